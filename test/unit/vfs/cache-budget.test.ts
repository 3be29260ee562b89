/**
 * The content cache under a CacheBudget: least recently used first, never a content the budget keeps
 * (pinned, open), a free-disk floor that shrinks the limit, and a read much larger than the cache that
 * never makes the cache's folder hold more than the limit (its size measured on disk during the read).
 */
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { CacheBudget } from '../../../src/vfs/cache-budget.js';
import { ContentCache } from '../../../src/vfs/content-cache.js';
import { openVfs, MemoryRemote } from '../../../src/vfs/index.js';
import { silentLogger } from '../../../src/shared/log.js';

const PAGE = 4096;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cloudlib-budget-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function cache(maxBytes: number, disk?: { free: number; total: number }): Promise<{ cache: ContentCache; budget: CacheBudget }> {
  const dir = await tempDir();
  const budget = new CacheBudget({ dir, maxBytes, minFreeFraction: disk ? 0.05 : 0, ...(disk ? { diskSpace: async () => disk } : {}) });
  const c = new ContentCache({ dir, maxBytes, budget, logger: silentLogger });
  await c.init();
  cleanups.push(() => c.close());
  return { cache: c, budget };
}

const hash = (c: string): string => c.repeat(40);

/** Bytes the files of a folder take on disk (allocated blocks). */
async function onDisk(dir: string): Promise<number> {
  let n = 0;
  for (const name of await readdir(dir)) n += (await stat(join(dir, name)).catch(() => ({ blocks: 0 }))).blocks * 512;
  return n;
}

describe('cache budget', () => {
  it('evicts least recently used first, never what the budget keeps (pinned, open)', async () => {
    // Each content: two pages of data and two of sidecar; the cache holds three of them.
    const { cache: c, budget } = await cache(12 * PAGE);
    const data = Buffer.alloc(2 * PAGE, 7);
    const pinned = new Set([hash('a')]);
    budget.setPinned((h) => pinned.has(h));
    for (const x of ['a', 'b', 'c']) await c.write(hash(x), 0, data);
    const release = budget.hold(hash('b'));
    await c.write(hash('d'), 0, data); // a pinned, b open: c goes
    expect(['a', 'b', 'c', 'd'].map((x) => c.complete(hash(x), data.length))).toEqual([true, true, false, true]);
    release();
    await c.read(hash('d'), 0, 1); // d used after b: b is now the least recently used that may go
    await c.write(hash('e'), 0, data);
    expect(['a', 'b', 'd', 'e'].map((x) => c.complete(hash(x), data.length))).toEqual([true, false, true, true]);
    // Everything kept: what does not fit is not cached, the limit holds.
    pinned.add(hash('d')).add(hash('e'));
    await c.write(hash('f'), 0, data);
    expect(c.complete(hash('f'), data.length)).toBe(false);
    expect(c.stats()).toMatchObject({ heldBytes: 12 * PAGE, skippedBytes: data.length });
    // Free up space drops neither pinned nor open content.
    expect(await c.drop(hash('a'))).toBe(0);
    pinned.delete(hash('e'));
    const open = budget.hold(hash('e'));
    expect(await c.drop(hash('e'))).toBe(0);
    open();
    expect(await c.drop(hash('e'))).toBe(4 * PAGE);
  });

  it('keeps the disk\'s free share: the limit shrinks when the disk fills', async () => {
    // A disk of 1000 pages with 60 free: 5 % (50 pages) stays free, so 10 pages may be used.
    const { cache: c, budget } = await cache(100 * PAGE, { free: 60 * PAGE, total: 1000 * PAGE });
    expect(await budget.limit(0)).toBe(10 * PAGE);
    await c.write(hash('a'), 0, Buffer.alloc(4 * PAGE, 1)); // 6 pages
    await c.write(hash('b'), 0, Buffer.alloc(4 * PAGE, 2)); // 6 more: a goes
    expect(c.complete(hash('a'), 4 * PAGE)).toBe(false);
    expect(c.complete(hash('b'), 4 * PAGE)).toBe(true);
    expect(c.stats().heldBytes).toBeLessThanOrEqual(10 * PAGE);
    expect(() => new CacheBudget({ dir: '/', maxBytes: 1, minFreeFraction: 1 })).toThrow(/minFreeFraction/);
  });

  it('a read much larger than the cache never makes its folder hold more than the limit', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    const big = randomBytes(24 * 1024 * 1024);
    remote.putFile('big.bin', big);
    const dataDir = await tempDir();
    const limit = 4 * 1024 * 1024;
    const vfs = await openVfs({ libraries: [{ name: 'A', id: '1', remote }], dataDir, feedIntervalMs: 0, cache: { diskBytes: limit, minFreePercent: 0 } });
    cleanups.push(() => vfs.close());
    const contentDir = join(dataDir, 'content');
    let most = 0;
    let read = 0;
    const stream = await vfs.createReadStream('/A/big.bin');
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      expect(chunk.equals(big.subarray(read, read + chunk.length))).toBe(true);
      read += chunk.length;
      most = Math.max(most, await onDisk(contentDir));
    }
    expect(read).toBe(big.length);
    await vfs.close();
    most = Math.max(most, await onDisk(contentDir));
    expect(most).toBeGreaterThan(limit / 2); // it was used
    expect(most).toBeLessThanOrEqual(limit);
    expect(vfs.status().disk!.heldBytes).toBeLessThanOrEqual(limit);
  });
});
