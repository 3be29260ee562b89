import { describe, expect, it } from 'vitest';
import { MemoryRemote } from '../../../src/vfs/memory-remote.js';
import { createMemoryVfs } from '../../../src/vfs/index.js';
import { MetadataCache } from '../../../src/vfs/metadata-cache.js';
import { UpdatesFeed } from '../../../src/vfs/updates-feed.js';
import { ChangeEvents, changeConcerns, changeEventOf, type ChangeEvent } from '../../../src/vfs/change-events.js';
import { silentLogger } from '../../../src/shared/log.js';

/** A feed over a MemoryRemote whose changes are published; `events` collects them. */
async function fed() {
  const remote = new MemoryRemote();
  const cache = new MetadataCache();
  const changes = new ChangeEvents();
  const events: ChangeEvent[] = [];
  changes.subscribe((e) => events.push(e));
  const feed = new UpdatesFeed({ library: 'L', remote, cache, intervalMs: 0, logger: silentLogger, onChange: (c, before) => changes.publish('L', c, before) });
  await feed.start();
  return { remote, cache, feed, events };
}

describe('ChangeEvents', () => {
  it('tells a feed change as created, changed, moved, deleted, with gateway paths and who made it', async () => {
    const { remote, cache, feed, events } = await fed();
    cache.setListing('L', '', []);
    remote.putFile('a.txt', Buffer.from('one'), { operator: { opName: 'alice' } });
    await feed.pollNow();
    remote.putFile('a.txt', Buffer.from('two!'), { operator: { opName: 'bob' } });
    await feed.pollNow();
    await remote.mkdir('d');
    await feed.pollNow();
    await remote.remove('a.txt');
    await feed.pollNow();
    expect(events.map((e) => [e.seq, e.kind, e.path, e.isDir, e.size, e.by])).toEqual([
      [1, 'created', '/L/a.txt', false, 3, 'alice'],
      [2, 'changed', '/L/a.txt', false, 4, 'bob'],
      [3, 'created', '/L/d', true, undefined, undefined],
      [4, 'deleted', '/L/a.txt', false, undefined, 'bob'],
    ]);
    await feed.stop();
  });

  it('an object seen at another path (same id) is moved, from where the cache knew it', () => {
    const entry = { id: 'x1', fullpath: 'b/new.txt', name: 'new.txt', isDir: false, size: 2, mtimeMs: 2000, ctimeMs: 1000 };
    const e = changeEventOf('L', { kind: 'upsert', entry }, { previous: null, movedFrom: 'old.txt' });
    expect(e).toMatchObject({ kind: 'moved', path: '/L/b/new.txt', from: '/L/old.txt' });
  });

  it('a lock change the feed states is locked or unlocked; unknown before: created only when never changed since', () => {
    const prev = { id: 'x1', fullpath: 'f', name: 'f', isDir: false, size: 2, contentHash: 'h', mtimeMs: 1000, ctimeMs: 1000, locked: false };
    expect(changeEventOf('L', { kind: 'upsert', entry: { ...prev, mtimeMs: 2000, locked: true } }, { previous: prev }).kind).toBe('locked');
    expect(changeEventOf('L', { kind: 'upsert', entry: { ...prev, mtimeMs: 3000, locked: false } }, { previous: { ...prev, locked: true } }).kind).toBe('unlocked');
    expect(changeEventOf('L', { kind: 'upsert', entry: prev }, { previous: undefined }).kind).toBe('created');
    expect(changeEventOf('L', { kind: 'upsert', entry: { ...prev, mtimeMs: 5000 } }, { previous: undefined }).kind).toBe('changed');
  });

  it('what the gateway showed already (its own change coming back) is marked shown; another change is not', () => {
    const prev = { id: 'x1', fullpath: 'f', name: 'f', isDir: false, size: 2, contentHash: 'h', mtimeMs: 1234, ctimeMs: 1234 };
    const echo = changeEventOf('L', { kind: 'upsert', entry: { ...prev, mtimeMs: 1000, ctimeMs: 1000 } }, { previous: prev });
    expect(echo).toMatchObject({ kind: 'created', shown: true });
    expect(changeEventOf('L', { kind: 'upsert', entry: { ...prev, contentHash: 'other' } }, { previous: prev }).shown).toBeUndefined();
    expect(changeEventOf('L', { kind: 'delete', entry: prev }, { previous: null })).toMatchObject({ kind: 'deleted', shown: true });
    expect(changeEventOf('L', { kind: 'delete', entry: prev }, { previous: prev }).shown).toBeUndefined();
  });

  it('regression: the feed reporting a move the gateway is making, before its answer is applied, is shown (the mount never forgets the name being renamed)', async () => {
    const { remote, cache, feed, events } = await fed();
    cache.setListing('L', '', []);
    await remote.mkdir('d');
    remote.putFile('d/f', Buffer.from('x'));
    await feed.pollNow();
    const end = feed.localChangeBegins(['d', 'e']);
    await remote.move('d', 'e');
    await feed.pollNow();
    end();
    await remote.move('e', 'g');
    await feed.pollNow();
    // This service reports a move as the old path removed and the object at the new one.
    expect(events.slice(2, 6).map((e) => [e.kind, e.from, e.path, e.shown])).toEqual([
      ['deleted', undefined, '/L/d', true],
      ['moved', '/L/d', '/L/e', true],
      ['deleted', undefined, '/L/d/f', true],
      ['moved', '/L/d/f', '/L/e/f', true],
    ]);
    // Once the move is answered, a move made elsewhere is not the gateway's.
    expect(events.slice(6).map((e) => [e.kind, e.path, e.shown])).toEqual([
      ['deleted', '/L/e', undefined],
      ['moved', '/L/g', undefined],
      ['deleted', '/L/e/f', undefined],
      ['moved', '/L/g/f', undefined],
    ]);
    await feed.stop();
  });

  it('regression: the delete of an object that left its path since (renamed over, written anew) leaves the path and is shown', async () => {
    const { remote, cache, feed, events } = await fed();
    cache.setListing('L', '', []);
    remote.putFile('over.log', Buffer.from('renamed over'));
    remote.putFile('moved.txt', Buffer.from('moved'));
    await feed.pollNow();
    // The gateway renames moved.txt over over.log, telling its cache as it does (LibraryMoves.rename).
    await remote.remove('over.log');
    await remote.move('moved.txt', 'over.log');
    const moved = (await remote.stat('over.log'))!;
    cache.remove('L', 'over.log', false);
    cache.remove('L', 'moved.txt', false);
    cache.upsert('L', moved);
    const seen = events.length;
    await feed.pollNow();
    expect(cache.getEntry('L', 'over.log')?.id, 'the path keeps the object renamed over it').toBe(moved.id);
    expect(events.slice(seen).filter((e) => !e.shown).map((e) => `${e.kind} ${e.path}`), 'changes the gateway had not shown').toEqual([]);
    await feed.stop();
  });

  it('regression: a feed change of a file whose local content is not all on the service is shown (its own upload coming back before the gateway heard it landed)', async () => {
    const { vfs, remotes } = await createMemoryVfs({ names: ['A'], feedIntervalMs: 3_600_000 });
    try {
      const events: ChangeEvent[] = [];
      vfs.changes.subscribe((e) => events.push(e));
      await vfs.refresh();
      const w = await vfs.open('/A/f.txt', { write: true, create: true });
      await w.write(0, Buffer.from('mine'));
      // The service has content at the path before the gateway hears of it (as its upload landing).
      remotes.get('A')!.putFile('f.txt', Buffer.from('mine'));
      await vfs.refresh();
      expect(events.filter((e) => e.path === '/A/f.txt').map((e) => [e.kind, e.shown])).toEqual([['created', true]]);
      await w.release();
    } finally {
      await vfs.close();
    }
  });

  it('regression: a move the feed brings while the gateway\'s own rename waits for its answer is shown, and the cache ends as the rename left it', async () => {
    const { vfs, remotes } = await createMemoryVfs({ names: ['A'], feedIntervalMs: 3_600_000 });
    try {
      const remote = remotes.get('A')!;
      remote.putFile('a.txt', Buffer.from('moved'));
      await vfs.refresh();
      await vfs.stat('/A/a.txt');
      const events: ChangeEvent[] = [];
      vfs.changes.subscribe((e) => events.push(e));
      // The service moves the file, then its answer waits until the feed has read the move.
      let moved!: () => void;
      const landed = new Promise<void>((r) => (moved = r));
      let answer!: () => void;
      const answered = new Promise<void>((r) => (answer = r));
      const move = remote.move.bind(remote);
      remote.move = async (from: string, to: string) => {
        await move(from, to);
        moved();
        await answered;
      };
      const renaming = vfs.rename('/A/a.txt', '/A/b.txt');
      await landed;
      await vfs.refresh();
      answer();
      await renaming;
      expect(events.filter((e) => !e.shown).map((e) => `${e.kind} ${e.path}`), 'changes the gateway had not shown').toEqual([]);
      await expect(vfs.stat('/A/a.txt')).rejects.toMatchObject({ code: 'ENOENT' });
      expect((await vfs.stat('/A/b.txt')).size).toBe(5);
    } finally {
      await vfs.close();
    }
  });

  it('a watch of a folder concerns what is in it, where it is or where it was', () => {
    const e = (path: string, from?: string): ChangeEvent => ({ seq: 1, kind: from ? 'moved' : 'changed', path, ...(from ? { from } : {}), isDir: false, timeMs: 0 });
    expect(changeConcerns(e('/L/a/b.txt'), '/L/a')).toBe(true);
    expect(changeConcerns(e('/L/ab.txt'), '/L/a')).toBe(false);
    expect(changeConcerns(e('/L/x.txt', '/L/a/x.txt'), '/L/a')).toBe(true);
    expect(changeConcerns(e('/M/x.txt'), '/')).toBe(true);
  });

  it('a listener that throws is reported and the others still get the event', () => {
    const errors: unknown[] = [];
    const changes = new ChangeEvents((err) => errors.push(err));
    const got: number[] = [];
    changes.subscribe(() => { throw new Error('boom'); });
    const stop = changes.subscribe((e) => got.push(e.seq));
    const entry = { id: 'x', fullpath: 'f', name: 'f', isDir: false, size: 0, mtimeMs: 1, ctimeMs: 1 };
    changes.publish('L', { kind: 'upsert', entry }, { previous: null });
    stop();
    changes.publish('L', { kind: 'upsert', entry }, { previous: null });
    expect(got).toEqual([1]);
    expect(errors).toHaveLength(2);
  });
});
