import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryRemote } from '../../../src/vfs/memory-remote.js';
import { FaultyRemote } from '../../../src/vfs/faulty-remote.js';
import { MetadataCache } from '../../../src/vfs/metadata-cache.js';
import { UpdatesFeed } from '../../../src/vfs/updates-feed.js';
import { createMemoryVfs, GatewayVfs } from '../../../src/vfs/index.js';
import { silentLogger } from '../../../src/shared/log.js';
import { waitFor } from '../../support/wait-for.js';
import { ManualClock } from '../../support/manual-clock.js';

const dirs: string[] = [];
const vfses: GatewayVfs[] = [];
afterEach(async () => {
  for (const v of vfses.splice(0)) await v.close();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

describe('UpdatesFeed', { timeout: 10_000 }, () => {
  it('stop() aborts a poll stuck on a service that does not answer, and leaves the cache alone', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'feed-'));
    dirs.push(dir);
    const remote = new FaultyRemote(new MemoryRemote());
    const cache = new MetadataCache();
    const feed = new UpdatesFeed({ library: 'L', remote, cache, intervalMs: 0, cursorFile: join(dir, 'cursor.json'), logger: silentLogger });
    await feed.start();
    cache.setListing('L', '', []);
    remote.inject({ kind: 'delay', methods: ['changes'], delayMs: 60_000 });
    const poll = feed.pollNow();
    await waitFor('the poll stuck in its changes call', () => remote.injected.delay, { until: (n) => n >= 1 });
    const t0 = Date.now();
    await feed.stop();
    await poll;
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(cache.getListing('L', '')).toEqual([]);
  });

  it('writes its cursor only when it moved: a poll that brings no change writes nothing', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'feed-'));
    dirs.push(dir);
    const file = join(dir, 'cursor.json');
    const remote = new MemoryRemote();
    const cache = new MetadataCache();
    const feed = new UpdatesFeed({ library: 'L', remote, cache, intervalMs: 0, cursorFile: file, logger: silentLogger });
    await feed.start();
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ cursor: await remote.headCursor() });
    await rm(file);
    await feed.pollNow();
    await feed.pollNow();
    await expect(readFile(file, 'utf8')).rejects.toMatchObject({ code: 'ENOENT' });
    remote.putFile('f', Buffer.from('1'));
    await feed.pollNow();
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ cursor: await remote.headCursor() });
    await feed.stop();
    // A feed started from the file: its cursor is the saved one, and a quiet poll leaves the file alone.
    await rm(file);
    await writeFile(file, JSON.stringify({ cursor: await remote.headCursor() }));
    const again = new UpdatesFeed({ library: 'L', remote, cache: new MetadataCache(), intervalMs: 0, cursorFile: file, logger: silentLogger });
    await again.start();
    const before = await stat(file);
    await again.pollNow();
    expect((await stat(file)).mtimeMs).toBe(before.mtimeMs);
    expect(again.snapshot().cursor).toBe(await remote.headCursor());
    await again.stop();
  });

  it("the gateway's own changes coming back through a poll they overlapped are applied, not doubted; an older one still is", async () => {
    const remote = new MemoryRemote();
    const cache = new MetadataCache();
    const feed = new UpdatesFeed({ library: 'L', remote, cache, intervalMs: 0, logger: silentLogger });
    await feed.start();
    // The gateway makes a folder (the service has it), then shows it, empty, while a poll is under way.
    const d = await remote.mkdir('d');
    let poll = feed.pollNow();
    cache.upsert('L', d);
    cache.setListing('L', 'd', []);
    feed.noteLocalChange('d');
    await poll;
    expect(cache.getListing('L', 'd')).toEqual([]);
    // A file the gateway wrote there, the same way.
    const f = remote.putFile('d/f', Buffer.from('1'));
    poll = feed.pollNow();
    cache.upsert('L', f);
    feed.noteLocalChange('d/f');
    await poll;
    expect(cache.getListing('L', 'd')!.map((e) => e.name)).toEqual(['f']);
    // A change older than what the gateway did meanwhile (other content): in doubt, asked again.
    remote.putFile('d/g', Buffer.from('old'));
    poll = feed.pollNow();
    const newer = remote.putFile('d/g', Buffer.from('newer'));
    cache.upsert('L', newer);
    feed.noteLocalChange('d/g');
    await poll;
    expect(cache.getEntry('L', 'd/g')).toBeUndefined();
    expect(cache.getListing('L', 'd')).toBeUndefined();
    await feed.stop();
  });

  it('applies creates, changes, deletes and moves to the cache and persists its cursor', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'feed-'));
    dirs.push(dir);
    const remote = new MemoryRemote();
    const cache = new MetadataCache();
    const feed = new UpdatesFeed({ library: 'L', remote, cache, intervalMs: 0, cursorFile: join(dir, 'cursor.json'), logger: silentLogger });
    await remote.mkdir('d');
    await feed.start();
    cache.setListing('L', 'd', await remote.list('d'));
    cache.setListing('L', '', await remote.list(''));
    remote.putFile('d/f', Buffer.from('1'));
    await feed.pollNow();
    expect(cache.getListing('L', 'd')!.map((e) => e.name)).toEqual(['f']);
    expect(cache.getEntry('L', 'd/f')!.size).toBe(1);
    remote.putFile('d/f', Buffer.from('22'));
    await feed.pollNow();
    expect(cache.getEntry('L', 'd/f')!.size).toBe(2);
    const id = cache.getEntry('L', 'd/f')!.id;
    await remote.move('d/f', 'g');
    await feed.pollNow();
    expect(cache.getEntry('L', 'd/f')).toBeNull();
    expect(cache.getEntry('L', 'g')!.id).toBe(id);
    await remote.remove('g');
    await feed.pollNow();
    expect(cache.getEntry('L', 'g')).toBeNull();
    const saved = JSON.parse(await readFile(join(dir, 'cursor.json'), 'utf8')) as { cursor: number };
    expect(saved.cursor).toBe(await remote.headCursor());
    expect(feed.snapshot()).toMatchObject({ healthy: true, changesApplied: 5 }) // 2 writes, a move (delete + create), a delete;
    await feed.stop();
  });

  it('drops the cache when the feed fails, and recovers', async () => {
    const remote = new FaultyRemote(new MemoryRemote());
    const cache = new MetadataCache();
    const feed = new UpdatesFeed({ library: 'L', remote, cache, intervalMs: 0, logger: silentLogger });
    await feed.start();
    cache.setListing('L', '', []);
    remote.inject({ kind: 'fail', methods: ['changes'], times: 1 });
    await feed.pollNow();
    expect(feed.healthy).toBe(false);
    expect(cache.getListing('L', '')).toBeUndefined();
    await feed.pollNow();
    expect(feed.healthy).toBe(true);
    await feed.stop();
  });

  it('rebuilds instead of replaying a backlog longer than the page limit (cursor too old)', async () => {
    const remote = new MemoryRemote();
    const cache = new MetadataCache();
    const feed = new UpdatesFeed({ library: 'L', remote, cache, intervalMs: 0, maxPagesPerPoll: 2, logger: silentLogger });
    await feed.start();
    for (let i = 0; i < 250; i++) remote.putFile(`f${i}`, Buffer.from('x'));
    cache.setListing('L', '', []);
    await feed.pollNow();
    expect(feed.snapshot().rebuilds).toBe(1);
    expect(cache.getListing('L', '')).toBeUndefined();
    expect(feed.snapshot().cursor).toBe(await remote.headCursor());
    await feed.stop();
  });

  it('a poll that brings an old change does not undo the gateway\'s own change made meanwhile', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'feed-race-'));
    dirs.push(dataDir);
    /** Each non-empty page waits for the test: `held` resolves when a page is held, `release()` lets it go. */
    let hold: { held: () => void; released: Promise<void> } | undefined;
    class SlowFeedRemote extends MemoryRemote {
      override async changes(cursor: number) {
        const page = await super.changes(cursor);
        const h = hold;
        if (h && page.changes.length > 0) { hold = undefined; h.held(); await h.released; }
        return page;
      }
    }
    const holdNext = (): { held: Promise<void>; release: () => void } => {
      let held: () => void = () => undefined;
      let release: () => void = () => undefined;
      const heldP = new Promise<void>((r) => { held = r; });
      hold = { held, released: new Promise<void>((r) => { release = r; }) };
      return { held: heldP, release };
    };
    const remote = new SlowFeedRemote({ name: 'L', id: '1' });
    const vfs = await GatewayVfs.open({ libraries: [{ name: 'L', id: '1', remote }], dataDir, feedIntervalMs: 60_000, logger: silentLogger });
    vfses.push(vfs);
    await vfs.writeFile('/L/f', Buffer.from('x'));
    await vfs.flushAll();
    const first = holdNext();
    const poll = vfs.refresh();
    await first.held; // the poll holds the old creation of f
    await vfs.unlink('/L/f');
    const second = holdNext();
    first.release();
    await second.held; // the creation is applied; the deletion waits in the next page
    try {
      await expect(vfs.stat('/L/f')).rejects.toMatchObject({ code: 'ENOENT' });
      expect((await vfs.readdir('/L')).map((a) => a.name)).toEqual([]);
    } finally {
      second.release();
      await poll;
    }
    await expect(vfs.stat('/L/f')).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a change by another client shows in a listing within one interval', async () => {
    const clock = new ManualClock();
    const { vfs, remotes } = await createMemoryVfs({ feedIntervalMs: 100, clock });
    vfses.push(vfs);
    const openedMs = clock.now();
    expect(await vfs.readdir('/Library')).toEqual([]);
    remotes.get('Library')!.putFile('other.txt', Buffer.from('from elsewhere'));
    // Short of the interval no poll runs: the listing is the one cached.
    clock.advance(99);
    expect(vfs.status().feeds[0]?.lastPollMs).toBeUndefined();
    expect(await vfs.readdir('/Library')).toEqual([]);
    // At the interval the poll runs, and the listing shows what it brought.
    clock.advance(1);
    await waitFor('the poll of the first interval to end', () => vfs.status().feeds[0]?.lastPollMs, { until: (ms) => ms === openedMs + 100 });
    expect((await vfs.readdir('/Library')).map((a) => a.name)).toEqual(['other.txt']);
  });

});
