import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { createMemoryVfs, GatewayVfs, MemoryRemote, FaultyRemote } from '../../../src/vfs/index.js';
import { silentLogger } from '../../../src/shared/log.js';
import { vfsCode } from '../../support/vfs.js';
import { waitFor } from '../../support/wait-for.js';
import { encodeCloseRecord } from '../../../src/vfs/write-back/engine-close-record.js';

/** A MemoryRemote that counts the content bytes read from it. */
class CountingRemote extends MemoryRemote {
  bytes = 0;
  override async openRange(fullpath: string, start: number, end: number): Promise<Readable> {
    const s = await super.openRange(fullpath, start, end);
    s.on('data', (c: Buffer) => { this.bytes += c.length; });
    return s;
  }
}

let open: GatewayVfs[] = [];
afterEach(async () => {
  for (const v of open) await v.close();
  open = [];
});

async function setup(opts: Parameters<typeof createMemoryVfs>[0] = {}): Promise<{ vfs: GatewayVfs; remotes: Map<string, MemoryRemote> }> {
  const r = await createMemoryVfs({ names: ['A', 'B'], upload: { retryBaseMs: 20, retryMaxMs: 100 }, ...opts });
  open.push(r.vfs);
  return r;
}

async function readAll(vfs: GatewayVfs, path: string): Promise<string> {
  const h = await vfs.open(path, { read: true });
  try {
    const st = await h.stat();
    return (await h.read(0, st.size + 10)).toString();
  } finally {
    await h.release();
  }
}

/** A close record as a side writer (the FUSE engine) writes it (engine-close-record.ts). */
function sideRecord(e: { id: string; library: string; fullpath: string; mtimeNs: bigint }, data: Buffer): Buffer {
  return encodeCloseRecord({ ...e, createdMs: Date.now(), seq: Date.now() * 1000, data });
}

/** One file made closed (EngineLease.createClosed with one file). */
async function createClosed(vfs: GatewayVfs, path: string, journalId: string, closed: { record: Buffer; spoolMtimeNs: bigint }): Promise<boolean | undefined> {
  return (await vfs.createClosed([{ path, journalId, closed }]))[0];
}

describe('GatewayVfs.createClosed (files a front end created, had written and closed by itself)', { timeout: 20_000 }, () => {
  /** A spool written in the journal's spool folder under a fresh id, with its side record. */
  async function closedFile(vfs: GatewayVfs, fullpath: string, data: Buffer): Promise<{ id: string; closed: { record: Buffer; spoolMtimeNs: bigint }; spool: string }> {
    const id = randomBytes(8).toString('hex');
    const spool = join(vfs.sideJournal()!.spoolFolderPath(), id);
    await writeFile(spool, data);
    const st = statSync(spool, { bigint: true });
    return { id, spool, closed: { record: sideRecord({ id, library: 'A', fullpath, mtimeNs: st.mtimeNs }, data), spoolMtimeNs: st.mtimeNs } };
  }

  it('makes the file closed at once: shown, read and uploaded as closed, journaled from its record', async () => {
    const { vfs, remotes } = await setup();
    await vfs.mkdir('/A/d');
    const data = Buffer.from('closed by the front end');
    const f = await closedFile(vfs, 'd/made.txt', data);
    expect(await createClosed(vfs, '/A/d/made.txt', f.id, f.closed)).toBe(true);
    expect(await vfs.stat('/A/d/made.txt')).toMatchObject({ size: data.length, isDir: false });
    expect((await vfs.readdir('/A/d')).map((a) => a.name)).toEqual(['made.txt']);
    expect(await readAll(vfs, '/A/d/made.txt')).toBe(data.toString());
    await vfs.flushAll({ timeoutMs: 10_000 });
    expect(remotes.get('A')!.read('d/made.txt').equals(data)).toBe(true);
  });

  it('refuses, changing nothing, a record that is not the file\'s, a spool changed since, a name taken, a missing folder', async () => {
    const { vfs } = await setup();
    await vfs.mkdir('/A/d');
    const data = Buffer.from('bytes');
    const f = await closedFile(vfs, 'd/x.txt', data);
    // Another id's record, another path's, a record that does not match its check.
    expect(await createClosed(vfs, '/A/d/x.txt', randomBytes(8).toString('hex'), f.closed)).toBe(false);
    expect(await createClosed(vfs, '/A/d/y.txt', f.id, f.closed)).toBe(false);
    const torn = Buffer.from(f.closed.record);
    torn[20] ^= 1;
    expect(await createClosed(vfs, '/A/d/x.txt', f.id, { ...f.closed, record: torn })).toBe(false);
    // The spool written on after the record was made.
    expect(await createClosed(vfs, '/A/d/x.txt', f.id, { ...f.closed, spoolMtimeNs: f.closed.spoolMtimeNs - 1n })).toBe(false);
    // A missing folder; a name made meanwhile.
    const g = await closedFile(vfs, 'nowhere/x.txt', data);
    expect(await createClosed(vfs, '/A/nowhere/x.txt', g.id, g.closed)).toBe(false);
    await vfs.writeFile('/A/d/x.txt', Buffer.from('made through the Vfs'));
    expect(await createClosed(vfs, '/A/d/x.txt', f.id, f.closed)).toBe(false);
    expect(await readAll(vfs, '/A/d/x.txt')).toBe('made through the Vfs');
    expect(await vfsCode(vfs.stat('/A/d/y.txt'))).toBe('ENOENT');
    expect(await vfsCode(vfs.stat('/A/nowhere'))).toBe('ENOENT');
  });

  it('makes many files in one call, their records in one write; a refused one among them changes nothing and the rest are made', async () => {
    const { vfs, remotes } = await setup();
    await vfs.mkdir('/A/d');
    await vfs.mkdir('/A/e');
    const files = await Promise.all(['d/1.txt', 'd/2.txt', 'e/3.txt', 'd/4.txt'].map((p, i) => closedFile(vfs, p, Buffer.from(`file ${i}`))));
    const log = join(vfs.sideJournal()!.spoolFolderPath(), '..', 'journal.log');
    const before = await readFile(log).catch(() => Buffer.alloc(0));
    const made = await vfs.createClosed([
      { path: '/A/d/1.txt', journalId: files[0]!.id, closed: files[0]!.closed },
      // Another file's record: refused.
      { path: '/A/d/2.txt', journalId: files[1]!.id, closed: files[0]!.closed },
      { path: '/A/e/3.txt', journalId: files[2]!.id, closed: files[2]!.closed },
      { path: '/A/d/4.txt', journalId: files[3]!.id, closed: files[3]!.closed },
    ]);
    expect(made).toEqual([true, false, true, true]);
    // The journal's log gained three put lines of its own (the three ids), nothing else.
    const added = (await readFile(log)).subarray(before.length).toString().split('\n').filter((l) => l.length > 0);
    expect(added.map((l) => (JSON.parse(l.slice(l.indexOf(' ') + 1)) as { put: { id: string } }).put.id)).toEqual([files[0]!.id, files[2]!.id, files[3]!.id]);
    expect(await vfsCode(vfs.stat('/A/d/2.txt'))).toBe('ENOENT');
    expect((await vfs.readdir('/A/d')).map((a) => a.name).sort()).toEqual(['1.txt', '4.txt']);
    await vfs.flushAll({ timeoutMs: 10_000 });
    expect(remotes.get('A')!.read('d/1.txt').toString()).toBe('file 0');
    expect(remotes.get('A')!.read('e/3.txt').toString()).toBe('file 2');
    expect(remotes.get('A')!.read('d/4.txt').toString()).toBe('file 3');
  });
});

describe('GatewayVfs over memory libraries', { timeout: 20_000 }, () => {
  it('lists one folder per library at the root and maps paths one to one', async () => {
    const { vfs, remotes } = await setup();
    expect((await vfs.readdir('/')).map((a) => a.name)).toEqual(['A', 'B']);
    remotes.get('A')!.putFile('hello.txt', Buffer.from('hi'));
    const st = await vfs.stat('/A/hello.txt');
    expect(st).toMatchObject({ path: '/A/hello.txt', name: 'hello.txt', isDir: false, size: 2 });
    expect(await readAll(vfs, '/A/hello.txt')).toBe('hi');
    expect(await vfsCode(vfs.stat('/C'))).toBe('ENOENT');
    expect(await vfsCode(vfs.stat('/A/missing'))).toBe('ENOENT');
  });

  it('mkdir, readdir, rmdir; rmdir of a non-empty folder is refused like POSIX', async () => {
    const { vfs, remotes } = await setup();
    await vfs.mkdir('/A/d');
    expect(await vfsCode(vfs.mkdir('/A/d'))).toBe('EEXIST');
    expect(await vfsCode(vfs.mkdir('/A/x/y'))).toBe('ENOENT');
    await vfs.writeFile('/A/d/f', Buffer.from('1'));
    expect(await vfsCode(vfs.rmdir('/A/d'))).toBe('ENOTEMPTY');
    expect(await vfsCode(vfs.rmdir('/A/d/f'))).toBe('ENOTDIR');
    expect(await vfsCode(vfs.unlink('/A/d'))).toBe('EISDIR');
    await vfs.unlink('/A/d/f');
    await vfs.rmdir('/A/d');
    expect(remotes.get('A')!.paths()).toEqual([]);
    expect(await vfsCode(vfs.mkdir('/New'))).toBe('EPERM');
    expect(await vfsCode(vfs.mkdir('/A'))).toBe('EEXIST');
    expect(await vfsCode(vfs.rmdir('/A'))).toBe('EPERM');
  });

  it('a folder it just made is known empty: names looked up in it ask the service nothing', async () => {
    const { vfs, remotes } = await setup();
    await vfs.mkdir('/A/new');
    const remote = remotes.get('A')!;
    let stats = 0;
    const stat = remote.stat.bind(remote);
    remote.stat = async (...args: Parameters<typeof stat>) => { stats++; return stat(...args); };
    expect(await vfsCode(vfs.stat('/A/new/f1'))).toBe('ENOENT');
    await vfs.writeFile('/A/new/f1', Buffer.from('1'));
    await vfs.flushAll();
    expect(await vfsCode(vfs.stat('/A/new/f2'))).toBe('ENOENT');
    expect((await vfs.stat('/A/new/f1')).size).toBe(1);
    expect((await vfs.readdir('/A/new')).map((a) => a.name)).toEqual(['f1']);
    expect(stats).toBe(0);
  });

  it('cachedNames: a folder\'s names as a lookup finds them, only while its listing is cached', async () => {
    const { vfs, remotes } = await setup();
    await remotes.get('A')!.mkdir('d');
    remotes.get('A')!.putFile('d/old.txt', Buffer.from('1'));
    remotes.get('A')!.putFile('d/gone.txt', Buffer.from('2'));
    expect(vfs.cachedNames('/A/d', 10)).toBeUndefined();
    await vfs.readdir('/A/d');
    expect(vfs.cachedNames('/A/d', 10)!.sort()).toEqual(['gone.txt', 'old.txt']);
    expect(vfs.cachedNames('/A/d', 1)).toBeUndefined();
    // Local files laid over the listing; a name being removed is not there.
    await vfs.writeFile('/A/d/new.txt', Buffer.from('3'));
    await vfs.unlink('/A/d/gone.txt');
    expect(vfs.cachedNames('/A/d', 10)!.sort()).toEqual(['new.txt', 'old.txt']);
    await vfs.mkdir('/A/empty');
    expect(vfs.cachedNames('/A/empty', 10)).toEqual([]);
    expect(vfs.cachedNames('/', 10)).toBeUndefined();
    expect(() => vfs.cachedNames('/Nope/d', 10)).toThrow(/ENOENT/);
  });

  it('cachedNames of a folder made here, with names in doubt: offered among its names, a name never seen left out', async () => {
    const { vfs, remotes } = await setup();
    await vfs.mkdir('/A/made');
    expect(vfs.cachedNames('/A/made', 10)).toEqual([]);
    await vfs.writeFile('/A/made/a', Buffer.from('1'));
    await vfs.flushAll({ timeoutMs: 10_000 });
    await vfs.writeFile('/A/made/b', Buffer.from('2'));
    remotes.get('A')!.putFile('made/elsewhere', Buffer.from('3'));
    // The feed brought changes of these while the gateway changed them: each in doubt.
    vfs.cache.doubt('A', 'made/a');
    vfs.cache.doubt('A', 'made/elsewhere');
    expect(vfs.cachedNames('/A/made', 10)!.sort()).toEqual(['a', 'b', 'elsewhere']);
    expect(vfs.cachedNames('/A/made', 2)).toBeUndefined();
    expect((await vfs.stat('/A/made/elsewhere')).size).toBe(1);
    expect(vfs.cachedNames('/A/made', 10)!.sort()).toEqual(['a', 'b', 'elsewhere']);
  });

  it('knownMissing: true only when the cache or a name being removed says nothing is there, without asking the service', async () => {
    const { vfs, remotes } = await setup();
    const missing = (p: string): boolean => vfs.engineLease.knownMissing(p);
    await vfs.mkdir('/A/made');
    expect(missing('/A/made/x.rclonelink')).toBe(true); // the listing of a folder made here: empty
    await vfs.writeFile('/A/made/x', Buffer.from('1'));
    expect(missing('/A/made/x')).toBe(false); // a local file
    await vfs.flushAll({ timeoutMs: 10_000 });
    expect(missing('/A/made/x')).toBe(false); // uploaded, in the listing
    vfs.cache.doubt('A', 'made/x');
    expect(missing('/A/made/x')).toBe(false); // in doubt: unknown
    await remotes.get('A')!.mkdir('other');
    expect(missing('/A/other/y')).toBe(false); // a folder not listed: unknown
    await vfs.readdir('/A/other');
    expect(missing('/A/other/y')).toBe(true);
    await vfs.unlink('/A/made/x');
    expect(missing('/A/made/x')).toBe(true);
    for (const p of ['/', '/A', '/Nope/x']) expect(missing(p)).toBe(false);
  });

  it('localRange of a service file\'s handles: bytes in the content cache, read-only and before a write\'s first change', async () => {
    const { vfs, remotes } = await setup({ cache: { diskBytes: 16 * 1024 * 1024 } });
    const data = randomBytes(1024 * 1024 + 7);
    remotes.get('A')!.putFile('f.bin', data);
    const readAt = (r: { fd: number; position: number; length: number }): Buffer => {
      const b = Buffer.alloc(r.length);
      expect(readSync(r.fd, b, 0, b.length, r.position)).toBe(b.length);
      return b;
    };
    const first = await vfs.open('/A/f.bin', { read: true });
    expect(first.localRange!(0, 4096)).toBeUndefined(); // nothing cached yet
    expect((await first.read(0, data.length)).equals(data)).toBe(true);
    await first.release();
    await waitFor('the content cache to hold the whole file', () => vfs.status().disk?.writtenBytes ?? 0, { until: (n) => n >= data.length });
    expect(vfs.status().disk?.writtenBytes).toBe(data.length);
    const ro = await vfs.open('/A/f.bin', { read: true });
    expect(readAt(ro.localRange!(1000, 5000)!).equals(data.subarray(1000, 6000))).toBe(true);
    expect(ro.localRange!(data.length - 3, 4096)).toMatchObject({ position: data.length - 3, length: 3 });
    const rw = await vfs.open('/A/f.bin', { read: true, write: true });
    expect(readAt(rw.localRange!(7, 100)!).equals(data.subarray(7, 107))).toBe(true);
    await rw.write(0, Buffer.from('changed'));
    // Changed: the range is the new version's spool, not the cached content.
    expect(readAt(rw.localRange!(0, 100)!).equals(Buffer.concat([Buffer.from('changed'), data.subarray(7, 100)]))).toBe(true);
    await rw.release();
    // A released handle has none.
    await ro.release();
    expect(ro.localRange!(0, 10)).toBeUndefined();
  });

  it('a read handle follows its file: writes through other handles, a rename; not a replace or an unlink', async () => {
    const { vfs, remotes } = await setup();
    const text = async (h: { stat(): Promise<{ size: number }>; read(p: number, l: number): Promise<Buffer> }): Promise<string> => (await h.read(0, (await h.stat()).size + 10)).toString();
    const rewrite = async (path: string, data: string): Promise<void> => {
      const w = await vfs.open(path, { write: true, truncate: true });
      await w.write(0, Buffer.from(data));
      await w.release();
    };
    // A file of the service, read before any local change; and one written here, read from its local version.
    remotes.get('A')!.putFile('remote.txt', Buffer.from('service version'));
    await vfs.writeFile('/A/local.txt', Buffer.from('first local version'));
    const onRemote = await vfs.open('/A/remote.txt', { read: true });
    const onLocal = await vfs.open('/A/local.txt', { read: true });
    expect(await text(onRemote)).toBe('service version');
    expect(await text(onLocal)).toBe('first local version');
    // Changed through other handles (each close journals a version; the next change clones it).
    await rewrite('/A/remote.txt', 'changed');
    await rewrite('/A/local.txt', 'second');
    await rewrite('/A/local.txt', 'third, longer than the others');
    expect(await text(onRemote)).toBe('changed');
    expect(await text(onLocal)).toBe('third, longer than the others');
    expect((await onLocal.stat()).size).toBe(29);
    // A writer still open: its writes show at once.
    const w = await vfs.open('/A/local.txt', { read: true, write: true });
    await w.write(0, Buffer.from('THIRD'));
    expect(await text(onLocal)).toBe('THIRD, longer than the others');
    await w.release();
    // On the service now: still the same bytes (the followed version stays local while they read it).
    await vfs.flushAll();
    expect(await text(onRemote)).toBe('changed');
    expect(await text(onLocal)).toBe('THIRD, longer than the others');
    expect(remotes.get('A')!.read('remote.txt').toString()).toBe('changed');
    // Renamed: followed to its new name.
    await vfs.rename('/A/local.txt', '/A/moved.txt');
    await rewrite('/A/moved.txt', 'after the rename');
    expect(await text(onLocal)).toBe('after the rename');
    // Replaced (another file renamed over it) or unlinked: the handle reads on what it read last.
    await vfs.writeFile('/A/other.txt', Buffer.from('another file'));
    await vfs.rename('/A/other.txt', '/A/moved.txt');
    expect(await text(onLocal)).toBe('after the rename');
    await rewrite('/A/moved.txt', 'written to the other file');
    expect(await text(onLocal)).toBe('after the rename');
    await vfs.unlink('/A/remote.txt');
    await vfs.writeFile('/A/remote.txt', Buffer.from('a new file of that name'));
    expect(await text(onRemote)).toBe('changed');
    await onRemote.release();
    await onLocal.release();
    expect(await readAll(vfs, '/A/moved.txt')).toBe('written to the other file');
    expect(await readAll(vfs, '/A/remote.txt')).toBe('a new file of that name');
    // Handles gone, uploads done: nothing local is left for them.
    await vfs.flushAll();
    await waitFor('no local file left', () => vfs.status().localFiles, { until: (n) => n === 0 });
  });

  it('a read handle does not follow into a new file made at the name of its file after another client deleted it', async () => {
    const { vfs, remotes } = await setup({ feedIntervalMs: 50 });
    const remote = remotes.get('A')!;
    remote.putFile('put.txt', Buffer.from('first file, put'));
    remote.putFile('made.txt', Buffer.from('first file, made'));
    const onPut = await vfs.open('/A/put.txt', { read: true });
    const onMade = await vfs.open('/A/made.txt', { read: true });
    // Read once first: this remote keeps no deleted content, the handles then read from what they fetched.
    expect((await onPut.read(0, 100)).toString()).toBe('first file, put');
    expect((await onMade.read(0, 100)).toString()).toBe('first file, made');
    await remote.remove('put.txt');
    await remote.remove('made.txt');
    await waitFor('the feed to remove made.txt', () => vfsCode(vfs.stat('/A/made.txt')), { until: (c) => c === 'ENOENT' });
    await waitFor('the feed to remove put.txt', () => vfsCode(vfs.stat('/A/put.txt')), { until: (c) => c === 'ENOENT' });
    // New files at those names: a replace of nothing, and a create.
    await vfs.writeFile('/A/put.txt', Buffer.from('second file'));
    const w = await vfs.open('/A/made.txt', { write: true, create: true });
    await w.write(0, Buffer.from('second file'));
    await w.release();
    expect((await onPut.read(0, 100)).toString()).toBe('first file, put');
    expect((await onMade.read(0, 100)).toString()).toBe('first file, made');
    await onPut.release();
    await onMade.release();
    expect(await readAll(vfs, '/A/put.txt')).toBe('second file');
    expect(await readAll(vfs, '/A/made.txt')).toBe('second file');
  });

  it('refuses names the service refuses and changes nothing', async () => {
    const { vfs, remotes } = await setup();
    expect(await vfsCode(vfs.writeFile('/A/bad\0name', Buffer.from('x')))).toBe('EINVAL');
    expect(await vfsCode(vfs.mkdir(`/A/${'é'.repeat(128)}`))).toBe('ENAMETOOLONG');
    expect(await vfsCode(vfs.mkdir('/A/../B'))).toBe('EINVAL');
    expect(await vfsCode(vfs.rename('/A', '/A/x'))).toBe('EPERM');
    expect(remotes.get('A')!.paths()).toEqual([]);
    expect((await vfs.readdir('/A'))).toEqual([]);
  });

  it('writes are visible at once (read-your-writes) and reach the service on flush', async () => {
    const { vfs, remotes } = await setup();
    const h = await vfs.open('/A/new.txt', { write: true, create: true });
    await h.write(0, Buffer.from('hello'));
    expect((await vfs.stat('/A/new.txt')).size).toBe(5);
    expect((await vfs.readdir('/A')).map((a) => [a.name, a.size, a.dirty])).toEqual([['new.txt', 5, true]]);
    expect((await h.read(0, 100)).toString()).toBe('hello');
    await h.release();
    await vfs.flushAll();
    expect(remotes.get('A')!.read('new.txt').toString()).toBe('hello');
    const st = await vfs.stat('/A/new.txt');
    expect(st.dirty).toBeFalsy();
    expect(st.contentHash).toBe('aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d');
  });

  it('exclusive create, truncate, append', async () => {
    const { vfs, remotes } = await setup();
    await vfs.writeFile('/A/f', Buffer.from('0123456789'));
    expect(await vfsCode(vfs.open('/A/f', { write: true, create: true, exclusive: true }))).toBe('EEXIST');
    expect(await vfsCode(vfs.open('/A/nope', { read: true }))).toBe('ENOENT');
    let h = await vfs.open('/A/f', { write: true, append: true });
    await h.write(0, Buffer.from('AB'));
    await h.release();
    await vfs.flushAll();
    expect(remotes.get('A')!.read('f').toString()).toBe('0123456789AB');
    h = await vfs.open('/A/f', { write: true });
    await h.truncate(4);
    await h.release();
    await vfs.flushAll();
    expect(remotes.get('A')!.read('f').toString()).toBe('0123');
    h = await vfs.open('/A/f', { write: true, truncate: true });
    await h.release();
    await vfs.flushAll();
    expect(remotes.get('A')!.read('f').length).toBe(0);
  });

  it('a partial write into the middle of an existing file keeps the rest (never uploads a truncated file)', async () => {
    const { vfs, remotes } = await setup();
    const big = Buffer.alloc(300_000, 'a');
    remotes.get('A')!.putFile('big', big);
    const h = await vfs.open('/A/big', { write: true, read: true });
    expect((await h.read(1000, 3)).toString()).toBe('aaa');
    await h.write(150_000, Buffer.from('XYZ'));
    await h.release();
    await vfs.flushAll();
    const after = remotes.get('A')!.read('big');
    expect(after.length).toBe(300_000);
    expect(after.subarray(149_999, 150_004).toString()).toBe('aXYZa');
  });

  it('a large file is fetched on demand: a write fetches nothing, a read only around it, the commit the rest', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'vfs-ondemand-'));
    const remote = new CountingRemote({ name: 'L', id: '1' });
    const size = 20 * 1024 * 1024;
    const original = randomBytes(size);
    remote.putFile('big', original);
    const vfs = await GatewayVfs.open({ libraries: [{ name: 'L', id: '1', remote }], dataDir, feedIntervalMs: 0, logger: silentLogger });
    try {
      const h = await vfs.open('/L/big', { read: true, write: true });
      await h.write(10 * 1024 * 1024, Buffer.from('MIDDLE'));
      expect(remote.bytes).toBe(0);
      expect((await h.read(15 * 1024 * 1024, 4)).equals(original.subarray(15 * 1024 * 1024, 15 * 1024 * 1024 + 4))).toBe(true);
      expect(remote.bytes).toBe(1024 * 1024);
      expect((await h.read(10 * 1024 * 1024 - 2, 10)).toString('latin1').slice(2, 8)).toBe('MIDDLE');
      await h.release();
      await vfs.flushAll();
      expect(remote.bytes).toBeLessThanOrEqual(size);
      const expected = Buffer.from(original);
      expected.write('MIDDLE', 10 * 1024 * 1024, 'latin1');
      expect(remote.read('big').equals(expected)).toBe(true);
    } finally {
      await vfs.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('regression: an open racing with the last release of a committed local file keeps the content', async () => {
    // Found on a FUSE mount: `cmp` closing while `dd conv=notrunc` opened the same file. The release
    // discarded the spool the new handle had just picked up, and the next upload carried zeros.
    const { vfs, remotes } = await setup();
    const data = randomBytes(20 * 1024 * 1024);
    await vfs.writeFile('/A/r.bin', data);
    const reader = await vfs.open('/A/r.bin', { read: true });
    await vfs.flushAll();
    const released = reader.release();
    const writer = await vfs.open('/A/r.bin', { read: true, write: true });
    await released;
    await writer.write(1000, Buffer.from('XYZ'));
    await writer.release();
    await vfs.flushAll();
    data.write('XYZ', 1000, 'latin1');
    expect(remotes.get('A')!.read('r.bin').equals(data)).toBe(true);
  });

  it('unlink and rename of files and folders; rename onto an existing file replaces it; noReplace refuses', async () => {
    const { vfs, remotes } = await setup();
    const a = remotes.get('A')!;
    await vfs.mkdir('/A/d');
    await vfs.writeFile('/A/d/1', Buffer.from('one'));
    await vfs.writeFile('/A/2', Buffer.from('two'));
    await vfs.flushAll();
    await vfs.rename('/A/d', '/A/e');
    expect(a.paths()).toEqual(['2', 'e', 'e/1']);
    expect(await vfsCode(vfs.rename('/A/2', '/A/e/1', { noReplace: true }))).toBe('EEXIST');
    await vfs.rename('/A/2', '/A/e/1');
    expect(a.paths()).toEqual(['e', 'e/1']);
    expect(a.read('e/1').toString()).toBe('two');
    expect(await vfsCode(vfs.rename('/A/e', '/A/e/sub'))).toBe('EINVAL');
    expect(await vfsCode(vfs.rename('/A/missing', '/A/x'))).toBe('ENOENT');
    await vfs.unlink('/A/e/1');
    expect(await vfsCode(vfs.stat('/A/e/1'))).toBe('ENOENT');
    expect(a.paths()).toEqual(['e']);
  });

  it('renaming a file whose upload is pending moves the pending upload (nothing lands at the old path)', async () => {
    const { vfs } = await setup({ faults: true });
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    const inner = faulty.inner as MemoryRemote;
    faulty.inject({ kind: 'delay', methods: ['commit'], delayMs: 300, times: 1 });
    await vfs.writeFile('/A/draft', Buffer.from('text'));
    await vfs.rename('/A/draft', '/A/final');
    expect((await vfs.readdir('/A')).map((x) => x.name)).toEqual(['final']);
    await vfs.flushAll();
    expect(inner.paths()).toEqual(['final']);
    expect(inner.read('final').toString()).toBe('text');
  });

  it('moves across libraries as copy then delete', async () => {
    const { vfs, remotes } = await setup();
    await vfs.mkdir('/A/d');
    await vfs.writeFile('/A/d/f', Buffer.from('payload'));
    await vfs.flushAll();
    await vfs.rename('/A/d', '/B/d2');
    expect(remotes.get('A')!.paths()).toEqual([]);
    expect(remotes.get('B')!.paths()).toEqual(['d2', 'd2/f']);
    expect(remotes.get('B')!.read('d2/f').toString()).toBe('payload');
    await vfs.copy('/B/d2', '/A/back');
    expect(remotes.get('A')!.read('back/f').toString()).toBe('payload');
    await vfs.copy('/A/back/f', '/A/copy');
    expect(remotes.get('A')!.read('copy').toString()).toBe('payload');
  });

  it('failed uploads retry with backoff until the service takes them; status() shows them', async () => {
    const { vfs } = await setup({ faults: true });
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    faulty.inject({ kind: 'fail', methods: ['commit'], code: 'EIO', times: 3 });
    await vfs.writeFile('/A/f', Buffer.from('data'));
    await waitFor('a first failed commit', () => faulty.injected.fail, { until: (n) => n >= 1 });
    const pending = vfs.status().uploads;
    expect(pending).toHaveLength(1);
    expect(pending[0]).toMatchObject({ library: 'A', fullpath: 'f' });
    await waitFor('the upload queue to empty', () => vfs.status().uploads, { until: (u) => u.length === 0 });
    expect((faulty.inner as MemoryRemote).read('f').toString()).toBe('data');
    expect(faulty.injected.fail).toBe(3);
  });

  it('an outage that cuts the upload in flight: retried until the service is back', async () => {
    const { vfs } = await setup({ faults: true });
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    faulty.inject({ kind: 'delay', methods: ['commit'], delayMs: 100, times: 1 });
    await vfs.writeFile('/A/f', Buffer.from('survives'));
    await waitFor('the delayed commit under way', () => faulty.injected.delay, { until: (n) => n >= 1 });
    expect(vfs.status().uploads[0].state).toBe('uploading');
    faulty.down(300, { cutInFlight: true });
    const t0 = Date.now();
    // A flush reports the failing upload (as fsync of a folder does), which stays queued.
    await expect(vfs.flushAll({ timeoutMs: 2000 })).rejects.toMatchObject({ code: 'EIO' });
    expect(vfs.status().uploads[0].failures).toBeGreaterThanOrEqual(1);
    await waitFor('the upload queue to empty', () => vfs.status().uploads, { until: (u) => u.length === 0 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    expect((faulty.inner as MemoryRemote).read('f').toString()).toBe('survives');
  });

  it('modifying a file whose upload is under way cancels it and uploads the new content', async () => {
    const { vfs } = await setup({ faults: true });
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    faulty.inject({ kind: 'delay', methods: ['commit'], delayMs: 200, times: 1 });
    await vfs.writeFile('/A/f', Buffer.from('first'));
    // The upload starts once the file is closed: its commit is held back.
    await waitFor('the delayed commit under way', () => faulty.injected.delay, { until: (n) => n >= 1 });
    const h = await vfs.open('/A/f', { write: true });
    await h.write(0, Buffer.from('second'));
    await h.release();
    await vfs.flushAll();
    expect((faulty.inner as MemoryRemote).read('f').toString()).toBe('second');
  });

  it('the local version keeps the name when the file changed on the service while open; the other is its conflict copy', async () => {
    const { vfs, remotes } = await setup();
    remotes.get('A')!.putFile('doc', Buffer.from('v1'));
    const h = await vfs.open('/A/doc', { write: true });
    await h.write(0, Buffer.from('local'));
    remotes.get('A')!.putFile('doc', Buffer.from('other client'));
    await h.release();
    await vfs.flushAll();
    expect(remotes.get('A')!.read('doc').toString()).toBe('local');
    const copies = remotes.get('A')!.paths().filter((p) => p.startsWith('doc (conflict '));
    expect(copies.map((c) => remotes.get('A')!.read(c).toString())).toEqual(['other client']);
  });

  it('unlink of a file with a pending upload cancels it', async () => {
    const { vfs } = await setup({ faults: true });
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    faulty.inject({ kind: 'fail', methods: ['commit'], times: 1 });
    await vfs.writeFile('/A/tmp', Buffer.from('x'));
    await vfs.unlink('/A/tmp');
    await vfs.flushAll({ timeoutMs: 500 });
    // The queue empty is the proof: nothing of the file is left to reach the service.
    await waitFor('the upload queue to empty', () => vfs.status().uploads, { until: (u) => u.length === 0 });
    expect((faulty.inner as MemoryRemote).paths()).toEqual([]);
  });

  it('read-only gateway refuses changes with EROFS', async () => {
    const { vfs, remotes } = await setup({ readOnly: true });
    remotes.get('A')!.putFile('f', Buffer.from('x'));
    expect(await vfsCode(vfs.mkdir('/A/d'))).toBe('EROFS');
    expect(await vfsCode(vfs.open('/A/f', { write: true }))).toBe('EROFS');
    expect(await vfsCode(vfs.unlink('/A/f'))).toBe('EROFS');
    expect(await readAll(vfs, '/A/f')).toBe('x');
  });

  it('statfs from the library quota; tags and lock as extended operations; operator passed through', async () => {
    const { vfs, remotes } = await setup();
    const a = remotes.get('A')!;
    a.capacity = 1000;
    await vfs.writeFile('/A/f', Buffer.from('12345'), { operator: { opName: 'alice' } });
    await vfs.flushAll();
    expect(await vfs.statfs('/A')).toMatchObject({ total: 1000, used: 5, free: 995, files: 1 });
    expect((await vfs.statfs('/')).total).toBe(Number.MAX_SAFE_INTEGER);
    expect(a.read('f').toString()).toBe('12345');
    expect((await a.stat('f'))!.lastModifiedBy).toBe('alice');
    await vfs.setTags('/A/f', ['red', 'blue']);
    expect((await vfs.getTags('/A/f')).sort()).toEqual(['blue', 'red']);
    await vfs.setTags('/A/f', ['blue']);
    expect(await vfs.getTags('/A/f')).toEqual(['blue']);
    expect(await vfsCode(vfs.setTags('/A/f', ['a;b']))).toBe('EINVAL');
    await vfs.setLocked('/A/f', true);
    expect((await a.stat('f'))!.locked).toBe(true);
  });

  it('a file held locally (open for writing) shows the lock and tags the gateway sets, not its base\'s old ones', async () => {
    const { vfs } = await setup();
    await vfs.writeFile('/A/held', Buffer.from('v1'));
    await vfs.flushAll();
    const h = await vfs.open('/A/held', { write: true });
    await h.write(0, Buffer.from('v2'));
    await vfs.setLocked('/A/held', true);
    expect((await vfs.stat('/A/held')).locked).toBe(true);
    await vfs.setLocked('/A/held', false);
    expect((await vfs.stat('/A/held')).locked).toBeFalsy();
    await vfs.setTags('/A/held', ['x']);
    expect((await vfs.stat('/A/held')).tags).toEqual(['x']);
    await h.release();
  });

  it('capacity exceeded surfaces as ENOSPC in the upload status and the data stays journaled', async () => {
    // The upload waits for the flush: the library fills up in between.
    const { vfs, remotes } = await setup({ upload: { retryBaseMs: 20, retryMaxMs: 100, delayMs: 60_000 } });
    // Room when written (a write beyond the free space is refused at once: size-limits.test.ts); gone by the upload.
    await vfs.writeFile('/A/f', Buffer.from('too big'));
    remotes.get('A')!.capacity = 3;
    await expect(vfs.flushAll({ timeoutMs: 2000 })).rejects.toMatchObject({ code: 'ENOSPC' });
    const [u] = vfs.status().uploads;
    expect(u.lastError).toMatch(/ENOSPC/);
    // Refused by the service: not repeated on the backoff; a flush asks again (or refusedRetryMs later).
    expect(u).toMatchObject({ state: 'failed', lastErrorCode: 'ENOSPC' });
    expect(u.nextAttemptMs).toBeGreaterThan(Date.now() + 500_000);
    remotes.get('A')!.capacity = undefined;
    await vfs.flushAll({ timeoutMs: 2000 });
    expect(vfs.status().uploads).toEqual([]);
    expect(remotes.get('A')!.read('f').toString()).toBe('too big');
  });

  it('an upload the service refuses (EACCES) is not retried on the backoff; a flush asks again', async () => {
    const { vfs } = await setup({ faults: true });
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    const stop = faulty.inject({ kind: 'fail', methods: ['commit'], code: 'EACCES' });
    const before = Date.now();
    await vfs.writeFile('/A/f', Buffer.from('data'));
    await expect(vfs.flushAll({ timeoutMs: 2000 })).rejects.toMatchObject({ code: 'EACCES' });
    expect(vfs.status().uploads[0]).toMatchObject({ state: 'failed', lastErrorCode: 'EACCES' });
    // Asked again only refusedRetryMs (10 minutes) later, not on the 20–100 ms backoff of this setup.
    expect(vfs.status().uploads[0]!.nextAttemptMs).toBeGreaterThanOrEqual(before + 600_000);
    // Each flush asks again, once (and is refused again).
    const refused = faulty.injected.fail;
    await expect(vfs.flushAll({ timeoutMs: 2000 })).rejects.toMatchObject({ code: 'EACCES' });
    expect(faulty.injected.fail).toBe(refused + 1);
    stop();
    await vfs.flushAll({ timeoutMs: 2000 });
    expect((faulty.inner as MemoryRemote).read('f').toString()).toBe('data');
  });

  it('an upload the service refused is asked again refusedRetryMs later, without a flush (space freed elsewhere)', async () => {
    const { vfs } = await setup({ faults: true, upload: { retryBaseMs: 20, retryMaxMs: 100, refusedRetryMs: 50 } });
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    const stop = faulty.inject({ kind: 'fail', methods: ['commit'], code: 'ENOSPC' });
    await vfs.writeFile('/A/f', Buffer.from('data'));
    await expect(vfs.flushAll({ timeoutMs: 2000 })).rejects.toMatchObject({ code: 'ENOSPC' });
    stop(); // the library has room again; nothing tells the gateway
    const inner = faulty.inner as MemoryRemote;
    await waitFor('the refused upload asked again and done', () => vfs.status().uploads, { until: (u) => u.length === 0 });
    expect(inner.read('f').toString()).toBe('data');
  });

  it('createReadStream serves ranges from the service and from local data', async () => {
    const { vfs, remotes } = await setup();
    remotes.get('A')!.putFile('f', Buffer.from('0123456789'));
    const chunks: Buffer[] = [];
    for await (const c of await vfs.createReadStream('/A/f', { start: 2, end: 5 })) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('2345');
    const h = await vfs.open('/A/g', { write: true, create: true });
    await h.write(0, Buffer.from('local bytes'));
    const out: Buffer[] = [];
    for await (const c of await vfs.createReadStream('/A/g', { start: 6 })) out.push(c as Buffer);
    expect(Buffer.concat(out).toString()).toBe('bytes');
    await h.release();
  });

  it('setTimes is kept for a clean file until the service changes it, and for local files until commit', async () => {
    const { vfs, remotes } = await setup();
    remotes.get('A')!.putFile('f', Buffer.from('x'));
    await vfs.setTimes('/A/f', 1_000_000);
    expect((await vfs.stat('/A/f')).mtimeMs).toBe(1_000_000);
    // A local file: the time survives the commit (as `touch -d` after a write, or tar, need).
    const h = await vfs.open('/A/g', { write: true, create: true });
    await h.write(0, Buffer.from('data'));
    await h.release();
    await vfs.setTimes('/A/g', 2_000_000);
    await vfs.flushAll();
    expect((await vfs.stat('/A/g')).mtimeMs).toBe(2_000_000);
    // Set through a handle that changes nothing (touch): kept after the handle closes.
    const t = await vfs.open('/A/g', { write: true });
    await vfs.setTimes('/A/g', 3_000_000);
    await t.release();
    expect((await vfs.stat('/A/g')).mtimeMs).toBe(3_000_000);
    // A new version on the service ends it.
    remotes.get('A')!.putFile('f', Buffer.from('changed'));
    vfs.cache.forget('A', 'f');
    expect((await vfs.stat('/A/f')).mtimeMs).not.toBe(1_000_000);
  });
});
