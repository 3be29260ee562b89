/**
 * Writes the engine makes into the spool itself (docs/fuse.md, The engine): a file that outgrows what
 * is held in memory has its following writes written by the engine's C side, hashed there while they
 * come front to back; JavaScript only keeps the books. Checked on the mount, on the Vfs's own view (the
 * content hash of the journaled version) and through the service's API. The mount's writeMode is
 * "writeback" (with passthrough a new file's writes go to the kernel, not the engine: passthrough.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { access, open, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { eventually, type MountHarness, sh, startMount, startMountOnSmallDisk } from './harness.js';

const T = 120_000;
const MiB = 1024 * 1024;

interface Counters { spoolsAttached: number; directWrites: number; hashedByEngine: number; fdReads: number; spoolWritebacks: number; spoolSyncs: number }

function pattern(bytes: number, seed: number): Buffer {
  const data = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) data[i] = (i * 31 + seed + (i >> 11)) & 0xff;
  return data;
}

const sha1 = (b: Buffer): string => createHash('sha1').update(b).digest('hex');

function describeMount(name: string, writebackCache: boolean, readerThreads = 1): void {
  describe(`direct spool writes, ${name}`, () => {
    let h: MountHarness;
    let lib: string;
    const counters = () => h.call<Counters>('mountCounters');
    const localSha1 = async (path: string) => (await h.call<{ contentHash?: string }>('localStat', { path })).contentHash;
    const remoteRead = async (path: string) => Buffer.from(await h.call<string>('remoteRead', { path }), 'base64');

    beforeAll(async () => {
      // A long write-back delay: the journaled version stays local, so its content hash is the one computed here.
      // A background sync of the spool every 8 MiB whose writeback started (the default is 64 MiB).
      h = await startMount({ mount: { attrTimeoutS: 1, writeMode: 'writeback', writebackCache, readerThreads, spoolSyncAheadBytes: 8 * MiB }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_UPLOAD_DELAY_MS: '600000' } });
      lib = join(h.mnt, 'Lib');
    }, T);
    afterAll(async () => {
      await h?.stop();
    }, T);

    it('a sequential write: the engine writes and hashes it, the content reads back and reaches the service', async () => {
      const data = pattern(24 * MiB + 4321, 1);
      const src = join(h.local, 'seq.bin');
      await writeFile(src, data);
      const before = await counters();
      await sh('dd', [`if=${src}`, `of=${join(lib, 'seq.bin')}`, 'bs=1M', 'conv=fsync', 'status=none'], { timeoutMs: 60_000 });
      const after = await counters();
      expect(after.spoolsAttached).toBeGreaterThan(before.spoolsAttached);
      expect(after.directWrites).toBeGreaterThan(before.directWrites);
      // The hash thread may finish after the fsync and close returned (it is not on their path). With the
      // kernel's writeback cache, a busy machine's writeback may send pages out of order: the engine's hash
      // then stops and the seal hashes the spool (the SHA-1 below is checked either way).
      if (!writebackCache) await eventually('the engine\'s hash of every byte', async () => ((await counters()).hashedByEngine > before.hashedByEngine ? true : undefined), 30_000);
      // Its writeback to disk started while it was written (every 8 MiB hashed), before the fsync.
      expect(after.spoolWritebacks - before.spoolWritebacks).toBeGreaterThanOrEqual(2);
      // And the engine's sync thread fdatasynced the spool while it came (it waits for nobody: counted once done).
      await eventually('a background sync of the spool', async () => ((await counters()).spoolSyncs > before.spoolSyncs ? true : undefined), 30_000);
      expect((await readFile(join(lib, 'seq.bin'))).equals(data)).toBe(true);
      expect(await localSha1('/Lib/seq.bin')).toBe(sha1(data));
      await h.call('flushAll');
      expect((await remoteRead('/Lib/seq.bin')).equals(data)).toBe(true);
    }, T);

    it('reads of a local file the kernel no longer caches are answered from its spool\'s descriptor by the engine', async () => {
      const data = pattern(3 * MiB + 777, 5);
      await writeFile(join(lib, 'local-read.bin'), data);
      // The kernel's copy of the pages goes: the reads reach the mount; the version is still local (not uploaded).
      await sh('dd', [`if=${join(lib, 'local-read.bin')}`, 'iflag=nocache', 'count=0', 'status=none'], { timeoutMs: 60_000 });
      const before = await counters();
      expect((await readFile(join(lib, 'local-read.bin'))).equals(data)).toBe(true);
      expect((await counters()).fdReads).toBeGreaterThan(before.fdReads);
      // A range in the middle, through a descriptor of its own.
      await sh('dd', [`if=${join(lib, 'local-read.bin')}`, 'iflag=nocache', 'count=0', 'status=none'], { timeoutMs: 60_000 });
      const fh = await open(join(lib, 'local-read.bin'), 'r');
      try {
        const part = Buffer.alloc(200_000);
        const { bytesRead } = await fh.read(part, 0, part.length, MiB + 12_345);
        expect(bytesRead).toBe(part.length);
        expect(part.equals(data.subarray(MiB + 12_345, MiB + 12_345 + part.length))).toBe(true);
        // Past the end: nothing.
        expect((await fh.read(Buffer.alloc(10), 0, 10, data.length)).bytesRead).toBe(0);
      } finally {
        await fh.close();
      }
    }, T);

    it('reads of a service file whose bytes are in the content cache on disk are answered from its descriptor by the engine', async () => {
      const data = pattern(3 * MiB + 555, 11);
      const target = join(lib, 'cached-remote.bin');
      await h.call('remoteWrite', { path: '/Lib/cached-remote.bin', data: data.toString('base64') });
      // First read: from the service, stored in the content cache in the background.
      const cached = async () => (await h.call<{ disk?: { writtenBytes: number } }>('vfsStatus')).disk?.writtenBytes ?? 0;
      const writtenBefore = await cached();
      await eventually('the file shows', async () => ((await readFile(target)).equals(data) ? true : undefined), 20_000);
      await eventually('the content cache holds it', async () => ((await cached()) - writtenBefore >= data.length ? true : undefined), 20_000);
      await sh('dd', [`if=${target}`, 'iflag=nocache', 'count=0', 'status=none'], { timeoutMs: 60_000 });
      const before = await counters();
      expect((await readFile(target)).equals(data)).toBe(true);
      expect((await counters()).fdReads).toBeGreaterThan(before.fdReads);
      // A range in the middle, through a descriptor of its own; past the end, nothing.
      await sh('dd', [`if=${target}`, 'iflag=nocache', 'count=0', 'status=none'], { timeoutMs: 60_000 });
      const fh = await open(target, 'r');
      try {
        const part = Buffer.alloc(300_000);
        expect((await fh.read(part, 0, part.length, 2 * MiB + 3)).bytesRead).toBe(part.length);
        expect(part.equals(data.subarray(2 * MiB + 3, 2 * MiB + 3 + part.length))).toBe(true);
        expect((await fh.read(Buffer.alloc(10), 0, 10, data.length)).bytesRead).toBe(0);
      } finally {
        await fh.close();
      }
    }, T);

    it('writes out of order: the content is right and its hash is computed from the spool at the seal', async () => {
      const size = 6 * MiB;
      const data = pattern(size, 7);
      const target = join(lib, 'scattered.bin');
      const fh = await open(target, 'w');
      // First the front (it passes the in-memory size: the engine takes over), then the rest backwards.
      await fh.write(data, 0, MiB, 0);
      for (let block = 5; block >= 1; block--) await fh.write(data, block * MiB, MiB, block * MiB);
      await fh.write(Buffer.from('patched'), 0, 7, 3 * MiB + 5);
      data.write('patched', 3 * MiB + 5);
      await fh.close();
      expect((await readFile(target)).equals(data)).toBe(true);
      expect(await localSha1('/Lib/scattered.bin')).toBe(sha1(data));
      await h.call('flushAll');
      expect((await remoteRead('/Lib/scattered.bin')).equals(data)).toBe(true);
    }, T);

    it('writes in flight at once, reaching the engine in any order: it writes them and its hash thread hashes them', async () => {
      const size = 16 * MiB;
      const data = pattern(size, 11);
      const target = join(lib, 'parallel.bin');
      const before = await counters();
      const fh = await open(target, 'w');
      await fh.write(data, 0, MiB, 0); // through JavaScript: the engine takes the following ones
      // The other fifteen blocks all at once, in a scrambled order (the thread pool makes four at a time).
      const blocks = Array.from({ length: 15 }, (_, i) => ((i * 7) % 15) + 1);
      await Promise.all(blocks.map((b) => fh.write(data, b * MiB, MiB, b * MiB)));
      await fh.close();
      const after = await counters();
      expect(after.spoolsAttached).toBeGreaterThan(before.spoolsAttached);
      expect(after.directWrites - before.directWrites).toBeGreaterThanOrEqual(15);
      // The hash covers every byte: the writes never overlapped, and at most 15 ranges waited ahead. The
      // close does not wait for the hash thread: a busy machine may report it after close() returned.
      await eventually('the engine\'s hash of every byte', async () => ((await counters()).hashedByEngine > before.hashedByEngine ? true : undefined), 30_000);
      expect((await readFile(target)).equals(data)).toBe(true);
      expect(await localSha1('/Lib/parallel.bin')).toBe(sha1(data));
      await h.call('flushAll');
      expect((await remoteRead('/Lib/parallel.bin')).equals(data)).toBe(true);
    }, T);

    it('a rewrite after a close starts a new version: the journaled one keeps its content', async () => {
      const first = pattern(3 * MiB, 3);
      const target = join(lib, 'rewrite.bin');
      await writeFile(target, first);
      expect(await localSha1('/Lib/rewrite.bin')).toBe(sha1(first));
      const fh = await open(target, 'r+');
      const second = Buffer.from(first);
      const piece = pattern(2 * MiB, 9);
      piece.copy(second, MiB);
      await fh.write(piece, 0, piece.length, MiB);
      await fh.write(piece, 0, MiB, 3 * MiB);
      const grown = Buffer.concat([second, piece.subarray(0, MiB)]);
      await fh.close();
      expect((await readFile(target)).equals(grown)).toBe(true);
      expect(await localSha1('/Lib/rewrite.bin')).toBe(sha1(grown));
      await h.call('flushAll');
      expect((await remoteRead('/Lib/rewrite.bin')).equals(grown)).toBe(true);
    }, T);

    // Only with the writeback cache does the engine answer small writes itself.
    if (writebackCache) {
      it('a write the engine answered is made before the writes the engine puts into a spool the handle gets after it', async () => {
        const marker = join(h.local, 'attach-held');
        const release = join(h.local, 'attach-release');
        const target = join(lib, 'answered-then-spool.bin');
        // O_DIRECT: each write reaches the mount, and the next is sent only once it is answered.
        const fh = await open(target, constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC | constants.O_DIRECT);
        try {
          const start = await counters();
          // JavaScript is held in the spool's attach that follows this write (it ends past what the engine answers).
          await h.call('holdSpoolAttach', { marker, release });
          const first = pattern(128 * 1024, 5);
          await fh.write(first, 0, first.length, 0);
          await eventually('JavaScript held before the attach', () => access(marker).then(() => true), 30_000);
          // The engine answers this one itself; its record waits for JavaScript.
          await fh.write(Buffer.alloc(4096, 0x41), 0, 4096, 0);
          await writeFile(release, '');
          // The handle got no spool: the engine's next write into it would have landed before the one above.
          expect(await h.call('heldSpoolAttach')).toEqual({ attached: false });
          const before = await counters();
          const later = Buffer.alloc(4096, 0x42);
          await fh.write(later, 0, 4096, 0);
          const back = Buffer.alloc(4096);
          await fh.read(back, 0, 4096, 0);
          expect(back.equals(later)).toBe(true);
          // The handle gets its spool once that write is made (its following writes are the engine's): at
          // the next write made through JavaScript, or as soon as the record is made, should JavaScript take
          // the records waiting (its poll of quiet records) before.
          const more = pattern(128 * 1024, 6);
          await fh.write(more, 0, more.length, first.length);
          const after = await counters();
          expect(after.spoolsAttached).toBe(start.spoolsAttached + 1);
          expect(after.directWrites).toBeGreaterThan(before.directWrites);
          await fh.close();
          const expected = Buffer.concat([later, first.subarray(4096), more]);
          expect((await readFile(target)).equals(expected)).toBe(true);
          await h.call('flushAll');
          expect((await remoteRead('/Lib/answered-then-spool.bin')).equals(expected)).toBe(true);
        } finally {
          await fh.close().catch(() => undefined);
        }
      }, T);
    }

    it('small files stay in memory: written without the engine taking over', async () => {
      const before = await counters();
      for (let i = 0; i < 20; i++) await writeFile(join(lib, `small-${i}.txt`), `small file ${i}\n`.repeat(200));
      const after = await counters();
      expect(after.spoolsAttached).toBe(before.spoolsAttached);
      expect(await readFile(join(lib, 'small-7.txt'), 'utf8')).toBe('small file 7\n'.repeat(200));
      expect(await localSha1('/Lib/small-7.txt')).toBe(sha1(Buffer.from('small file 7\n'.repeat(200))));
    }, T);
  });
}

describeMount('with the writeback cache', true);
describeMount('without the writeback cache', false);
// Four reader threads, each write(2) its own request: the engine's writes to one spool go in parallel.
describeMount('four reader threads, without the writeback cache', false, 4);

// A full spool folder: the gateway's data folder on a small tmpfs (mounting one needs root).
describe.skipIf(process.getuid?.() !== 0)('direct spool writes on a full disk', () => {
  let h: MountHarness | undefined;

  beforeAll(async () => {
    h = await startMountOnSmallDisk(24, { attrTimeoutS: 1, writeMode: 'writeback' });
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('ENOSPC reaches the writer, the failed version is dropped, and the mount goes on working', async () => {
    const lib = join(h!.mnt, 'Lib');
    const before = await h!.call<Counters>('mountCounters');
    const failed = await sh('dd', ['if=/dev/zero', `of=${join(lib, 'too-big.bin')}`, 'bs=1M', 'count=48', 'conv=fsync', 'status=none'], { timeoutMs: 60_000 }).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(failed?.message).toMatch(/No space left on device/);
    const after = await h!.call<Counters>('mountCounters');
    expect(after.directWrites).toBeGreaterThan(before.directWrites);
    await h!.call('flushAll');
    // The failed version is dropped: what stays is the empty file dd's open made (dd closes it once before writing).
    expect((await h!.call<{ size: number }>('remoteStat', { path: '/Lib/too-big.bin' }))?.size).toBe(0);
    // The failed version's spool is gone with it: a small file fits again.
    await writeFile(join(lib, 'after.txt'), 'still working');
    await h!.call('flushAll');
    expect((await h!.call<{ size: number }>('remoteStat', { path: '/Lib/after.txt' }))?.size).toBe(13);
  }, T);
});
