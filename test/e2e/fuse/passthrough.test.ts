/**
 * FUSE passthrough (docs/fuse.md, Passthrough): in the engine, negotiated at INIT instead of the
 * writeback cache, a backing file registered with the kernel, and opens answered with it, after which
 * the kernel reads and writes that local file itself (driven through the null mount of the benchmarks:
 * one file, `f`, in a process of its own); then the mount over the gateway's Vfs with it. Everything here
 * is async I/O, the mounts are always stopped.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { chmod, mkdir, mkdtemp, open, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually, type MountHarness, sh, startMount, startMountOnSmallDisk, startMountProcess } from './harness.js';
import { expectRefusedNamesFail } from './refused-names.js';
import { readCloseRecords, type EngineCloseRecord } from '../../../src/vfs/write-back/engine-close-record.js';

const T = 60_000;
const NULL_MOUNT = fileURLToPath(new URL('../../../scripts/bench/support/fuse-null-mount.ts', import.meta.url));
const NULL_FILES_MOUNT = fileURLToPath(new URL('../../../scripts/bench/support/fuse-null-files-mount.ts', import.meta.url));
const SIZE = 4 * 1024 * 1024;

interface Served {
  passthrough: boolean;
  backingId: number;
  backingError: number;
  opens: number;
  writes: number;
  reads: number;
}

/** Passthrough needs Linux 6.9 and CAP_SYS_ADMIN (to register a backing file): root here. */
const [major, minor] = release().split('.').map(Number) as [number, number];
const granted = (major > 6 || (major === 6 && minor >= 9)) && process.getuid?.() === 0;

const stops: Array<() => Promise<Served | undefined>> = [];
afterEach(async () => {
  while (stops.length) await stops.pop()!();
});

/** Starts the null mount on a fresh folder; `stop` unmounts it and answers what it served. */
async function nullMount(args: string[]): Promise<{ mnt: string; spool: string; stop: () => Promise<Served | undefined> }> {
  const base = await mkdtemp(join(tmpdir(), 'cloudlib-passthrough-'));
  const mnt = join(base, 'mnt');
  const spool = join(base, 'spool.bin');
  const served = await startMountProcess(process.execPath, ['--import', 'tsx', NULL_MOUNT, mnt, String(SIZE), spool, ...args], mnt, 'the null mount').catch(async (err: unknown) => {
    await rm(base, { recursive: true, force: true });
    throw err;
  });
  let stopped: Promise<Served | undefined> | undefined;
  const stop = (): Promise<Served | undefined> => (stopped ??= (async () => {
    await served.stop();
    await rm(base, { recursive: true, force: true });
    const line = served.output().split('\n').find((l) => l.startsWith('served '));
    return line ? (JSON.parse(line.slice('served '.length)) as Served) : undefined;
  })());
  stops.push(stop);
  return { mnt, spool, stop };
}

/** Writes `data` at `offset` of the mount's file and reads it back, each through its own open. */
async function writeAndRead(file: string, data: Buffer, offset: number): Promise<Buffer> {
  const w = await open(file, 'r+');
  try {
    await w.write(data, 0, data.length, offset);
    await w.sync();
  } finally {
    await w.close();
  }
  const r = await open(file, 'r');
  try {
    const back = Buffer.alloc(data.length);
    await r.read(back, 0, back.length, offset);
    return back;
  } finally {
    await r.close();
  }
}

describe('FUSE passthrough', () => {
  it.runIf(granted)('answers opens with a backing file: the kernel writes and reads it, no request reaches the engine', async () => {
    const m = await nullMount(['passthrough']);
    const data = randomBytes(3 * 1024 * 1024 + 123);
    const back = await writeAndRead(join(m.mnt, 'f'), data, 4096);
    expect(back.equals(data)).toBe(true);
    // Two handles open at once share the inode's one backing file.
    const a = await open(join(m.mnt, 'f'), 'r');
    const b = await open(join(m.mnt, 'f'), 'r+');
    await b.write(Buffer.from('both'), 0, 4, 0);
    const both = Buffer.alloc(4);
    await a.read(both, 0, 4, 0);
    await a.close();
    await b.close();
    expect(both.toString()).toBe('both');
    const spool = await readFile(m.spool);
    const served = await m.stop();
    expect(spool.subarray(4096, 4096 + data.length).equals(data)).toBe(true);
    expect(spool.subarray(0, 4).toString()).toBe('both');
    expect(served).toMatchObject({ passthrough: true, backingError: 0, opens: 4, writes: 0, reads: 0 });
    expect(served!.backingId).toBeGreaterThan(0);
  }, T);

  it('asks for no passthrough unless told: writes and reads reach the engine', async () => {
    const m = await nullMount([]);
    const data = randomBytes(64 * 1024);
    const back = await writeAndRead(join(m.mnt, 'f'), data, 0);
    // The null mount answers reads with zeros: what it read shows the read reached it.
    expect(back.equals(Buffer.alloc(data.length))).toBe(true);
    const served = await m.stop();
    expect(served).toMatchObject({ passthrough: false, backingId: 0 });
    expect(served!.writes).toBeGreaterThan(0);
    expect(served!.reads).toBeGreaterThan(0);
  }, T);

  it.runIf(granted)('the null file system shaped as a passthrough mount (the bench\'s ceiling) answers creates with its backing files, in turn: the kernel writes them', async () => {
    const base = await mkdtemp(join(tmpdir(), 'cloudlib-null-backing-'));
    const mnt = join(base, 'mnt');
    const served = await startMountProcess(process.execPath, ['--import', 'tsx', NULL_FILES_MOUNT, mnt, 'auto', 'backing'], mnt, 'the null file system with backing files');
    try {
      const backing = /backing (\S+)/.exec(served.output())![1]!;
      const files = [randomBytes(4096), randomBytes(100), randomBytes(7000)];
      for (const [i, data] of files.entries()) await writeFile(join(mnt, `f${i}`), data);
      // Each create took the next file made beforehand, which holds what was written.
      for (const [i, data] of files.entries()) expect((await readFile(join(backing, String(i)))).equals(data)).toBe(true);
      expect((await stat(join(backing, '3'))).size).toBe(0);
    } finally {
      await served.stop();
      await rm(base, { recursive: true, force: true });
    }
    expect(served.output()).toMatch(/transport \{.*"passthrough":true/);
  }, T);

  it.runIf(!granted)('falls back without passthrough where the kernel does not grant it', async () => {
    const m = await nullMount(['passthrough']);
    await writeAndRead(join(m.mnt, 'f'), randomBytes(4096), 0);
    const served = await m.stop();
    // The kernel refuses a backing file on a connection without passthrough (EOPNOTSUPP).
    expect(served).toMatchObject({ passthrough: false, backingId: 0, backingError: 95 });
    expect(served!.writes).toBeGreaterThan(0);
  }, T);
});

/**
 * The mount with writeMode "passthrough" over the gateway's Vfs and an embedded service: what the kernel
 * writes itself reaches the Vfs, the journal and the service as any write through the engine does.
 */
describe.runIf(granted)('the mount with passthrough', () => {
  let h: MountHarness;
  const counters = (): Promise<{ passthroughFiles: number; passthroughOpens: number; transport: { passthrough: boolean } }> => h.call('mountCounters');
  const remote = async (path: string): Promise<Buffer> => Buffer.from(await h.call<string>('remoteRead', { path }), 'base64');
  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 1, writeMode: 'passthrough' }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_UPLOAD_DELAY_MS: '600000' } });
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('small files copied into a folder: created and closed by the engine, written by the kernel, uploaded whole', async () => {
    const src = join(h.local, 'small');
    await mkdir(src);
    for (let i = 0; i < 30; i++) await writeFile(join(src, `s${i}`), Buffer.alloc(100 + i * 1000, 97 + (i % 26)));
    await mkdir(join(h.mnt, 'Lib/small'));
    const before = await counters();
    await sh('sh', ['-c', 'cp "$1"/* "$2"/', 'sh', src, join(h.mnt, 'Lib/small')]);
    expect(before.transport.passthrough).toBe(true);
    // Counted as JavaScript takes each spool over, behind the creates' answers.
    await eventually('30 files handed over', async () => ((await counters()).passthroughFiles - before.passthroughFiles === 30 ? true : undefined), 10_000);
    for (const i of [0, 29]) expect((await stat(join(h.mnt, `Lib/small/s${i}`))).size).toBe(100 + i * 1000);
    await h.call('flushAll');
    for (const i of [0, 7, 29]) expect((await remote(`/Lib/small/s${i}`)).equals(Buffer.alloc(100 + i * 1000, 97 + (i % 26)))).toBe(true);
  }, T);

  it('a name the service refuses fails at its create with its errno, where the engine answers creates too; nothing is made', async () => {
    await expectRefusedNamesFail(h, 'fresh-names');
  }, T);

  it('a file the engine created, held open: stat shows the kernel\'s writes (answered from the spool) and a mode set meanwhile', async () => {
    await mkdir(join(h.mnt, 'Lib/held'));
    const before = await counters();
    const fh = await open(join(h.mnt, 'Lib/held/f.txt'), 'wx');
    try {
      // Counted once JavaScript has taken the engine's spool over (behind the create's answer).
      await eventually('the file handed over', async () => ((await counters()).passthroughFiles - before.passthroughFiles === 1 ? true : undefined), 10_000);
      await fh.write('0123456789');
      expect((await stat(join(h.mnt, 'Lib/held/f.txt'))).size).toBe(10);
      await fh.write('abc');
      expect((await fh.stat()).size).toBe(13);
      await fh.chmod(0o640);
      const st = await stat(join(h.mnt, 'Lib/held/f.txt'));
      expect([st.mode & 0o777, st.size]).toEqual([0o640, 13]);
    } finally {
      await fh.close();
    }
    expect(await readFile(join(h.mnt, 'Lib/held/f.txt'), 'utf8')).toBe('0123456789abc');
  }, T);

  it('a large file: stat follows the kernel\'s writes while it is open, a reader opened meanwhile sees them, the service gets it whole', async () => {
    const data = randomBytes(6 * 1024 * 1024 + 5);
    const path = join(h.mnt, 'Lib/large.bin');
    const w = await open(path, 'w');
    await w.write(data, 0, 4 * 1024 * 1024, 0);
    expect((await stat(path)).size).toBe(4 * 1024 * 1024);
    const r = await open(path, 'r');
    const seen = Buffer.alloc(16);
    await w.write(data, 4 * 1024 * 1024, data.length - 4 * 1024 * 1024, 4 * 1024 * 1024);
    await r.read(seen, 0, 16, data.length - 16);
    expect(seen.equals(data.subarray(data.length - 16))).toBe(true);
    await w.close();
    await r.close();
    expect((await readFile(path)).equals(data)).toBe(true);
    await h.call('flushAll');
    expect((await remote('/Lib/large.bin')).equals(data)).toBe(true);
  }, T);

  it('rsync -a: the mode it sets on each file it writes is answered by the engine, and shows', async () => {
    const src = join(h.local, 'to-rsync');
    await mkdir(src);
    for (let i = 0; i < 10; i++) {
      await writeFile(join(src, `m${i}`), Buffer.alloc(200 + i, 97 + i));
      await chmod(join(src, `m${i}`), 0o640);
    }
    await mkdir(join(h.mnt, 'Lib/rsynced'));
    const modes = async (): Promise<number> => (await h.call<{ answered: { modes: number } }>('mountCounters')).answered.modes;
    const before = await modes();
    await sh('rsync', ['-a', `${src}/`, `${join(h.mnt, 'Lib/rsynced')}/`], { timeoutMs: 60_000 });
    expect((await modes()) - before).toBeGreaterThanOrEqual(10);
    for (let i = 0; i < 10; i++) expect((await stat(join(h.mnt, 'Lib/rsynced', `m${i}`))).mode & 0o7777).toBe(0o640);
    await h.call('flushAll');
    for (const i of [0, 9]) expect((await remote(`/Lib/rsynced/m${i}`)).equals(Buffer.alloc(200 + i, 97 + i))).toBe(true);
  }, T);

  it('writes after a close through another descriptor of the same open file are journaled and uploaded too', async () => {
    const path = join(h.mnt, 'Lib/after-close.txt');
    // One descriptor closed (its flush journals "first"), the other writes on and closes last.
    const script = 'import os, sys\nfd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n' +
      'os.write(fd, b"first")\nos.close(os.dup(fd))\nos.write(fd, b" and after")\nos.ftruncate(fd, 15)\nos.close(fd)\n';
    await sh('python3', ['-c', script, path]);
    expect(await readFile(path, 'utf8')).toBe('first and after');
    await h.call('flushAll');
    expect((await remote('/Lib/after-close.txt')).toString()).toBe('first and after');
  }, T);

  it('an emptied existing file is handed over again; one opened without emptying, or with O_DIRECT, is written through the engine', async () => {
    const path = join(h.mnt, 'Lib/rewritten.txt');
    await writeFile(path, 'version one');
    await h.call('flushAll');
    const before = await counters();
    await writeFile(path, 'version two, longer');
    const handedOver = (await counters()).passthroughFiles - before.passthroughFiles;
    expect(handedOver).toBe(1);
    const a = await open(path, 'r+');
    await a.write('VERSION', 0, 'utf8');
    await a.close();
    const d = await open(join(h.mnt, 'Lib/direct.bin'), constants.O_CREAT | constants.O_RDWR | constants.O_DIRECT);
    const block = Buffer.alloc(4096, 7);
    await d.write(block, 0, 100, 0);
    await d.close();
    expect((await counters()).passthroughFiles - before.passthroughFiles).toBe(1);
    expect(await readFile(path, 'utf8')).toBe('VERSION two, longer');
    await h.call('flushAll');
    expect((await remote('/Lib/rewritten.txt')).toString()).toBe('VERSION two, longer');
    expect((await remote('/Lib/direct.bin')).equals(block.subarray(0, 100))).toBe(true);
  }, T);
});

/** A data folder kept for the tests of a describe (they read the journal's files), and their mount: both go after them. */
function keptDataDir(prefix: string): { dataDir: string; h?: MountHarness } {
  const kept: { dataDir: string; h?: MountHarness } = { dataDir: '' };
  beforeAll(async () => {
    kept.dataDir = await mkdtemp(join(tmpdir(), prefix));
  });
  afterAll(async () => {
    await kept.h?.stop();
    await rm(kept.dataDir, { recursive: true, force: true });
  });
  return kept;
}

/** The lines of the journal's logs (in the data folder `dataDir`) whose file names `which` picks. */
async function journalLines(dataDir: string, which: (name: string) => boolean): Promise<string[]> {
  const dir = join(dataDir, 'journal');
  const lines: string[] = [];
  for (const name of (await readdir(dir)).filter(which)) lines.push(...(await readFile(join(dir, name), 'utf8')).split('\n').filter((l) => l.length > 0));
  return lines;
}

/** The engine's close records in the journal's side logs (its own format: engine-close-record.ts). */
async function sideRecords(dataDir: string): Promise<EngineCloseRecord[]> {
  const dir = join(dataDir, 'journal');
  const out: EngineCloseRecord[] = [];
  for (const name of (await readdir(dir)).filter((n) => n.startsWith('closes.'))) for await (const r of readCloseRecords(join(dir, name))) out.push(r);
  return out;
}

/** The entries of the put lines of the journal's own log. */
async function ownPuts(dataDir: string): Promise<{ id: string; fullpath: string; size: number; sha1?: string }[]> {
  const lines = await journalLines(dataDir, (n) => n === 'journal.log');
  return lines.map((l) => JSON.parse(l.slice(l.indexOf(' ') + 1)) as { put?: { id: string; fullpath: string; size: number; sha1?: string } }).flatMap((r) => (r.put ? [r.put] : []));
}

/** The journal's spool folder: the names of spools (journal ids), and of emptied ones in its pool. */
async function spoolFolder(dataDir: string): Promise<{ spools: string[]; pool: string[] }> {
  const dir = join(dataDir, 'journal', 'spool');
  const ids = (names: string[]): string[] => names.filter((n) => /^[0-9a-f]{16}$/.test(n));
  return { spools: ids(await readdir(dir)), pool: ids(await readdir(join(dir, '.pool'))) };
}

// Spools made ahead (docs/fuse.md): the engine keeps empty spools made and open, and a create takes one.
describe.runIf(granted)('the mount with passthrough: spools made ahead', () => {
  const kept = keptDataDir('cloudlib-fuse-ahead-');

  it('creates take spools made ahead; a stopped mount puts the ones not taken back into the pool', async () => {
    const h = kept.h = await startMount({ mount: { attrTimeoutS: 1, writeMode: 'passthrough' }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_DATA_DIR: kept.dataDir, FUSE_TEST_UPLOAD_DELAY_MS: '600000' } });
    const answered = async (): Promise<{ creates: number; spoolsMadeAhead: number }> => (await h.call<{ answered: { creates: number; spoolsMadeAhead: number } }>('mountCounters')).answered;
    await mkdir(join(h.mnt, 'Lib/ahead'));
    // Made in the background once the engine has the spool folder.
    await eventually('spools made ahead', async () => ((await spoolFolder(kept.dataDir)).spools.length > 0 ? true : undefined), 10_000);
    const src = join(h.local, 'ahead');
    await mkdir(src);
    for (let i = 0; i < 20; i++) await writeFile(join(src, `a${i}`), Buffer.alloc(50 + i, 65 + i));
    const before = await answered();
    await sh('sh', ['-c', 'cp "$1"/* "$2"/', 'sh', src, join(h.mnt, 'Lib/ahead')]);
    const after = await answered();
    expect(after.creates - before.creates).toBe(20);
    expect(after.spoolsMadeAhead - before.spoolsMadeAhead).toBeGreaterThan(0);
    await h.call('flushAll');
    for (const i of [0, 19]) expect(Buffer.from(await h.call<string>('remoteRead', { path: `/Lib/ahead/a${i}` }), 'base64').equals(Buffer.alloc(50 + i, 65 + i))).toBe(true);
    // A spool made ahead carries the time it was made: an empty file created now shows now, also once
    // JavaScript took it over (it shows the spool's time), never the time its spool was made.
    const made = (await spoolFolder(kept.dataDir)).spools;
    expect(made.length).toBeGreaterThan(0);
    const long = new Date('2001-01-01T00:00:00Z');
    for (const id of made) await utimes(join(kept.dataDir, 'journal', 'spool', id), long, long).catch(() => undefined);
    const t0 = Date.now() - 1000;
    await writeFile(join(h.mnt, 'Lib/ahead/empty'), '');
    expect((await stat(join(h.mnt, 'Lib/ahead/empty'))).mtimeMs).toBeGreaterThanOrEqual(t0);
    await h.call('flushAll');
    expect((await h.call<{ mtimeMs: number }>('localStat', { path: '/Lib/ahead/empty' })).mtimeMs).toBeGreaterThanOrEqual(t0);
    // The engine recorded each close (a side log): the journal wrote a put line of its own from each record.
    const side = (await sideRecords(kept.dataDir)).filter((r) => r.fullpath.startsWith('ahead/a'));
    expect(side).toHaveLength(20);
    const own = await ownPuts(kept.dataDir);
    expect(side.filter((r) => own.some((e) => e.id === r.id && e.fullpath === r.fullpath && e.sha1 === r.sha1 && e.size === r.data.length))).toHaveLength(20);
    await h.stop();
    kept.h = undefined;
    // Every file is uploaded (its spool emptied into the pool), and the spools made ahead went back there.
    const left = await spoolFolder(kept.dataDir);
    expect(left.spools).toEqual([]);
    expect(left.pool.length).toBeGreaterThan(0);
  }, T);
});

// Closes answered by the engine (docs/fuse.md), applied while JavaScript was held still: files the engine
// created, the kernel wrote and the engine closed, made in the Vfs in one step; and the kernel writing on
// between the engine's read of a closed file and JavaScript taking its record.
describe.runIf(granted)('the mount with passthrough: closes the engine journaled while JavaScript was held still', () => {
  const kept = keptDataDir('cloudlib-fuse-taken-');
  beforeAll(async () => {
    kept.h = await startMount({ mount: { attrTimeoutS: 600, writeMode: 'passthrough' }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_DATA_DIR: kept.dataDir, FUSE_TEST_UPLOAD_DELAY_MS: '600000' } });
  }, T);

  /**
   * A folder made through the mount (the engine knows its names), then `work` run while the mount's
   * JavaScript is held still (every request it makes must be answered by the engine: one that is not
   * holds it past its timeout). `work` gets a file to create once it is where it must wait for JavaScript.
   */
  async function whileHeld(folderName: string, work: (folder: string, reached: string) => Promise<unknown>): Promise<void> {
    const h = kept.h!;
    const folder = join(h.mnt, 'Lib', folderName);
    await mkdir(folder);
    await stat(folder);
    const marker = join(h.local, `stalled-${folderName}`);
    const release = join(h.local, `released-${folderName}`);
    const reached = join(h.local, `reached-${folderName}`);
    await h.call('stall', { ms: 120_000, marker, release });
    await eventually('JavaScript is held still', async () => ((await stat(marker).catch(() => undefined)) ? true : undefined), 15_000);
    let done: Promise<unknown>;
    try {
      done = work(folder, reached);
      await Promise.race([done, eventually('the work is where it waits for JavaScript', async () => ((await stat(reached).catch(() => undefined)) ? true : undefined), 30_000)]);
    } finally {
      await writeFile(release, '');
    }
    await done;
  }

  it('files created, written and closed meanwhile are made in one step, as closed: each in the Vfs, the journal and on the service', async () => {
    const h = kept.h!;
    const madeClosed = async (): Promise<number> => (await h.call<{ madeClosed: number }>('mountCounters')).madeClosed;
    const before = await madeClosed();
    const src = join(h.local, 'whole');
    await mkdir(src);
    for (let i = 0; i < 20; i++) await writeFile(join(src, `w${i}`), Buffer.alloc(100 + i, 97 + i));
    await whileHeld('whole', async (folder, reached) => {
      // One cp a file (a cp of several stats each file it made, which JavaScript would answer).
      await sh('sh', ['-c', 'for f in "$1"/*; do cp "$f" "$2"/ || exit 1; done', 'sh', src, folder], { timeoutMs: 30_000 });
      await writeFile(reached, '');
    });
    await eventually('the files made closed', async () => ((await madeClosed()) - before >= 20 ? true : undefined), 30_000);
    expect((await madeClosed()) - before).toBe(20);
    for (const i of [0, 19]) expect((await readFile(join(h.mnt, 'Lib/whole', `w${i}`))).equals(Buffer.alloc(100 + i, 97 + i))).toBe(true);
    expect((await h.call<{ size: number }>('localStat', { path: '/Lib/whole/w7' })).size).toBe(107);
    await h.call('flushAll');
    for (let i = 0; i < 20; i++) expect(Buffer.from(await h.call<string>('remoteRead', { path: `/Lib/whole/w${i}` }), 'base64').equals(Buffer.alloc(100 + i, 97 + i))).toBe(true);
    // Each of the twenty: the journal's own put line written from the engine's record.
    const side = (await sideRecords(kept.dataDir)).filter((r) => /^whole\/w\d+$/.test(r.fullpath));
    expect(side).toHaveLength(20);
    const own = await ownPuts(kept.dataDir);
    expect(side.filter((r) => own.some((e) => e.id === r.id && e.fullpath === r.fullpath && e.sha1 === r.sha1 && e.size === r.data.length))).toHaveLength(20);
  }, T);

  it('a mode set on the open file before its close (an fchmod, as rsync makes) still makes it in one step, the mode kept', async () => {
    const h = kept.h!;
    const madeClosed = async (): Promise<number> => (await h.call<{ madeClosed: number }>('mountCounters')).madeClosed;
    const before = await madeClosed();
    await whileHeld('fchmod', async (folder, reached) => {
      const script = 'import os,sys\nfor i in range(10):\n  fd=os.open(os.path.join(sys.argv[1],"m%d"%i),os.O_CREAT|os.O_EXCL|os.O_WRONLY,0o644)\n  os.write(fd,b"x"*(50+i))\n  os.fchmod(fd,0o600)\n  os.close(fd)\n';
      await sh('python3', ['-c', script, folder], { timeoutMs: 30_000 });
      await writeFile(reached, '');
    });
    await eventually('the files made closed', async () => ((await madeClosed()) - before >= 10 ? true : undefined), 30_000);
    expect((await madeClosed()) - before).toBe(10);
    for (const i of [0, 9]) {
      const path = join(h.mnt, 'Lib/fchmod', `m${i}`);
      expect((await stat(path)).mode & 0o777).toBe(0o600);
      expect((await readFile(path)).equals(Buffer.alloc(50 + i, 'x'))).toBe(true);
    }
  }, T);

  it('closes the engine answered wait for JavaScript up to 8 MiB of records: past that, JavaScript closes the files; nothing is lost', async () => {
    const h = kept.h!;
    // The engine's bound on the bytes of records not yet handed to JavaScript (ANSWERED_BYTES_MAX).
    const bound = 8 * 1024 * 1024;
    const sideBytes = async (): Promise<number> => {
      const dir = join(kept.dataDir, 'journal');
      let bytes = 0;
      for (const name of (await readdir(dir)).filter((n) => n.startsWith('closes.'))) bytes += (await stat(join(dir, name))).size;
      return bytes;
    };
    // Records of 4 KiB files (about 4.2 KB each): 2,200 of them pass the bound.
    const files = 2200;
    const src = join(h.local, 'bound');
    await mkdir(src);
    for (let i = 0; i < files; i++) await writeFile(join(src, `f${i}`), Buffer.alloc(4096, i % 251));
    const before = await sideBytes();
    let whileHeldBytes = 0;
    await whileHeld('bound', async (folder, reached) => {
      const copying = sh('sh', ['-c', 'for f in "$1"/*; do cp "$f" "$2"/ || exit 1; done', 'sh', src, folder], { timeoutMs: 180_000 });
      // The engine answers closes, each record in its side log, until the records waiting reach the bound;
      // the next close waits for JavaScript, which is held: the copy stops there.
      await eventually('the records waiting reach the bound', async () => ((await sideBytes()) - before >= bound - 8192 ? true : undefined), 120_000);
      // No event marks a close held back in the kernel: a second lets a copy that was not held run past the bound.
      // eslint-disable-next-line no-restricted-syntax -- the proof of a stop is time with no progress
      await new Promise((r) => setTimeout(r, 1000));
      whileHeldBytes = (await sideBytes()) - before;
      await writeFile(reached, '');
      await copying;
    });
    // At most one record past the bound (the check comes before each record is added).
    expect(whileHeldBytes).toBeLessThanOrEqual(bound + 8192);
    expect((await readdir(join(h.mnt, 'Lib', 'bound'))).length).toBe(files);
    for (const i of [0, 1499, files - 1]) expect((await readFile(join(h.mnt, 'Lib/bound', `f${i}`))).equals(Buffer.alloc(4096, i % 251))).toBe(true);
    await h.call('flushAll', { timeoutMs: 120_000 }, 130_000);
    for (const i of [0, files - 1]) expect(Buffer.from(await h.call<string>('remoteRead', { path: `/Lib/bound/f${i}` }), 'base64').equals(Buffer.alloc(4096, i % 251))).toBe(true);
  }, 4 * T);

  it('a file written on through another descriptor after the engine read it is journaled as the spool then is, not with the bytes the engine read; the service gets the last bytes', async () => {
    const h = kept.h!;
    // The create, the first close (of a duplicate) and the writes are the engine's and the kernel's alone;
    // the last close waits for JavaScript.
    const script = 'import os, sys\nfd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL)\n' +
      'os.write(fd, b"first")\nos.close(os.dup(fd))\nos.write(fd, b" and after")\nopen(sys.argv[2], "w").close()\nos.close(fd)\n';
    await whileHeld('written-on', (folder, reached) => sh('python3', ['-c', script, join(folder, 'f.txt'), reached], { timeoutMs: 60_000 }));
    await h.call('flushAll');
    expect((await h.call<string>('remoteRead', { path: '/Lib/written-on/f.txt' }).then((b) => Buffer.from(b, 'base64'))).toString()).toBe('first and after');
    // The engine's record has the five bytes it read; the journal's own record of the version has all.
    const side = (await sideRecords(kept.dataDir)).filter((r) => r.fullpath === 'written-on/f.txt');
    expect(side).toHaveLength(1);
    expect(side[0]!.data.toString()).toBe('first');
    const own = (await ownPuts(kept.dataDir)).filter((e) => e.fullpath === 'written-on/f.txt');
    expect(own.some((e) => e.sha1 === side[0]!.sha1)).toBe(false);
    expect(own[0]!.size).toBe(15);
  }, T);
});

// A full spool folder: the gateway's data folder on a small tmpfs (mounting one needs root, as passthrough does).
describe.runIf(granted)('the mount with passthrough on a full disk', () => {
  let h: MountHarness | undefined;

  beforeAll(async () => {
    h = await startMountOnSmallDisk(24, { attrTimeoutS: 1, writeMode: 'passthrough' });
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('ENOSPC reaches the writer at its write and its close; the partial copy never becomes a version; the mount goes on working', async () => {
    const lib = join(h!.mnt, 'Lib');
    const failed = await sh('dd', ['if=/dev/zero', `of=${join(lib, 'too-big.bin')}`, 'bs=1M', 'count=48', 'status=none'], { timeoutMs: 60_000 }).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(failed?.message).toMatch(/No space left on device/);
    // Written by the kernel on a full disk: its close fails it whole, and nothing shows or is uploaded.
    await eventually('the partial file gone', async () => (await stat(join(lib, 'too-big.bin')).then(() => undefined, (e: NodeJS.ErrnoException) => e.code)), 10_000);
    expect((await stat(join(lib, 'too-big.bin')).catch((e: NodeJS.ErrnoException) => e)) as NodeJS.ErrnoException).toMatchObject({ code: 'ENOENT' });
    await h!.call('flushAll');
    expect(await h!.call('remoteStat', { path: '/Lib/too-big.bin' })).toBeNull();
    // Its spool went (back into the pool, emptied): a small file fits again.
    await writeFile(join(lib, 'after.txt'), 'still working');
    await h!.call('flushAll');
    expect((await h!.call<{ size: number }>('remoteStat', { path: '/Lib/after.txt' }))?.size).toBe(13);
  }, T);
});
