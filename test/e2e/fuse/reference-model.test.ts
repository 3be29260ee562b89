/**
 * The reference model through a real mount (the write-back model of test/unit/vfs/write-back, driven
 * through the kernel): a seeded random sequence over several files at once, with the engine answering
 * creates and closes and, where the kernel grants it, passthrough on. Steps: create/write/close, O_TRUNC
 * rewrites, appends, renames, unlinks, fsync loops, writers at once on one path through the mount and
 * through WebDAV, a file kept open through the mount and replaced through WebDAV between its writer's fsync
 * and close (written on after the replace, or not), names the service refuses (fail at open, nothing changes), ENOSPC (the data folder on a
 * small tmpfs: root only) and a crash (kill -9 of the mount's process, a new one on the same data folder).
 *
 * The model records what each program was told was saved (a close, an fsync, a 2xx to a PUT). Asserted:
 * every operation gets the answer a local file system gives (none fails but the refused names and the
 * writes past the full disk); reads through the mount show what the model holds; after a flush the mount,
 * the service (its API) and the model agree on every name and content; every version in a file's history
 * on the service is one a program was told was saved (no partial copy, no mix). Versions acknowledged
 * and then replaced before their upload may be merged away (the write-back uploads the last one).
 *
 * By default the sequence leaves out the steps that still find failures (listed at the tests below);
 * CLOUDLIB_MODEL_ALL=1 runs the whole mix too. CLOUDLIB_MODEL_SEED replays a sequence (the seed, and how
 * to replay it, is printed with any failure); CLOUDLIB_MODEL_STEPS sets its length (40 batches);
 * CLOUDLIB_MODEL_ONLY (kinds of step, comma-separated) narrows a failure down.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, mkdtemp, open, readdir, readFile, rename, rm, stat, unlink } from 'node:fs/promises';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, smallDisk, startMount, type MountHarness } from './harness.js';
import { REFUSED } from './refused-names.js';
import { startTestService, type TestService } from '../../support/service.js';

const T = 120_000;
const SEED = Number(process.env.CLOUDLIB_MODEL_SEED ?? 44);
const STEPS = Number(process.env.CLOUDLIB_MODEL_STEPS ?? 40);
/** The whole mix of steps too (writers at once, a full disk, crashes): see the tests below. */
const ALL = process.env.CLOUDLIB_MODEL_ALL === '1';
/** Only these kinds of step (comma-separated), the others left out: to narrow a failure down. */
const ONLY = process.env.CLOUDLIB_MODEL_ONLY?.split(',');
const NAMES = ['a.txt', 'b.bin', 'c', 'd.log', 'e.db'];
/** The tmpfs the data folder lives on, and what a write past it writes. */
const DISK_MIB = 24;
const TOO_BIG_MIB = 32;

const [major, minor] = release().split('.').map(Number) as [number, number];
const root = process.getuid?.() === 0;
/** Passthrough needs Linux 6.9 and CAP_SYS_ADMIN (root here). */
const passthrough = (major > 6 || (major === 6 && minor >= 9)) && root;

/** A small seeded generator (mulberry32): the same seed, the same sequence. */
function generator(seed: number): { next: () => number; int: (n: number) => number; pick: <T>(xs: readonly T[]) => T; bytes: (n: number) => Buffer } {
  let s = seed >>> 0;
  const next = (): number => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number): number => Math.floor(next() * n);
  return {
    next, int,
    pick: (xs) => xs[int(xs.length)]!,
    bytes: (n) => {
      const b = Buffer.alloc(n + 3);
      for (let i = 0; i < n; i += 4) b.writeUInt32LE(Math.floor(next() * 4294967296), i);
      return b.subarray(0, n);
    },
  };
}

const sha1 = (b: Buffer): string => createHash('sha1').update(b).digest('hex');

type Step =
  | { op: 'write'; name: string; data: Buffer[] }
  | { op: 'append'; name: string; data: Buffer }
  | { op: 'fsyncLoop'; name: string; data: Buffer[] }
  | { op: 'rename'; name: string; to: string }
  | { op: 'unlink'; name: string }
  | { op: 'read'; name: string }
  | { op: 'writers'; name: string; mount: Buffer[]; webdav: Buffer[] }
  | { op: 'replaceOpen'; name: string; first: Buffer; put: Buffer; after: Buffer }
  | { op: 'refused'; which: number }
  | { op: 'full'; name: string }
  | { op: 'crash' };

/** A batch of steps run at once (on distinct names), or one step alone. */
function sequence(seed: number, steps: number, withFullDisk: boolean, leftOut: readonly Step['op'][]): Step[][] {
  const g = generator(seed);
  let n = 0;
  const content = (what: string, sized?: number): Buffer => {
    // Sizes across the engine's thresholds: empty, small (answered closes), and past its in-memory size.
    const size = sized ?? g.pick([0, 1, 100, 4096, 5000, 70_000, 300_000, 1_200_000]);
    const tag = size >= 24 ? Buffer.from(`${what} #${n++}\n`.padStart(24, '-')) : Buffer.alloc(0);
    return size === 0 ? Buffer.alloc(0) : Buffer.concat([tag, g.bytes(Math.max(0, size - tag.length))]);
  };
  const batches: Step[][] = [];
  for (let i = 0; i < steps; i++) {
    const r = g.next();
    if (r < 0.05) { batches.push([{ op: 'crash' }]); continue; }
    if (r < 0.1) { batches.push([{ op: 'refused', which: g.int(REFUSED.length) }]); continue; }
    if (r < 0.15) {
      if (withFullDisk) batches.push([{ op: 'full', name: `too-big-${i}` }]);
      continue;
    }
    if (r < 0.27) {
      // One size for all: each mount writer's one pwrite covers the whole file, so whichever writes last
      // leaves its content whole, as on a local file system (of different sizes, a mix would be right too).
      const name = g.pick(NAMES);
      const size = g.pick([1, 100, 5000, 70_000, 1_200_000]);
      batches.push([{ op: 'writers', name, mount: [content('mount', size), content('mount', size)], webdav: [content('webdav', size), content('webdav', size)] }]);
      continue;
    }
    if (r < 0.33) {
      // A file kept open through the mount and replaced through WebDAV between the writer's fsync and its
      // close; the writer writes on after the replace, or not.
      const name = g.pick(NAMES);
      batches.push([{ op: 'replaceOpen', name, first: content(`open ${name}`), put: content(`put ${name}`), after: g.next() < 0.5 ? Buffer.alloc(0) : content(`after ${name}`) }]);
      continue;
    }
    // Several files at once: one step a name.
    const names = [...NAMES].sort(() => g.next() - 0.5).slice(0, 1 + g.int(3));
    const used = new Set(names);
    const batch: Step[] = [];
    for (const name of names) {
      const k = g.next();
      if (k < 0.3) batch.push({ op: 'write', name, data: Array.from({ length: 1 + g.int(3) }, () => content(`write ${name}`)) });
      else if (k < 0.45) batch.push({ op: 'append', name, data: content(`append ${name}`) });
      else if (k < 0.6) batch.push({ op: 'fsyncLoop', name, data: Array.from({ length: 2 + g.int(4) }, () => content(`fsync ${name}`)) });
      else if (k < 0.7) {
        const to = NAMES.find((x) => !used.has(x));
        if (to === undefined) batch.push({ op: 'read', name });
        else {
          used.add(to);
          batch.push({ op: 'rename', name, to });
        }
      } else if (k < 0.8) batch.push({ op: 'unlink', name });
      else batch.push({ op: 'read', name });
    }
    batches.push(batch);
  }
  const kept = (s: Step): boolean => !leftOut.includes(s.op) && (!ONLY || ONLY.includes(s.op));
  return batches.map((b) => b.filter(kept)).filter((b) => b.length > 0);
}

/** What the model holds of a name: the contents it may show (one, unless writers raced). */
type Model = Map<string, Buffer[]>;

function describeStep(s: Step): string {
  switch (s.op) {
    case 'write': case 'fsyncLoop': return `${s.op} ${s.name} (${s.data.map((d) => d.length).join('+')} bytes)`;
    case 'append': return `append ${s.name} (${s.data.length} bytes)`;
    case 'writers': return `writers at once on ${s.name} (mount ${s.mount.map((d) => d.length).join(', ')}; WebDAV ${s.webdav.map((d) => d.length).join(', ')})`;
    case 'replaceOpen': return `${s.name} written (${s.first.length} bytes) and fsynced, kept open, replaced through WebDAV (${s.put.length} bytes), ${s.after.length > 0 ? `written on (${s.after.length} bytes)` : 'not written'}, closed`;
    case 'rename': return `rename ${s.name} → ${s.to}`;
    case 'refused': return `create of a refused name (${REFUSED[s.which]![0]})`;
    case 'full': return `write of ${TOO_BIG_MIB} MiB to ${s.name} on a ${DISK_MIB} MiB disk`;
    case 'crash': return 'kill -9 of the mount, a new one on the same data folder';
    default: return `${s.op} ${s.name}`;
  }
}

describe('the reference model through a mount with the engine\'s answers' + (passthrough ? ' and passthrough' : ''), () => {
  let svc: TestService;
  let dataParent: { path: string; remove: () => Promise<void> };
  let h: MountHarness | undefined;
  let davUrl = '';

  const mountOnce = async (): Promise<void> => {
    h = await startMount({
      mount: { attrTimeoutS: 1, ...(passthrough ? { writeMode: 'passthrough' } : {}) },
      env: {
        FUSE_TEST_BACKEND: 'service',
        FUSE_TEST_DATA_DIR: join(dataParent.path, 'data'),
        FUSE_TEST_SERVICE: JSON.stringify({ baseUrl: svc.client.baseUrl, credentials: svc.client.credentials }),
      },
    });
    davUrl = await h.call<string>('serveWebdav');
  };

  beforeAll(async () => {
    svc = await startTestService();
    if (root) dataParent = await smallDisk(DISK_MIB);
    else {
      const path = await mkdtemp(join(tmpdir(), 'cloudlib-model-'));
      dataParent = { path, remove: () => rm(path, { recursive: true, force: true }) };
    }
    await mkdir(join(dataParent.path, 'data'));
    await mountOnce();
  }, T);
  afterAll(async () => {
    await h?.stop();
    await dataParent?.remove();
    await svc?.close();
  }, T);

  it.skipIf(root)('ENOSPC steps are left out: a small tmpfs for the data folder needs root', () => undefined);

  /**
   * Runs the sequence of `seed` (less the steps `leftOut`) in folder `FOLDER` of the library, checking
   * every answer, then flushes and checks the mount, the service and the histories against the model.
   */
  async function runModel(seed: number, FOLDER: string, leftOut: readonly Step['op'][]): Promise<void> {
    const model: Model = new Map();
    /** Every content a program was told was saved, anywhere: what a version on the service may be. */
    const acknowledged = new Set<string>([sha1(Buffer.alloc(0))]);
    const ack = (b: Buffer): void => void acknowledged.add(sha1(b));
    const dir = (): string => join(h!.mnt, 'Lib', FOLDER);
    const auth = { authorization: `Basic ${Buffer.from('alice:secret').toString('base64')}` };
    const done: string[] = [];

    /** Reads a name through the mount: one of what the model allows, which it then holds. */
    const check = async (name: string): Promise<void> => {
      const allowed = model.get(name);
      const got = await readFile(join(dir(), name)).catch((e: NodeJS.ErrnoException) => e.code ?? e);
      if (allowed === undefined) {
        expect(got, `${name} is not in the model`).toBe('ENOENT');
        return;
      }
      if (!Buffer.isBuffer(got)) throw new Error(`read of ${name}: ${String(got)}`);
      const i = allowed.findIndex((c) => c.equals(got));
      expect(i, `${name} (${got.length} bytes) is one of the ${allowed.length} the model allows (${allowed.map((c) => c.length).join(', ')} bytes)`).toBeGreaterThanOrEqual(0);
      model.set(name, [allowed[i]!]);
    };

    const writeWhole = async (path: string, parts: Buffer[], fsyncEach: boolean): Promise<void> => {
      const fh = await open(path, constants.O_CREAT | constants.O_WRONLY | constants.O_TRUNC, 0o644);
      try {
        let at = 0;
        for (const p of parts) {
          await fh.write(p, 0, p.length, at);
          at += p.length;
          if (fsyncEach) {
            await fh.sync();
            ack(Buffer.concat(parts).subarray(0, at));
          }
        }
      } finally {
        await fh.close();
      }
    };

    const run = async (s: Step): Promise<void> => {
      const path = 'name' in s ? join(dir(), s.name) : '';
      switch (s.op) {
        case 'write': case 'fsyncLoop': {
          await writeWhole(path, s.data, s.op === 'fsyncLoop');
          const whole = Buffer.concat(s.data);
          ack(whole);
          model.set(s.name, [whole]);
          return;
        }
        case 'append': {
          const fh = await open(path, constants.O_CREAT | constants.O_WRONLY | constants.O_APPEND, 0o644);
          try {
            await fh.write(s.data);
          } finally {
            await fh.close();
          }
          const after = (model.get(s.name) ?? [Buffer.alloc(0)]).map((c) => Buffer.concat([c, s.data]));
          after.forEach(ack);
          model.set(s.name, after);
          return;
        }
        case 'rename': {
          const had = model.get(s.name);
          const err = await rename(path, join(dir(), s.to)).then(() => undefined, (e: NodeJS.ErrnoException) => e.code);
          if (had === undefined) {
            expect(err, `rename of missing ${s.name}`).toBe('ENOENT');
            return;
          }
          if (err) throw new Error(`rename ${s.name} → ${s.to}: ${err}`);
          model.set(s.to, had);
          model.delete(s.name);
          return;
        }
        case 'unlink': {
          const err = await unlink(path).then(() => undefined, (e: NodeJS.ErrnoException) => e.code);
          expect(err, `unlink of ${s.name}`).toBe(model.has(s.name) ? undefined : 'ENOENT');
          model.delete(s.name);
          return;
        }
        case 'read': return check(s.name);
        case 'replaceOpen': {
          const fh = await open(path, constants.O_CREAT | constants.O_WRONLY | constants.O_TRUNC, 0o644);
          let put = 0;
          try {
            await fh.write(s.first, 0, s.first.length, 0);
            await fh.sync();
            ack(s.first);
            const res = await fetch(new URL(`Lib/${FOLDER}/${s.name}`, davUrl), { method: 'PUT', headers: auth, body: new Uint8Array(s.put) });
            await res.arrayBuffer();
            put = res.status;
            if (s.after.length > 0) await fh.write(s.after, 0, s.after.length, s.first.length);
          } finally {
            await fh.close();
          }
          if (put !== 201 && put !== 204) throw new Error(`WebDAV PUT of ${s.name} kept open: ${put}`);
          ack(s.put);
          // The last acknowledged wins: the writer's close, when it had written on after the replace; else
          // the replace, which came after the writer's fsync (docs/semantics.md).
          const last = s.after.length > 0 ? Buffer.concat([s.first, s.after]) : s.put;
          ack(last);
          model.set(s.name, [last]);
          await check(s.name);
          return;
        }
        case 'writers': {
          const answers = await Promise.all([
            ...s.mount.map((d) => writeWhole(path, [d], false).then(() => d)),
            ...s.webdav.map(async (d) => {
              const res = await fetch(new URL(`Lib/${FOLDER}/${s.name}`, davUrl), { method: 'PUT', headers: auth, body: new Uint8Array(d) });
              await res.arrayBuffer();
              if (res.status !== 201 && res.status !== 204) throw new Error(`WebDAV PUT of ${s.name}: ${res.status}`);
              return d;
            }),
          ].map((p) => p.then((d) => ({ d }), (e: Error) => ({ e }))));
          const failed = answers.flatMap((a) => ('e' in a ? [a.e.message] : []));
          if (failed.length > 0) throw new Error(`writers at once on ${s.name}: ${failed.join('; ')}`);
          const saved = answers.map((a) => (a as { d: Buffer }).d);
          saved.forEach(ack);
          model.set(s.name, saved);
          // What the mount shows now is one of them, and stays (each writer is done).
          return check(s.name);
        }
        case 'refused': {
          const [what, name, code] = REFUSED[s.which]!;
          const before = (await readdir(dir())).sort();
          const err = await open(Buffer.concat([Buffer.from(`${dir()}/`), name]), constants.O_CREAT | constants.O_WRONLY, 0o644).then(
            async (fh) => {
              await fh.write('data').finally(() => fh.close());
              return 'no error';
            },
            (e: NodeJS.ErrnoException) => e.code,
          );
          expect(err, `create of a name of ${what}`).toBe(code);
          expect((await readdir(dir())).sort(), `the folder after a refused create (${what})`).toEqual(before);
          return;
        }
        case 'full': {
          const chunk = Buffer.alloc(1024 * 1024, 0x5a);
          const err = await (async () => {
            const fh = await open(path, 'w');
            try {
              for (let i = 0; i < TOO_BIG_MIB; i++) await fh.write(chunk);
            } finally {
              await fh.close();
            }
          })().then(() => 'no error', (e: NodeJS.ErrnoException) => e.code);
          expect(err, `a write past the full disk (${s.name})`).toBe('ENOSPC');
          // Failed whole: the partial file is not left behind.
          await eventually(`${s.name} gone after its failed write`, async () => (await stat(path).then(() => undefined, (e: NodeJS.ErrnoException) => e.code)), 10_000);
          expect(await stat(path).then(() => 'exists', (e: NodeJS.ErrnoException) => e.code)).toBe('ENOENT');
          return;
        }
        case 'crash': {
          const killed = new Promise<void>((resolve) => h!.child.once('exit', () => resolve()));
          h!.child.kill('SIGKILL');
          await killed;
          await h!.stop();
          h = undefined;
          await mountOnce();
          return;
        }
      }
    };

    try {
      await mkdir(dir());
      for (const [i, batch] of sequence(seed, STEPS, root, leftOut).entries()) {
        const line = `${i}: ${batch.map(describeStep).join(' | ')}`;
        done.push(line);
        const answers = await Promise.all(batch.map((s) => run(s).then(() => undefined, (e: Error) => e)));
        const failed = answers.find((e) => e !== undefined);
        if (failed) throw failed;
      }
      done.push('flush');
      await h!.call('flushAll', { timeoutMs: 60_000 }, 70_000);
      // The mount: every name of the model, each with one of its contents, and nothing else.
      expect((await readdir(dir())).sort(), 'names in the mount').toEqual([...model.keys()].sort());
      for (const name of model.keys()) await check(name);
      // The service: the same names and contents; every version in a history one that was acknowledged.
      const listed = (await svc.client.file.ls({ fullpath: FOLDER, start: 0, size: 100 })).list.map((e) => e.filename).sort();
      expect(listed, 'names on the service').toEqual([...model.keys()].sort());
      for (const [name, [content]] of model) {
        const { urls } = await svc.client.file.downloadUrl({ fullpath: `${FOLDER}/${name}` });
        const res = await fetch(urls[0]!);
        const remote = Buffer.from(await res.arrayBuffer());
        expect(remote.equals(content!), `${name} on the service (${remote.length} bytes) is what the mount shows (${content!.length} bytes)`).toBe(true);
        const history = { list: [] as Array<{ dir: unknown; filehash: unknown; filesize: unknown }> };
        for (let start = 0; ; start += 100) {
          const page = await svc.client.file.history({ fullpath: `${FOLDER}/${name}`, start, size: 100 });
          history.list.push(...page.list);
          if (page.list.length < 100) break;
        }
        const unacknowledged = history.list.filter((v) => Number(v.dir) !== 1 && !acknowledged.has(String(v.filehash)));
        expect(unacknowledged.map((v) => `${String(v.filesize)} bytes`), `versions of ${name} no program was told were saved`).toEqual([]);
        expect(history.list.some((v) => String(v.filehash) === sha1(content!)), `the current version of ${name} in its history`).toBe(true);
      }
    } catch (err) {
      const e = err as Error;
      e.message = `seed ${seed} (replay: CLOUDLIB_MODEL_SEED=${seed}${leftOut.length === 0 ? ' CLOUDLIB_MODEL_ALL=1' : ''} npx vitest run test/e2e/fuse/reference-model.test.ts -t '${leftOut.length === 0 ? 'whole mix' : 'left out'}'), at ${done.at(-1) ?? 'the start'}: ${e.message}\nsteps:\n${done.join('\n')}`;
      throw e;
    }
  }

  // Run by default: the whole mix (renames, writers at once through both front ends, a full data folder
  // and kill -9 among the steps). A kind of step that still finds a failure is left out here, with why,
  // and run again with CLOUDLIB_MODEL_ALL=1: none today. (Renames were, for an ENOENT at an O_CREAT open
  // after a rename over its name: the feed's delete of the object the name held before was told to the
  // kernel as the name's; see model-regressions.test.ts. So was, with seed 26, a small file whose close the
  // engine answered, missing once the next step filled the disk before JavaScript applied the close: the
  // record now stands for the file until the journal can write its line; see model-regressions.test.ts.
  // So was, once in about thirty runs of 150 steps of writes and renames, a conflict copy of a name
  // renamed over again and again: a version left at the old name by a rename made here only, then moved
  // over the name by a later rename; unit `sent-lineage`, and `conflicts` "…moved by a rename made here…".
  // Writers at once were, for seed 19: an EIO at a truncating open whose new version another writer sealed
  // first, and a new name left empty when the engine's spool and a version shared one file; see
  // write-back.test.ts and model-regressions.test.ts. So was, once in about a hundred runs of seed 19
  // three at once, `a (1).txt` listed for a moment beside a new file written by an fsync loop: an fsync
  // after the seal stopped the upload under way, whose commit the service took all the same, and the
  // version, still counted new, was committed again at a numbered name then moved over the name; unit
  // `write-back/fsync-loop-passthrough`.)
  const today: Step['op'][] = [];
  const mix = today.length > 0 ? `left out: ${today.join(' ')}` : 'the whole mix';
  it(`seed ${SEED}, ${mix}: every answer as a local file system's, and the mount, the service and the histories agree with the model after a flush`, () => runModel(SEED, 'model', today), T);
  it.runIf(ALL && today.length > 0)(`seed ${SEED}, the whole mix`, () => runModel(SEED, 'model-all', []), T);
});
