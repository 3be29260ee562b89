/**
 * JournalSpools: an UploadJournal's state (upload-journal.ts says what the journal is) and its spools —
 * the spool folder, the ids of new versions, and the pool of emptied spools a front end may take.
 */
import { mkdir, open, readdir, readFile, rename, truncate, writeFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { SideLogWriter } from '../engine-lease.js';

import { fsyncFolderIfSupported, removeFileIfPresent } from '../../shared/atomic-file.js';
import { ID_RE, type JournalEntry } from './journal-records.js';

/** Where an entry's bytes are safe: in a record (`inline`), or in its spool file. */
export interface LiveEntry {
  entry: JournalEntry;
  inline: boolean;
  /** Log records written when its last record was (durable once the log is synced that far). */
  record: number;
  /** The checks of its last line and of its last line carrying its bytes: the lines a rewrite keeps. */
  lines: Set<string>;
}

/** Side logs: `closes.<16 hex digits>.log`. */
export const SIDE_LOG_RE = /^closes\.[0-9a-f]{16}\.log$/;

export const ID_POOL_BYTES = 4096;
/** The pool of emptied spools (see UploadJournal.recycle): its folder in the spool folder, its files' prefix, its size. */
export const POOL = '.pool';
export const POOL_PREFIX = 'p';
export const POOL_MAX = 4096;
/** A pool that looks full is counted again at most this often (a front end takes from it silently). */
export const POOL_RECOUNT_MS = 1000;
export const LOG = 'journal.log';
/** The log is rewritten once it holds this many records more than live entries, and twice as many (compactionDue). */
export const COMPACT_DEAD_RECORDS = 2000;
/**
 * Appends of up to this many bytes are written on the calling thread (a write into the page cache, a few
 * microseconds) rather than handed to the thread pool and back, two thread hand-offs on the path of every
 * close. One that takes longer than SLOW_APPEND_MS (the kernel throttling writers of a busy disk) sends the
 * appends of the next APPENDS_OFF_THREAD_MS through the thread pool, so a throttled disk holds the event
 * loop once, not at every close.
 */
export const SYNC_APPEND_MAX_BYTES = 64 * 1024;
export const SLOW_APPEND_MS = 5;
export const APPENDS_OFF_THREAD_MS = 10_000;


export abstract class JournalSpools {
  readonly spoolDir: string;
  protected readonly entriesDir: string;
  protected readonly logPath: string;
  /** Random bytes that new ids are cut from (one call to the random source for 512 ids). */
  protected idPool = Buffer.alloc(0);
  protected idPoolAt = ID_POOL_BYTES;
  /** Files in the pool as last counted or added (a front end takes some meanwhile), and names given so far. */
  protected poolOn = false;
  protected pooled = 0;
  protected poolCountedMs = 0;
  protected poolFilling: Promise<void> = Promise.resolve();
  protected poolSerial = 0;
  /** The log, open for appending (closed after close(): each later append opens it). */
  protected log: FileHandle | undefined;
  /** The spool folder, kept open for its fsyncs. */
  protected spoolFolder: Promise<FileHandle> | undefined;
  protected closed = false;
  /** Entries whose last record is in the log (for `sync`, the spool fsyncs and compaction). */
  protected readonly live = new Map<string, LiveEntry>();
  /** Spool files not in their record, written since their last fsync; fsynced by the next group commit. */
  protected readonly unsyncedSpools = new Set<string>();
  /** Lines waiting for the writer (one write for all of them). */
  protected queue: { line: Buffer; done: (err: Error | undefined, record: number) => void }[] = [];
  /** A write of the queue is on the log's chain. */
  protected flushQueued = false;
  /** Every change of the log file runs on this chain, one at a time. */
  protected chain: Promise<void> = Promise.resolve();
  /** Records written to the log (page cache), and how many of them are durable. */
  protected written = 0;
  protected synced = 0;
  /** Bytes of the log file (undefined until first opened), and how many of them are durable. */
  protected logBytes: number | undefined;
  protected syncedBytes = 0;
  /** Records in the log file (live and dead), for compaction, and how many its last rewrite kept. */
  protected logRecords = 0;
  protected keptRecords = 0;
  protected rewrites = 0;
  /** The fdatasync under way, and how far it reaches. */
  protected syncing: Promise<void> | undefined;
  /** A write failed part way and could not be undone: the next write starts on a line of its own. */
  protected tornTail = false;
  /** Until then appends go through the thread pool (an append on the calling thread was slow). */
  protected appendsOffThreadUntil = 0;
  /** Appends written on the calling thread, and those sent to the thread pool (for tests and figures). */
  readonly appendCounts = { inline: 0, pooled: 0 };
  protected groupTimer: NodeJS.Timeout | undefined;
  /** The writer of side logs, and the side log it writes now. */
  protected sideWriter: SideLogWriter | undefined;
  protected sideLog: string | undefined;
  /** Ids of side records settled since the writer's last switch (their side log stays until the next one). */
  protected readonly settledSinceSwitch = new Set<string>();
  /** Checks of side records kept in the log as they are (lines a rewrite keeps). */
  protected readonly keptLines = new Set<string>();
  /** A compaction that first switches the side writer to a new log is under way. */
  protected sideCompaction: Promise<void> | undefined;
  /** The group commit under way (a sync waits for it, then runs its own). */
  protected committing: Promise<void> = Promise.resolve();

  protected readonly slowAppendMs: number;

  /**
   * `groupCommitMs`: the longest a put without sync waits for its fsync. `slowAppendMs`: an append on the
   * calling thread slower than this sends the next ones through the thread pool for a while (default
   * SLOW_APPEND_MS).
   */
  constructor(readonly dir: string, protected readonly groupCommitMs = 1000, opts: { slowAppendMs?: number } = {}) {
    this.slowAppendMs = opts.slowAppendMs ?? SLOW_APPEND_MS;
    this.spoolDir = join(dir, 'spool');
    this.entriesDir = join(dir, 'entries');
    this.logPath = join(dir, LOG);
  }

  /**
   * From now on spools nobody needs are kept, emptied, in a pool (`poolDir`, see `recycle`), filled in the
   * background with empty files up to POOL_MAX: for a front end that makes spools itself, many a second
   * (the FUSE engine with passthrough).
   */
  async startSpoolPool(): Promise<void> {
    if (this.poolOn) return;
    await mkdir(this.poolDir, { recursive: true, mode: 0o700 });
    this.pooled = (await readdir(this.poolDir).catch(() => [] as string[])).length;
    this.poolOn = true;
    // In the background: a spool is made anew meanwhile (close waits for it).
    this.poolFilling = this.fillPool().catch(() => undefined);
  }

  /** Makes empty files in the pool up to POOL_MAX (before anything waits for a spool). */
  protected async fillPool(): Promise<void> {
    for (; this.pooled < POOL_MAX && !this.closed; this.pooled++) {
      const fh = await open(join(this.poolDir, this.poolName()), 'wx', 0o600).catch(() => undefined);
      if (!fh) return;
      await fh.close();
    }
  }

  protected poolName(): string {
    return `${POOL_PREFIX}${process.pid.toString(36)}-${Date.now().toString(36)}-${(this.poolSerial++).toString(36)}`;
  }

  /**
   * The folder of empty spool files kept for reuse (see `recycle`): a front end that makes spools itself
   * takes one from there (a rename into the spool folder) before it makes a new file.
   */
  get poolDir(): string {
    return join(this.spoolDir, POOL);
  }

  /**
   * A spool nobody needs any more: removed; once the pool is started (startSpoolPool), emptied and kept in the pool for a later spool, up to POOL_MAX files
   * (else removed). Making a file costs more than reusing one: on ext4, the inodes of files removed in the
   * last seconds are skipped one by one by the next allocations in their group, and the spool folder's
   * group is where every spool comes and goes (measured: creates in a busy spool folder took a third of a
   * small-file copy's CPU). A spool someone still has open must not come here: it is emptied.
   */
  protected async recycle(path: string): Promise<void> {
    if (!this.poolOn) return removeFileIfPresent(path);
    if (this.pooled >= POOL_MAX && Date.now() - this.poolCountedMs >= POOL_RECOUNT_MS) {
      // Taken from meanwhile by a front end (which says nothing): counted again, at most once a second.
      this.poolCountedMs = Date.now();
      this.pooled = (await readdir(this.poolDir).catch(() => [] as string[])).length;
    }
    if (this.pooled >= POOL_MAX) return removeFileIfPresent(path);
    // Renamed into the pool, then emptied (a front end takes only an empty one).
    const pooled = join(this.poolDir, this.poolName());
    try {
      await rename(path, pooled);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') await removeFileIfPresent(path);
      return;
    }
    this.pooled++;
    await truncate(pooled, 0).catch(() => removeFileIfPresent(pooled).catch(() => undefined));
  }

  /** A fresh id for a spool file (not journaled until `put`): 8 random bytes, taken from a pool. */
  newId(): string {
    if (this.idPoolAt >= ID_POOL_BYTES) {
      this.idPool = randomBytes(ID_POOL_BYTES);
      this.idPoolAt = 0;
    }
    const id = this.idPool.toString('hex', this.idPoolAt, this.idPoolAt + 8);
    this.idPoolAt += 8;
    return id;
  }

  /** Whether `id` may name a new entry: 16 hex digits, no entry of it in the log. */
  freshId(id: string): boolean {
    return ID_RE.test(id) && !this.live.has(id);
  }

  spoolPath(id: string): string {
    if (!ID_RE.test(id)) throw new TypeError(`journal id: expected 16 hex digits, got '${id}'`);
    return join(this.spoolDir, id);
  }

  dropSpool(id: string): Promise<void> {
    return removeFileIfPresent(this.spoolPath(id));
  }

  /** Removes a spool file that was never journaled (or whose entry is gone). */
  async discardSpool(id: string): Promise<void> {
    this.unsyncedSpools.delete(this.spoolPath(id));
    await this.recycle(this.spoolPath(id));
  }

  spoolFolderPath(): string {
    return this.spoolDir;
  }

  protected async syncSpoolFolder(): Promise<void> {
    if (this.closed) return fsyncFolderIfSupported(this.spoolDir);
    if (!this.spoolFolder) {
      const opening = open(this.spoolDir, 'r');
      this.spoolFolder = opening;
      opening.catch(() => { if (this.spoolFolder === opening) this.spoolFolder = undefined; });
    }
    const fh = await this.spoolFolder;
    try { await fh.sync(); } catch { /* some file systems refuse fsync on folders */ }
  }
}

/** Writes a small file's spool from its record when the file is missing or differs (lost to a power loss). */
export async function restoreSpool(path: string, data: Buffer, size: number): Promise<void> {
  if (data.length !== size) return;
  const now = await readFile(path).catch(() => undefined);
  if (now && now.equals(data)) return;
  await writeFile(path, data, { mode: 0o600 });
}

export function ignoreMissing(err: unknown): void {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
}


