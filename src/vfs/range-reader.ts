/**
 * RangeReader: reads of one version of one remote file, turned into as few range requests as possible.
 * Sequential access (each read starting where the last ended) is served from streaming ranges whose
 * window grows (1 MiB → 8 MiB by default) as the streak goes on; once the streak is established, the
 * windows after the one being read are asked for at the same time (up to `streams` ranges in flight,
 * at most `aheadBytes` asked for and not yet read), so a far-away service delivers several windows per
 * round trip instead of one stream's worth (what rclone's multi-thread streams and mountpoint-s3's
 * prefetcher do). Random access fetches only the small
 * aligned blocks it touches, kept in a shared in-memory BlockCache. With a ContentCache, bytes are looked
 * up on disk first (keyed by content hash) and what is fetched is stored there. A range that fails is
 * retried with a fresh download link.
 */
import type { Readable } from 'node:stream';
import type { Logger } from '../shared/log.js';
import { isTransient } from '../shared/transient.js';
import type { BlockCache } from './block-cache.js';
import type { ContentCache } from './content-cache.js';
import type { Remote, RemoteCallOptions } from './remote.js';
import { skipBytes } from './byte-ranges.js';
import { VfsError } from './types.js';
import type { LocalRange } from './engine-lease.js';

export interface RangeReaderOptions {
  remote: Remote;
  fullpath: string;
  size: number;
  /** Content hash of the version read (keys the caches; absent = not cached on disk). */
  contentHash?: string;
  /** Key of this version in the block cache. */
  contentKey: string;
  blocks: BlockCache;
  disk?: ContentCache;
  /** First read-ahead window of a sequential streak, bytes. Default 1 MiB. */
  initialWindow?: number;
  /** Largest read-ahead window, bytes. Default 8 MiB. */
  maxWindow?: number;
  /** Ranges of one sequential streak in flight at once (the one being read included). Default 4. */
  streams?: number;
  /**
   * Bytes asked for ahead of the reader and not yet read, at most (the memory the read-ahead may hold:
   * a window ahead buffers what arrives until it is read). Default 32 MiB.
   */
  aheadBytes?: number;
  /** Where the first sequential streak starts (a stream of a range from there). Default 0. */
  startAt?: number;
  /** Shared by every reader of a gateway: bytes of windows asked for ahead, all readers together. */
  budget?: ReadAheadBudget;
  /** Options of each range call (`exactVersion`: the version of `contentHash` or nothing). */
  call?: RemoteCallOptions & { exactVersion?: boolean };
  logger: Logger;
}

/**
 * The read-ahead memory of all readers together: a window asked for ahead of its reader holds what
 * arrives until it is read, so the bytes of such windows are reserved here first (and given back when
 * the window becomes the one being read, or is dropped). A reader that finds none left reads with the
 * windows it has.
 */
export class ReadAheadBudget {
  private used = 0;
  constructor(readonly limit: number) {
    if (!(limit >= 0)) throw new TypeError(`read-ahead budget: expected a byte count >= 0, got ${String(limit)}`);
  }

  take(bytes: number): boolean {
    if (this.used + bytes > this.limit) return false;
    this.used += bytes;
    return true;
  }

  give(bytes: number): void {
    this.used -= bytes;
  }

  get inUse(): number {
    return this.used;
  }
}

/** An open streaming range with a read position: take(n) returns the next n bytes, as the pieces they arrived in. */
class StreamCursor {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private ended = false;
  private error: Error | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly stream: Readable, public position: number, readonly end: number, private readonly bufferLimit: number) {
    stream.on('data', (c: Buffer) => {
      this.chunks.push(c);
      this.buffered += c.length;
      // Back-pressure: hold at most bufferLimit in memory beyond what was asked.
      if (this.buffered > this.bufferLimit) stream.pause();
      this.notify();
    });
    stream.on('end', () => { this.ended = true; this.notify(); });
    stream.on('error', (err) => { this.error = err; this.notify(); });
  }

  /** Bytes left in the window (inclusive end). */
  get remaining(): number {
    return this.end + 1 - this.position;
  }

  /** The next `n` bytes (fewer only at the end of the stream), as the chunks they arrived in: not copied. */
  async take(n: number): Promise<Buffer[]> {
    while (this.buffered < n && !this.ended && !this.error) {
      if (this.stream.isPaused()) this.stream.resume();
      await new Promise<void>((r) => { this.wake = r; });
    }
    if (this.buffered < n && this.error) throw this.error;
    const want = Math.min(n, this.buffered);
    const parts: Buffer[] = [];
    let need = want;
    while (need > 0) {
      const c = this.chunks[0];
      if (c.length <= need) {
        parts.push(c);
        this.chunks.shift();
        need -= c.length;
      } else {
        parts.push(c.subarray(0, need));
        this.chunks[0] = c.subarray(need);
        need = 0;
      }
    }
    this.buffered -= want;
    this.position += want;
    if (this.buffered < this.bufferLimit / 2 && this.stream.isPaused()) this.stream.resume();
    return parts;
  }

  /** Stops the range; a take waiting for bytes is woken (with `reason` when given). */
  close(reason?: Error): void {
    this.stream.destroy();
    this.error ??= reason;
    this.ended = true;
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }
}

/**
 * The bytes a sequential streak streamed past most recently (at most `limit`, contiguous): the kernel's
 * read-ahead sends several reads at once and they can arrive out of order, so a read just behind the
 * cursor is served from here instead of ending the streak.
 */
class RecentBytes {
  private pieces: Buffer[] = [];
  private start = 0;
  private bytes = 0;

  constructor(private readonly limit: number) {}

  add(position: number, piece: Buffer): void {
    if (piece.length === 0) return;
    if (position !== this.start + this.bytes) this.clear();
    if (this.bytes === 0) this.start = position;
    this.pieces.push(piece);
    this.bytes += piece.length;
    while (this.bytes - this.pieces[0]!.length >= this.limit) {
      const first = this.pieces.shift()!;
      this.start += first.length;
      this.bytes -= first.length;
    }
  }

  /** Bytes [position, end), in pieces, when all of them are here. */
  read(position: number, end: number): Buffer[] | undefined {
    if (position < this.start || end > this.start + this.bytes || end <= position) return undefined;
    const parts: Buffer[] = [];
    let at = this.start;
    for (const p of this.pieces) {
      const pEnd = at + p.length;
      if (pEnd > position && at < end) parts.push(p.subarray(Math.max(0, position - at), Math.min(p.length, end - at)));
      if (pEnd >= end) break;
      at = pEnd;
    }
    return parts;
  }

  clear(): void {
    this.pieces = [];
    this.bytes = 0;
  }
}

/** How close to the end of its window the stream gets before the next window is requested regardless of the budget. */
const PREFETCH_BYTES = 4 * 1024 * 1024;
/** Sequential reads in a row before the next window is requested ahead. */
const PREFETCH_STREAK = 4;

/** How far ahead of the stream a read may start and still continue the streak (the gap is kept). */
const REORDER_SLACK = 2 * 1024 * 1024;

export class RangeReader {
  private nextPosition = -1;
  private readonly recent = new RecentBytes(4 * 1024 * 1024);
  private streak = 0;
  private window: number;
  private cursor: StreamCursor | undefined;
  /** The windows after the cursor's, in order, requested before the cursor runs out (so no read waits for them). */
  private ahead: { start: number; end: number; cursor: Promise<StreamCursor>; reserved: number }[] = [];
  private readonly initialWindow: number;
  private readonly maxWindow: number;
  private readonly streams: number;
  private readonly aheadBytes: number;
  private readonly bufferLimit: number;
  /** The signal of the read under way, given to the ranges it opens. */
  private readSignal: AbortSignal | undefined;
  /** Serialises reads (a FUSE read and a read-ahead must not interleave on one cursor). */
  private chain: Promise<unknown> = Promise.resolve();
  /** Reads called and not yet settled. */
  private reading = 0;
  readonly counters = { requests: 0, sequentialBytes: 0, randomBytes: 0, diskBytes: 0 };

  constructor(private readonly opts: RangeReaderOptions) {
    this.initialWindow = opts.initialWindow ?? 1024 * 1024;
    this.maxWindow = opts.maxWindow ?? 8 * 1024 * 1024;
    this.streams = opts.streams ?? 4;
    this.aheadBytes = opts.aheadBytes ?? 32 * 1024 * 1024;
    if (!Number.isInteger(this.streams) || this.streams < 1) throw new TypeError(`streams: expected a whole number >= 1, got ${String(opts.streams)}`);
    if (!(this.aheadBytes >= 0)) throw new TypeError(`aheadBytes: expected a byte count >= 0, got ${String(opts.aheadBytes)}`);
    // A window ahead is held whole until it is read (it is never paused half-way, which would stall it).
    this.bufferLimit = Math.max(8 * 1024 * 1024, this.maxWindow);
    this.window = this.initialWindow;
    if (opts.startAt !== undefined) this.nextPosition = opts.startAt;
  }

  /**
   * Up to `length` bytes at `position`; fewer at the end of the file, empty past it. When `ctx.signal`
   * aborts (a FUSE deadline, a WebDAV client gone), the ranges this reader has in flight stop and the read
   * fails; the signal is looked at only when the read goes to the service.
   */
  async read(position: number, length: number, ctx?: ReadContext): Promise<Buffer> {
    const parts = await this.readParts(position, length, ctx);
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  }

  /**
   * As `read`, in the pieces the bytes arrived in (nothing is joined): a caller that copies them into a
   * buffer of its own (the FUSE front end, into the kernel's) allocates nothing per read.
   */
  readParts(position: number, length: number, ctx?: ReadContext): Promise<Buffer[]> {
    this.reading++;
    const run = this.chain.then(() => this.doRead(position, length, ctx)).finally(() => this.reading--);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /**
   * Where the bytes of a read of `[position, position + length)` are in a local file right now (the
   * content cache on disk), clipped to the file's size, when all of them are there and no read of this
   * reader is under way (reads keep their order); the read then counts as one (LeasedHandle.localRange).
   * Undefined whenever `read` has to answer.
   */
  localRange(position: number, length: number): LocalRange | undefined {
    const { disk, contentHash } = this.opts;
    if (!disk || this.reading > 0 || !Number.isSafeInteger(position) || position < 0 || !(length > 0)) return undefined;
    const end = Math.min(this.opts.size, position + length);
    const local = end > position ? disk.localRange(contentHash, position, end) : undefined;
    if (!local) return undefined;
    // As `doRead` answering from the disk: the streak goes on from the end of this read.
    this.nextPosition = end;
    this.counters.diskBytes += local.length;
    return local;
  }

  close(): void {
    this.dropStreams();
    this.recent.clear();
  }

  /** Closes the cursor and the windows requested after it (a take waiting on the cursor fails with `reason`). */
  private dropStreams(reason?: Error): void {
    this.cursor?.close(reason);
    this.cursor = undefined;
    this.dropAhead();
  }

  /**
   * Runs a read's fetching under its caller's signal: the signal goes with every range opened meanwhile,
   * and its abort closes the ranges in flight (a read waiting on one fails at once).
   */
  private async underSignal<T>(ctx: ReadContext | undefined, work: () => Promise<T>): Promise<T> {
    const signal = ctx?.signal;
    if (!signal) return work();
    signal.throwIfAborted();
    const onAbort = () => this.dropStreams(abortError(signal, this.opts.fullpath));
    signal.addEventListener('abort', onAbort, { once: true });
    this.readSignal = signal;
    try {
      return await work();
    } catch (err) {
      if (signal.aborted) throw abortError(signal, this.opts.fullpath);
      throw err;
    } finally {
      this.readSignal = undefined;
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Forgets the windows requested ahead, closing each once it has opened. */
  private dropAhead(): void {
    for (const w of this.ahead.splice(0)) {
      this.opts.budget?.give(w.reserved);
      void w.cursor.then((c) => c.close(), () => undefined);
    }
  }

  /** Ranges of this reader in flight now (the cursor and the windows ahead). */
  get streamsOpen(): number {
    return (this.cursor && this.cursor.remaining > 0 ? 1 : 0) + this.ahead.length;
  }

  /** A cursor on [start, end] of the file. */
  private async openCursor(start: number, end: number): Promise<StreamCursor> {
    return new StreamCursor(await this.open(start, end), start, end, this.bufferLimit);
  }

  /**
   * The cursor for the window starting at `at` (and covering at least to `end`): the one requested ahead
   * when it is that one, else a new request.
   */
  private async cursorAt(at: number, end: number): Promise<StreamCursor> {
    const next = this.ahead[0];
    if (next && next.start === at) {
      this.ahead.shift();
      this.opts.budget?.give(next.reserved); // being read now: no longer ahead
      const c = await next.cursor.catch(() => undefined);
      if (c) return c;
      // That request failed: this window again, on its own (the windows after it stay).
      return this.openCursor(at, Math.max(next.end, Math.min(this.opts.size - 1, end - 1)));
    }
    this.dropAhead();
    const windowEnd = Math.min(this.opts.size - 1, Math.max(end - 1, at + this.window - 1));
    const c = await this.openCursor(at, windowEnd);
    this.window = Math.min(this.maxWindow, this.window * 2);
    return c;
  }

  /**
   * Requests the windows after the cursor's once the streak has gone on for a few reads (a reader of a
   * file's first bytes, a thumbnailer say, does not start a second request): up to `streams` ranges in
   * flight, while the bytes asked for and not yet read stay within `aheadBytes`. The window right after
   * the cursor's is asked for anyway once the cursor is within PREFETCH_BYTES of its end.
   */
  private prefetch(): void {
    const c = this.cursor;
    if (!c || this.streak < PREFETCH_STREAK) return;
    let last = this.ahead.length > 0 ? this.ahead[this.ahead.length - 1]!.end : c.end;
    let outstanding = c.remaining;
    for (const w of this.ahead) outstanding += w.end - w.start + 1;
    while (1 + this.ahead.length < this.streams + (c.remaining > 0 ? 0 : 1) && last + 1 < this.opts.size) {
      const start = last + 1;
      const end = Math.min(this.opts.size - 1, start + this.window - 1);
      const length = end - start + 1;
      const nextAnyway = this.ahead.length === 0 && c.remaining <= PREFETCH_BYTES;
      if (!nextAnyway && outstanding + length > this.aheadBytes) break;
      // The shared budget: the window right after the cursor's goes anyway (as one stream always did).
      const reserved = this.opts.budget?.take(length) ? length : 0;
      if (!nextAnyway && this.opts.budget && reserved === 0) break;
      const cursor = this.openCursor(start, end);
      cursor.catch(() => undefined); // a failed prefetch is retried as an ordinary request when needed
      this.ahead.push({ start, end, cursor, reserved });
      this.window = Math.min(this.maxWindow, this.window * 2);
      outstanding += length;
      last = end;
    }
  }

  private async doRead(position: number, length: number, ctx?: ReadContext): Promise<Buffer[]> {
    if (!Number.isInteger(position) || position < 0) throw new VfsError('EINVAL', `expected a read position >= 0, got ${position}`);
    if (!Number.isInteger(length) || length < 0) throw new VfsError('EINVAL', `expected a read length >= 0, got ${length}`);
    const end = Math.min(this.opts.size, position + length);
    if (end <= position) return [];
    const recent = this.recent.read(position, end);
    if (recent) {
      this.counters.sequentialBytes += end - position;
      return recent;
    }
    // Where the streak goes on (a new reader: the start). A read a little ahead of it overtook the reads
    // before it: the streak streams the bytes in between too, and keeps them for those reads.
    const from = Math.max(0, this.nextPosition);
    const ahead = position - from;
    const overtook = ahead > 0 && ahead <= REORDER_SLACK && (this.nextPosition < 0 || this.streak > 0);
    const sequential = ahead === 0 || overtook;
    this.nextPosition = end;
    const { disk, contentHash } = this.opts;
    // Blocks already held answer, unless the stream of a streak is right there (it goes on instead).
    const held = this.cursor?.position === position ? undefined : this.fromBlocks(position, end);
    if (held) {
      this.counters.randomBytes += held.length;
      return [held];
    }
    if (disk && disk.has(contentHash, position, end)) {
      this.counters.diskBytes += end - position;
      return [await disk.read(contentHash!, position, end)];
    }
    if (sequential || position === 0) {
      this.streak = sequential ? this.streak + 1 : 1;
      const parts = await this.underSignal(ctx, () => this.readSequential(overtook ? from : position, end));
      return overtook ? skipBytes(parts, ahead) : parts;
    }
    this.streak = 0;
    this.window = this.initialWindow;
    this.dropStreams();
    return [await this.underSignal(ctx, () => this.readBlocks(position, end))];
  }

  /**
   * From the streaming cursor, opening a new (larger) window when needed. A failure is the read's: the
   * request was retried already where requests are (the HTTP dispatcher), and the download link is the
   * Remote's to renew; the streams are dropped, so the next read opens a new range.
   */
  private async readSequential(position: number, end: number): Promise<Buffer[]> {
    try {
      if (!this.cursor || this.cursor.position !== position || this.cursor.remaining <= 0) {
        this.cursor?.close();
        this.cursor = await this.cursorAt(position, end);
      }
      const parts: Buffer[] = [];
      let at = position;
      while (at < end) {
        if (this.cursor.remaining <= 0) {
          this.cursor.close();
          this.cursor = await this.cursorAt(at, end);
        }
        const pieces = await this.cursor.take(Math.min(end - at, this.cursor.remaining));
        if (pieces.length === 0) throw new VfsError('EIO', `range of '${this.opts.fullpath}' ended early at ${at}`);
        for (const piece of pieces) {
          this.recent.add(at, piece);
          parts.push(piece);
          at += piece.length;
        }
        this.prefetch();
      }
      this.counters.sequentialBytes += end - position;
      if (this.opts.disk) void this.opts.disk.write(this.opts.contentHash, position, parts);
      return parts;
    } catch (err) {
      this.dropStreams();
      this.opts.logger.debug({ path: this.opts.fullpath, position, transient: isTransient(err), err: (err as Error).message }, 'range read failed');
      throw asVfsError(err, this.opts.fullpath);
    }
  }

  /** Bytes [position, end) when the block cache holds every block of them (a small file fetched ahead: a walk). */
  private fromBlocks(position: number, end: number): Buffer | undefined {
    const bs = this.opts.blocks.blockSize;
    const first = Math.floor(position / bs);
    const last = Math.floor((end - 1) / bs);
    if (last - first > 1) return undefined; // a long read: the streaming path
    const blocks: Buffer[] = [];
    for (let i = first; i <= last; i++) {
      const b = this.opts.blocks.peek(this.opts.contentKey, i);
      if (!b) return undefined;
      blocks.push(b);
    }
    const all = blocks.length === 1 ? blocks[0]! : Buffer.concat(blocks);
    if (all.length < end - first * bs) return undefined;
    return all.subarray(position - first * bs, end - first * bs);
  }

  /** Aligned blocks through the block cache; missing neighbours fetched in one range. */
  private async readBlocks(position: number, end: number): Promise<Buffer> {
    const bs = this.opts.blocks.blockSize;
    const first = Math.floor(position / bs);
    const last = Math.floor((end - 1) / bs);
    const blocks: Buffer[] = [];
    for (let i = first; i <= last; i++) {
      const cached = this.opts.blocks.get(this.opts.contentKey, i);
      if (cached) { blocks.push(cached); continue; }
      let j = i;
      while (j + 1 <= last && !this.opts.blocks.get(this.opts.contentKey, j + 1)) j++;
      const start = i * bs;
      const stop = Math.min(this.opts.size, (j + 1) * bs);
      const data = await this.fetch(start, stop - 1);
      void this.opts.disk?.write(this.opts.contentHash, start, data);
      for (let k = i; k <= j; k++) {
        const b = data.subarray((k - i) * bs, Math.min(data.length, (k - i + 1) * bs));
        this.opts.blocks.set(this.opts.contentKey, k, b);
        blocks.push(b);
      }
      i = j;
    }
    const all = blocks.length === 1 ? blocks[0] : Buffer.concat(blocks);
    const out = all.subarray(position - first * bs, end - first * bs);
    this.counters.randomBytes += out.length;
    return out;
  }

  /** One whole range into memory (small: random-access blocks); a failure is the read's (see readSequential). */
  private async fetch(start: number, end: number): Promise<Buffer> {
    try {
      const stream = await this.open(start, end);
      const chunks: Buffer[] = [];
      for await (const c of stream as AsyncIterable<Buffer>) chunks.push(c);
      const data = Buffer.concat(chunks);
      if (data.length !== end - start + 1) throw new VfsError('EIO', `range ${start}-${end} of '${this.opts.fullpath}': expected ${end - start + 1} bytes, got ${data.length}`);
      return data;
    } catch (err) {
      throw asVfsError(err, this.opts.fullpath);
    }
  }

  private open(start: number, end: number): Promise<Readable> {
    this.counters.requests++;
    const call = this.opts.call;
    const signal = !this.readSignal ? call?.signal : call?.signal ? AbortSignal.any([call.signal, this.readSignal]) : this.readSignal;
    return this.opts.remote.openRange(this.opts.fullpath, start, end, { ...call, signal, contentHash: this.opts.contentHash });
  }
}

/** What a read takes of its caller's context: the signal that stops it. */
export interface ReadContext { readonly signal?: AbortSignal }

/** A read stopped by its caller: a VfsError (EIO, as the front ends answer a read that did not finish). */
function abortError(signal: AbortSignal, path: string): VfsError {
  const why = signal.reason instanceof Error ? signal.reason.message : 'aborted';
  return new VfsError('EIO', `reading '${path}' stopped: ${why}`, { cause: signal.reason });
}


function asVfsError(err: unknown, path: string): VfsError {
  if (err instanceof VfsError) return err;
  return new VfsError('EIO', `reading '${path}': ${(err as Error).message ?? String(err)}`, { cause: err });
}
