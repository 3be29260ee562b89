/**
 * Read-only opens of content wholly in the content cache handed to the kernel (docs/fuse.md, Passthrough;
 * docs/pins-and-cache.md): the kernel reads the cache file itself. Over the gateway's Vfs and an embedded
 * service, in a mount child with writeMode "passthrough"; needs Linux 6.9 and CAP_SYS_ADMIN (root).
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startMount, type MountHarness } from './harness.js';

const T = 60_000;
const [major, minor] = release().split('.').map(Number) as [number, number];
const granted = (major > 6 || (major === 6 && minor >= 9)) && process.getuid?.() === 0;

const sha1 = (b: Buffer): string => createHash('sha1').update(b).digest('hex');

describe.runIf(granted)('read-only opens of cached content through passthrough', () => {
  let h: MountHarness;
  let dataDir: string;
  const counters = (): Promise<{ passthroughReads: number; transport: { passthrough: boolean } }> => h.call('mountCounters');
  const put = (path: string, data: Buffer) => h.call('remoteWrite', { path, data: data.toString('base64') });
  const evict = (path: string) => h.call<{ files: number }>('evict', { path });

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-cached-passthrough-'));
    h = await startMount({ mount: { attrTimeoutS: 1, writeMode: 'passthrough' }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_DATA_DIR: dataDir, FUSE_TEST_FEED_INTERVAL_MS: '200' } });
  }, T);
  afterAll(async () => {
    await h?.stop();
    await rm(dataDir, { recursive: true, force: true });
  }, T);

  it('a pinned file: its open is handed the cache file and reads byte-exact', async () => {
    const data = randomBytes(5 * 1024 * 1024 + 17);
    await put('/Lib/pinned.bin', data);
    await h.call('pin', { path: '/Lib/pinned.bin' });
    const before = await counters();
    expect(before.transport.passthrough).toBe(true);
    expect((await readFile(join(h.mnt, 'Lib/pinned.bin'))).equals(data)).toBe(true);
    expect((await counters()).passthroughReads - before.passthroughReads).toBe(1);
  }, T);

  it('free up space leaves the content while the kernel reads it, and takes it once it is closed', async () => {
    const data = randomBytes(2 * 1024 * 1024);
    await put('/Lib/cached.bin', data);
    const file = join(h.mnt, 'Lib/cached.bin');
    await h.call('pin', { path: '/Lib/cached.bin' });
    let fh = await open(file, 'r');
    const handed = async (): Promise<boolean> => {
      const before = (await counters()).passthroughReads;
      await fh.close();
      fh = await open(file, 'r');
      return (await counters()).passthroughReads > before;
    };
    await eventually('an open of the cached file handed to the kernel', async () => ((await handed()) ? true : undefined), 10_000);
    // Unpinned while open: only the grant's hold keeps the content from here.
    await h.call('pin', { path: '/Lib/cached.bin', pinned: false });
    try {
      expect(await evict('/Lib/cached.bin')).toMatchObject({ files: 0 });
      const back = Buffer.alloc(data.length);
      const { bytesRead } = await fh.read(back, 0, back.length, 0);
      expect(bytesRead).toBe(data.length);
      expect(back.equals(data)).toBe(true);
    } finally {
      await fh.close();
    }
    // The release reaches the gateway behind the close: the content goes once it has.
    await eventually('the closed content to be evicted', async () => ((await evict('/Lib/cached.bin')).files === 1 ? true : undefined), 10_000);
    expect((await readFile(file)).equals(data)).toBe(true); // fetched again
  }, T);

  it('a change made elsewhere during a read: the open keeps what it opened, a new open reads the new version', async () => {
    const v1 = randomBytes(3 * 1024 * 1024);
    const v2 = randomBytes(3 * 1024 * 1024 + 5);
    await put('/Lib/changing.bin', v1);
    await h.call('pin', { path: '/Lib/changing.bin' });
    const file = join(h.mnt, 'Lib/changing.bin');
    const before = (await counters()).passthroughReads;
    const fh = await open(file, 'r');
    try {
      expect((await counters()).passthroughReads - before).toBe(1);
      const first = Buffer.alloc(1024 * 1024);
      await fh.read(first, 0, first.length, 0);
      expect(first.equals(v1.subarray(0, first.length))).toBe(true);
      await put('/Lib/changing.bin', v2);
      await eventually('the new version to show to a new open', async () => {
        const now = await readFile(file).catch(() => undefined);
        return now?.equals(v2) ? true : undefined;
      }, 15_000);
      const rest = Buffer.alloc(v1.length - first.length);
      const { bytesRead } = await fh.read(rest, 0, rest.length, first.length);
      expect(bytesRead).toBe(rest.length);
      expect(rest.equals(v1.subarray(first.length))).toBe(true);
    } finally {
      await fh.close();
    }
  }, T);

  it('a write open beside a read the kernel answers is refused (EBUSY), never writes the cache file; after it, writes make a new version', async () => {
    const data = randomBytes(1024 * 1024);
    await put('/Lib/written.bin', data);
    await h.call('pin', { path: '/Lib/written.bin' });
    const file = join(h.mnt, 'Lib/written.bin');
    const before = (await counters()).passthroughReads;
    const reader = await open(file, 'r');
    try {
      expect((await counters()).passthroughReads - before).toBe(1);
      for (const mode of ['r+', 'w', 'a']) await expect(open(file, mode), mode).rejects.toMatchObject({ code: 'EBUSY' });
      const back = Buffer.alloc(data.length);
      await reader.read(back, 0, back.length, 0);
      expect(back.equals(data)).toBe(true);
    } finally {
      await reader.close();
    }
    // Once the reader's release is in, a writer opens as before, and its bytes go to a version of their own.
    await eventually('a write open once the reader is closed', async () => {
      try {
        await writeFile(file, 'written here');
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EBUSY') return undefined;
        throw err;
      }
    }, 10_000);
    expect(await readFile(file, 'utf8')).toBe('written here');
    expect((await readFile(join(dataDir, 'content', `${sha1(data)}.data`))).equals(data)).toBe(true);
    await h.call('flushAll');
    expect(Buffer.from(await h.call<string>('remoteRead', { path: '/Lib/written.bin' }), 'base64').toString()).toBe('written here');
  }, T);
});

describe('read-only opens of cached content without passthrough', () => {
  let h: MountHarness;
  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 1, writeMode: 'writeback' }, env: { FUSE_TEST_BACKEND: 'service' } });
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('a pinned file is read through the engine, as before', async () => {
    const data = randomBytes(2 * 1024 * 1024 + 3);
    await h.call('remoteWrite', { path: '/Lib/pinned.bin', data: data.toString('base64') });
    await h.call('pin', { path: '/Lib/pinned.bin' });
    expect((await readFile(join(h.mnt, 'Lib/pinned.bin'))).equals(data)).toBe(true);
    const c = await h.call<{ passthroughReads: number; fdReads: number; transport: { passthrough: boolean } }>('mountCounters');
    expect(c.transport.passthrough).toBe(false);
    expect(c.passthroughReads).toBe(0);
    expect(c.fdReads).toBeGreaterThan(0);
  }, T);
});
