/**
 * A rename of a file of which nothing was sent moves it here only (no request: an rsync renames every file
 * it writes). "Nothing sent" is of the whole path, not of the version shown: a version made from one while
 * that one was held by the write-back delay, then sent, is no longer a file the service has nothing of.
 */
import { describe, expect, it } from 'vitest';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';
import type { CommitOptions, CommitSource, RemoteEntry } from '../../../../src/vfs/remote.js';
import { VfsError } from '../../../../src/vfs/types.js';
import { waitFor } from '../../../support/wait-for.js';
import { closedAfterEach } from '../../../support/vfs-teardown.js';

/** A memory service whose next commit of `held` bytes waits until its caller gives up on it, and then fails (nothing lands). */
class HoldingRemote extends MemoryRemote {
  held: string | undefined;
  waiting = false;
  constructor() {
    super({ name: 'A', id: '1' });
  }

  override async commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> {
    const signal = opts?.signal;
    const data = source.data ?? await readFile(source.path);
    if (this.held !== undefined && data.toString() === this.held && signal) {
      this.waiting = true;
      this.held = undefined;
      if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      this.waiting = false;
      throw new VfsError('EIO', 'cut off before the service took it');
    }
    return super.commit(fullpath, source, opts);
  }
}

describe('a rename after a version of the file was sent', { timeout: 20_000 }, () => {
  const { open, dirs } = closedAfterEach();

  async function setup(): Promise<{ vfs: GatewayVfs; remote: HoldingRemote }> {
    const remote = new HoldingRemote();
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-sent-lineage-'));
    dirs.push(dataDir);
    // A write-back delay: the first version waits while the next one is written.
    const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, upload: { delayMs: 100, retryBaseMs: 20, retryMaxMs: 100 }, feedIntervalMs: 0 });
    open.push(vfs);
    return { vfs, remote };
  }

  async function write(vfs: GatewayVfs, path: string, data: string): Promise<void> {
    const h = await vfs.open(path, { write: true, create: true, truncate: true });
    await h.write(0, Buffer.from(data));
    await h.release();
  }

  /** A new file whose first version reaches the service while a second one, made from it, is written. */
  async function sentWhileChanged(vfs: GatewayVfs, remote: MemoryRemote, path: string): Promise<void> {
    await write(vfs, path, 'first');
    const h = await vfs.open(path, { write: true });
    await h.write(0, Buffer.from('second'));
    await waitFor('the first version on the service', () => remote.paths().includes(path.slice(3)), { timeoutMs: 10_000 });
    await h.release();
  }

  it('regression: a version made while the one before it was held, then uploaded, is renamed on the service too: nothing stays at the old name', async () => {
    const { vfs, remote } = await setup();
    await sentWhileChanged(vfs, remote, '/A/a');
    await vfs.rename('/A/a', '/A/b');
    await vfs.flushAll();
    expect(remote.paths()).toEqual(['b']);
    expect(remote.read('b').toString()).toBe('second');
    expect(vfs.status().conflicts).toEqual([]);
  });

  it('regression: a name renamed over again and again keeps no conflict copy (the old name\'s first version was left there, then moved over the name)', async () => {
    const { vfs, remote } = await setup();
    await sentWhileChanged(vfs, remote, '/A/a');
    await vfs.rename('/A/a', '/A/b');
    // A new file at the old name, renamed over `b` while its first commit is under way (then cut off).
    remote.held = 'third';
    await write(vfs, '/A/a', 'third');
    await waitFor('the commit of the new file under way', () => remote.waiting, { timeoutMs: 10_000 });
    await vfs.rename('/A/a', '/A/b');
    await vfs.flushAll();
    expect(remote.paths()).toEqual(['b']);
    expect(remote.read('b').toString()).toBe('third');
    expect(vfs.status().conflicts).toEqual([]);
  });
});
