/**
 * A file removed here (an unlink, a rename over it) while its upload's commit is under way: the service
 * may take that commit all the same. Cut off, its answer lost, it could land once the removal had looked
 * and found nothing: the file back after its unlink, a rename over it refused (EEXIST), or a new file at
 * a numbered name nobody made. The removal waits for the commit's answer (a few seconds at most) and
 * removes what landed.
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
 * A memory service holding the first commit of `held` until `answer()`. Cut off by its caller before
 * that, it is taken all the same, late: right after the next look at the path that finds nothing (a
 * stat; `afterMove`: the next move to it instead).
 */
class LateLandingRemote extends MemoryRemote {
  underWay = false;
  private answerNow?: () => void;
  private lateLanding?: () => Promise<void>;
  constructor(readonly held: string, readonly afterMove = false) {
    super({ name: 'A', id: '1' });
  }

  answer(): void {
    this.answerNow?.();
  }

  override async commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> {
    const signal = opts?.signal;
    if (this.underWay || fullpath !== this.held || !signal) return super.commit(fullpath, source, opts);
    this.underWay = true;
    const answered = new Promise<boolean>((resolve) => {
      this.answerNow = () => resolve(true);
      signal.addEventListener('abort', () => resolve(false), { once: true });
    });
    if (await answered) return super.commit(fullpath, source, opts);
    this.lateLanding = async () => {
      this.lateLanding = undefined;
      await super.commit(fullpath, source, opts);
    };
    throw new VfsError('EIO', `commit '${fullpath}': connection cut, outcome unknown`);
  }

  override async stat(fullpath: string): Promise<RemoteEntry | null> {
    const found = await super.stat(fullpath);
    if (found === null && fullpath === this.held && !this.afterMove) await this.lateLanding?.();
    return found;
  }

  override async move(from: string, to: string): Promise<void> {
    await super.move(from, to);
    if (to === this.held) await this.lateLanding?.();
  }
}

/** A memory service that takes `held` in parts: `part()` answers one more (the upload's progress); it never completes. */
class PartsRemote extends MemoryRemote {
  underWay = false;
  private nextPart?: () => void;
  constructor(readonly held: string) {
    super({ name: 'A', id: '1' });
  }

  part(): void {
    this.nextPart?.();
  }

  override async commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> {
    if (fullpath !== this.held || !opts?.signal) return super.commit(fullpath, source, opts);
    this.underWay = true;
    const signal = opts.signal;
    for (let sent = 1; !signal.aborted; sent++) {
      await new Promise<void>((resolve) => {
        this.nextPart = resolve;
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
      if (!signal.aborted) opts.onProgress?.(Math.min(sent, source.size - 1), source.size);
    }
    throw new VfsError('EBUSY', `commit '${fullpath}': cut off`);
  }
}

describe('a file removed here while its commit is under way', { timeout: 20_000 }, () => {
  const { open, dirs } = closedAfterEach();

  /** A gateway over `remote` that uploads at once; `answerWaitMs`: how long a removal waits for a commit's answer. */
  async function gatewayOver<R extends MemoryRemote>(remote: R, answerWaitMs = 600_000): Promise<{ vfs: GatewayVfs; remote: R }> {
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-late-landing-'));
    dirs.push(dataDir);
    const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, upload: { delayMs: 0, retryBaseMs: 20, retryMaxMs: 100, answerWaitMs }, feedIntervalMs: 0 });
    open.push(vfs);
    return { vfs, remote };
  }

  const setup = (held: string, afterMove = false, answerWaitMs?: number) => gatewayOver(new LateLandingRemote(held, afterMove), answerWaitMs);
  const underWay = (remote: { underWay: boolean }) => waitFor('the commit under way', () => remote.underWay, { timeoutMs: 10_000 });

  /** Runs `removal` while `path`'s commit is under way; the service answers once the upload is stopped. */
  async function removeWhileCommitting(vfs: GatewayVfs, remote: LateLandingRemote, path: string, removal: () => Promise<void>): Promise<string | undefined> {
    await underWay(remote);
    const done = removal().then(() => undefined, (e: Error) => e.message);
    await waitFor('the upload stopped', () => !vfs.status().uploads.some((u) => u.fullpath === path), { timeoutMs: 10_000 });
    remote.answer();
    return done;
  }

  // A rename over a file whose commit is under way. A replace, cut off, would make the rename fail with
  // EEXIST; a new file, cut off, would land once the other file took the name: at `a (1)`.
  for (const [title, held, afterMove, moved, replaced] of [
    ['regression: a rename over it replaces it (no EEXIST), nothing of it left', 'c', false, 'the new one', 'replaced'],
    ['regression: a new file renamed over lands at no numbered name', 'a', true, 'moved here', 'new, replaced'],
  ] as const) {
    it(title, async () => {
      const { vfs, remote } = await setup(held, afterMove);
      await vfs.writeFile('/A/from', Buffer.from(moved));
      await vfs.flushAll();
      await vfs.writeFile(`/A/${held}`, Buffer.from(replaced));
      expect(await removeWhileCommitting(vfs, remote, held, () => vfs.rename('/A/from', `/A/${held}`))).toBeUndefined();
      await vfs.flushAll();
      expect(remote.paths()).toEqual([held]);
      expect(remote.read(held).toString()).toBe(moved);
    });
  }

  it('regression: unlinked, it does not come back', async () => {
    const { vfs, remote } = await setup('u');
    await vfs.writeFile('/A/u', Buffer.from('unlinked'));
    expect(await removeWhileCommitting(vfs, remote, 'u', () => vfs.unlink('/A/u'))).toBeUndefined();
    await vfs.flushAll();
    expect(remote.paths()).toEqual([]);
    await expect(vfs.stat('/A/u')).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a service that never answers: the unlink waits for it no longer than answerWaitMs', async () => {
    const { vfs, remote } = await setup('s', false, 50);
    await vfs.writeFile('/A/s', Buffer.from('never answered'));
    await underWay(remote);
    // No answer comes: the bound cuts the commit off and the unlink returns.
    await vfs.unlink('/A/s');
    await expect(vfs.stat('/A/s')).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('the gateway closing meanwhile cuts the commit off: neither the close nor the unlink waits for its answer', async () => {
    const { vfs, remote } = await setup('k');
    await vfs.writeFile('/A/k', Buffer.from('never answered'));
    await underWay(remote);
    const done = vfs.unlink('/A/k').then(() => 'done', (e: Error) => e.message);
    await waitFor('the upload stopped', () => !vfs.status().uploads.some((u) => u.fullpath === 'k'), { timeoutMs: 10_000 });
    await vfs.close();
    expect(typeof await done).toBe('string');
  });

  it('its parts still being sent: the upload is cut off at the next part, the unlink waits for no answer', async () => {
    const { vfs, remote } = await gatewayOver(new PartsRemote('p'));
    await vfs.writeFile('/A/p', Buffer.from('sent in parts'));
    await underWay(remote);
    const done = vfs.unlink('/A/p');
    await waitFor('the upload stopped', () => vfs.status().uploads.length === 0, { timeoutMs: 10_000 });
    remote.part();
    await done;
    expect(remote.paths()).toEqual([]);
  });
});
