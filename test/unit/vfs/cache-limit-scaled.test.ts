/**
 * The "a 10 GiB read through a 1 GiB cache never holds more than the limit", scaled down: 1 GiB of
 * content read (64 contents of 16 MiB, in the 1 MiB pieces a sequential read hands the cache), then one
 * content larger than the cache, through a 64 MiB cache. At every eviction the cache's own count and its
 * folder's allocated blocks are sampled; none passes the limit.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { CacheBudget } from '../../../src/vfs/cache-budget.js';
import { ContentCache } from '../../../src/vfs/content-cache.js';
import { silentLogger } from '../../../src/shared/log.js';

const MiB = 1024 * 1024;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** Bytes the files of a folder take on disk (allocated blocks). */
async function onDisk(dir: string): Promise<number> {
  let n = 0;
  for (const name of await readdir(dir)) n += (await stat(join(dir, name)).catch(() => ({ blocks: 0 }))).blocks * 512;
  return n;
}

describe('cache limit, scaled', () => {
  it('1 GiB read through a 64 MiB cache: at every eviction it holds no more than the limit', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cloudlib-limit-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const limit = 64 * MiB;
    const budget = new CacheBudget({ dir, maxBytes: limit, minFreeFraction: 0 });
    const evictions: { heldBytes: number; limitBytes: number }[] = [];
    const sampledOnDisk: Promise<number>[] = [];
    const c = new ContentCache({
      dir, maxBytes: limit, budget, logger: silentLogger,
      onEvicted: (e) => {
        evictions.push(e);
        sampledOnDisk.push(onDisk(dir));
      },
    });
    await c.init();
    cleanups.push(() => c.close());
    const hashOf = (i: number): string => createHash('sha1').update(`content ${i}`).digest('hex');
    /** A sequential read of content `i` of `size` bytes: each 1 MiB piece handed to the cache as it passes. */
    const read = async (i: number, size: number): Promise<void> => {
      for (let at = 0; at < size; at += MiB) await c.write(hashOf(i), at, Buffer.alloc(MiB, i & 0xff));
    };
    for (let i = 0; i < 64; i++) await read(i, 16 * MiB);
    // Three contents of 16 MiB (and their sidecars' pages) fit: every later one evicted the oldest.
    expect(evictions.length).toBeGreaterThanOrEqual(60);
    expect(c.stats().writtenBytes).toBe(1024 * MiB);
    for (const i of [61, 62, 63]) expect(c.complete(hashOf(i), 16 * MiB)).toBe(true);
    expect(c.complete(hashOf(60), 16 * MiB)).toBe(false);
    // One content larger than the cache: the rest goes for it, and it stops being cached at the limit.
    const before = evictions.length;
    await read(64, 96 * MiB);
    expect(evictions.length).toBe(before + 3);
    expect(c.complete(hashOf(64), 96 * MiB)).toBe(false);
    expect(c.stats().skippedBytes).toBeGreaterThanOrEqual(32 * MiB);
    for (const e of evictions) {
      expect(e.limitBytes).toBe(limit);
      expect(e.heldBytes).toBeLessThanOrEqual(limit);
    }
    const disk = await Promise.all(sampledOnDisk);
    expect(Math.max(...disk)).toBeLessThanOrEqual(limit);
    expect(c.stats().heldBytes).toBeLessThanOrEqual(limit);
    expect(await onDisk(dir)).toBeLessThanOrEqual(limit);
    expect(await onDisk(dir)).toBeGreaterThan(limit / 2); // it was used
  }, 120_000);
});
