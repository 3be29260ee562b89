/**
 * Pins ("keep on this machine") over a MemoryRemote: a pinned folder is fetched, kept up to date by the
 * updates feed, and read with the service gone, also after a restart; an unpin inside it wins; a pin that
 * does not fit is refused; a pinned folder survives a flood of other reads; "free up space" drops only
 * what is neither pinned nor open.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { openVfs, FaultyRemote, MemoryRemote, VfsError, type GatewayVfs } from '../../../src/vfs/index.js';
import { PinMarks } from '../../../src/vfs/pin-marks.js';
import { readAll, vfsCode } from '../../support/vfs.js';
import { waitFor } from '../../support/wait-for.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cloudlib-pins-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function gateway(remote: MemoryRemote, dir: string, diskBytes = 64 * 1024 * 1024, opts: { down?: boolean } = {}): Promise<{ vfs: GatewayVfs; faulty: FaultyRemote }> {
  const faulty = new FaultyRemote(remote);
  if (opts.down) faulty.down(3_600_000);
  const info = await remote.info();
  // A long feed interval: the test polls with refresh() when it wants to. No free-disk floor: the machine's disk is not the test's.
  const vfs = await openVfs({ libraries: [{ name: 'A', id: info.id, remote: faulty, ...(opts.down ? { unreachable: new VfsError('EIO', 'the service is down', { unreachable: true }) } : {}) }], dataDir: dir, feedIntervalMs: 3_600_000, cache: { diskBytes, minFreePercent: 0 } });
  cleanups.push(() => vfs.close());
  return { vfs, faulty };
}

async function readBytes(vfs: GatewayVfs, path: string): Promise<Buffer> {
  const h = await vfs.open(path, { read: true });
  try {
    return await h.read(0, (await h.stat()).size + 1);
  } finally {
    await h.release();
  }
}

async function names(vfs: GatewayVfs, path: string): Promise<string[]> {
  return (await vfs.readdir(path)).map((a) => a.name).sort();
}

describe('pins', () => {
  it('marks: inherited inside a pinned folder, an unpin inside wins, kept across a restart', async () => {
    const file = join(await dataDir(), 'pins', 'marks.json');
    const marks = new PinMarks(file);
    await marks.load();
    await marks.set('A', 'docs', true);
    await marks.set('A', 'docs/big', false);
    expect(marks.pinned('A', 'docs/a.txt')).toBe(true);
    expect(marks.pinned('A', 'docs/big/b.iso')).toBe(false);
    expect(marks.pinned('A', 'other')).toBe(false);
    expect(marks.pinned('B', 'docs/a.txt')).toBe(false);
    const again = new PinMarks(file);
    await again.load();
    expect(again.pinned('A', 'docs/big/b.iso')).toBe(false);
    expect(again.roots('A')).toEqual(['docs']);
    // Pinning the folder again decides for all of it; unpinning a path not pinned leaves no mark.
    await again.set('A', 'docs', true);
    expect(again.pinned('A', 'docs/big/b.iso')).toBe(true);
    await again.set('A', 'other', false);
    expect(again.markOf('A', 'other')).toBeUndefined();
    await again.set('A', 'docs', false);
    expect(again.roots('A')).toEqual([]);
  });

  it('fetches a pinned folder, follows the feed, and serves it with the service gone, also after a restart', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    await remote.mkdir('keep');
    await remote.mkdir('keep/sub');
    await remote.mkdir('keep/skip');
    remote.putFile('keep/a.txt', Buffer.from('alpha'));
    remote.putFile('keep/sub/b.txt', Buffer.from('beta'));
    remote.putFile('keep/skip/c.txt', Buffer.from('not kept'));
    remote.putFile('other.txt', Buffer.from('not pinned'));
    const dir = await dataDir();
    const { vfs } = await gateway(remote, dir);

    expect(await vfs.setPinned('/A/keep', true)).toEqual({ files: 3, bytes: 5 + 4 + 8 });
    await vfs.setPinned('/A/keep/skip', false);
    expect(await vfs.pinned('/A/keep/sub/b.txt')).toBe(true);
    expect(await vfs.pinned('/A/keep/skip/c.txt')).toBe(false);
    expect(await vfs.pinned('/A/other.txt')).toBe(false);
    await vfs.pinsFetched();
    expect(vfs.status().pins).toMatchObject({ pins: ['/A/keep'], files: 2, bytes: 9, pendingFiles: 0, errors: [] });

    // Changes the feed brings: a new file in the pinned folder and a changed one are fetched too.
    remote.putFile('keep/sub/new.txt', Buffer.from('new one'));
    remote.putFile('keep/a.txt', Buffer.from('alpha two'));
    // A folder moved in brings what is inside it.
    await remote.mkdir('outside');
    remote.putFile('outside/moved.txt', Buffer.from('moved in'));
    await vfs.refresh();
    await remote.move('outside', 'keep/moved');
    await vfs.refresh();
    await waitFor('the folder moved in to be walked and fetched', () => vfs.status().pins!, { until: (p) => p.files === 4 && p.pendingFiles === 0 });
    expect(vfs.status().pins).toMatchObject({ files: 4, bytes: 9 + 4 + 7 + 8, pendingFiles: 0 });
    await vfs.close();

    // A restart with the service gone: everything pinned is listed and read; nothing else is there.
    const again = (await gateway(remote, dir, 64 * 1024 * 1024, { down: true })).vfs;
    expect(again.status().libraries[0]!.online).toBe(false);
    expect(await names(again, '/A/keep')).toEqual(['a.txt', 'moved', 'sub']);
    expect(await readAll(again, '/A/keep/moved/moved.txt')).toBe('moved in');
    expect(await names(again, '/A/keep/sub')).toEqual(['b.txt', 'new.txt']);
    expect(await readAll(again, '/A/keep/a.txt')).toBe('alpha two');
    expect(await readAll(again, '/A/keep/sub/b.txt')).toBe('beta');
    expect(await readAll(again, '/A/keep/sub/new.txt')).toBe('new one');
    const h = await again.open('/A/keep/sub/b.txt', { read: true });
    expect((await h.read(1, 3)).toString()).toBe('eta');
    await h.release();
    expect(await vfsCode(again.stat('/A/keep/nothing.txt'))).toBe('ENOENT');
    expect(await vfsCode(readAll(again, '/A/other.txt'))).toBe('EIO');
    expect(await vfsCode(readAll(again, '/A/keep/skip/c.txt'))).toBe('EIO');
    expect(again.status().pins).toMatchObject({ pins: ['/A/keep'], files: 4, pendingFiles: 0 });
  });

  it('refuses a pin that does not fit in the cache beside what is pinned, changing nothing', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('small.bin', randomBytes(100 * 1024));
    remote.putFile('large.bin', randomBytes(200 * 1024));
    const { vfs } = await gateway(remote, await dataDir(), 256 * 1024);
    await vfs.setPinned('/A/small.bin', true);
    const err = await vfs.setPinned('/A/large.bin', true).then(() => undefined, (e: Error & { code?: string }) => e);
    expect(err?.code).toBe('ENOSPC');
    expect(err?.message).toMatch(/large\.bin: pinning needs \d+ bytes of cache, \d+ are pinned already and the cache may hold 262144/);
    expect(await vfs.pinned('/A/large.bin')).toBe(false);
    await vfs.pinsFetched();
    expect(vfs.status().pins).toMatchObject({ pins: ['/A/small.bin'], files: 1, pendingFiles: 0 });
    expect(await vfsCode(vfs.setPinned('/A/missing', true))).toBe('ENOENT');
  });

  it('keeps a pinned folder through a flood of other reads, never past the limit', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    await remote.mkdir('keep');
    const kept = new Map<string, Buffer>();
    for (let i = 0; i < 3; i++) kept.set(`keep/k${i}.bin`, randomBytes(64 * 1024));
    for (const [p, b] of kept) remote.putFile(p, b);
    for (let i = 0; i < 24; i++) remote.putFile(`flood${i}.bin`, randomBytes(100 * 1024));
    const limit = 512 * 1024;
    const dir = await dataDir();
    const { vfs } = await gateway(remote, dir, limit);
    await vfs.setPinned('/A/keep', true);
    await vfs.pinsFetched();
    const seen = (): number => vfs.status().disk!.writtenBytes + vfs.status().disk!.skippedBytes;
    const before = seen();
    for (let i = 0; i < 24; i++) {
      await readAll(vfs, `/A/flood${i}.bin`);
      // Read after read, each one's bytes on disk (or refused) before the next.
      await waitFor(`flood${i}.bin to reach the cache`, seen, { until: (n) => n >= before + (i + 1) * 100 * 1024 });
      expect(vfs.status().disk!.heldBytes).toBeLessThanOrEqual(limit);
    }
    await vfs.close(); // every cache write done
    expect(vfs.status().disk!.evictions).toBeGreaterThan(0);
    expect(vfs.status().disk!.heldBytes).toBeLessThanOrEqual(limit);
    // With the service gone after a restart, every pinned file is still read.
    const after = (await gateway(remote, dir, limit, { down: true })).vfs;
    expect(after.status().pins).toMatchObject({ files: 3, pendingFiles: 0 });
    for (const [p, b] of kept) expect((await readBytes(after, `/A/${p}`)).equals(b)).toBe(true);
  });

  it('frees up space: drops cached content that is neither pinned nor open', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('pinned.txt', Buffer.from('pinned content'));
    remote.putFile('open.txt', Buffer.from('open content'));
    remote.putFile('plain.txt', Buffer.from('plain content'));
    remote.putFile('streamed.txt', Buffer.from('streamed content'));
    const dir = await dataDir();
    const { vfs } = await gateway(remote, dir);
    await vfs.setPinned('/A/pinned.txt', true);
    await vfs.pinsFetched();
    for (const f of ['open.txt', 'plain.txt', 'streamed.txt']) await readAll(vfs, `/A/${f}`);
    await vfs.close();
    const { vfs: again, faulty } = await gateway(remote, dir);
    const h = await again.open('/A/open.txt', { read: true });
    const stream = await again.createReadStream('/A/streamed.txt'); // as a WebDAV GET: held until it closes
    expect(await again.evict('/A')).toEqual({ files: 1, bytes: expect.any(Number) });
    let streamed = '';
    for await (const c of stream as AsyncIterable<Buffer>) streamed += c.toString();
    expect(streamed).toBe('streamed content');
    await new Promise((resolve) => (stream.closed ? resolve(undefined) : stream.once('close', resolve)));
    expect(await again.evict('/A/streamed.txt')).toEqual({ files: 1, bytes: expect.any(Number) });
    faulty.down(3_600_000);
    await again.refresh();
    expect((await h.read(0, 4)).toString()).toBe('open');
    await h.release();
    expect(await readAll(again, '/A/pinned.txt')).toBe('pinned content');
    expect(await vfsCode(readAll(again, '/A/plain.txt'))).toBe('EIO');
  });
});
