/**
 * UploadBackpressure: a bound on the bytes written on this machine and not yet on the service, so that
 * writes faster than the uploads (or made while the service is away) do not fill the disk. A write that
 * would take the bytes waiting to upload past the bound waits for uploads to make room, at most `waitMs`,
 * then fails with ENOSPC; a file larger than the bound on its own can never fit and fails at once.
 *
 * The bytes waiting are the sizes of the files in the upload queue (closed and journaled); the file being
 * written counts with its size so far. Files waiting for the write-back delay are not in the queue yet.
 */
import { sleep, systemClock, type Clock } from './clock.js';
import { VfsError, type CallContext } from './types.js';

export interface UploadBackpressureOptions {
  /** Bytes waiting to upload at most; 0 = no bound. */
  maxBytes: number;
  /** Bytes in the upload queue now. */
  pendingBytes: () => number;
  /** Longest a writer waits for room, ms. Default 30 000 (within the mount's deadline of a write). */
  waitMs?: number;
  /** How often the queue is looked at while a writer waits, ms. Default 50. */
  pollMs?: number;
  /** The time of the writers' wait and of the queue's figure. Default the real one. */
  clock?: Clock;
}

/** The queue's figure is trusted this long between writes, ms (it is summed over every upload). */
const PENDING_TTL_MS = 20;

export class UploadBackpressure {
  private readonly waitMs: number;
  private readonly pollMs: number;
  private readonly clock: Clock;
  private pending: { bytes: number; atMs: number } | undefined;
  /** Writers waiting now (status). */
  waiting = 0;

  constructor(private readonly opts: UploadBackpressureOptions) {
    this.waitMs = opts.waitMs ?? 30_000;
    this.pollMs = opts.pollMs ?? 50;
    this.clock = opts.clock ?? systemClock;
    if (!Number.isFinite(opts.maxBytes) || opts.maxBytes < 0) throw new TypeError(`maxBytes: expected a number of bytes >= 0, got ${opts.maxBytes}`);
  }

  /**
   * Room for a file of `size` bytes being written at `path`: waits while the queue and it pass the bound
   * (not with `wait: false`); ENOSPC when it never fits, or no room came in time.
   */
  async admit(path: string, size: number, ctx?: CallContext, opts: { wait?: boolean } = {}): Promise<void> {
    const max = this.opts.maxBytes;
    if (max <= 0) return;
    if (size > max) throw new VfsError('ENOSPC', `${path}: ${size} bytes can never fit in what may wait to upload on this machine (${max} bytes, journal.max_pending_mb)`);
    if (opts.wait === false || this.queued() + size <= max) return;
    const deadline = this.clock.now() + this.waitMs;
    this.waiting++;
    try {
      while (this.queued(true) + size > max) {
        ctx?.signal?.throwIfAborted();
        if (this.clock.now() >= deadline) {
          throw new VfsError('ENOSPC', `${path}: ${this.queued()} bytes wait to upload on this machine and ${size} more do not fit (${max} bytes, journal.max_pending_mb); nothing made room within ${Math.round(this.waitMs / 1000)} s`);
        }
        await sleep(this.clock, this.pollMs);
      }
    } finally {
      this.waiting--;
    }
  }

  private queued(fresh = false): number {
    const p = this.pending;
    const now = this.clock.now();
    if (fresh || !p || now - p.atMs > PENDING_TTL_MS) this.pending = { bytes: this.opts.pendingBytes(), atMs: now };
    return this.pending!.bytes;
  }
}
