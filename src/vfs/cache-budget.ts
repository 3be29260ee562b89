/**
 * CacheBudget: the one limit on content cached on this machine's disk. The content cache may hold at most
 * `maxBytes`, and less when the disk it lives on gets full: it always leaves `minFreeFraction` of that
 * disk free (as mountpoint-s3 keeps 5 %). Content that must stay — pinned ("keep on this machine") or open
 * — is never chosen for eviction: `keeps(hash)` says which. Content waiting to upload is not the cache's
 * (it lives in the write-back's journal) and so is never evicted either.
 */
import { statfs } from 'node:fs/promises';
import { systemClock, type Clock } from './clock.js';

export interface CacheBudgetOptions {
  /** Folder of the cache (the disk whose free space is watched). */
  dir: string;
  /** Bytes the cache may hold at most. */
  maxBytes: number;
  /** Share of the disk kept free, 0..1. Default 0.05. */
  minFreeFraction?: number;
  /** Free and total bytes of the disk holding `dir` (tests give their own). Default: statfs. */
  diskSpace?: (dir: string) => Promise<{ free: number; total: number }>;
  /** The time the disk's figure ages in (DISK_TTL_MS). Default the real one. */
  clock?: Clock;
}

/** How long the disk's free space is trusted before it is asked again, ms. */
const DISK_TTL_MS = 1000;
/** Bytes written after which the disk's free space is asked again whatever its age. */
const DISK_RECHECK_BYTES = 16 * 1024 * 1024;

export class CacheBudget {
  readonly maxBytes: number;
  readonly minFreeFraction: number;
  private readonly diskSpace: (dir: string) => Promise<{ free: number; total: number }>;
  /** Open contents, by hash: how many handles read each. */
  private readonly open = new Map<string, number>();
  /** Says whether a content is pinned (set by the pins' owner). */
  private pinned: (hash: string) => boolean = () => false;
  private disk: { free: number; total: number; atMs: number; heldAt: number } | undefined;

  constructor(private readonly opts: CacheBudgetOptions) {
    this.maxBytes = opts.maxBytes;
    this.minFreeFraction = opts.minFreeFraction ?? 0.05;
    if (!Number.isFinite(this.maxBytes) || this.maxBytes < 0) throw new TypeError(`maxBytes: expected a number of bytes >= 0, got ${opts.maxBytes}`);
    if (!(this.minFreeFraction >= 0 && this.minFreeFraction < 1)) throw new TypeError(`minFreeFraction: expected a share from 0 to below 1, got ${opts.minFreeFraction}`);
    this.diskSpace = opts.diskSpace ?? (async (d) => {
      const s = await statfs(d);
      return { free: s.bavail * s.bsize, total: s.blocks * s.bsize };
    });
  }

  /** Which pinned contents must stay (the pins' owner gives it once). */
  setPinned(pinned: (hash: string) => boolean): void {
    this.pinned = pinned;
  }

  /** Marks a content open until the returned function is called. */
  hold(hash: string | undefined): () => void {
    if (!hash) return () => undefined;
    this.open.set(hash, (this.open.get(hash) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.open.get(hash) ?? 1) - 1;
      if (left > 0) this.open.set(hash, left);
      else this.open.delete(hash);
    };
  }

  /** True when the content must not be evicted (pinned or open). */
  keeps(hash: string): boolean {
    return this.open.has(hash) || this.pinned(hash);
  }

  isOpen(hash: string): boolean {
    return this.open.has(hash);
  }

  /**
   * Bytes the cache may hold now that it holds `held`: `maxBytes`, or less when the disk would keep less
   * than its free share. Asks the disk again when its figure is old or much was written since.
   */
  async limit(held: number): Promise<number> {
    const d = this.disk;
    const clock = this.opts.clock ?? systemClock;
    if (!d || clock.now() - d.atMs > DISK_TTL_MS || Math.abs(held - d.heldAt) > DISK_RECHECK_BYTES) {
      try {
        const s = await this.diskSpace(this.opts.dir);
        this.disk = { ...s, atMs: clock.now(), heldAt: held };
      } catch {
        this.disk = undefined; // the disk cannot be asked: the configured limit alone
        return this.maxBytes;
      }
    }
    return this.limitNow(held);
  }

  /** As `limit`, from the disk's figure already known (never waits). */
  limitNow(held: number): number {
    const d = this.disk;
    if (!d) return this.maxBytes;
    // What the disk has free once the cache's own growth since it was asked is taken off.
    const free = d.free - Math.max(0, held - d.heldAt);
    const room = held + free - this.minFreeFraction * d.total;
    return Math.max(0, Math.min(this.maxBytes, Math.floor(room)));
  }
}
