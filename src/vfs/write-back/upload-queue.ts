/**
 * UploadQueue: commits journaled files to the service in the background. A p-queue bounds the uploads
 * under way; each attempt hashes the spool off the main thread, then commits it (create_file with
 * overwrite, instant upload or the chunked protocol). An attempt that failed for a transient reason (no
 * answer, a busy or failing service: `isTransient`) is retried with exponential backoff, capped, for as
 * long as it takes. One the service refused (no permission, no space, a locked file, any other 4xx) is
 * not repeated at once: it waits, `failed`, until asked again — a flush (`flushAll`, `ctl flush`, fsync
 * of a folder), the service coming back, `refusedRetryMs` later (10 minutes), or the next start. A parent folder that vanished (ENOENT) is made
 * again and the upload retried. The data is in the journal either way and is never dropped. A task can
 * be cancelled (the file was modified, renamed or deleted); its state is visible through `status()`.
 */
import PQueue from 'p-queue';
import type { Logger } from '../../shared/log.js';
import { isTransient } from '../../shared/transient.js';
import { sleep, systemClock, type Clock, type ClockTimer } from '../clock.js';
import type { FileHasher } from './file-hasher.js';
import type { ForegroundActivity } from '../foreground-activity.js';
import type { CommitOptions, CommitSource, Remote, RemoteEntry } from '../remote.js';
import { VfsError, type Operator } from '../types.js';

/** What the queue needs to know about a file to upload; read afresh at each attempt (renames move it). */
export interface PendingFile {
  readonly id: string;
  readonly library: string;
  readonly fullpath: string;
  readonly spoolPath: string;
  /** Bumped by every local modification. */
  readonly generation: number;
  /** Bytes of the file now (which lane its upload waits in). */
  readonly size: number;
  readonly operator?: Operator;
  /** SHA-1 and size of the spool with the generation they belong to, taken with no change in between. */
  snapshotHash(hasher: FileHasher): Promise<{ generation: number; sha1: string; size: number }>;
  /** The content with its SHA-1, when the file is sealed and still held in memory (no spool written): uploaded from there. */
  heldContent?(): { generation: number; sha1: string; size: number; data: Buffer } | undefined;
}

/** `retrying`: waiting out a backoff after a transient failure; `failed`: refused by the service, waiting to be asked again (a flush, the service's return, or `refusedRetryMs`). */
export type UploadState = 'queued' | 'hashing' | 'uploading' | 'retrying' | 'failed';

export interface UploadStatus {
  id: string;
  library: string;
  fullpath: string;
  state: UploadState;
  /** Failed attempts so far. */
  failures: number;
  lastError?: string;
  /** The code of the last failure (ENOSPC, ELOCKED, EIO…). */
  lastErrorCode?: string;
  /** When the next attempt starts (retrying), ms since the epoch. */
  nextAttemptMs?: number;
  /** When the task was queued, ms since the epoch. */
  queuedMs: number;
  /** Size of the content being uploaded (known once hashed). */
  size?: number;
  /** Bytes of the current attempt the service has (instant uploads jump to `size`). */
  sentBytes?: number;
  /** When the current attempt last moved (started, or the service took bytes), ms since the epoch: an upload that stalls shows it here. */
  progressMs?: number;
}

export interface UploadQueueOptions {
  /** Uploads of files larger than `smallMaxBytes` under way at once. Default 4. */
  concurrency?: number;
  /**
   * Uploads of small files (up to `smallMaxBytes`) under way at once, beside the large ones. A small file
   * is one exchange whose time is mostly the round trip to the service, so many go at once; a large one
   * streams parts that already fill the link. Default 16.
   */
  smallConcurrency?: number;
  /** Largest file that waits in the small files' lane, bytes. Default 256 KiB (one create_file with the content). */
  smallMaxBytes?: number;
  /** First retry delay, ms; doubles per failure. Default 1000. */
  retryBaseMs?: number;
  /** Longest retry delay, ms. Default 30 000. */
  retryMaxMs?: number;
  /**
   * An upload the service refused (no space, a lock, no permission) is asked again after this long, ms,
   * as well as at a flush or the service's return: space is freed and locks are released elsewhere,
   * without the gateway hearing of it. Default 600 000 (10 minutes).
   */
  refusedRetryMs?: number;
  hasher: FileHasher;
  remoteFor: (library: string) => Remote | undefined;
  /**
   * The service has the content as it was at `generation` under `fullpath`. Called before the task
   * counts as done; it decides whether the journal entry can go.
   */
  onCommitted: (file: PendingFile, entry: RemoteEntry, snapshot: { generation: number; fullpath: string; library: string }) => Promise<void>;
  /**
   * A commit the service answered after the upload was cancelled (the answer was on its way): the service
   * has the content as it was at `generation` under `fullpath` all the same. Called before the cancel
   * resolves; the task is gone either way.
   */
  onCommittedAfterCancel?: (file: PendingFile, entry: RemoteEntry, snapshot: { generation: number; fullpath: string; library: string }) => Promise<void>;
  /**
   * Commits the file's content to `fullpath` (default: `remote.commit`): conflicts.ts looks at the
   * service's version there and keeps both sides. What it throws fails the attempt like a failed commit.
   * `retry`: an earlier attempt of this upload failed (its commit may have landed, its answer lost).
   */
  commit?: (file: PendingFile, remote: Remote, fullpath: string, source: CommitSource, opts: CommitOptions, retry: boolean) => Promise<RemoteEntry>;
  /** Before retrying an attempt that failed with ENOENT (a parent folder vanished). */
  onMissingParent?: (file: PendingFile) => Promise<void>;
  /**
   * While applications are being served (`busy()`), each lane runs one upload at a time and uploads start
   * at most one per BUSY_START_MS, so the main thread they share stays with the applications; a flush
   * (`settle`) goes at full width regardless.
   */
  foreground?: Pick<ForegroundActivity, 'busy'>;
  /** The time of the retry delays, the pacing and the statuses. Default the real one. */
  clock?: Clock;
  /** How long a cancel waits for the answer of a commit under way (`cancel`'s `answered`), ms. Default 5 s. */
  answerWaitMs?: number;
  logger: Logger;
}

/** How often the lanes' width follows the foreground while uploads are pending, ms. */
const PACE_MS = 50;
/** While the foreground is busy, uploads start at most one per this many ms (both lanes together). */
const BUSY_START_MS = 20;

interface Task {
  file: PendingFile;
  status: UploadStatus;
  abort?: AbortController;
  timer?: ClockTimer;
  cancelled: boolean;
  /** Cancelled while its commit was under way, waiting for its answer: cuts it off at its next part. */
  cutAtPart?: () => void;
  /** Settles when the current attempt has finished. */
  attempt?: Promise<void>;
  /** Failures counted since a flushAll() started waiting. */
  failedSinceMark: boolean;
}

export class UploadQueue {
  private readonly tasks = new Map<string, Task>();
  /** Cancelled tasks whose commit under way is let answer (cancel's `answered`): cut off at a close. */
  private readonly answering = new Set<Task>();
  /**
   * The attempt under way at each path (library and path), cancelled ones included: a commit is not cut
   * by a cancel and may land all the same, so the next attempt at the path waits for it to end.
   */
  private readonly atPath = new Map<string, Promise<void>>();
  private readonly queue: PQueue;
  private readonly smallQueue: PQueue;
  private readonly smallMaxBytes: number;
  private readonly waiters = new Set<() => void>();
  private closed = false;
  readonly counters = { committed: 0, failures: 0, cancelled: 0 };
  private readonly concurrency: number;
  private readonly smallConcurrency: number;
  /** The lanes are one upload wide (the foreground is busy). */
  private yielding = false;
  private paceTimer: ClockTimer | undefined;
  /** settle() calls waiting: the lanes stay at full width. */
  private settling = 0;
  /** When the last upload started (clock). */
  private lastStartMs = -Infinity;
  private readonly clock: Clock;

  constructor(private readonly opts: UploadQueueOptions) {
    const concurrency = opts.concurrency ?? 4;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new TypeError(`concurrency: expected a whole number >= 1, got ${opts.concurrency}`);
    const smallConcurrency = opts.smallConcurrency ?? 16;
    if (!Number.isInteger(smallConcurrency) || smallConcurrency < 1) throw new TypeError(`smallConcurrency: expected a whole number >= 1, got ${opts.smallConcurrency}`);
    this.smallMaxBytes = opts.smallMaxBytes ?? 256 * 1024;
    if (!Number.isSafeInteger(this.smallMaxBytes) || this.smallMaxBytes < 0) throw new TypeError(`smallMaxBytes: expected a byte count, got ${opts.smallMaxBytes}`);
    this.concurrency = concurrency;
    this.smallConcurrency = smallConcurrency;
    this.queue = new PQueue({ concurrency });
    this.smallQueue = new PQueue({ concurrency: smallConcurrency });
    this.clock = opts.clock ?? systemClock;
  }

  /**
   * Sets the lanes' width from the foreground (one upload each while it is busy and no flush waits), and
   * looks again in PACE_MS while uploads are pending.
   */
  private pace(): void {
    const fg = this.opts.foreground;
    if (!fg) return;
    const yielding = this.tasks.size > 0 && this.settling === 0 && fg.busy();
    if (yielding !== this.yielding) {
      this.yielding = yielding;
      this.queue.concurrency = yielding ? 1 : this.concurrency;
      this.smallQueue.concurrency = yielding ? 1 : this.smallConcurrency;
    }
    if (this.tasks.size > 0 && !this.closed && !this.paceTimer) {
      this.paceTimer = this.clock.after(PACE_MS, () => {
        this.paceTimer = undefined;
        this.pace();
      });
    }
  }

  /**
   * An upload's turn to start: at once, unless the foreground is busy (and no flush waits), when uploads
   * start at most one per BUSY_START_MS: they go on, and take little of the main thread meanwhile.
   */
  private async turn(): Promise<void> {
    const fg = this.opts.foreground;
    while (fg && !this.closed && this.settling === 0 && fg.busy()) {
      // At most BUSY_START_MS: a clock set back does not hold the uploads.
      const wait = Math.min(BUSY_START_MS, this.lastStartMs + BUSY_START_MS - this.clock.now());
      if (wait <= 0) break;
      await sleep(this.clock, Math.ceil(wait));
    }
    this.lastStartMs = this.clock.now();
  }

  /**
   * Queues an upload of `file`, replacing a queued or running one: that one is stopped first, and the new
   * one starts once it has. The new task is registered at once (before this returns), so a settle() right
   * after waits for it (regression: while the one it replaced was stopping, the file had no task, and a
   * flush took its upload for done).
   */
  async enqueue(file: PendingFile): Promise<void> {
    if (this.closed) return;
    const before = this.tasks.get(file.id);
    const task: Task = {
      file, cancelled: false, failedSinceMark: false,
      status: { id: file.id, library: file.library, fullpath: file.fullpath, state: 'queued', failures: 0, queuedMs: this.clock.now() },
    };
    this.tasks.set(file.id, task);
    if (before) await this.stop(before);
    // Cancelled meanwhile (it left the tasks then), or the queue closed.
    if (task.cancelled || this.closed) return;
    this.schedule(task);
  }

  /** The state of this file's upload; undefined when none is queued, running or waiting. */
  stateOf(id: string): UploadState | undefined {
    return this.tasks.get(id)?.status.state;
  }

  /** True when an upload of this file is queued, running or waiting to retry. */
  has(id: string): boolean {
    return this.tasks.has(id);
  }

  /**
   * Stops the file's upload (queued, running or waiting); resolves when a running attempt has ended.
   * `answered`: a commit under way is not cut off where the service may take it all the same (its request
   * sent whole, its answer on the way): the answer is waited for, so that what the service holds at the
   * path is known once this resolves. It is cut off at its next part instead, where nothing can land, or
   * once it waited `answerWaitMs` (a silent service: the caller, an unlink, never hangs on it).
   */
  async cancel(id: string, opts: { answered?: boolean } = {}): Promise<void> {
    const task = this.tasks.get(id);
    if (!task) return;
    this.tasks.delete(id);
    await this.stop(task, opts);
  }

  /** Stops `task`, no longer among the tasks (see cancel). */
  private async stop(task: Task, opts: { answered?: boolean } = {}): Promise<void> {
    task.cancelled = true;
    task.timer?.cancel();
    const reason = new VfsError('EBUSY', 'upload cancelled: the file changed');
    const abort = task.abort;
    let bound: ClockTimer | undefined;
    if (opts.answered && abort && task.status.state === 'uploading') {
      task.cutAtPart = () => abort.abort(reason);
      this.answering.add(task);
      bound = this.clock.after(this.opts.answerWaitMs ?? 5_000, () => abort.abort(reason));
    } else abort?.abort(reason);
    this.counters.cancelled++;
    await task.attempt?.catch(() => undefined);
    bound?.cancel();
    this.answering.delete(task);
    this.notify();
  }

  status(): UploadStatus[] {
    return [...this.tasks.values()].map((t) => ({ ...t.status, fullpath: t.file.fullpath, library: t.file.library }));
  }

  get pending(): number {
    return this.tasks.size;
  }

  /** Attempts waiting out a retry delay, and uploads the service refused, start now (the service is back). */
  retryNow(library?: string): void {
    for (const task of this.tasks.values()) {
      if (!(task.timer || task.status.state === 'failed') || (library !== undefined && task.file.library !== library)) continue;
      this.restart(task);
    }
  }

  /** Uploads the service refused start again (a flush asks for them). */
  retryFailed(): void {
    for (const task of this.tasks.values()) if (task.status.state === 'failed') this.restart(task);
  }

  private restart(task: Task): void {
    task.timer?.cancel();
    task.timer = undefined;
    task.status.state = 'queued';
    task.status.nextAttemptMs = undefined;
    this.schedule(task);
  }

  /** Tasks that failed at least once since the last settle() began (still queued for retry). */
  failedSinceMark(): UploadStatus[] {
    return [...this.tasks.values()].filter((t) => t.failedSinceMark).map((t) => ({ ...t.status, fullpath: t.file.fullpath, library: t.file.library }));
  }

  /**
   * Resolves when every task present has been confirmed by the service, or has failed at least once since
   * this call (it stays queued for retry), or after `timeoutMs`.
   */
  async settle(timeoutMs?: number): Promise<void> {
    for (const t of this.tasks.values()) t.failedSinceMark = false;
    const deadline = timeoutMs === undefined ? Infinity : this.clock.now() + timeoutMs;
    // Asked for (a flush): full width, whatever the foreground does.
    this.settling++;
    this.pace();
    try {
      while (this.tasks.size > 0 && [...this.tasks.values()].some((t) => !t.failedSinceMark)) {
        const left = deadline - this.clock.now();
        if (left <= 0) return;
        await new Promise<void>((resolve) => {
          const t = left === Infinity ? undefined : this.clock.after(left, done);
          function done(): void { t?.cancel(); resolve(); }
          this.waiters.add(() => { done(); });
        });
      }
    } finally {
      this.settling--;
    }
  }

  /** Closed: nothing is uploaded any more (the gateway is stopping). */
  get stopped(): boolean {
    return this.closed;
  }

  /** Stops scheduling; running attempts are aborted (the journal keeps their data). */
  async close(): Promise<void> {
    this.closed = true;
    this.paceTimer?.cancel();
    this.paceTimer = undefined;
    const running = [...this.tasks.values()];
    for (const t of running) {
      t.cancelled = true;
      t.timer?.cancel();
      t.abort?.abort(new VfsError('EIO', 'gateway closing'));
    }
    for (const t of this.answering) t.abort?.abort(new VfsError('EIO', 'gateway closing'));
    this.queue.clear();
    this.smallQueue.clear();
    await Promise.all(running.map((t) => t.attempt?.catch(() => undefined)));
    this.tasks.clear();
    this.notify();
  }

  private schedule(task: Task): void {
    this.pace();
    const lane = task.file.size <= this.smallMaxBytes ? this.smallQueue : this.queue;
    void lane.add(async () => {
      await this.turn();
      // One commit at a time at a path, in order: a stopped one still landing after a newer version's
      // would put the older content over it (regression: a replace committed while the upload it
      // superseded was under way, then undone by that one).
      const key = `${task.file.library}\0${task.file.fullpath}`;
      for (let before = this.atPath.get(key); before; before = this.atPath.get(key)) await before;
      if (task.cancelled || this.closed) return;
      const attempt = this.attempt(task);
      const settled = attempt.catch(() => undefined);
      task.attempt = attempt;
      this.atPath.set(key, settled);
      try {
        await attempt;
      } finally {
        if (this.atPath.get(key) === settled) this.atPath.delete(key);
      }
    });
  }

  private async attempt(task: Task): Promise<void> {
    const { file } = task;
    const snapshot = { generation: file.generation, fullpath: file.fullpath, library: file.library };
    const abort = new AbortController();
    task.abort = abort;
    try {
      const remote = this.opts.remoteFor(snapshot.library);
      if (!remote) throw new VfsError('ENOENT', `library '${snapshot.library}' is not configured`);
      task.status.state = 'hashing';
      const held = file.heldContent?.();
      const { sha1, size, generation } = held ?? await file.snapshotHash(this.opts.hasher);
      snapshot.generation = generation;
      if (task.cancelled) return;
      task.status.state = 'uploading';
      task.status.size = size;
      task.status.sentBytes = 0;
      task.status.progressMs = this.clock.now();
      const source: CommitSource = { path: file.spoolPath, size, sha1, data: held?.data };
      const commitOpts: CommitOptions = {
        operator: file.operator, signal: abort.signal,
        onProgress: (sent) => {
          if (sent !== task.status.sentBytes) task.status.progressMs = this.clock.now();
          task.status.sentBytes = sent;
          // Between two parts (or mid-body): the rest is not sent, so the service cannot take the file.
          if (sent < size) task.cutAtPart?.();
        },
      };
      const entry = await (this.opts.commit ? this.opts.commit(file, remote, snapshot.fullpath, source, commitOpts, task.status.failures > 0) : remote.commit(snapshot.fullpath, source, commitOpts));
      if (task.cancelled) {
        if (!this.closed) await this.opts.onCommittedAfterCancel?.(file, entry, snapshot);
        return;
      }
      await this.opts.onCommitted(file, entry, snapshot);
      this.counters.committed++;
      if (this.tasks.get(file.id) === task) this.tasks.delete(file.id);
      this.opts.logger.debug({ library: snapshot.library, path: snapshot.fullpath, size }, 'upload committed');
    } catch (err) {
      if (task.cancelled || this.closed) return;
      const failures = ++task.status.failures;
      this.counters.failures++;
      const delay = Math.min(this.opts.retryMaxMs ?? 30_000, (this.opts.retryBaseMs ?? 1000) * 2 ** Math.min(failures - 1, 20));
      task.status.lastError = (err as Error).message ?? String(err);
      task.status.lastErrorCode = err instanceof VfsError ? err.code : 'EIO';
      task.failedSinceMark = true;
      const missingParent = err instanceof VfsError && err.code === 'ENOENT' && this.opts.onMissingParent !== undefined;
      if (!missingParent && !isTransient(err)) {
        const later = this.opts.refusedRetryMs ?? 600_000;
        task.status.state = 'failed';
        task.status.nextAttemptMs = this.clock.now() + later;
        this.opts.logger.warn({ library: snapshot.library, path: snapshot.fullpath, failures, retryInMs: later, err: task.status.lastError }, 'upload refused by the service; kept in the journal, asked again at a flush, at the service\'s return or later');
        task.timer = this.clock.after(later, () => {
          task.timer = undefined;
          if (task.cancelled || this.closed || task.status.state !== 'failed') return;
          this.restart(task);
        });
        return;
      }
      task.status.state = 'retrying';
      task.status.nextAttemptMs = this.clock.now() + delay;
      this.opts.logger.warn({ library: snapshot.library, path: snapshot.fullpath, failures, retryInMs: delay, err: task.status.lastError }, 'upload failed, will retry');
      if (missingParent) await this.opts.onMissingParent!(file).catch(() => undefined);
      task.timer = this.clock.after(delay, () => {
        task.timer = undefined;
        if (task.cancelled || this.closed) return;
        task.status.state = 'queued';
        this.schedule(task);
      });
    } finally {
      task.abort = undefined;
      this.notify();
    }
  }

  private notify(): void {
    const ws = [...this.waiters];
    this.waiters.clear();
    for (const w of ws) w();
  }
}
