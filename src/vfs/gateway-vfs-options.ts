/** What a GatewayVfs is opened with: its libraries, data folder, caches, read-ahead, uploads and limits. */
import type { Logger } from '../shared/log.js';
import type { DiskFaults } from './disk-faults.js';
import type { ResolvedLibrary } from './library-set.js';
import type { Clock } from './clock.js';

export interface GatewayVfsOptions {
  libraries: ResolvedLibrary[];
  /** Folder of the journal, the content cache and the feed cursors. */
  dataDir: string;
  /** Updates feed poll interval, ms; 0 = no feed (cache entries then expire after `cache.ttlMs`). Default 2000. */
  feedIntervalMs?: number;
  cache?: {
    /** Metadata entries kept. Default 100 000. */
    metadataEntries?: number;
    /** Memory bound of the metadata cache, bytes. Default 64 MiB. */
    metadataBytes?: number;
    /** Trust limit of cached metadata, ms (0 = until changed). Default 0 with a feed, else 1000. */
    ttlMs?: number;
    /** In-memory block cache, bytes. Default 64 MiB. */
    blockBytes?: number;
    /** Block size of random reads, bytes. Default 64 KiB. */
    blockSize?: number;
    /** On-disk content cache, bytes; 0 = off (and no pins). Default 0. */
    diskBytes?: number;
    /** Share of the cache's disk always left free, percent. Default 5. */
    minFreePercent?: number;
  };
  /**
   * Read-ahead of sequential reads: first and largest window (bytes; default 1 MiB and 8 MiB), ranges
   * in flight at once (default 4), bytes asked for ahead of one reader at most (default 32 MiB) and of
   * all readers together (default 256 MiB).
   */
  readAhead?: { initial?: number; max?: number; streams?: number; bytes?: number; totalBytes?: number };
  upload?: {
    /** Uploads of files over 256 KiB at once. Default 4. */
    concurrency?: number;
    /** Uploads of files up to 256 KiB at once (each one exchange with the service), beside those. Default 16. */
    smallConcurrency?: number;
    /** First retry delay, ms. Default 1000. */
    retryBaseMs?: number;
    /** Longest retry delay, ms. Default 30 000. */
    retryMaxMs?: number;
    /** An upload the service refused (ENOSPC, a lock, EACCES) is asked again after this long, ms. Default 600 000. */
    refusedRetryMs?: number;
    /** An unlink or rename over a file waits this long for the answer of its commit under way, ms. Default 5 000. */
    answerWaitMs?: number;
    /**
     * Write-back delay, ms: a file closed is uploaded this long after its last close (one fsynced and kept
     * open, once it stayed unchanged this long), so a burst of writes is not competing with its own
     * uploads, and a file rewritten meanwhile is uploaded once. flushAll and `ctl flush` upload at once.
     * Default 0.
     */
    delayMs?: number;
  };
  /**
   * When a closed file is safe against power loss: `group` (default) fsyncs the journal within
   * `groupCommitMs` (default 1000) of the close, and at once on fsync, flushAll and `ctl flush` (a crash of
   * the gateway loses nothing either way); `close` fsyncs at every close.
   */
  durability?: { mode?: 'group' | 'close'; groupCommitMs?: number };
  /**
   * Bytes of closed small files (up to 64 KiB each, carried by their journal entries) that may wait in
   * memory for their spool files until the upload or a reader needs them. Default 16 MiB.
   */
  unwrittenSpoolBytes?: number;
  /** Existing files opened for writing: up to `wholeMaxBytes` fetched whole at the first change (default 8 MiB); larger ones on demand, at least `chunkBytes` per fetch (default 1 MiB). */
  partialFetch?: { wholeMaxBytes?: number; chunkBytes?: number };
  /** Injected failures of the gateway's own disk (tests, fault drills). */
  diskFaults?: DiskFaults;
  /** Refuse every change with EROFS. Default false. */
  readOnly?: boolean;
  /** Largest file a write may make, bytes (EFBIG beyond it); 0 or undefined for no limit. */
  maxFileBytes?: number;
  /** Bytes waiting to upload at most: writers wait for room, ENOSPC when none comes (upload-backpressure.ts); 0 or undefined for no bound. */
  maxPendingBytes?: number;
  /**
   * How long a document stays locked on the service after its Office lock file is deleted, ms: the same
   * maker making it again meanwhile (LibreOffice does around each save) keeps the lock throughout
   * (office-lock-files.ts). Default 2000; 0 releases at once.
   */
  officeLockReleaseGraceMs?: number;
  /** The time the gateway reads (feeds, stalls, quotas, cache ages). Default the real one; tests pass a manual one. */
  clock?: Clock;
  logger: Logger;
  /** Called by close() after everything else (closes what the factory opened). */
  onClose?: () => Promise<void>;
}
