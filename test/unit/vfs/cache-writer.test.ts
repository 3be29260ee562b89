/**
 * CacheWriter: the content cache's bytes written by a thread of its own at the lowest CPU priority, from
 * a bounded ring: writes larger than a slot, pieces of any size, several at once, and a descriptor that
 * fails.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { CacheWriter } from '../../../src/vfs/cache-writer.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe('CacheWriter', () => {
  it('writes pieces at their positions, larger than a slot and several at once, at a lowered priority', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cloudlib-cache-writer-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'content.data');
    const fh = await open(file, 'w+');
    cleanups.push(() => fh.close());
    const writer = new CacheWriter();
    cleanups.push(() => writer.close());
    const data = randomBytes(11 * 1024 * 1024 + 123);
    // Pieces of uneven sizes, as a socket hands them; two writes of different ranges at once.
    const pieces = (from: number, to: number): Buffer[] => {
      const out: Buffer[] = [];
      for (let at = from; at < to;) {
        const n = Math.min(to - at, 1000 + ((at * 7) % 70_000));
        out.push(data.subarray(at, at + n));
        at += n;
      }
      return out;
    };
    const half = 5 * 1024 * 1024 + 7;
    await Promise.all([
      writer.write(fh.fd, 0, pieces(0, half), half),
      writer.write(fh.fd, half, pieces(half, data.length), data.length - half),
    ]);
    expect((await readFile(file)).equals(data)).toBe(true);
    expect(writer.counters).toEqual({ writes: 2, bytes: data.length });
    if (process.platform === 'linux') expect(writer.lowered).toBe(true);
  });

  it('a write that fails rejects with why; the writer goes on', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cloudlib-cache-writer-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const writer = new CacheWriter();
    cleanups.push(() => writer.close());
    const readOnly = await open(join(dir, 'ro.data'), 'w+').then(async (h) => { await h.close(); return open(join(dir, 'ro.data'), 'r'); });
    cleanups.push(() => readOnly.close());
    await expect(writer.write(readOnly.fd, 0, [Buffer.alloc(10)], 10)).rejects.toThrow(/writing the cached content: EBADF/);
    const fh = await open(join(dir, 'ok.data'), 'w+');
    cleanups.push(() => fh.close());
    await writer.write(fh.fd, 0, [Buffer.from('kept')], 4);
    expect(await readFile(join(dir, 'ok.data'), 'utf8')).toBe('kept');
    await writer.close();
    await expect(writer.write(fh.fd, 0, [Buffer.from('x')], 1)).rejects.toThrow(/closed/);
  });
});
