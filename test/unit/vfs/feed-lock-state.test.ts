import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, MemoryRemote, type GatewayVfs } from '../../../src/vfs/index.js';
import type { ChangesPage, RemoteEntry } from '../../../src/vfs/remote.js';
import { ManualClock } from '../../support/manual-clock.js';

/** The service as the updates feed shows it: items say nothing of locks (as `ls` and `info` do); stats counted. */
class FeedWithoutLocks extends MemoryRemote {
  stats = 0;
  lists = 0;
  override async changes(cursor: number): Promise<ChangesPage> {
    const page = await super.changes(cursor);
    return { ...page, changes: page.changes.map(({ kind, entry: { locked: _unsaid, ...entry } }) => ({ kind, entry })) };
  }
  override async stat(fullpath: string): Promise<RemoteEntry | null> {
    this.stats++;
    return super.stat(fullpath);
  }
  override async list(fullpath: string): Promise<RemoteEntry[]> {
    this.lists++;
    return super.list(fullpath);
  }
}

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

/** Two gateways of one library; their feeds' timers wait on a clock that never moves: polled by `refresh()` only. */
async function twoGateways(): Promise<{ here: GatewayVfs; there: GatewayVfs; remote: FeedWithoutLocks }> {
  const remote = new FeedWithoutLocks({ name: 'A' });
  const open = async (): Promise<GatewayVfs> => {
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-feedlock-'));
    cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
    const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, feedIntervalMs: 1000, clock: new ManualClock() });
    cleanup.push(() => vfs.close());
    return vfs;
  };
  return { here: await open(), there: await open(), remote };
}

describe('lock state of an entry the updates feed brought', () => {
  it('regression: a file locked through another gateway is refused to writes after the feed brings its entry', async () => {
    const { here, there, remote } = await twoGateways();
    remote.putFile('doc.txt', Buffer.from('doc'));
    expect((await there.stat('/A/doc.txt')).state).toBe('synced');
    await here.setLocked('/A/doc.txt', true, { operator: { opName: 'ann' } });
    await there.refresh();
    // The feed's entry says nothing of the lock: the lock is asked of the service before the write.
    const before = remote.stats;
    await expect(there.writeFile('/A/doc.txt', Buffer.from('mine'))).rejects.toMatchObject({ code: 'ELOCKED' });
    const shown = await there.stat('/A/doc.txt');
    expect([shown.locked, shown.state]).toEqual([true, 'locked-by other']);
    expect(remote.stats - before).toBe(1); // the answer stays until the feed brings the file again
    await expect(there.unlink('/A/doc.txt')).rejects.toMatchObject({ code: 'ELOCKED' });
    await expect(there.rename('/A/doc.txt', '/A/moved.txt')).rejects.toMatchObject({ code: 'ELOCKED' });
    expect(remote.read('doc.txt').toString()).toBe('doc');
    // Unlocked elsewhere: the next entry the feed brings makes it unknown again, and the service says unlocked.
    await here.setLocked('/A/doc.txt', false, { operator: { opName: 'ann' } });
    await there.refresh();
    expect((await there.stat('/A/doc.txt')).state).toBe('synced');
    await there.writeFile('/A/doc.txt', Buffer.from('mine'));
  });

  it('callers that need an unknown lock state at once share one lookup', async () => {
    const { here, there, remote } = await twoGateways();
    remote.putFile('doc.txt', Buffer.from('doc'));
    await there.stat('/A/doc.txt');
    await here.setLocked('/A/doc.txt', true);
    await there.refresh();
    const before = remote.stats;
    const states = await Promise.all([there.stat('/A/doc.txt'), there.stat('/A/doc.txt'), there.stat('/A/doc.txt')]);
    expect(states.map((a) => a.state)).toEqual(['locked-by other', 'locked-by other', 'locked-by other']);
    expect(remote.stats - before).toBe(1);
  });

  it('a listing holding a file whose lock the feed left unknown is asked again: its state is shown right', async () => {
    const { here, there, remote } = await twoGateways();
    remote.putFile('doc.txt', Buffer.from('doc'));
    remote.putFile('other.txt', Buffer.from('other'));
    expect((await there.readdir('/A')).map((a) => a.state)).toEqual(['synced', 'synced']);
    await here.setLocked('/A/doc.txt', true);
    await there.refresh();
    const [lists, stats] = [remote.lists, remote.stats];
    expect((await there.readdir('/A')).map((a) => a.state)).toEqual(['locked-by other', 'synced']);
    expect((await there.stat('/A/doc.txt')).state).toBe('locked-by other');
    expect((await there.readdir('/A')).map((a) => a.state)).toEqual(['locked-by other', 'synced']);
    expect([remote.lists - lists, remote.stats - stats]).toEqual([1, 0]);
    // A stat that asked the lock answers for the listing too.
    await here.setLocked('/A/doc.txt', false);
    await there.refresh();
    const [lists2, stats2] = [remote.lists, remote.stats];
    expect((await there.stat('/A/doc.txt')).state).toBe('synced');
    expect((await there.readdir('/A')).map((a) => a.state)).toEqual(['synced', 'synced']);
    expect([remote.lists - lists2, remote.stats - stats2]).toEqual([0, 1]);
  });

  it('a lock taken through this gateway is known from its holds: the feed\'s entry costs no lookup', async () => {
    const { here, remote } = await twoGateways();
    remote.putFile('doc.txt', Buffer.from('doc'));
    await here.setLocked('/A/doc.txt', true, { operator: { opName: 'ann' } });
    await here.refresh();
    const before = remote.stats;
    expect((await here.stat('/A/doc.txt')).state).toBe('locked-by ann');
    expect(remote.stats).toBe(before);
  });
});
