/**
 * ContentCache: an optional on-disk cache of file content keyed by content hash (SHA-1), so content that
 * has not changed is never fetched twice, even across restarts and renames. Each content is a sparse file
 * plus a sidecar listing the byte ranges present. Bounded by total bytes; whole contents are evicted,
 * least recently used first.
 *
 * Writes are queued and done in the background, in the pieces the bytes arrived in (no copy, no join);
 * queued writes that follow on from each other go out as one writev (on libuv's pool: the reader's
 * thread never copies them). Bytes waiting to be written are bounded too: when the disk falls behind
 * the network, what does not fit is not cached (counted in `skippedBytes`) rather than held in memory
 * or waited for; a caller that waits for each of its writes (a pin's fetch: `keep`) is never let go.
 *
 * With a CacheBudget the limit is a hard one on what the cache holds on disk: each content counts the
 * 4 KiB pages its ranges take plus two pages for its sidecar (and its replacement), room is reserved before a byte is written,
 * the limit shrinks when the disk would keep less than its free share, and contents the budget keeps
 * (pinned, open) are never evicted: what does not fit beside them is not cached.
 */
import { mkdir, open, readFile, readdir, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { constants } from 'node:fs';
import { writeFileAtomic } from '../shared/atomic-file.js';
import type { Logger } from '../shared/log.js';
import { addRange, covers, rangeBytes, skipBytes, type ByteRange } from './byte-ranges.js';
import type { LocalRange } from './engine-lease.js';
import { systemClock, type Clock } from './clock.js';
import type { CacheBudget } from './cache-budget.js';

export interface ContentCacheOptions {
  /** Folder of the cache. */
  dir: string;
  /** Bytes kept on disk at most. Default 1 GiB. */
  maxBytes?: number;
  /** Bytes waiting to be written at most; beyond that, writes are skipped. Default 64 MiB. */
  maxPendingBytes?: number;
  /** The time of the sidecars' saves. Default the real one. */
  clock?: Clock;
  /** The limit, and the contents never evicted; without one, `maxBytes` and none. */
  budget?: CacheBudget;
  /** Told after each eviction (its files removed), with what the cache holds then by its own count. */
  onEvicted?: (e: { hash: string; freedBytes: number; heldBytes: number; limitBytes: number }) => void;
  logger: Logger;
}

type Range = ByteRange;

interface QueuedWrite { position: number; parts: readonly Buffer[]; length: number }

/** Most pieces (iovecs) and bytes in one writev when queued writes are joined up. */
const MAX_IOV = 1024;
const MAX_WRITE_BYTES = 16 * 1024 * 1024;

interface Item { hash: string; ranges: Range[]; bytes: number; held: number; lastUse: number; fh?: FileHandle; sidecarDirty: boolean; savedAtMs: number }

/** Disk pages are counted in this size. */
const PAGE = 4096;

/**
 * Bytes a content with these ranges takes on disk at most: its ranges' pages, and two pages of sidecar
 * (the sidecar and its replacement, for the moment both exist while it is replaced atomically).
 */
function heldBytes(ranges: readonly Range[]): number {
  let n = 2 * PAGE;
  for (const [s, e] of ranges) n += Math.ceil(e / PAGE) * PAGE - Math.floor(s / PAGE) * PAGE;
  return n;
}

/** The sidecar of a content being written is saved at most this often (and on close), ms. */
const SIDECAR_EVERY_MS = 1000;

const HASH_RE = /^[0-9a-f]{40}$/;

/** The first `n` bytes of `parts`, as pieces of them (nothing copied). */
function takeBytes(parts: readonly Buffer[], n: number): Buffer[] {
  const out: Buffer[] = [];
  for (const p of parts) {
    if (n <= 0) break;
    out.push(p.length <= n ? p : p.subarray(0, n));
    n -= p.length;
  }
  return out;
}

export class ContentCache {
  private readonly items = new Map<string, Item>();
  private readonly maxBytes: number;
  private readonly maxPendingBytes: number;
  private total = 0;
  /** Bytes on disk (and reserved for writes under way), as heldBytes counts them. */
  private held = 0;
  private pendingBytes = 0;
  /** Contents with a write under way (from its room being reserved to its end): never evicted meanwhile. */
  private readonly writing = new Set<string>();
  private useClock = 0;
  /** Writes waiting, per content, and the loop writing them out (one at a time per content). */
  private readonly queues = new Map<string, { writes: QueuedWrite[]; drained: Promise<void> }>();
  readonly counters = { hits: 0, misses: 0, writtenBytes: 0, skippedBytes: 0, evictions: 0 };

  constructor(private readonly opts: ContentCacheOptions) {
    this.maxBytes = opts.maxBytes ?? 1024 * 1024 * 1024;
    this.maxPendingBytes = opts.maxPendingBytes ?? 64 * 1024 * 1024;
  }

  /** Loads what a previous run left. */
  async init(): Promise<void> {
    await mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.opts.dir)) {
      if (!name.endsWith('.ranges')) continue;
      const hash = name.slice(0, -'.ranges'.length);
      if (!HASH_RE.test(hash)) continue;
      try {
        const ranges = JSON.parse(await readFile(join(this.opts.dir, name), 'utf8')) as Range[];
        const bytes = rangeBytes(ranges);
        const held = heldBytes(ranges);
        this.items.set(hash, { hash, ranges, bytes, held, lastUse: 0, sidecarDirty: false, savedAtMs: 0 });
        this.total += bytes;
        this.held += held;
      } catch { /* a torn sidecar: ignore the content */ }
    }
  }

  /** True when `[start, end)` of the content is on disk. */
  has(hash: string | undefined, start: number, end: number): boolean {
    if (!hash) return false;
    const item = this.items.get(hash);
    const hit = !!item && covers(item.ranges, start, end);
    if (hit) this.counters.hits++;
    else this.counters.misses++;
    return hit;
  }

  /** Reads `[start, end)`; call only after `has()` said yes. */
  async read(hash: string, start: number, end: number): Promise<Buffer> {
    const item = this.items.get(hash);
    if (!item) throw new Error(`content ${hash} is not cached`);
    item.lastUse = ++this.useClock;
    const fh = await this.handle(item);
    const buf = Buffer.allocUnsafe(end - start);
    let done = 0;
    while (done < buf.length) {
      const { bytesRead } = await fh.read(buf, done, buf.length - done, start + done);
      if (bytesRead === 0) break;
      done += bytesRead;
    }
    return buf.subarray(0, done);
  }

  /**
   * Where `[start, end)` of the content is on disk right now, when all of it is and the content's file is
   * open (after a first read or write of it in this run): its descriptor and the range, counted as a hit.
   * The descriptor stays valid until the caller's next await (an eviction first forgets the content, then
   * closes the file); undefined otherwise, nothing counted.
   */
  localRange(hash: string | undefined, start: number, end: number): LocalRange | undefined {
    const item = hash ? this.items.get(hash) : undefined;
    if (!item?.fh || end <= start || !covers(item.ranges, start, end)) return undefined;
    item.lastUse = ++this.useClock;
    this.counters.hits++;
    return { fd: item.fh.fd, position: start, length: end - start };
  }

  /**
   * The descriptor of the content's file when all `size` bytes of it are on disk (opened if it was not
   * yet), for a reader that reads the file itself; undefined otherwise (or for an empty content, which
   * has no file). The caller holds the content (CacheBudget.hold) for as long as it reads: a complete
   * content's file is never written again, and a held one is never evicted.
   */
  async wholeFile(hash: string | undefined, size: number): Promise<number | undefined> {
    const item = hash ? this.items.get(hash) : undefined;
    if (!item || !(size > 0) || !covers(item.ranges, 0, size)) return undefined;
    const fh = await this.handle(item);
    if (this.items.get(item.hash) !== item || item.fh !== fh) return undefined; // evicted meanwhile
    item.lastUse = ++this.useClock;
    this.counters.hits++;
    return fh.fd;
  }

  /**
   * Stores bytes at `position`, the pieces one after the other, in the background (failures are only
   * logged). The pieces are kept as they are until written: the caller must not change them afterwards.
   * Bytes passing on their way to a reader are let go when more than `maxPendingBytes` wait already;
   * `keep` (a caller that waits for each write, as a pin's fetch does, and so bounds them itself): never
   * let go for that.
   */
  write(hash: string | undefined, position: number, pieces: Buffer | readonly Buffer[], opts: { keep?: boolean } = {}): Promise<void> {
    const parts = Buffer.isBuffer(pieces) ? [pieces] : pieces;
    let length = 0;
    for (const p of parts) length += p.length;
    if (!hash || !HASH_RE.test(hash) || length === 0 || length > this.maxBytes) return Promise.resolve();
    if (!opts.keep && this.pendingBytes + length > this.maxPendingBytes) {
      this.counters.skippedBytes += length;
      return Promise.resolve();
    }
    this.pendingBytes += length;
    const queued = this.queues.get(hash);
    if (queued) {
      queued.writes.push({ position, parts, length });
      return queued.drained;
    }
    const queue = { writes: [{ position, parts, length }], drained: Promise.resolve() };
    this.queues.set(hash, queue);
    queue.drained = this.drain(hash, queue.writes);
    return queue.drained;
  }

  /**
   * Writes out the queue of one content, joining writes that follow on from each other into one writev
   * (sequential reads queue many small ones while one is being written).
   */
  private async drain(hash: string, writes: QueuedWrite[]): Promise<void> {
    while (writes.length > 0) {
      const first = writes.shift()!;
      let parts = [...first.parts];
      let length = first.length;
      while (writes.length > 0 && writes[0]!.position === first.position + length
        && parts.length + writes[0]!.parts.length <= MAX_IOV && length + writes[0]!.length <= MAX_WRITE_BYTES) {
        const next = writes.shift()!;
        parts = parts.concat(next.parts);
        length += next.length;
      }
      try {
        await this.doWrite(hash, first.position, parts, length);
      } catch (err) {
        this.opts.logger.warn({ err: (err as Error).message, hash }, 'content cache: write failed');
      } finally {
        this.writing.delete(hash);
        this.pendingBytes -= length;
      }
    }
    this.queues.delete(hash); // at once when empty: a write queued later starts a new loop
  }

  stats(): { contents: number; bytes: number; heldBytes: number; maxBytes: number; limitBytes: number; hits: number; misses: number; writtenBytes: number; skippedBytes: number; evictions: number } {
    return { contents: this.items.size, bytes: this.total, heldBytes: this.held, maxBytes: this.maxBytes, limitBytes: this.limitNow(), ...this.counters };
  }

  /** True when all `size` bytes of the content are on disk (nothing counted: not a read). */
  complete(hash: string | undefined, size: number): boolean {
    const item = hash ? this.items.get(hash) : undefined;
    return size === 0 || (!!item && covers(item.ranges, 0, size));
  }

  /** Saves the content's sidecar now (a content that must survive a crash right after it was fetched). */
  async persist(hash: string): Promise<void> {
    await this.queues.get(hash)?.drained;
    const item = this.items.get(hash);
    if (item?.sidecarDirty) await this.saveSidecar(item);
  }

  /** Bytes the content takes on disk (0 when none of it is there). */
  heldOf(hash: string): number {
    return this.items.get(hash)?.held ?? 0;
  }

  /** What the cache may hold now (its budget's limit as last known, else `maxBytes`). */
  limitNow(): number {
    return this.opts.budget ? this.opts.budget.limitNow(this.held) : this.maxBytes;
  }

  /**
   * Drops one content (free up space), unless the budget keeps it or a write of it is under way. Returns
   * the bytes it took on disk (0: nothing dropped).
   */
  async drop(hash: string): Promise<number> {
    const item = this.items.get(hash);
    if (!item || this.writing.has(hash) || this.opts.budget?.keeps(hash)) return 0;
    await this.forget(item);
    return item.held;
  }

  /** Forgets a content at once (then closes and removes its files). */
  private async forget(victim: Item): Promise<void> {
    this.items.delete(victim.hash);
    this.total -= victim.bytes;
    this.held -= victim.held;
    await victim.fh?.close().catch(() => undefined);
    await rm(join(this.opts.dir, `${victim.hash}.ranges`), { force: true });
    await rm(join(this.opts.dir, `${victim.hash}.data`), { force: true });
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.drained));
    for (const item of this.items.values()) {
      if (item.sidecarDirty) await this.saveSidecar(item).catch(() => undefined);
      await item.fh?.close().catch(() => undefined);
      item.fh = undefined;
    }
  }

  private async doWrite(hash: string, position: number, parts: readonly Buffer[], length: number): Promise<void> {
    let item = this.items.get(hash);
    if (!item) {
      item = { hash, ranges: [], bytes: 0, held: heldBytes([]), lastUse: ++this.useClock, sidecarDirty: false, savedAtMs: 0 };
      this.items.set(hash, item);
      this.held += item.held;
    }
    if (covers(item.ranges, position, position + length)) return;
    // Room first: older contents are evicted for these bytes; a content that would overrun the limit on
    // its own stops being cached (what it has stays), the limit is never exceeded. The room is reserved
    // before the write (other contents are written meanwhile).
    const growthOf = (n: number): number => heldBytes(addRange(item.ranges, position, position + n)) - item.held;
    let growth = growthOf(length);
    const limit = this.opts.budget ? await this.opts.budget.limit(this.held) : this.maxBytes;
    await this.evict(hash, growth, limit);
    if (this.held + growth > limit && this.items.has(hash)) {
      // What fits of it (its first bytes) is written; the rest is let go. Writes queued while one
      // was under way go out joined, and a join larger than the room would otherwise be lost whole.
      const fits = this.fittingPrefix(length, limit - this.held, growthOf);
      if (fits > 0) {
        this.counters.skippedBytes += length - fits;
        parts = takeBytes(parts, fits);
        length = fits;
        growth = growthOf(fits);
      }
    }
    if (this.held + growth > limit || !this.items.has(hash)) {
      this.counters.skippedBytes += length;
      if (item.ranges.length === 0 && this.items.get(hash) === item) {
        this.items.delete(hash);
        this.held -= item.held;
      }
      return;
    }
    item.held += growth;
    this.held += growth;
    this.writing.add(hash);
    const fh = await this.handle(item);
    let rest = parts;
    for (let at = position, end = position + length; at < end;) {
      const { bytesWritten } = await fh.writev(rest, at);
      if (bytesWritten === 0) throw new Error(`writing the cached content at ${at}: nothing written`);
      at += bytesWritten;
      rest = skipBytes(rest, bytesWritten);
    }
    const before = item.bytes;
    item.ranges = addRange(item.ranges, position, position + length);
    item.bytes = rangeBytes(item.ranges);
    item.lastUse = ++this.useClock;
    this.total += item.bytes - before;
    this.counters.writtenBytes += item.bytes - before;
    item.sidecarDirty = true;
    const now = (this.opts.clock ?? systemClock).now();
    if (now - item.savedAtMs >= SIDECAR_EVERY_MS) await this.saveSidecar(item);
  }

  /** The most bytes of a write of `length` whose growth fits in `room` (0: none), whole pages of it. */
  private fittingPrefix(length: number, room: number, growthOf: (n: number) => number): number {
    let lo = 0;
    let hi = Math.floor(length / PAGE);
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (growthOf(mid * PAGE) <= room) lo = mid;
      else hi = mid - 1;
    }
    return lo * PAGE;
  }

  private async handle(item: Item): Promise<FileHandle> {
    if (!item.fh) item.fh = await open(join(this.opts.dir, `${item.hash}.data`), constants.O_RDWR | constants.O_CREAT, 0o600);
    return item.fh;
  }

  private async saveSidecar(item: Item): Promise<void> {
    const file = join(this.opts.dir, `${item.hash}.ranges`);
    // A cache: after a power loss a lost or older sidecar only costs fetching again.
    await writeFileAtomic(file, JSON.stringify(item.ranges), { durability: 'rename', mode: 0o600 });
    item.sidecarDirty = false;
    item.savedAtMs = (this.opts.clock ?? systemClock).now();
  }

  /**
   * Evicts whole contents, least recently used first, until `incoming` more bytes fit in `limit` (never
   * `keep`, a content with a write under way, or one the budget keeps).
   */
  private async evict(keep: string, incoming: number, limit: number): Promise<void> {
    const budget = this.opts.budget;
    while (this.held + incoming > limit) {
      let victim: Item | undefined;
      for (const item of this.items.values()) {
        if (item.hash === keep || this.writing.has(item.hash) || budget?.keeps(item.hash)) continue;
        if (!victim || item.lastUse < victim.lastUse) victim = item;
      }
      if (!victim) return;
      this.counters.evictions++;
      await this.forget(victim);
      this.opts.onEvicted?.({ hash: victim.hash, freedBytes: victim.held, heldBytes: this.held, limitBytes: limit });
    }
  }
}
