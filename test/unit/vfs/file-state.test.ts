import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, MemoryRemote, type GatewayVfs } from '../../../src/vfs/index.js';
import type { CommitOptions, CommitSource, RemoteEntry } from '../../../src/vfs/remote.js';
import { FileStates } from '../../../src/vfs/file-state.js';
import { waitFor } from '../../support/wait-for.js';

/** A MemoryRemote whose commits wait until the test opens the gate. */
class GatedRemote extends MemoryRemote {
  private open!: () => void;
  private gate = new Promise<void>((resolve) => { this.open = resolve; });
  release(): void { this.open(); }
  override async commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> {
    await this.gate;
    return super.commit(fullpath, source, opts);
  }
}

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

async function setup(): Promise<{ vfs: GatewayVfs; remote: GatedRemote }> {
  const remote = new GatedRemote({ name: 'A' });
  const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-state-'));
  cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
  // Uploads wait for a flush (a long write-back delay): the pending state is seen before any upload.
  const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, feedIntervalMs: 0, upload: { delayMs: 600_000, retryBaseMs: 20, retryMaxMs: 100 } });
  cleanup.push(() => vfs.close());
  return { vfs, remote };
}

describe('file states', { timeout: 20_000 }, () => {
  it('regression: a lock taken here stays shown when an entry that says nothing of locks (the feed\'s) replaces the cached one', async () => {
    const { vfs, remote } = await setup();
    remote.putFile('doc.txt', Buffer.from('doc'));
    await vfs.setLocked('/A/doc.txt', true, { operator: { opName: 'ann' } });
    const shown = await remote.stat('doc.txt');
    const { locked: _said, ...fromFeed } = shown!;
    vfs.cache.upsert('A', fromFeed);
    const attr = await vfs.stat('/A/doc.txt');
    expect([attr.locked, attr.state]).toEqual([true, 'locked-by ann']);
    await vfs.setLocked('/A/doc.txt', false, { operator: { opName: 'ann' } });
    vfs.cache.upsert('A', fromFeed);
    expect((await vfs.stat('/A/doc.txt')).state).toBe('synced');
  });

  it('follow a file from pending to uploading to synced, then locked-by who locked it', async () => {
    const { vfs, remote } = await setup();
    await vfs.writeFile('/A/f.txt', Buffer.from('content'));
    expect((await vfs.stat('/A/f.txt')).state).toBe('pending');
    const flushed = vfs.flushAll();
    await waitFor('the state says uploading', async () => (await vfs.stat('/A/f.txt')).state, { until: (s) => s === 'uploading', timeoutMs: 10_000 });
    remote.release();
    await flushed;
    expect((await vfs.stat('/A/f.txt')).state).toBe('synced');
    expect((await vfs.readdir('/A')).map((a) => [a.name, a.state])).toEqual([['f.txt', 'synced']]);

    await vfs.setLocked('/A/f.txt', true, { operator: { opName: 'alice' } });
    expect((await vfs.stat('/A/f.txt')).state).toBe('locked-by alice');
    await vfs.setLocked('/A/f.txt', false);
    expect((await vfs.stat('/A/f.txt', undefined, { fresh: true })).state).toBe('synced');
    // Locked by another client: the service does not say who.
    await remote.lock('f.txt', true);
    expect((await vfs.stat('/A/f.txt', undefined, { fresh: true })).state).toBe('locked-by other');
    // A change made here and not sent shows first.
    await vfs.setLocked('/A/f.txt', false);
    await vfs.writeFile('/A/f.txt', Buffer.from('changed'));
    expect((await vfs.stat('/A/f.txt')).state).toBe('pending');
  });

  it('is conflict when the conflict query says so, and folders have none', async () => {
    const { vfs, remote } = await setup();
    remote.release();
    await vfs.mkdir('/A/d');
    await vfs.writeFile('/A/d/c.txt', Buffer.from('x'));
    await vfs.flushAll();
    vfs.states.conflictOf = (library, fullpath) => library === 'A' && fullpath === 'd/c.txt';
    expect((await vfs.stat('/A/d/c.txt')).state).toBe('conflict');
    expect((await vfs.stat('/A/d')).state).toBeUndefined();
  });

  it('is offline-only for content not on the service while the library is offline', () => {
    let online = true;
    const states = new FileStates({ syncState: () => 'pending', online: () => online });
    expect(states.of('A', { fullpath: 'f', isDir: false })).toBe('pending');
    online = false;
    expect(states.of('A', { fullpath: 'f', isDir: false })).toBe('offline-only');
  });
});
