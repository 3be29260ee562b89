/**
 * A bandwidth limit as rclone's `--bwlimit` has it: a token bucket of bytes shared by the transfers it
 * limits, `RATE` for both directions together or `UP:DOWN` for each on its own (`10M`, `512k`, `10M:2M`;
 * binary units, bytes a second; `off` or 0 for none). Transfers take their bytes from the bucket before
 * they move them; the bucket fills at the rate, up to one second's worth, and starts empty.
 */
import { Transform, type Readable } from 'node:stream';

/** The time the bucket reads: the current time and one-shot timers (the Vfs's Clock fits). */
export interface LimitClock {
  now(): number;
  after(ms: number, fn: () => void): { cancel(): void };
}

const realClock: LimitClock = {
  now: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(t) };
  },
};

/** What a bucket did: bytes taken, takes that had to wait, and the time they waited in all (ms). */
export interface BucketCounters {
  bytes: number;
  waits: number;
  waitedMs: number;
}

interface Waiter {
  left: number;
  since: number;
  waited: boolean;
  resolve: () => void;
}

export class TokenBucket {
  readonly counters: BucketCounters = { bytes: 0, waits: 0, waitedMs: 0 };
  private tokens = 0;
  private last: number;
  private readonly burst: number;
  private readonly waiting: Waiter[] = [];
  private timer: { cancel(): void } | undefined;

  constructor(readonly bytesPerSecond: number, private readonly clock: LimitClock = realClock) {
    if (!Number.isFinite(bytesPerSecond) || bytesPerSecond <= 0) throw new RangeError(`bandwidth limit: expected bytes a second > 0, got ${bytesPerSecond}`);
    this.burst = Math.max(1, Math.floor(bytesPerSecond));
    this.last = clock.now();
  }

  /** Resolves once `bytes` may move; takes are served in the order they came. */
  take(bytes: number): Promise<void> {
    if (!(bytes > 0)) return Promise.resolve();
    this.counters.bytes += bytes;
    return new Promise((resolve) => {
      this.waiting.push({ left: bytes, since: this.clock.now(), waited: false, resolve });
      this.pump();
    });
  }

  private pump(): void {
    if (this.timer) return;
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.bytesPerSecond) / 1000);
    this.last = now;
    while (this.waiting.length > 0) {
      const w = this.waiting[0]!;
      // A take larger than the bucket holds goes in pieces of at most a bucketful.
      const piece = Math.min(w.left, this.burst);
      if (this.tokens >= piece) {
        this.tokens -= piece;
        w.left -= piece;
        if (w.left > 0) continue;
        this.waiting.shift();
        if (w.waited) this.counters.waitedMs += now - w.since;
        w.resolve();
        continue;
      }
      if (!w.waited) {
        w.waited = true;
        this.counters.waits++;
      }
      const ms = Math.max(1, Math.ceil(((piece - this.tokens) * 1000) / this.bytesPerSecond));
      this.timer = this.clock.after(ms, () => {
        this.timer = undefined;
        this.pump();
      });
      return;
    }
  }
}

/** The buckets of one limit: `upload` and `download` (the same bucket when one rate limits both). */
export interface BandwidthLimit {
  upload?: TokenBucket;
  download?: TokenBucket;
}

const UNITS: Record<string, number> = { '': 1024, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** Bytes a second of one rate (`10M`, `512k`, `1.5G`, `100b`; a bare number is KiB as rclone's); 0 for `off`. */
export function parseRate(text: string): number {
  const t = text.trim().toLowerCase();
  if (t === 'off' || t === '0') return 0;
  const m = /^(\d+(?:\.\d+)?)([bkmgt]?)(?:i?b)?(?:\/s)?$/.exec(t);
  if (!m) throw new Error(`bandwidth limit: expected a rate such as 10M, 512k or off, got '${text}'`);
  const bytes = Math.floor(Number(m[1]) * UNITS[m[2]!]!);
  if (!Number.isSafeInteger(bytes)) throw new Error(`bandwidth limit: rate too large: '${text}'`);
  return bytes;
}

/** The rates of a `--bwlimit` value: `RATE` (both directions together) or `UP:DOWN` (each on its own); 0 = unlimited. */
export function parseBandwidthLimit(text: string): { upload: number; download: number; shared: boolean } {
  const parts = text.split(':');
  if (parts.length > 2) throw new Error(`bandwidth limit: expected RATE or UP:DOWN (e.g. 10M:2M), got '${text}' (timetables are not supported)`);
  if (parts.length === 1) {
    const rate = parseRate(parts[0]!);
    return { upload: rate, download: rate, shared: true };
  }
  return { upload: parseRate(parts[0]!), download: parseRate(parts[1]!), shared: false };
}

/** The buckets of a `--bwlimit` value (undefined where a direction is unlimited). */
export function bandwidthLimitOf(text: string, clock?: LimitClock): BandwidthLimit {
  const r = parseBandwidthLimit(text);
  if (r.shared) {
    const both = r.upload > 0 ? new TokenBucket(r.upload, clock) : undefined;
    return { upload: both, download: both };
  }
  return { upload: r.upload > 0 ? new TokenBucket(r.upload, clock) : undefined, download: r.download > 0 ? new TokenBucket(r.download, clock) : undefined };
}

/** `source` with each chunk passed on once `bucket` lets its bytes move (the source as is without a bucket). */
export function throttled(source: Readable, bucket: TokenBucket | undefined): Readable {
  if (!bucket) return source;
  const out = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      bucket.take(chunk.length).then(() => cb(null, chunk), cb);
    },
  });
  source.on('error', (err) => out.destroy(err));
  out.on('close', () => {
    if (!source.destroyed) source.destroy();
  });
  return source.pipe(out);
}
