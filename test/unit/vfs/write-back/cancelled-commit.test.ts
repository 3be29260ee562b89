/**
 * An upload stopped by a rename while its commit is under way: the service may take that commit all the
 * same (its answer was on its way when the upload was cancelled). The file is then committed once: the
 * rename moves it on the service, and it is not uploaded again (which would make the service place a
 * second copy at a numbered name, then remove it).
 */
import { describe, expect, it } from 'vitest';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';
import type { CommitOptions, CommitSource, RemoteEntry } from '../../../../src/vfs/remote.js';
import { VfsError } from '../../../../src/vfs/types.js';
import { waitFor } from '../../../support/wait-for.js';
import { closedAfterEach } from '../../../support/vfs-teardown.js';

/**
 * A memory service that takes the first commit of a path under `held` only once its caller has given up
 * on it (its signal aborted: the answer was on its way), and answers it all the same; `commits` lists
 * every commit that reached it.
 */
class LateAnswerRemote extends MemoryRemote {
  waiting = false;
  constructor(readonly heldPrefix: string) {
    super({ name: 'A', id: '1' });
  }

  override async commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> {
    const signal = opts?.signal;
    if (!this.waiting && fullpath.startsWith(this.heldPrefix) && signal) {
      this.waiting = true;
      if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    }
    return super.commit(fullpath, source, opts);
  }
}

/**
 * LateAnswerRemote that checks writes (as a member's library does, at a create and at the rename of a
 * file of which nothing was sent): one outside `held` (the rename's target) only once the first commit
 * under `held` is under way, so that the upload starts while the rename is decided.
 */
class CheckingRemote extends LateAnswerRemote {
  async checkWrite(fullpath: string): Promise<void> {
    if (!fullpath.startsWith(this.heldPrefix)) await waitFor('the commit under way', () => this.waiting, { timeoutMs: 10_000 });
  }
}

describe('a commit that lands after its upload was stopped by a rename', { timeout: 20_000 }, () => {
  const { open, dirs } = closedAfterEach();

  /**
   * A Vfs over LateAnswerRemote; `reached`: once the first commit under `held` is under way.
   */
  async function setup(held: string, opts: { checking?: boolean; delayMs?: number } = {}): Promise<{ vfs: GatewayVfs; remote: LateAnswerRemote; reached: () => Promise<void> }> {
    const remote = opts.checking ? new CheckingRemote(held) : new LateAnswerRemote(held);
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-cancelled-commit-'));
    dirs.push(dataDir);
    const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, upload: { delayMs: opts.delayMs ?? 0, retryBaseMs: 20, retryMaxMs: 100 }, feedIntervalMs: 0 });
    open.push(vfs);
    const reached = async (): Promise<void> => { await waitFor('the commit under way', () => remote.waiting, { timeoutMs: 10_000 }); };
    return { vfs, remote, reached };
  }

  async function write(vfs: GatewayVfs, path: string, data: string): Promise<void> {
    const h = await vfs.open(path, { write: true, create: true, truncate: true });
    await h.write(0, Buffer.from(data));
    await h.release();
  }

  it('a file renamed (as rsync renames its temporary file): committed once, at its new name', async () => {
    const { vfs, remote, reached } = await setup('.r1.tmp');
    await write(vfs, '/A/.r1.tmp', 'rsynced content');
    await reached();
    // The rename stops the upload; its commit's answer comes all the same.
    await vfs.rename('/A/.r1.tmp', '/A/r1');
    await vfs.flushAll();
    expect(remote.commits.map((c) => c.fullpath)).toEqual(['.r1.tmp']);
    expect(remote.paths()).toEqual(['r1']);
    expect(remote.read('r1').toString()).toBe('rsynced content');
    expect(vfs.status().uploads).toEqual([]);
    const h = await vfs.open('/A/r1', { read: true });
    expect((await h.read(0, 100)).toString()).toBe('rsynced content');
    await h.release();
  });

  it('a folder renamed while a file in it is committed: the file is committed once, moved with the folder', async () => {
    const { vfs, remote, reached } = await setup('d/');
    await vfs.mkdir('/A/d');
    await write(vfs, '/A/d/f', 'in the folder');
    await reached();
    await vfs.rename('/A/d', '/A/d2');
    await vfs.flushAll();
    expect(remote.commits.map((c) => c.fullpath)).toEqual(['d/f']);
    expect(remote.paths().sort()).toEqual(['d2', 'd2/f']);
    expect(remote.read('d2/f').toString()).toBe('in the folder');
  });

  it('a rename that fails after the commit landed: the file stays where it landed, not committed again', async () => {
    const { vfs, remote, reached } = await setup('.r2.tmp');
    await write(vfs, '/A/.r2.tmp', 'stays');
    await reached();
    remote.move = async (): Promise<void> => { throw new VfsError('EACCES', 'moves refused'); };
    await expect(vfs.rename('/A/.r2.tmp', '/A/r2')).rejects.toMatchObject({ code: 'EACCES' });
    await vfs.flushAll();
    expect(remote.commits.map((c) => c.fullpath)).toEqual(['.r2.tmp']);
    expect(remote.paths()).toEqual(['.r2.tmp']);
    expect(remote.read('.r2.tmp').toString()).toBe('stays');
  });

  it('an upload that starts while a rename of a file of which nothing was sent is decided: committed once, at its new name', async () => {
    // The write-back delay holds the upload until the rename is under way; the rename, finding nothing
    // sent, would move the file here only.
    const { vfs, remote } = await setup('.r3.tmp', { checking: true, delayMs: 50 });
    await write(vfs, '/A/.r3.tmp', 'sent meanwhile');
    await vfs.rename('/A/.r3.tmp', '/A/r3');
    await vfs.flushAll();
    expect(remote.commits.map((c) => c.fullpath)).toEqual(['.r3.tmp']);
    expect(remote.paths()).toEqual(['r3']);
    expect(remote.read('r3').toString()).toBe('sent meanwhile');
    const h = await vfs.open('/A/r3', { read: true });
    expect((await h.read(0, 100)).toString()).toBe('sent meanwhile');
    await h.release();
  });
});
