/**
 * A sealed version is what its journal record names, or it is never uploaded as that version: a large
 * version the kernel wrote itself (FUSE passthrough, changed in place) is sealed by its spool's mark
 * (mtime, ctime and inode, nothing read), others by their SHA-1, and replay checks every spool against
 * its record's size and SHA-1 or mark before the upload, setting aside one that differs.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { closeSync, futimesSync, openSync, statSync, writeSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { waitFor } from '../../../support/wait-for.js';
import { UploadJournal } from '../../../../src/vfs/write-back/upload-journal.js';
import { LocalVersion } from '../../../../src/vfs/write-back/local-version.js';
import { FileHasher } from '../../../../src/vfs/write-back/file-hasher.js';
import { spoolMatches } from '../../../../src/vfs/write-back/spool-verification.js';
import { createVfs, FaultyRemote, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

interface Setup { vfs: GatewayVfs; remote: MemoryRemote; faulty: FaultyRemote; dataDir: string }

async function gateway(opts: { dataDir?: string; remote?: MemoryRemote } = {}): Promise<Setup> {
  const remote = opts.remote ?? new MemoryRemote({ name: 'A', id: '1' });
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'cloudlib-sealed-')));
  if (!opts.dataDir) cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const faulty = new FaultyRemote(remote);
  const vfs = await createVfs({ libraries: [{ name: 'A', remote: faulty }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 20, retryMaxMs: 100 } });
  cleanups.push(() => vfs.close());
  return { vfs, remote, faulty, dataDir };
}

/** Uploads held back (the service is slow or away): what is journaled stays in the journal. */
function holdUploads(faulty: FaultyRemote): void {
  faulty.inject({ kind: 'delay', methods: ['commit'], delayMs: 600_000 });
}

/** A crash of the gateway (kill -9): abandoned without close(), its uploads stopped. */
async function crash(s: Setup): Promise<void> {
  await s.vfs.writeBack.uploads.close();
}

/** The put records of the journal's log for `fullpath`, newest last. */
interface Put { id: string; size: number; sha1?: string; spoolMark?: { mtimeNs: string; ctimeNs: string; ino: string } }

async function puts(dataDir: string, fullpath: string): Promise<Put[]> {
  const text = await readFile(join(dataDir, 'journal', 'journal.log'), 'utf8');
  return text.split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l.slice(l.indexOf(' ') + 1)) as { put?: Put & { fullpath: string } })
    .flatMap((r) => (r.put && r.put.fullpath === fullpath ? [r.put] : []));
}

const sha1 = (b: Buffer): string => createHash('sha1').update(b).digest('hex');

/** The mark a record names the spool at `path` by, as the spool is now. */
function markOf(path: string): { mtimeNs: string; ctimeNs: string; ino: string } {
  const st = statSync(path, { bigint: true });
  return { mtimeNs: String(st.mtimeNs), ctimeNs: String(st.ctimeNs), ino: String(st.ino) };
}

/** Content larger than a journal record carries (its spool is the only copy of its bytes). */
function largeContent(seed: number): Buffer {
  const b = Buffer.alloc(300 * 1024);
  for (let i = 0; i < b.length; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

/** A new file written by "the kernel" (FileHandle.passthrough: straight into its spool), closed and done with. */
async function writtenByKernel(vfs: GatewayVfs, path: string, data: Buffer): Promise<void> {
  const h = await vfs.open(path, { write: true, create: true, exclusive: true });
  const spool = await h.passthrough!();
  expect(spool).toBeDefined();
  writeSync(spool!.fd, data, 0, data.length, 0);
  await h.flush();
  await h.release();
  spool!.end();
}

/** Runs `change` once, just before the next seal of any version (then seals as always); `ran` says whether it did. */
function beforeNextSeal(change: (version: LocalVersion) => void): { ran: boolean } {
  const seal = LocalVersion.prototype.seal;
  const seen = { ran: false };
  const spy = vi.spyOn(LocalVersion.prototype, 'seal').mockImplementation(function (this: LocalVersion, ...args: Parameters<LocalVersion['seal']>) {
    spy.mockRestore();
    seen.ran = true;
    change(this);
    return seal.apply(this, args);
  });
  return seen;
}

/**
 * Each record of `/A/e.db` carries the bytes its SHA-1 names (`last`); renamed to `/A/c`, crashed and
 * started again, the gateway uploads `last` there, nothing at the old name and nothing set aside.
 */
async function renamedCrashedReplayed(a: Setup, last: Buffer): Promise<void> {
  for (const r of await puts(a.dataDir, 'e.db')) if (r.sha1) expect(r.sha1).toBe(sha1(last));
  await a.vfs.rename('/A/e.db', '/A/c');
  await crash(a);
  const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
  await b.vfs.flushAll({ timeoutMs: 10_000 });
  expect(a.remote.read('c').equals(last)).toBe(true);
  expect(await a.remote.stat('e.db')).toBeNull();
  expect(await readdir(join(a.dataDir, 'journal', 'unverified')).catch(() => [])).toEqual([]);
}

describe('a sealed version is what its record names, or replay sets it aside', { timeout: 20_000 }, () => {
  it('a large file the kernel wrote (passthrough) is sealed by its spool\'s mark, nothing read: after a crash, untouched, it is uploaded whole', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    const data = largeContent(1);
    await writtenByKernel(a.vfs, '/A/big', data);
    const recorded = await puts(a.dataDir, 'big');
    // Every record of it, its seal's first: its size and the spool's mark as it is, no SHA-1 (its close
    // read none of its bytes; the upload hashes it).
    expect(recorded.length).toBeGreaterThan(0);
    const mark = markOf(join(a.dataDir, 'journal', 'spool', recorded[0]!.id));
    for (const r of recorded) {
      expect(r).toMatchObject({ size: data.length, spoolMark: mark });
      expect(r.sha1).toBeUndefined();
    }
    await crash(a);
    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll({ timeoutMs: 10_000 });
    expect(a.remote.read('big').equals(data)).toBe(true);
  });

  it('regression: a spool changed after its seal (the kernel writing it in place, a crash before its new record) is never uploaded as that version; its bytes are set aside', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    const kernel = largeContent(2);
    const written = largeContent(3);
    await writtenByKernel(a.vfs, '/A/in-place', kernel);
    const h = await a.vfs.open('/A/grown', { write: true, create: true });
    await h.write(0, written);
    await h.release();
    const [inPlace, grown] = [(await puts(a.dataDir, 'in-place')).at(-1)!, (await puts(a.dataDir, 'grown')).at(-1)!];
    // After their seals: one changed in place (same size), one written past its end; then the crash.
    const changed = Buffer.from(kernel);
    changed.write('changed after its seal', 1000);
    for (const [id, at, bytes] of [[inPlace.id, 1000, Buffer.from('changed after its seal')], [grown.id, written.length, Buffer.from('more')]] as const) {
      const fd = openSync(join(a.dataDir, 'journal', 'spool', id), 'r+');
      writeSync(fd, bytes, 0, bytes.length, at);
      closeSync(fd);
    }
    await crash(a);

    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll({ timeoutMs: 10_000 });
    expect(await a.remote.stat('in-place')).toBeNull();
    expect(await a.remote.stat('grown')).toBeNull();
    expect(b.vfs.status().uploads).toEqual([]);
    // Kept aside, each with its record, for a person to look at; gone from the journal.
    const aside = join(a.dataDir, 'journal', 'unverified');
    expect((await readdir(aside)).sort()).toEqual([inPlace.id, `${inPlace.id}.json`, grown.id, `${grown.id}.json`].sort());
    expect((await readFile(join(aside, inPlace.id))).equals(changed)).toBe(true);
    expect(JSON.parse(await readFile(join(aside, `${inPlace.id}.json`), 'utf8'))).toMatchObject({ fullpath: 'in-place', size: kernel.length, spoolMark: inPlace.spoolMark });
    expect(JSON.parse(await readFile(join(aside, `${grown.id}.json`), 'utf8'))).toMatchObject({ fullpath: 'grown', size: written.length, sha1: sha1(written) });
    await crash(b);
    const c = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await c.vfs.flushAll({ timeoutMs: 10_000 });
    expect(a.remote.paths()).toEqual([]);
  });
  it('regression: a rename then a crash replays the last acknowledged version: the kernel writing between the read of a small file\'s bytes and its seal', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    const first = Buffer.alloc(100, 0x61);
    const last = Buffer.alloc(100, 0x62);
    const h = await a.vfs.open('/A/e.db', { write: true, create: true, exclusive: true });
    const spool = await h.passthrough!();
    expect(spool).toBeDefined();
    writeSync(spool!.fd, first, 0, first.length, 0);
    // Another descriptor of the open file writes on while the close journals it: after its bytes were
    // read for the record, before the seal hashes the spool (another time: the seal sees the change).
    const sealed = beforeNextSeal(() => {
      writeSync(spool!.fd, last, 0, last.length, 0);
      futimesSync(spool!.fd, new Date(1_000_000), new Date(2_000_000));
    });
    await h.flush();
    await h.release();
    spool!.end();
    expect(sealed.ran, 'the close sealed it').toBe(true);
    await renamedCrashedReplayed(a, last);
  });
  it('regression: a rename then a crash replays the last acknowledged version: another handle writing between the read of a small file\'s bytes and its seal', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    const first = Buffer.alloc(100, 0x61);
    const last = Buffer.alloc(100, 0x62);
    const h = await a.vfs.open('/A/e.db', { write: true, create: true, exclusive: true });
    await h.write(0, first);
    // A write of another writer queued just before the seal: the seal hashes the spool with it.
    const sealed = beforeNextSeal((version) => void version.write(0, last));
    await h.release();
    expect(sealed.ran, 'the close sealed it').toBe(true);
    await renamedCrashedReplayed(a, last);
  });
  it('a spool the kernel wrote, only touched after its seal (same size, same bytes, another time), is set aside, not uploaded', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    const data = largeContent(4);
    await writtenByKernel(a.vfs, '/A/touched', data);
    const put = (await puts(a.dataDir, 'touched')).at(-1)!;
    expect(put.spoolMark).toBeDefined();
    const fd = openSync(join(a.dataDir, 'journal', 'spool', put.id), 'r+');
    futimesSync(fd, 1_900_000_000, 1_900_000_000);
    closeSync(fd);
    await crash(a);

    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll({ timeoutMs: 10_000 });
    expect(await a.remote.stat('touched')).toBeNull();
    const aside = join(a.dataDir, 'journal', 'unverified');
    expect((await readdir(aside)).sort()).toEqual([put.id, `${put.id}.json`].sort());
    expect((await readFile(join(aside, put.id))).equals(data)).toBe(true);
  });

  it('a file the kernel wrote on through another descriptor after its seal is journaled again by the write-back: replay checks that record and uploads what it names', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    const first = largeContent(5);
    const h = await a.vfs.open('/A/again', { write: true, create: true, exclusive: true });
    const spool = (await h.passthrough!())!;
    writeSync(spool.fd, first, 0, first.length, 0);
    // One descriptor's close seals it; the kernel writes on through another before it is done with the spool.
    await h.flush();
    const sealed = (await puts(a.dataDir, 'again')).at(-1)!;
    const more = Buffer.from('written through another descriptor after the seal');
    writeSync(spool.fd, more, 0, more.length, 4096);
    await h.release();
    spool.end();
    // The kernel is done with the spool: the write-back records the version as the spool is now.
    const want = Buffer.from(first);
    more.copy(want, 4096);
    const spoolPath = join(a.dataDir, 'journal', 'spool', sealed.id);
    await waitFor('a record of the spool as the kernel left it', async () => (await puts(a.dataDir, 'again')).at(-1)!.spoolMark?.ctimeNs === markOf(spoolPath).ctimeNs);
    expect(sealed.spoolMark).not.toEqual(markOf(spoolPath));
    await crash(a);

    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll({ timeoutMs: 10_000 });
    expect(a.remote.read('again').equals(want)).toBe(true);
  });
});

describe('a mark written before its spool is durable holds only in its boot', { timeout: 20_000 }, () => {
  async function journalWithMarkedSpool(): Promise<{ dir: string; journal: UploadJournal; id: string; data: Buffer }> {
    const root = await mkdtemp(join(tmpdir(), 'cloudlib-marks-'));
    cleanups.push(() => rm(root, { recursive: true, force: true }));
    const dir = join(root, 'journal');
    // No group commit of its own during the test: syncAll runs it.
    const journal = new UploadJournal(dir, 600_000, { bootId: 'boot-a' });
    await journal.init();
    cleanups.push(() => journal.close());
    const id = journal.newId();
    const data = largeContent(6);
    await writeFile(journal.spoolPath(id), data);
    return { dir, journal, id, data };
  }

  it('put without sync, its record says its boot; once the group commit fsynced the spool, a record without it follows', async () => {
    const { dir, journal, id, data } = await journalWithMarkedSpool();
    const mark = markOf(journal.spoolPath(id));
    await journal.put({ id, library: 'A', fullpath: 'f', size: data.length, mtimeMs: 1, createdMs: 1, spoolMark: mark }, { sync: false });
    expect((await puts(dirname(dir), 'f')).at(-1)!.spoolMark).toEqual({ ...mark, boot: 'boot-a' });
    await journal.syncAll();
    expect((await puts(dirname(dir), 'f')).at(-1)!.spoolMark).toEqual(mark);
    // Put with sync: durable at once, no boot.
    await journal.put({ id, library: 'A', fullpath: 'g', size: data.length, mtimeMs: 1, createdMs: 2, spoolMark: mark }, { sync: true });
    expect((await puts(dirname(dir), 'g')).at(-1)!.spoolMark).toEqual(mark);
  });

  it('replay checks such a mark in the boot it was written in (a crash of the gateway), never in another (a power loss may have kept the times without the bytes)', async () => {
    const { journal, id, data } = await journalWithMarkedSpool();
    const hasher = new FileHasher();
    cleanups.push(() => hasher.close());
    const mark = markOf(journal.spoolPath(id));
    const entry = { size: data.length, spoolMark: { ...mark, boot: 'boot-a' } };
    expect(await spoolMatches(hasher, journal.spoolPath(id), entry, 'boot-a')).toBe(true);
    expect(await spoolMatches(hasher, journal.spoolPath(id), entry, 'boot-b')).toBe(false);
    // Durable (no boot): in any boot, as long as the spool shows its mark.
    expect(await spoolMatches(hasher, journal.spoolPath(id), { size: data.length, spoolMark: mark }, 'boot-b')).toBe(true);
    expect(await spoolMatches(hasher, journal.spoolPath(id), { size: data.length + 1, spoolMark: mark }, 'boot-b')).toBe(false);
  });

  it('a record read back in its boot is made durable by the next group commit', async () => {
    const first = await journalWithMarkedSpool();
    const mark = markOf(first.journal.spoolPath(first.id));
    await first.journal.put({ id: first.id, library: 'A', fullpath: 'f', size: first.data.length, mtimeMs: 1, createdMs: 1, spoolMark: mark }, { sync: false });
    // A crash: the next run (same boot) reads the record back.
    const next = new UploadJournal(first.dir, 600_000, { bootId: 'boot-a' });
    cleanups.push(() => next.close());
    const [e] = await next.entries();
    expect(e!.spoolMark).toEqual({ ...mark, boot: 'boot-a' });
    await next.syncAll();
    expect((await puts(dirname(first.dir), 'f')).at(-1)!.spoolMark).toEqual(mark);
  });
});
