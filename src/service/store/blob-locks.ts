/**
 * StoredBlobLocks: the per-blob lock of BlobStore.lock, across the processes of a service. A blob's
 * ingest (its bytes, then the row that references them) and its collection (the row, then the bytes)
 * must not interleave, or a collection could remove bytes that an ingest on another process has just
 * found in place. Within a process the BlobStore's KeyedLock orders them; between processes a row of
 * `blob_locks` does: taken by one statement (an `INSERT … ON CONFLICT` that takes over only an expired
 * row), released by deleting it. A holder that dies leaves its row until the lease (`leaseMs`) passes.
 */
import { randomBytes } from 'node:crypto';
import type { BlobStore } from './blob-store.js';
import type { MetadataStore } from './metadata-store.js';

/** What a section run under a blob's lock may do with it. */
export interface BlobLockHold {
  /**
   * Gives the lock back with the COMMIT of the transaction this is called in (the transaction that
   * records what the section did); when that transaction rolls back, the lock is given back after the
   * section as usual. Call it last in the transaction, and return once it committed.
   */
  releaseAtCommit(): Promise<void>;
}

/** The per-blob lock: the BlobStore's (one process) or StoredBlobLocks (the processes of a service). */
export interface BlobLocks {
  lock<T>(sha1: string, fn: (hold?: BlobLockHold) => Promise<T> | T): Promise<T>;
}

const RELEASE_SQL = 'DELETE FROM blob_locks WHERE sha1 = ? AND holder = ?';

export interface StoredBlobLocksOptions {
  /** How long a held lock stays valid (ms); an ingest of a large blob into S3 must fit. Default 600 000 (10 min). */
  leaseMs?: number;
  /** Longest pause between two attempts to take a held lock (ms). Default 200. */
  maxWaitMs?: number;
  clock?: () => number;
}

export class StoredBlobLocks {
  /** This process, as `holder` of the rows it takes. */
  readonly holder = `${process.pid}-${randomBytes(6).toString('hex')}`;
  private readonly leaseMs: number;
  private readonly maxWaitMs: number;
  private readonly clock: () => number;

  constructor(private readonly db: MetadataStore, private readonly local: Pick<BlobStore, 'lock'>, opts: StoredBlobLocksOptions = {}) {
    this.leaseMs = opts.leaseMs ?? 600_000;
    this.maxWaitMs = opts.maxWaitMs ?? 200;
    this.clock = opts.clock ?? Date.now;
  }

  /**
   * Runs `fn` while no other ingest or removal of this blob runs, in this process or any other. `fn` may
   * have the lock given back by the transaction it runs (BlobLockHold.releaseAtCommit): it then goes
   * with that transaction's COMMIT instead of a statement of its own afterwards.
   */
  lock<T>(sha1: string, fn: (hold: BlobLockHold) => Promise<T> | T): Promise<T> {
    return this.local.lock(sha1, async () => {
      await this.take(sha1);
      let queued = false;
      let released = false;
      const hold: BlobLockHold = {
        releaseAtCommit: async () => {
          await this.db.runLater(RELEASE_SQL, [sha1, this.holder]);
          queued = true;
        },
      };
      try {
        const result = await fn(hold);
        // `fn` returned once its transaction committed, with the release when it queued one.
        released = queued;
        return result;
      } finally {
        if (!released) await this.db.run(RELEASE_SQL, [sha1, this.holder]);
      }
    });
  }

  private async take(sha1: string): Promise<void> {
    for (let pause = 2; ; pause = Math.min(pause * 2, this.maxWaitMs)) {
      const now = this.clock();
      const taken = await this.db.get(
        'INSERT INTO blob_locks (sha1, holder, until_ms) VALUES (?, ?, ?) ' +
        'ON CONFLICT (sha1) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms WHERE blob_locks.until_ms <= ? RETURNING holder',
        [sha1, this.holder, now + this.leaseMs, now],
      );
      if (taken) return;
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}
