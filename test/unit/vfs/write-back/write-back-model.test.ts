/**
 * Reference-model property test of the write-back: generated interleavings of several write handles on a
 * path (FUSE-style: they share one open file; a handle may hand its writes to the kernel, FUSE
 * passthrough, which writes the spool with no request, the hand-over ended before the release as the
 * mount does), whole replaces (WebDAV PUT-style, some cut off), another client writing through the
 * service, upload outages and crashes (the gateway abandoned without close, a new one started on the same
 * data folder) are applied to the Vfs and to a small model. Asserted:
 * - reads through a fresh open show what the model says is visible;
 * - nothing acknowledged is lost: after the last crash and a flush, the service holds each path's last
 *   acknowledged content (or the other client's, when that came last);
 * - every version the service was ever given is one a writer completed (acknowledged): never a mix of two
 *   writers, a cut-off body, or a state a handle never flushed (but for a quiet seal, below);
 * - with a second writer at the service (`other`: a change made while a local version of the path waits
 *   for its upload, offline or not, across crashes too): no acknowledged version of either side is
 *   missing from the folder or its history, the local one keeps the name, the other one is kept beside
 *   it as a conflict copy, and every conflict copy is listed in a gateway's status.
 * A file kept open after an fsync is sealed by the write-back delay (0 here) once unchanged, at a moment
 * the model does not know: what such a file held since may be uploaded, and a crash may leave the last
 * such seal at the path, which the model then reads back. A flush, close or replace ends that.
 * Sequences are drawn up to their longest (40 operations): the short ones of the default size missed
 * sequences that lost acknowledged bytes.
 */
import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { writeSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, FaultyRemote, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';
import type { PassthroughSpool } from '../../../../src/vfs/engine-lease.js';
import { isConflictCopy } from '../../../../src/vfs/write-back/conflicts.js';

const PATHS = ['f', 'g'];
const HANDLES = 3;

type Op =
  | { op: 'open'; h: number; path: string; truncate: boolean }
  | { op: 'passthrough'; h: number }
  | { op: 'write'; h: number; offset: number; data: Uint8Array }
  | { op: 'flush'; h: number }
  | { op: 'fsync'; h: number }
  | { op: 'close'; h: number }
  | { op: 'put'; path: string; data: Uint8Array }
  | { op: 'cutPut'; path: string; data: Uint8Array }
  | { op: 'behind'; path: string; data: Uint8Array }
  | { op: 'other'; path: string; data: Uint8Array }
  | { op: 'read'; path: string }
  | { op: 'outage'; on: boolean }
  | { op: 'crash' };

const pathArb = fc.constantFrom(...PATHS);
const handleArb = fc.nat(HANDLES - 1);
const dataArb = fc.uint8Array({ minLength: 1, maxLength: 300 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant('open' as const), h: handleArb, path: pathArb, truncate: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('passthrough' as const), h: handleArb }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('write' as const), h: handleArb, offset: fc.nat(400), data: dataArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('flush' as const), h: handleArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('fsync' as const), h: handleArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('close' as const), h: handleArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('put' as const), path: pathArb, data: fc.uint8Array({ maxLength: 300 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('cutPut' as const), path: pathArb, data: dataArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('behind' as const), path: pathArb, data: dataArb }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('other' as const), path: pathArb, data: dataArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('read' as const), path: pathArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('outage' as const), on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ op: 'crash' as const }) },
);

/**
 * What `p` rejects with (it fails the run when `p` fulfils). The runs use this, not `expect(p).rejects`:
 * vitest keeps every such assertion until the test ends — the one test of all the runs — and with it the
 * error, whose stack's frames hold the gateways of its run (each with its metadata cache, megabytes).
 */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

/** What a fresh open of `path` reads, in hex (undefined: no such file). */
async function readHex(vfs: GatewayVfs, path: string): Promise<string | undefined> {
  if (!await vfs.stat(path).then(() => true, () => false)) return undefined;
  const r = await vfs.open(path, { read: true });
  try {
    return (await r.read(0, 100_000)).toString('hex');
  } finally {
    await r.release();
  }
}

/** The model of one path. */
interface PathModel {
  /** What a fresh open reads (undefined: no such file). */
  visible?: Buffer;
  /** The content the service must end with, unless something newer comes. */
  last?: Buffer;
  /** Every content acknowledged for the path (and the other client's): what the service may be given. */
  completed: Set<string>;
  /**
   * The open file shared by the path's handles. `quiet`: fsynced while kept open, so the write-back delay
   * may seal what it holds at any moment (with a delay of 0, between any two operations). `replaced`: a
   * replace came since the handles' last change through the Vfs or flush: the kernel's writes (passthrough)
   * do not show at the path until the next one.
   */
  session?: { content: Buffer; handles: Set<number>; changed: boolean; quiet?: boolean; replaced?: boolean };
  /** Contents such a seal may have made the path's since its last acknowledged one: a crash may show one. */
  sealable: Set<string>;
  /** Who the name shows once everything is uploaded: this side's `last`, or the other writer's `otherLast`. */
  nameSide: 'local' | 'other';
  /** The other writer's last content. */
  otherLast?: Buffer;
  /** The other writer's content that met a local version waiting for its upload: it must end as a conflict copy. */
  owed?: Buffer;
}

function patch(content: Buffer, offset: number, data: Uint8Array): Buffer {
  const out = Buffer.alloc(Math.max(content.length, offset + data.length));
  content.copy(out);
  Buffer.from(data).copy(out, offset);
  return out;
}

class Model {
  readonly paths = new Map<string, PathModel>(PATHS.map((p) => [p, { completed: new Set(), nameSide: 'local', sealable: new Set() }]));
  readonly handles = new Map<number, string>();
  down = false;

  acknowledge(m: PathModel, content: Buffer): void {
    m.last = Buffer.from(content);
    m.completed.add(content.toString('hex'));
    m.nameSide = 'local';
    m.sealable.clear();
  }

  /** What the session of `m` holds now, which a seal of the write-back delay may make the path's. */
  mayBeSealed(m: PathModel): void {
    if (!m.session?.quiet) return;
    const hex = m.session.content.toString('hex');
    m.completed.add(hex);
    m.sealable.add(hex);
  }

  /** What a fresh open shows once the gateway's view is current. */
  shown(m: PathModel): Buffer | undefined {
    return m.nameSide === 'local' ? m.last : m.otherLast;
  }
}

describe('write-back against a reference model', () => {
  it('interleaved handles, replaces, another client, outages and crashes: nothing acknowledged lost, nothing else uploaded', { timeout: 180_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40, size: 'max' }), async (ops) => {
        const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-wbm-'));
        const remote = new MemoryRemote({ name: 'A', id: '1' });
        const gateways: GatewayVfs[] = [];
        let faulty!: FaultyRemote;
        let vfs!: GatewayVfs;
        const start = async (): Promise<void> => {
          faulty = new FaultyRemote(remote);
          vfs = await createVfs({ libraries: [{ name: 'A', remote: faulty }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 5, retryMaxMs: 20 } });
          gateways.push(vfs);
        };
        await start();
        const model = new Model();
        const open = new Map<number, Awaited<ReturnType<GatewayVfs['open']>>>();
        /** Handles whose writes the kernel makes itself in the version's spool (FUSE passthrough). */
        const passed = new Map<number, PassthroughSpool>();
        try {
          for (const o of ops) {
            switch (o.op) {
              case 'open': {
                if (open.has(o.h)) break;
                const m = model.paths.get(o.path)!;
                const handle = await vfs.open(`/A/${o.path}`, { read: true, write: true, create: true, truncate: o.truncate });
                open.set(o.h, handle);
                model.handles.set(o.h, o.path);
                if (!m.session) m.session = { content: Buffer.from(m.visible ?? Buffer.alloc(0)), handles: new Set(), changed: false };
                m.session.handles.add(o.h);
                if (o.truncate || m.visible === undefined) {
                  // A truncate changes the file when it empties something: the session's bytes, or those the
                  // path shows (a replace made while the session was open).
                  const changes = (o.truncate && (m.session.content.length > 0 || (m.visible?.length ?? 0) > 0)) || m.visible === undefined;
                  if (changes) {
                    m.session.changed = true;
                    // A change: the session's file is the path's again. One that empties nothing is none.
                    m.session.replaced = false;
                  }
                  m.session.content = Buffer.alloc(0);
                  m.visible = m.session.content;
                  model.mayBeSealed(m);
                }
                break;
              }
              case 'passthrough': {
                const handle = open.get(o.h);
                if (!handle || passed.has(o.h)) break;
                // Granted to the only writer of a version still writable; else its writes go through the Vfs.
                const spool = await handle.passthrough!();
                if (spool) passed.set(o.h, spool);
                break;
              }
              case 'write': {
                const handle = open.get(o.h);
                if (!handle) break;
                const m = model.paths.get(model.handles.get(o.h)!)!;
                const spool = passed.get(o.h);
                if (spool) writeSync(spool.fd, o.data, 0, o.data.length, o.offset);
                else await handle.write(o.offset, Buffer.from(o.data));
                m.session!.content = patch(m.session!.content, o.offset, o.data);
                m.session!.changed = true;
                // The Vfs sees no request for the kernel's writes: after a replace they show from the next flush.
                if (!spool) m.session!.replaced = false;
                if (!m.session!.replaced) m.visible = m.session!.content;
                model.mayBeSealed(m);
                break;
              }
              case 'flush':
              case 'fsync':
              case 'close': {
                const handle = open.get(o.h);
                if (!handle) break;
                const m = model.paths.get(model.handles.get(o.h)!)!;
                if (o.op === 'flush') await handle.flush();
                else if (o.op === 'fsync') await handle.fsync();
                else {
                  // As the mount does: the kernel's hand-over ends before the Vfs's release.
                  passed.get(o.h)?.end();
                  await handle.release();
                }
                if (m.session!.changed) {
                  // The last acknowledged wins: what the handles flushed is what the path shows again.
                  model.acknowledge(m, m.session!.content);
                  m.visible = m.session!.content;
                  m.session!.changed = false;
                  m.session!.replaced = false;
                  // A flush or close seals the file: a later change is a new version, sealed by no delay.
                  m.session!.quiet = false;
                }
                if (o.op === 'fsync') m.session!.quiet = true;
                if (o.op === 'close') {
                  passed.delete(o.h);
                  open.delete(o.h);
                  model.handles.delete(o.h);
                  m.session!.handles.delete(o.h);
                  if (m.session!.handles.size === 0) m.session = undefined;
                }
                break;
              }
              case 'put': {
                const m = model.paths.get(o.path)!;
                await vfs.writeFile(`/A/${o.path}`, Buffer.from(o.data));
                model.acknowledge(m, Buffer.from(o.data));
                m.visible = Buffer.from(o.data);
                // The delay seals no open file a replace followed: its writers' next flush decides.
                if (m.session) {
                  m.session.quiet = false;
                  m.session.replaced = true;
                }
                break;
              }
              case 'cutPut': {
                const data = Buffer.from(o.data);
                async function* cut(): AsyncGenerator<Buffer> {
                  yield data;
                  throw new Error('cut off');
                }
                expect(await rejection(vfs.writeFile(`/A/${o.path}`, cut()))).toMatchObject({ message: 'cut off' });
                break;
              }
              case 'behind': {
                const m = model.paths.get(o.path)!;
                // Another client writes once the gateway's uploads are done (and no handle has the file open).
                if (model.down || m.session) break;
                await vfs.flushAll();
                // A flush of everything (sync, `ctl flush`) acknowledges what open files hold, as fsync does.
                for (const other of model.paths.values()) {
                  if (other.session?.changed) {
                    model.acknowledge(other, other.session.content);
                    other.visible = other.session.content;
                    other.session.changed = false;
                    // Acknowledged after a replace, the session's version is the path's again.
                    other.session.replaced = false;
                    other.session.quiet = false;
                  }
                }
                remote.putFile(o.path, Buffer.from(o.data));
                vfs.dropCaches();
                m.last = Buffer.from(o.data);
                m.completed.add(m.last.toString('hex'));
                m.nameSide = 'local';
                m.owed = undefined;
                m.visible = m.last;
                break;
              }
              case 'other': {
                const m = model.paths.get(o.path)!;
                // Another client writes at any time no handle has the file open: while its local version
                // waits for its upload (queued, retrying in an outage, or journaled before a crash) too.
                // Not between the look at the service's version and the commit of one upload (a change
                // landing there is in the file's history only: the service offers no conditional commit).
                if (m.session) break;
                const upload = vfs.status().uploads.find((u) => u.fullpath === o.path);
                if (upload?.state === 'uploading') break;
                const data = Buffer.from(o.data);
                // Bytes the service held at the path already (now or in its history): nothing of the other
                // writer's is new, and a local version made from them may replace them without a copy.
                const same = remote.paths().includes(o.path) && [remote.read(o.path), ...remote.contentsBefore(o.path)].some((b) => b.equals(data));
                remote.putFile(o.path, data, { operator: { opName: 'other' } });
                vfs.dropCaches();
                m.otherLast = data;
                // A local version waiting: it keeps the name, this one must become its conflict copy.
                m.owed = upload && !same ? data : undefined;
                if (!upload) m.nameSide = 'other';
                m.visible = model.shown(m);
                break;
              }
              case 'read': {
                const m = model.paths.get(o.path)!;
                if (m.visible === undefined) {
                  expect(await rejection(vfs.stat(`/A/${o.path}`))).toMatchObject({ code: 'ENOENT' });
                  break;
                }
                const r = await vfs.open(`/A/${o.path}`, { read: true });
                const got = await r.read(0, 100_000);
                await r.release();
                expect(got.toString('hex'), `read /A/${o.path}`).toBe(m.visible.toString('hex'));
                break;
              }
              case 'outage': {
                model.down = o.on;
                faulty.heal();
                if (o.on) faulty.inject({ kind: 'fail', code: 'EIO', methods: ['commit'] });
                break;
              }
              case 'crash': {
                // kill -9: handles and unflushed bytes are gone; the journal stays. The abandoned gateway's
                // uploads stop where they are (its process would be gone), none of them confirmed.
                await vfs.writeBack.uploads.close();
                // Nor does it write anything once the next one reads the journal: a seal of the delay under way
                // ends first, as if the kill came just after it (one starting now finds the uploads stopped).
                const sealing = (vfs.writeBack as unknown as { sealingAt: Map<string, Set<{ sealing?: Promise<void> }>> }).sealingAt;
                await Promise.all([...sealing.values()].flatMap((at) => [...at].map((v) => v.sealing?.catch(() => undefined))));
                open.clear();
                passed.clear();
                model.handles.clear();
                model.down = false;
                for (const m of model.paths.values()) {
                  m.session = undefined;
                  m.visible = model.shown(m);
                }
                await start();
                for (const [p, m] of model.paths) {
                  if (m.sealable.size === 0) continue;
                  // A seal of the delay may have come before the crash: the path shows what it sealed last.
                  const shown = await readHex(vfs, `/A/${p}`);
                  if (shown !== undefined && shown !== m.visible?.toString('hex') && m.sealable.has(shown)) model.acknowledge(m, Buffer.from(shown, 'hex'));
                  m.sealable.clear();
                  m.visible = model.shown(m);
                }
                break;
              }
            }
          }
          for (const [h, handle] of open) {
            passed.get(h)?.end();
            await handle.release();
          }
          for (const m of model.paths.values()) {
            if (m.session?.changed) model.acknowledge(m, m.session.content);
            m.session = undefined;
          }
          faulty.heal();
          await vfs.flushAll();
          const listed = new Set(gateways.flatMap((g) => g.status().conflicts.map((c) => c.copy)));
          for (const [p, m] of model.paths) {
            const onService = (await remote.stat(p)) ? remote.read(p).toString('hex') : undefined;
            expect(onService, `/A/${p} on the service`).toBe(model.shown(m)?.toString('hex'));
            const copies = remote.paths().filter((c) => c.startsWith(`${p} (conflict `));
            const inFolder = new Set([onService, ...copies.map((c) => remote.read(c).toString('hex'))]);
            const history = new Set(remote.contentsBefore(p).map((b) => b.toString('hex')));
            // Nothing lost: either side's last version is in the folder or the file's history.
            for (const kept of [m.last, m.otherLast]) {
              if (kept) expect(inFolder.has(kept.toString('hex')) || history.has(kept.toString('hex')), `a version of /A/${p} lost`).toBe(true);
            }
            // Every conflict visible: the other side's version that met a waiting local one is a copy in the folder, listed.
            if (m.owed) expect(copies.map((c) => remote.read(c).toString('hex')), `/A/${p}: the other writer's version kept as a copy`).toContain(m.owed.toString('hex'));
            for (const c of copies) {
              expect(isConflictCopy(c), c).toBe(true);
              expect(listed.has(c), `${c} listed in a status`).toBe(true);
            }
          }
          for (const c of remote.commits) {
            // A new file's commit that found the name taken landed at the service's numbered name first.
            expect(model.paths.get(c.fullpath.replace(/ \(\d+\)$/, ''))!.completed.has(c.data.toString('hex')), `a version of /A/${c.fullpath} nobody completed: ${c.data.length} bytes`).toBe(true);
          }
        } finally {
          for (const g of gateways.reverse()) await g.close().catch(() => undefined);
          await rm(dataDir, { recursive: true, force: true });
        }
      }),
      { numRuns: 120 },
    );
  });
});
