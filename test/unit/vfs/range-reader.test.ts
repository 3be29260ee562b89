import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { readSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { MemoryRemote } from '../../../src/vfs/memory-remote.js';
import { FaultyRemote } from '../../../src/vfs/faulty-remote.js';
import { BlockCache } from '../../../src/vfs/block-cache.js';
import { ContentCache } from '../../../src/vfs/content-cache.js';
import { RangeReader, ReadAheadBudget } from '../../../src/vfs/range-reader.js';
import { silentLogger } from '../../../src/shared/log.js';
import { waitFor } from '../../support/wait-for.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

const MiB = 1024 * 1024;

async function fixture(size: number): Promise<{ remote: FaultyRemote; data: Buffer; hash: string }> {
  const inner = new MemoryRemote();
  const data = randomBytes(size);
  const e = inner.putFile('f', data);
  return { remote: new FaultyRemote(inner), data, hash: e.contentHash! };
}

/** A ContentCache in a folder of its own (removed after the test). */
async function contentCache(opts: Omit<ConstructorParameters<typeof ContentCache>[0], 'dir' | 'logger'>): Promise<ContentCache> {
  const dir = await mkdtemp(join(tmpdir(), 'cc-'));
  dirs.push(dir);
  const disk = new ContentCache({ dir, logger: silentLogger, ...opts });
  await disk.init();
  return disk;
}

function reader(remote: FaultyRemote, data: Buffer, hash: string, extra: Partial<ConstructorParameters<typeof RangeReader>[0]> = {}): RangeReader {
  return new RangeReader({
    remote, fullpath: 'f', size: data.length, contentHash: hash, contentKey: hash, blocks: new BlockCache({ blockSize: 4096 }),
    initialWindow: 256 * 1024, maxWindow: 2 * MiB, logger: silentLogger, ...extra,
  });
}

describe('RangeReader', { timeout: 20_000 }, () => {
  it('sequential reads use few requests with a growing window', async () => {
    const { remote, data, hash } = await fixture(8 * MiB);
    const rr = reader(remote, data, hash);
    const parts: Buffer[] = [];
    for (let pos = 0; pos < data.length; pos += 128 * 1024) parts.push(await rr.read(pos, 128 * 1024));
    expect(Buffer.concat(parts).equals(data)).toBe(true);
    // 256K, 512K, 1M, 2M, 2M, 2M... → 6 windows for 8 MiB instead of 64 reads.
    expect(rr.counters.requests).toBeLessThanOrEqual(7);
    expect((await rr.read(data.length, 10)).length).toBe(0);
    rr.close();
  });

  it('read-ahead arriving out of order (pairs swapped, several in flight) stays one streak', async () => {
    const { remote, data, hash } = await fixture(8 * MiB);
    const rr = reader(remote, data, hash);
    const K = 128 * 1024;
    const order: number[] = [];
    for (let i = 0; i < data.length / K; i += 2) order.push((i + 1) * K, i * K); // 128K before 0, 384K before 256K…
    const got = await Promise.all(order.map((pos) => rr.read(pos, K).then((b) => [pos, b] as const)));
    for (const [pos, b] of got) expect(b.equals(data.subarray(pos, pos + K))).toBe(true);
    expect(rr.counters.randomBytes).toBe(0);
    expect(rr.counters.requests).toBeLessThanOrEqual(7);
    // A read further back than the bytes kept is an ordinary random read, and still right.
    expect((await rr.read(0, 100)).equals(data.subarray(0, 100))).toBe(true);
    rr.close();
  });

  it('readParts gives the bytes of read, in the pieces they arrived in, out-of-order reads included', async () => {
    const { remote, data, hash } = await fixture(3 * MiB + 333);
    const rr = reader(remote, data, hash);
    const K = 128 * 1024;
    for (const pos of [K, 0, 2 * K, 4 * K, 3 * K]) {
      const parts = await rr.readParts(pos, K);
      expect(Buffer.concat(parts).equals(data.subarray(pos, pos + K))).toBe(true);
    }
    expect(rr.counters.randomBytes).toBe(0);
    // A jump further than the reorder slack is a random read: still the right bytes, to the end of file.
    const tail = await rr.readParts(3 * MiB, K);
    expect(Buffer.concat(tail).equals(data.subarray(3 * MiB))).toBe(true);
    expect(await rr.readParts(data.length, K)).toEqual([]);
    rr.close();
  });

  it('requests the next window before the stream runs out, and closes it when the streak ends', async () => {
    const { remote, data, hash } = await fixture(16 * MiB);
    const opened: { start: number; stream: import('node:stream').Readable }[] = [];
    const openRange = remote.openRange.bind(remote);
    // Each window as asked for (a read asks for the next ones before it returns), and once opened.
    const asked: number[] = [];
    remote.openRange = async (p, start, end, o) => {
      asked.push(start);
      const stream = await openRange(p, start, end, o);
      opened.push({ start, stream });
      return stream;
    };
    const rr = reader(remote, data, hash, { initialWindow: 8 * MiB, maxWindow: 8 * MiB });
    const K = 128 * 1024;
    for (let pos = 0; pos < 5 * MiB; pos += K) expect((await rr.read(pos, K)).equals(data.subarray(pos, pos + K))).toBe(true);
    // Within 4 MiB of the first window's end: the second window is asked for ahead of the reads.
    await waitFor('the second window asked for', () => opened.length, { until: (n) => n >= 2 });
    expect(opened.map((o) => o.start)).toEqual([0, 8 * MiB]);
    for (let pos = 5 * MiB; pos < 9 * MiB; pos += K) expect((await rr.read(pos, K)).equals(data.subarray(pos, pos + K))).toBe(true);
    expect(opened).toHaveLength(2); // the read across the boundary used it
    // A jump ends the streak: both streams are closed.
    expect((await rr.read(15 * MiB, 100)).equals(data.subarray(15 * MiB, 15 * MiB + 100))).toBe(true);
    await waitFor('both streams closed', () => opened.map((o) => o.stream.destroyed), { until: (d) => d.every(Boolean) });
    rr.close();

    // A reader of the first bytes only (a few reads) asks for one window, not two.
    opened.length = 0;
    asked.length = 0;
    const head = reader(remote, data, hash, { initialWindow: 1 * MiB, maxWindow: 8 * MiB });
    for (let pos = 0; pos < 3 * K; pos += K) await head.read(pos, K);
    expect(asked).toEqual([0]);
    head.close();
  });

  it('keeps several windows in flight once the streak is established, within the streams and the byte budget', async () => {
    const { remote, data, hash } = await fixture(16 * MiB);
    const K = 128 * 1024;
    const starts = async (extra: Partial<ConstructorParameters<typeof RangeReader>[0]>): Promise<number[]> => {
      const opened: number[] = [];
      const openRange = remote.openRange.bind(remote);
      remote.openRange = (p, start, end, o) => { opened.push(start); return openRange(p, start, end, o); };
      const rr = reader(remote, data, hash, { initialWindow: 1 * MiB, maxWindow: 4 * MiB, ...extra });
      try {
        for (let pos = 0; pos < 4 * K; pos += K) expect((await rr.read(pos, K)).equals(data.subarray(pos, pos + K))).toBe(true);
        return [...opened];
      } finally {
        rr.close();
        remote.openRange = openRange;
      }
    };
    // After four reads (half the first window left): windows of 2 and 4 MiB ahead, the third range the limit.
    expect(await starts({ streams: 3, aheadBytes: 8 * MiB })).toEqual([0, 1 * MiB, 3 * MiB]);
    // The budget: 0.5 MiB left + 2 MiB fits in 3 MiB, another 4 MiB does not.
    expect(await starts({ streams: 4, aheadBytes: 3 * MiB })).toEqual([0, 1 * MiB]);
    // One stream: the next window only once the cursor is near its end (as a single stream always did).
    expect(await starts({ streams: 1 })).toEqual([0]);
    expect(() => reader(remote, data, hash, { streams: 0 })).toThrow(/streams/);

    // Read to the end with the defaults: every byte right, whatever the order the windows arrive in.
    const rr = reader(remote, data, hash, { initialWindow: 1 * MiB, maxWindow: 4 * MiB });
    const parts: Buffer[] = [];
    for (let pos = 0; pos < data.length; pos += K) parts.push(await rr.read(pos, K));
    expect(Buffer.concat(parts).equals(data)).toBe(true);
    expect(rr.counters.requests).toBe(6); // 1 + 2 + 4 + 4 + 4 + 1 MiB
    rr.close();
  });

  it('readers sharing a read-ahead budget: windows ahead only within it, given back when read or dropped', async () => {
    const { remote, data, hash } = await fixture(16 * MiB);
    const K = 128 * 1024;
    const budget = new ReadAheadBudget(6 * MiB);
    const opened: number[] = [];
    const openRange = remote.openRange.bind(remote);
    remote.openRange = (p, start, end, o) => { opened.push(start); return openRange(p, start, end, o); };
    const make = () => reader(remote, data, hash, { initialWindow: 1 * MiB, maxWindow: 4 * MiB, budget });
    const a = make();
    for (let pos = 0; pos < 4 * K; pos += K) await a.read(pos, K);
    expect(opened).toEqual([0, 1 * MiB, 3 * MiB]); // 2 + 4 MiB ahead: the whole budget
    expect(budget.inUse).toBe(6 * MiB);
    opened.length = 0;
    const b = make();
    for (let pos = 0; pos < 4 * K; pos += K) await b.read(pos, K);
    expect(opened).toEqual([0, 1 * MiB]); // only the window right after its own (as one stream always had)
    expect(budget.inUse).toBe(6 * MiB);
    // Reading on: a window ahead becomes the one read and its bytes are given back.
    for (let pos = 4 * K; pos < 1 * MiB + K; pos += K) expect((await a.read(pos, K)).equals(data.subarray(pos, pos + K))).toBe(true);
    expect(budget.inUse).toBe(4 * MiB); // the 2 MiB window is read now; the 4 MiB one still ahead
    a.close();
    b.close();
    expect(budget.inUse).toBe(0);
    remote.openRange = openRange;
  });

  it('random reads fetch only small aligned blocks and reuse the block cache', async () => {
    const { remote, data, hash } = await fixture(4 * MiB);
    const rr = reader(remote, data, hash);
    const positions = [3 * MiB + 5, 17, 2 * MiB + 4000, 3 * MiB + 100];
    for (const p of positions) expect((await rr.read(p, 200)).equals(data.subarray(p, p + 200))).toBe(true);
    expect(rr.counters.randomBytes).toBe(800);
    expect(rr.counters.requests).toBe(3); // the last read hit the cached block
    rr.close();
  });

  it('a range cut mid-way fails that read (retries are the HTTP layer\'s, not the reader\'s); the next read opens a new range', async () => {
    const { remote, data, hash } = await fixture(2 * MiB);
    remote.inject({ kind: 'cut', methods: ['openRange'], afterBytes: 100_000, times: 1 });
    const rr = reader(remote, data, hash);
    await expect(rr.read(0, 1 * MiB)).rejects.toMatchObject({ code: 'EIO' });
    expect(rr.counters.requests).toBe(1);
    const got = await rr.read(0, 1 * MiB);
    expect(got.equals(data.subarray(0, MiB))).toBe(true);
    expect(remote.injected.cut).toBe(1);
    rr.close();
  });

  it('a failing range fails the read with EIO, asking the Remote once', async () => {
    const { remote, data, hash } = await fixture(100_000);
    remote.inject({ kind: 'fail', methods: ['openRange'], code: 'EIO' });
    const rr = reader(remote, data, hash);
    await expect(rr.read(0, 10)).rejects.toMatchObject({ code: 'EIO' });
    expect(rr.counters.requests).toBe(1);
    rr.close();
  });

  it('with a content cache, unchanged content is never fetched twice (across readers)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cc-'));
    dirs.push(dir);
    const disk = new ContentCache({ dir, maxBytes: 16 * MiB, logger: silentLogger });
    await disk.init();
    const { remote, data, hash } = await fixture(3 * MiB);
    const first = reader(remote, data, hash, { disk });
    for (let pos = 0; pos < data.length; pos += MiB) await first.read(pos, MiB);
    first.close();
    await disk.close();
    const again = new ContentCache({ dir, maxBytes: 16 * MiB, logger: silentLogger });
    await again.init();
    remote.inject({ kind: 'fail', methods: ['openRange'] });
    const second = reader(remote, data, hash, { disk: again });
    const got: Buffer[] = [];
    for (let pos = 0; pos < data.length; pos += MiB) got.push(await second.read(pos, MiB));
    expect(Buffer.concat(got).equals(data)).toBe(true);
    expect(second.counters.requests).toBe(0);
    await again.close();
  });

  it('localRange: bytes all on disk in the content cache are given as its descriptor and range; else undefined', async () => {
    const disk = await contentCache({ maxBytes: 16 * MiB });
    const { remote, data, hash } = await fixture(3 * MiB + 100);
    const first = reader(remote, data, hash, { disk });
    // Nothing cached yet, and a reader without a cache never has any.
    expect(first.localRange(0, MiB)).toBeUndefined();
    expect(reader(remote, data, hash).localRange(0, MiB)).toBeUndefined();
    for (let pos = 0; pos < 2 * MiB; pos += MiB) await first.read(pos, MiB);
    first.close();
    await disk.close(); // the queued writes are done; the content's file is opened again by the next read
    const rr = reader(remote, data, hash, { disk });
    expect(rr.localRange(0, MiB)).toBeUndefined();
    expect((await rr.read(0, 4096)).equals(data.subarray(0, 4096))).toBe(true);
    const requests = rr.counters.requests;
    const local = rr.localRange(MiB - 10, 4096)!;
    expect(local).toMatchObject({ position: MiB - 10, length: 4096 });
    const got = Buffer.alloc(local.length);
    expect(readSync(local.fd, got, 0, got.length, local.position)).toBe(got.length);
    expect(got.equals(data.subarray(MiB - 10, MiB - 10 + 4096))).toBe(true);
    // Bytes not all cached, an empty or invalid range, past the end: the read answers.
    expect(rr.localRange(2 * MiB - 10, 4096)).toBeUndefined();
    expect(rr.localRange(3 * MiB + 100, 4096)).toBeUndefined();
    expect(rr.localRange(-1, 4096)).toBeUndefined();
    expect(rr.localRange(0, 0)).toBeUndefined();
    // While a read of the reader is under way, it keeps its order: undefined.
    const pending = rr.read(2 * MiB, MiB + 100);
    expect(rr.localRange(0, 4096)).toBeUndefined();
    expect((await pending).equals(data.subarray(2 * MiB))).toBe(true);
    expect(rr.counters.requests).toBeGreaterThan(requests);
    await disk.close();
    rr.close();
  });

  it('the content cache evicts whole contents, least recently used first, within its bound', async () => {
    // The bound counts what a content takes on disk: its 4 KiB pages and two for its sidecar.
    const page = 4096;
    const disk = await contentCache({ maxBytes: 5 * page });
    const a = 'a'.repeat(40);
    const b = 'b'.repeat(40);
    await disk.write(a, 0, Buffer.alloc(2 * page, 1));
    await disk.write(b, 0, Buffer.alloc(2 * page, 2));
    expect(disk.has(a, 0, 2 * page)).toBe(false);
    expect(disk.has(b, 0, 2 * page)).toBe(true);
    expect(disk.stats()).toMatchObject({ bytes: 2 * page, heldBytes: 4 * page });
    expect((await disk.read(b, 10, 20)).equals(Buffer.alloc(10, 2))).toBe(true);
    // One content larger than the bound (a big file being read): it stops being cached at the bound,
    // what it has stays readable, and the cache never holds more than its limit.
    await disk.write(b, 2 * page, Buffer.alloc(page, 2));
    await disk.write(b, 3 * page, Buffer.alloc(page, 2));
    expect(disk.stats().heldBytes).toBeLessThanOrEqual(5 * page);
    expect(disk.stats().skippedBytes).toBe(page);
    expect(disk.has(b, 0, 3 * page)).toBe(true);
    expect(disk.has(b, 3 * page, 4 * page)).toBe(false);
    await disk.close();
  });

  it('the content cache writes pieces in order, as given, in the background', async () => {
    const disk = await contentCache({ maxBytes: 16 * MiB });
    const h = 'c'.repeat(40);
    const data = randomBytes(3 * MiB + 17);
    // Uneven pieces, as a socket delivers them, starting past 0.
    const pieces = [data.subarray(0, 1), data.subarray(1, 65_537), data.subarray(65_537, 2 * MiB), data.subarray(2 * MiB)];
    await disk.write(h, 4096, pieces);
    expect(disk.has(h, 4096, 4096 + data.length)).toBe(true);
    expect(disk.has(h, 0, 4096)).toBe(false);
    expect((await disk.read(h, 4096, 4096 + data.length)).equals(data)).toBe(true);
    expect(disk.stats().writtenBytes).toBe(data.length);
    await disk.close();
  });

  it('the content cache joins queued writes that follow on, and keeps apart those that do not', async () => {
    const disk = await contentCache({ maxBytes: 16 * MiB });
    const h = 'e'.repeat(40);
    const data = randomBytes(4 * MiB);
    const writes: Promise<void>[] = [];
    // 64 KiB reads arriving in order, each in two pieces, plus one far ahead (not contiguous).
    for (let at = 0; at < 2 * MiB; at += 64 * 1024) writes.push(disk.write(h, at, [data.subarray(at, at + 1000), data.subarray(at + 1000, at + 64 * 1024)]));
    writes.push(disk.write(h, 3 * MiB, data.subarray(3 * MiB)));
    await Promise.all(writes);
    expect(disk.has(h, 0, 2 * MiB)).toBe(true);
    expect(disk.has(h, 2 * MiB, 3 * MiB)).toBe(false);
    expect(disk.has(h, 3 * MiB, 4 * MiB)).toBe(true);
    expect((await disk.read(h, 0, 2 * MiB)).equals(data.subarray(0, 2 * MiB))).toBe(true);
    expect((await disk.read(h, 3 * MiB, 4 * MiB)).equals(data.subarray(3 * MiB))).toBe(true);
    await disk.close();
  });

  it('the content cache skips what does not fit in its write queue rather than holding it in memory', async () => {
    const disk = await contentCache({ maxBytes: 16 * MiB, maxPendingBytes: MiB });
    const h = 'd'.repeat(40);
    const first = disk.write(h, 0, Buffer.alloc(768 * 1024, 1));
    const second = disk.write(h, 768 * 1024, Buffer.alloc(512 * 1024, 2)); // queued behind the first: over the bound
    await Promise.all([first, second]);
    expect(disk.has(h, 0, 768 * 1024)).toBe(true);
    expect(disk.has(h, 768 * 1024, 1280 * 1024)).toBe(false);
    expect(disk.stats().skippedBytes).toBe(512 * 1024);
    // Once the queue has drained, writes are taken again.
    await disk.write(h, 768 * 1024, Buffer.alloc(512 * 1024, 2));
    expect(disk.has(h, 0, 1280 * 1024)).toBe(true);
    expect((await disk.read(h, 768 * 1024, 768 * 1024 + 4)).equals(Buffer.alloc(4, 2))).toBe(true);
    await disk.close();
  });

  it('the content cache never lets go a write its caller waits for (a pin\'s fetch: keep)', async () => {
    const disk = await contentCache({ maxBytes: 16 * MiB, maxPendingBytes: MiB });
    const h = 'f'.repeat(40);
    const passing = disk.write(h, 0, Buffer.alloc(768 * 1024, 1));
    const kept = disk.write(h, 768 * 1024, Buffer.alloc(512 * 1024, 2), { keep: true }); // over the bound: kept anyway
    await Promise.all([passing, kept]);
    expect(disk.has(h, 0, 1280 * 1024)).toBe(true);
    expect(disk.stats().skippedBytes).toBe(0);
    await disk.close();
  });
});
