/**
 * UploadQueue on its own: a task that replaces one under way, as a flush sees it.
 */
import { describe, it, expect } from 'vitest';
import { createHash } from 'node:crypto';
import { UploadQueue, type PendingFile } from '../../../../src/vfs/write-back/upload-queue.js';
import { FileHasher } from '../../../../src/vfs/write-back/file-hasher.js';
import { MemoryRemote } from '../../../../src/vfs/memory-remote.js';
import type { CommitOptions, CommitSource, RemoteEntry } from '../../../../src/vfs/remote.js';
import { silentLogger } from '../../../../src/shared/log.js';
import { waitFor } from '../../../support/wait-for.js';

/** A file held in memory whose content can change between two uploads (a new generation each time). */
class HeldFile implements PendingFile {
  readonly spoolPath = '/nonexistent';
  generation = 1;
  constructor(readonly id: string, readonly library: string, readonly fullpath: string, public data: Buffer) {}
  get size(): number {
    return this.data.length;
  }
  snapshotHash(): Promise<{ generation: number; sha1: string; size: number }> {
    return Promise.resolve({ generation: this.generation, sha1: sha1(this.data), size: this.data.length });
  }
  heldContent(): { generation: number; sha1: string; size: number; data: Buffer } {
    return { generation: this.generation, sha1: sha1(this.data), size: this.data.length, data: this.data };
  }
}

function sha1(b: Buffer): string {
  return createHash('sha1').update(b).digest('hex');
}

/** Commits that wait, each, until released. */
class HeldCommits extends MemoryRemote {
  readonly waiting: (() => void)[] = [];
  override async commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> {
    await new Promise<void>((resolve, reject) => {
      this.waiting.push(resolve);
      opts?.signal?.addEventListener('abort', () => reject(opts.signal!.reason as Error));
    });
    return super.commit(fullpath, source, opts);
  }
}

describe('UploadQueue', () => {
  it('regression: a settle right after an upload replaced one under way waits for the new one', async () => {
    // The file had no task while the one replaced was stopping: a flush then took its upload for done,
    // and the file's last content never reached the service.
    const remote = new HeldCommits({ name: 'A', id: '1' });
    const hasher = new FileHasher();
    const committed: number[] = [];
    const queue = new UploadQueue({
      hasher, logger: silentLogger, retryBaseMs: 5, retryMaxMs: 20,
      remoteFor: () => remote,
      onCommitted: async (_f, entry) => { committed.push(entry.size); },
    });
    try {
      const file = new HeldFile('0123456789abcdef', 'A', 'f', Buffer.from('old'));
      await queue.enqueue(file);
      await waitFor('the first commit under way', () => remote.waiting.length === 1);
      file.data = Buffer.from('newer');
      file.generation++;
      const replaced = queue.enqueue(file);
      const settled = queue.settle();
      await replaced;
      await waitFor('the second commit under way', () => remote.waiting.length === 2);
      remote.waiting[1]!();
      await settled;
      expect(committed).toEqual([5]);
      expect(remote.read('f').toString()).toBe('newer');
    } finally {
      await queue.close();
      await hasher.close();
    }
  });
});
