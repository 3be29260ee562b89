/**
 * LocalVersion: one version of a file that the gateway holds locally, in a spool file of the
 * UploadJournal. Its life has explicit states, and only its owner (WriteBack) moves it along them:
 *
 *   writing → journaled → uploading → uploaded → retired
 *
 * - `writing`: the only state in which its bytes change. Writes, truncates and base fetches go to the
 *   spool, serialised (`exclusive()`).
 * - `journaled`: the spool and its journal entry are durable; from here on the version is immutable (a
 *   later change is made in a new version, copied from this one). `uploading` is the same with its upload
 *   running.
 * - `uploaded`: the service has it; the spool stays only while a handle still reads it.
 * - `retired`: the spool is gone; any access is a bug, answered EIO.
 *
 * A version of an existing file starts with none of the service's content (the "base") local. The spool
 * is sparse: `present` records which byte ranges hold valid data (written locally or fetched). Reads of
 * absent base ranges fetch them on demand (at least `fetchChunk` bytes at a time) and keep them;
 * `fillAll()` fetches every absent range before the version is journaled, so an upload never carries a
 * truncated or partial file. Small files are fetched whole at the first change instead (one request).
 *
 * A version may hand its spool to a direct writer (`directSpool`: the FUSE engine writes the data from
 * its own thread and reports each write); while it writes, every change made here ends it first.
 *
 * A version may also be handed to the kernel (`passthroughBegin`: FUSE passthrough), which then reads
 * and writes the spool itself, telling nothing, until WriteBack ends it (`passthroughEnd`, once the last
 * handle opened that way is closed). Meanwhile the version is "live": its size and mtime are the spool's
 * (`refreshLive`, from fstat), it keeps no running hash (a small one is hashed from the spool when it is
 * sealed; a large one when it is uploaded), it is changed in place (a truncate goes to the spool even
 * once sealed, as the kernel's writes do), and a change seen after its seal makes it due for a new
 * journal record (`liveChanged`).
 *
 * Which field is guarded by what: `size`, `baseSize`, `present`, `baseReady`, `generation` and the spool
 * descriptor change only inside `exclusive()`, or from a direct writer's reports, which only arrive
 * while no change of this side runs (each ends the direct writes before it starts). `library`/`fullpath` change only in WriteBack (a rename,
 * after the upload is cancelled). `state`, `pins` and `failed` are changed only by WriteBack.
 */
import { copyFile, open, stat, type FileHandle as FsHandle } from 'node:fs/promises';
import { createHash, hash, type Hash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync, statfsSync } from 'node:fs';
import type { Readable } from 'node:stream';
import type { PendingFile } from './upload-queue.js';
import { INLINE_MAX_BYTES } from './upload-journal.js';
import { fsErrorOf } from './fs-errors.js';
import type { DiskFaults } from './disk-faults.js';
import type { RemoteEntry } from './remote.js';
import { baseAfter, baseOf, type ConflictBase } from './conflicts.js';
import { addRange, clipRanges, gaps, type ByteRange } from './byte-ranges.js';
import type { Sha1Stream } from './sha1-streams.js';
import { KERNEL_WRITE_MIN_FREE_BYTES, VfsError, type DirectSpool, type DirectWritesDone, type LocalRange, type Operator } from './types.js';

/** Opens bytes `[start, end]` (inclusive) of the base content. */
export type BaseOpener = (start: number, end: number) => Promise<Readable>;

interface Hasher { hash(path: string): Promise<{ sha1: string; size: number }> }

/**
 * Bytes of journaled small files whose spools are not written yet, kept in memory (their journal entries
 * carry them): shared by a WriteBack's versions, so what waits in memory stays bounded.
 */
export class UnwrittenSpools {
  private used = 0;
  constructor(readonly maxBytes: number) {}

  /** Counts `n` more bytes if they fit. */
  take(n: number): boolean {
    if (this.used + n > this.maxBytes) return false;
    this.used += n;
    return true;
  }

  give(n: number): void {
    this.used -= n;
  }

  get bytes(): number {
    return this.used;
  }
}

export interface LocalVersionOptions {
  /** Bytes of the base content (0 for a new file). */
  baseSize: number;
  /** Where absent base bytes come from (absent for a new file or a replayed journal entry). */
  openBase?: BaseOpener;
  /** Smallest fetch of absent base bytes on a read, bytes. Default 1 MiB. */
  fetchChunk?: number;
  /** A SHA-1 kept up to date while the file is written front to back from empty (see Sha1Streams). */
  sha1Stream?: () => Sha1Stream;
  mtimeMs?: number;
  /** Injected disk failures (tests). */
  faults?: DiskFaults;
  /** The spool does not exist yet (a fresh id): nothing to truncate or measure before the first write. */
  newSpool?: boolean;
  /** Where a sealed small file's bytes may wait for their spool (else it is written right after the seal). */
  unwritten?: UnwrittenSpools;
}

/** A file appended to from empty is hashed on the main thread up to this size (no worker round trip); beyond, by a Sha1Stream. */
const SMALL_HASH_MAX = 256 * 1024;
/** A direct writer continues the running hash only of a spool this small (it reads the bytes back once). */
const DIRECT_HASH_FROM_MAX = 8 * 1024 * 1024;

/** A direct writer of the spool: how to stop it, and how many of its writes were reported. */
interface DirectAttachment { stop: () => DirectWritesDone | undefined; reported: number }

export type VersionState = 'writing' | 'journaled' | 'uploading' | 'uploaded' | 'retired';

export class LocalVersion implements PendingFile {
  state: VersionState = 'writing';
  /** Bumped by every modification (while writing); names the content a hash belongs to. */
  generation = 0;
  /** Order of acknowledgement (set when journaled): the highest of a path is the version that wins. */
  seq = 0;
  /** Handles, read streams and write sessions using the spool: it is kept while this is above 0. */
  pins = 0;
  /** A write, truncate or fetch failed: the version holds no content any writer meant, it is never journaled. */
  failed: VfsError | undefined;
  /** Unlinked: never journaled or uploaded; the spool goes with the last pin. */
  deleted = false;
  /** A newer acknowledged version of the path replaced this one: never uploaded; the spool goes with the last pin. */
  superseded = false;
  /** Settles once the journal entry of this version is written (or failed); an upload's confirmation waits for it. */
  journaling: Promise<void> | undefined;
  /** Hashed for its journal entry: the bytes no longer change (the entry may still be being written). */
  sealed = false;
  /**
   * Made in this run as a new file (or from such a version), and neither it nor a version it came from
   * was handed to the uploader: the service has nothing of it from here. A replayed version never is.
   */
  unsent = false;
  /** Upload held until this time (an empty new file that content usually follows), ms since the epoch. */
  holdUntilMs = 0;
  /**
   * An fsync wrote a record of it while it was still being written: replay takes the spool as it then is
   * (as a local file system keeps what reached its disk): `bytes` when the record carries them (a small
   * file), `spool` when its spool was made durable. Cleared by its seal, whose record replaces it.
   */
  openRecord: 'bytes' | 'spool' | undefined;
  /** The generation that record was written at. */
  openGeneration = -1;
  /** A newer version came to the path after that record, with this one unchanged since (at this generation). */
  overtakenAt = -1;
  /** Settles once that record is written (a seal's record waits for it). */
  recording: Promise<void> | undefined;
  /** Its journaling (WriteBack.journalVersion), once one started: a second flush waits for it. */
  sealing: Promise<void> | undefined;
  /** While that journaling runs (the version is in use: its spool stays). */
  journalingNow = false;
  /**
   * The version this one was made from while that one was still being journaled: once this one is
   * acknowledged first, that one is superseded (this one holds its bytes and more).
   */
  predecessor: LocalVersion | undefined;
  /** The generation whose bytes `sync` last made durable (-1: none). */
  syncedGeneration = -1;
  /** Logical size. */
  size: number;
  /** Bytes of the base still part of the file (a truncate below it shortens it). */
  baseSize: number;
  /** The modification time programs see (of the last change, or set by utimens); kept once uploaded. */
  mtimeMs: number;
  ctimeMs: number;
  /** True when every base byte still part of the file is in the spool. */
  baseReady: boolean;
  operator?: Operator;
  /** What it may replace on the service without a conflict (conflicts.ts): its base's hash, then its predecessors'. */
  replaces: ConflictBase;
  /** Spool ranges holding valid data (meaningful while !baseReady). */
  private present: ByteRange[] = [];
  private readonly openBase?: BaseOpener;
  private readonly fetchChunk: number;
  /** SHA-1 of the spool as of `generation` (computed with the fsync of a flush). */
  private hashed: { generation: number; sha1: string; size: number } | undefined;
  private fh: FsHandle | undefined;
  private readonly newSha1Stream?: () => Sha1Stream;
  private readonly faults?: DiskFaults;
  /** Set while the spool has been written only front to back since it was emptied: its running SHA-1. */
  private appended: Sha1Stream | undefined;
  /** The same for a file still small: hashed here as it is written (`smallBytes` of it so far). */
  private smallHash: Hash | undefined;
  private smallBytes = 0;
  /** While the file is no larger than INLINE_MAX_BYTES: copies of what was appended, for its journal record. */
  private smallData: Buffer[] | undefined;
  /**
   * A new file held in memory, without a spool file yet: copies of what was appended (at most
   * INLINE_MAX_BYTES; its journal record carries them). The spool is written when anything needs it (a
   * change other than an append, a reader of the file, the upload), and right after the seal, off the
   * caller's way. Undefined once the spool holds the content.
   */
  private memory: Buffer[] | undefined;
  private readonly unwritten?: UnwrittenSpools;
  /** Bytes of `memory` counted in `unwritten` (sealed, the spool's writing put off until it is needed). */
  private unwrittenBytes = 0;
  /** Length of the spool file when known (saves an fstat, and a truncate of a spool that is empty). */
  private spoolLength: number | undefined;
  /** False while a new version's spool file was never made (a file held in memory): nothing to remove. */
  private spoolMade = true;
  private chain: Promise<unknown> = Promise.resolve();
  /** Runs of `exclusive` queued or under way. */
  private queued = 0;
  /** Writes of this side under way (a spool is handed to a direct writer only with none). */
  private writesUnderWay = 0;
  /** The direct writer of the spool, while it writes: how to stop it, and how many of its writes were reported. */
  private direct: DirectAttachment | undefined;
  /** Handed to the kernel (passthrough): its spool descriptor, and the spool's size and mtime last seen. */
  private live: { fd: number; size: bigint; mtimeNs: bigint; small?: { generation: number; data: Buffer } } | undefined;
  /** Changed in place after its seal (while live): due for a new journal record. */
  liveChanged = false;
  /** The SHA-1 of the content of `generation` that a stopped direct writer is still finishing (see stopDirect). */
  private directHash: { generation: number; size: number; sha1: Promise<string | undefined> } | undefined;
  readonly counters = { fetchedBytes: 0, fetches: 0, directWrites: 0 };

  constructor(
    readonly id: string,
    readonly spoolPath: string,
    public library: string,
    public fullpath: string,
    /** The service's version this local copy started from (undefined for a new file). */
    public base: RemoteEntry | undefined,
    opts: LocalVersionOptions,
  ) {
    this.baseSize = opts.baseSize;
    this.size = opts.baseSize;
    this.replaces = baseOf(base);
    this.openBase = opts.openBase;
    this.fetchChunk = opts.fetchChunk ?? 1024 * 1024;
    this.newSha1Stream = opts.sha1Stream;
    this.faults = opts.faults;
    if (opts.newSpool) {
      this.spoolLength = 0;
      this.spoolMade = false;
    }
    if (opts.newSpool && opts.baseSize === 0 && !opts.openBase) this.memory = [];
    this.unwritten = opts.unwritten;
    this.baseReady = opts.baseSize === 0 || !opts.openBase;
    this.mtimeMs = opts.mtimeMs ?? Date.now();
    this.ctimeMs = base?.ctimeMs ?? this.mtimeMs;
  }

  /**
   * A new file's version whose spool a front end had written and closed by itself (WriteBack.createClosed):
   * sealed at once with the content its journal record names (`sha1`, `size`), nothing read.
   */
  static closedSpool(id: string, spoolPath: string, library: string, fullpath: string, closed: { size: number; mtimeMs: number; sha1: string }): LocalVersion {
    const v = new LocalVersion(id, spoolPath, library, fullpath, undefined, { baseSize: 0, mtimeMs: closed.mtimeMs });
    v.size = closed.size;
    v.spoolLength = closed.size;
    v.generation = 1;
    v.hashed = { generation: 1, sha1: closed.sha1, size: closed.size };
    v.sealed = true;
    v.unsent = true;
    return v;
  }

  /** For the conflict check before its commit (UploadQueue's beforeCommit). */
  conflictBase(): ConflictBase {
    return this.replaces;
  }

  /** Bytes the service does not have yet (written, or journaled and not yet uploaded). */
  get dirty(): boolean {
    return this.state !== 'uploaded' && this.state !== 'retired' && (this.generation > 0 || this.state !== 'writing');
  }

  /** True while the bytes may change. */
  get mutable(): boolean {
    return this.state === 'writing' && !this.sealed && !this.failed;
  }

  /** Runs `fn` with the file to itself (no other read, write, truncate or fetch in between). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    this.queued++;
    const run = this.chain.then(fn).finally(() => this.queued--);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /**
   * Where a read of [position, position + length) finds its bytes in the spool right now (FileHandle.
   * localRange): clipped to the file's size, when they are all there as they are: not while the file is
   * held in memory, while anything of the spool is under way or waiting (`exclusive`), while base bytes
   * of the range are still to be fetched, past the spool's known length (a read would stop short), or
   * once a change failed.
   */
  localRange(position: number, length: number): LocalRange | undefined {
    if (this.memory || !this.fh || this.queued > 0 || this.writesUnderWay > 0 || this.failed) return undefined;
    if (!Number.isSafeInteger(position) || position < 0 || !(length > 0)) return undefined;
    const end = Math.min(this.size, position + length);
    if (end <= position || this.spoolLength === undefined || this.spoolLength < end) return undefined;
    if (!this.baseReady && gaps(this.present, position, Math.min(end, this.baseSize)).length > 0) return undefined;
    return { fd: this.fh.fd, position, length: end - position };
  }

  /** Empties the file (a new or truncated file): no base any more. */
  async startEmpty(): Promise<void> {
    this.stopDirect();
    await this.exclusive(async () => {
      this.stopDirect();
      if (this.memory) {
        this.assertMutable();
        this.generation++;
        this.dropSha1Stream();
        this.memory = [];
        this.size = 0;
        if (this.newSha1Stream) {
          this.smallHash = createHash('sha1');
          this.smallBytes = 0;
        }
        return;
      }
      const fh = await this.changeHandle();
      this.generation++; // before the spool changes (see snapshotHash); callers touch() after
      this.dropSha1Stream();
      if (this.spoolLength !== 0) await fh.truncate(0);
      this.spoolLength = 0;
      this.size = 0;
      this.baseSize = 0;
      this.present = [];
      this.baseReady = true;
      if (this.newSha1Stream) {
        this.smallHash = createHash('sha1');
        this.smallBytes = 0;
        this.smallData = [];
      }
    });
  }

  /** Fetches every absent base byte (before a commit, or at the first change of a small file). */
  async fillAll(): Promise<void> {
    if (this.baseReady) return;
    await this.exclusive(async () => {
      if (this.baseReady) return;
      this.assertMutable();
      for (const [s, e] of gaps(this.present, 0, this.baseSize)) await this.fetch(s, e);
      this.baseReady = true;
      this.present = [];
    });
  }

  async read(position: number, length: number): Promise<Buffer> {
    return this.exclusive(async () => {
      const end = Math.min(this.size, position + length);
      if (end <= position) return Buffer.alloc(0);
      if (this.memory) return Buffer.concat(this.memory, this.size).subarray(position, end);
      if (!this.baseReady) {
        for (const [s, e] of gaps(this.present, position, Math.min(end, this.baseSize))) {
          // Fetch at least a chunk (up to the next present range), so sequential reads stay efficient.
          const next = gaps(this.present, s, Math.min(this.baseSize, Math.max(e, s + this.fetchChunk)))[0];
          await this.fetch(s, Math.max(e, next ? next[1] : e));
        }
      }
      const fh = await this.handle();
      const buf = Buffer.alloc(end - position);
      let done = 0;
      while (done < buf.length) {
        const { bytesRead } = await fh.read(buf, done, buf.length - done, position + done);
        if (bytesRead === 0) break; // beyond the spool's end: a hole, zeros
        done += bytesRead;
      }
      return buf;
    });
  }

  async write(position: number, data: Buffer): Promise<number> {
    this.writesUnderWay++;
    return this.exclusive(async () => {
      this.stopDirect();
      if (this.memory && position === this.size && this.size + data.length <= INLINE_MAX_BYTES) return this.append(data);
      const fh = await this.changeHandle();
      this.touch(); // before the spool changes (see snapshotHash)
      if (position !== this.size) this.dropSha1Stream(); // not an append: the running hash is of no use
      else if (this.smallHash) {
        if (this.smallBytes + data.length <= SMALL_HASH_MAX) {
          this.smallHash.update(data);
          this.smallBytes += data.length;
          // A copy: the caller may reuse its buffer (a request body).
          if (this.smallData && this.smallBytes <= INLINE_MAX_BYTES) this.smallData.push(Buffer.from(data));
          else this.smallData = undefined;
        } else {
          // Grown past small: the worker hashes from byte 0, reading back what is written.
          this.smallHash = undefined;
          this.appended = this.newSha1Stream?.();
        }
      }
      let done = 0;
      try {
        this.faults?.check('write', `writing '${this.fullpath}'`);
        while (done < data.length) {
          const { bytesWritten } = await fh.write(data, done, data.length - done, position + done);
          done += bytesWritten;
        }
      } catch (err) {
        this.dropSha1Stream();
        throw this.fail(err, `writing ${data.length} bytes at ${position}`);
      }
      if (!this.baseReady) this.present = addRange(this.present, position, position + data.length);
      this.size = Math.max(this.size, position + data.length);
      if (this.spoolLength !== undefined) this.spoolLength = Math.max(this.spoolLength, position + data.length);
      this.appended?.extend(this.size);
      return done;
    }).finally(() => this.writesUnderWay--);
  }

  /**
   * The spool for a direct writer, when it may take over the writes now: the version is being written,
   * its spool is open (not held in memory), every base byte is local, no write of this side is under way,
   * and no injected disk failure is waiting. The caller makes sure it is the version's only writer.
   */
  directSpool(): DirectSpool | undefined {
    if (!this.mutable || this.direct || this.live || this.memory || !this.fh || !this.baseReady || this.writesUnderWay > 0) return undefined;
    if (this.faults?.armed('write')) return undefined;
    const sequential = (this.smallHash !== undefined && this.smallBytes === this.size) || this.appended !== undefined;
    const hashFrom = sequential && this.size <= DIRECT_HASH_FROM_MAX && this.spoolLength === this.size ? this.size : -1;
    const fd = this.fh.fd;
    let attachment: DirectAttachment | undefined;
    return {
      fd,
      hashFrom,
      begin: (stop) => {
        if (!this.mutable || this.direct) {
          stop();
          return;
        }
        attachment = { stop, reported: 0 };
        this.direct = attachment;
        // The writer keeps the hash from here (or none): this side's running hashes would miss its writes.
        this.dropSha1Stream();
      },
      wrote: (offset, length, errno) => {
        if (!this.direct || this.direct !== attachment) return; // ended: its stop accounted for this write
        if (errno > 0) {
          this.recordDirectFailure(errno);
          return;
        }
        this.direct.reported++;
        this.recordDirectWrite(offset + length);
      },
      end: () => {
        if (this.direct && this.direct === attachment) this.stopDirect();
      },
    };
  }

  /** Ends the direct writes (if any): what they did that was not reported yet is taken from the writer's answer. */
  stopDirect(): void {
    const d = this.direct;
    if (!d) return;
    this.direct = undefined;
    const done = d.stop();
    if (!done) return;
    if (done.count > d.reported) this.recordDirectWrite(done.end);
    if (done.errno > 0) this.recordDirectFailure(done.errno);
    // The writer's hash covers the whole content: the seal needs no pass over the spool. A hash the
    // writer is still finishing is waited for where a hash is needed (hashNow).
    if (done.hashed !== this.size || this.failed) return;
    if (done.sha1) this.hashed = { generation: this.generation, sha1: done.sha1, size: this.size };
    else if (done.sha1Later) this.directHash = { generation: this.generation, size: this.size, sha1: done.sha1Later };
  }

  /**
   * The spool's descriptor for the kernel to read and write itself (passthrough), when the version may be
   * handed over now: being written, every base byte local, no other writer (direct, or of this side), no
   * injected disk failure waiting. A file held in memory is written to its spool first. The caller makes
   * sure no handle reads or writes the version through this side meanwhile.
   */
  async passthroughBegin(): Promise<number | undefined> {
    if (this.live) return this.live.fd;
    const ready = (): boolean => this.mutable && !this.direct && this.baseReady && this.writesUnderWay === 0 && !this.faults?.armed('write');
    if (!ready()) return undefined;
    const fh = await this.exclusive(async () => (ready() ? this.handle() : undefined)).catch(() => undefined);
    if (!fh || !ready()) return undefined;
    await this.padToSize(fh);
    return this.goLive(false);
  }

  /**
   * Hands the spool over: a descriptor of its own for it, closed at the end (the spool's may close
   * meanwhile), and no running hash (the kernel's writes are not seen here). `adopt`: what the spool holds
   * now is the version's content.
   */
  private goLive(adopt: boolean): number | undefined {
    let fd: number;
    try {
      fd = openSync(this.spoolPath, constants.O_RDWR);
    } catch {
      return undefined;
    }
    this.dropSha1Stream();
    this.hashed = undefined;
    this.directHash = undefined;
    const st = fstatSync(fd, { bigint: true });
    this.live = { fd, size: st.size, mtimeNs: st.mtimeNs };
    // Adopted: what the spool holds now is the version's content, a change.
    if (adopt) this.applyLiveStat(st, true);
    return fd;
  }

  /**
   * A new file held in memory, still empty, whose spool a front end made and had the kernel write
   * (FileHandle.adoptSpool): that spool becomes this version's, taken as it is, and the version is
   * handed to the kernel (see passthroughBegin). Undefined when the version is not such a file.
   */
  async adoptSpool(): Promise<number | undefined> {
    if (!this.mutable || !this.memory || this.size !== 0 || this.live || this.direct || this.writesUnderWay > 0 || this.queued > 0) return undefined;
    // With no wait: the file's next request waits for this (its spool, made by the front end, exists);
    // the spool's own handle is opened when something needs it.
    const fd = this.goLive(true);
    if (fd === undefined) return undefined;
    this.memory = undefined;
    this.releaseUnwritten();
    this.spoolMade = true;
    return fd;
  }

  /** True while the kernel reads and writes the spool (passthrough). */
  get isLive(): boolean {
    return this.live !== undefined;
  }

  /**
   * While live: takes the size and mtime from the spool. A change since the last look is a change of the
   * version (a new generation; due for a new journal record once sealed).
   */
  refreshLive(): void {
    const live = this.live;
    if (!live) return;
    let st;
    try {
      st = fstatSync(live.fd, { bigint: true });
    } catch {
      return; // unreadable: the last look stands
    }
    this.applyLiveStat(st, false);
  }

  /** What an fstat of the live spool shows; a change (or `changed`) is a new generation. */
  private applyLiveStat(st: { size: bigint; mtimeNs: bigint }, changed: boolean): void {
    const live = this.live!;
    if (!changed && st.size === live.size && st.mtimeNs === live.mtimeNs) return;
    live.size = st.size;
    live.mtimeNs = st.mtimeNs;
    this.generation++;
    this.size = Number(st.size);
    this.spoolLength = this.size;
    this.mtimeMs = Number(st.mtimeNs / 1_000_000n);
    this.hashed = undefined;
    if (this.sealed) this.liveChanged = true;
  }

  /** While live: a truncate, made in place (the kernel writes on into the same spool). */
  async truncateLive(size: number): Promise<void> {
    const live = this.live;
    if (!live) throw new VfsError('EIO', `'${this.fullpath}': not handed to the kernel`);
    await this.exclusive(async () => {
      await (await this.handle()).truncate(size).catch((err: unknown) => { throw this.fail(err, `truncating to ${size}`); });
      this.changedInPlace(live);
      // A truncate to the same size still changes the file (its mtime), as the kernel shows it.
      this.touch();
    });
  }

  /** While live: a change made through this side (a write, a truncate), seen as the kernel's are. */
  private changedInPlace(live: NonNullable<LocalVersion['live']>): void {
    live.small = undefined;
    this.refreshLive();
    if (this.sealed) this.liveChanged = true;
  }

  /**
   * Changed in place after its seal (`liveChanged`): sealed again as the spool now is. A small one is
   * hashed again and its bytes answered (its new journal record carries them); a large one is hashed
   * when it is uploaded.
   */
  reseal(): Buffer | undefined {
    this.refreshLive();
    this.liveChanged = false;
    this.hashed = undefined;
    const fd = this.live?.fd ?? this.fh?.fd;
    const data = fd !== undefined && this.size <= INLINE_MAX_BYTES ? readWhole(fd, this.size) : undefined;
    if (data) this.hashSmall(data);
    return data;
  }

  /** The hash of this generation, from its whole content (a small live file's, read from the spool). */
  private hashSmall(data: Buffer): void {
    this.hashed = { generation: this.generation, sha1: hash('sha1', data, 'hex'), size: data.length };
  }

  /** While live: a write made through this side (another front end's), in place as the kernel's are. */
  async writeLive(position: number, data: Buffer): Promise<number> {
    const live = this.live;
    if (!live) throw new VfsError('EIO', `'${this.fullpath}': not handed to the kernel`);
    return this.exclusive(async () => {
      let done = 0;
      try {
        while (done < data.length) done += (await (await this.handle()).write(data, done, data.length - done, position + done)).bytesWritten;
      } catch (err) {
        throw this.fail(err, `writing ${data.length} bytes at ${position}`);
      }
      this.changedInPlace(live);
      return done;
    });
  }

  /** The kernel no longer reads or writes the spool: the version is as the spool last shows it. */
  passthroughEnd(): void {
    const live = this.live;
    if (!live) return;
    this.refreshLive();
    this.live = undefined;
    try {
      closeSync(live.fd);
    } catch {
      // already closed: nothing holds it
    }
  }

  private recordDirectWrite(end: number): void {
    this.touch();
    this.counters.directWrites++;
    this.size = Math.max(this.size, end);
    if (this.spoolLength !== undefined) this.spoolLength = Math.max(this.spoolLength, end);
  }

  private recordDirectFailure(errno: number): void {
    const code = errno === 28 ? 'ENOSPC' : 'EIO';
    const err = Object.assign(new Error(`${code}: a direct write to the spool failed (errno ${errno})`), { code });
    this.fail(err, 'writing');
  }

  /** An append to a file held in memory (see `memory`). */
  private append(data: Buffer): number {
    this.assertMutable();
    this.touch();
    try {
      this.faults?.check('write', `writing '${this.fullpath}'`);
    } catch (err) {
      this.dropSha1Stream();
      throw this.fail(err, `writing ${data.length} bytes at ${this.size}`);
    }
    if (this.smallHash) {
      this.smallHash.update(data);
      this.smallBytes += data.length;
    }
    this.memory!.push(Buffer.from(data)); // a copy: the caller may reuse its buffer (a request body)
    this.size += data.length;
    return data.length;
  }

  async truncate(size: number): Promise<void> {
    this.stopDirect();
    await this.exclusive(async () => {
      this.stopDirect();
      const fh = await this.changeHandle();
      this.touch(); // before the spool changes (see snapshotHash)
      if (size !== this.size) this.dropSha1Stream();
      await fh.truncate(size).catch((err: unknown) => { throw this.fail(err, `truncating to ${size}`); });
      this.spoolLength = size;
      if (size < this.baseSize) this.baseSize = size;
      this.present = clipRanges(this.present, size);
      if (this.baseSize === 0) this.baseReady = true;
      this.size = size;
    });
  }

  /**
   * Ends the writing: from here on the bytes never change. Hashes the spool and, with `sync`, makes it
   * durable at the same time (the hash runs in a worker while the kernel writes the data out). `onHashed`
   * runs as soon as the hash is known, before the fsync has ended. `closed` (live): the spool's size and
   * time when another reader hashed it; when the spool still shows them, that hash is the version's and
   * nothing is read (see `sealedAs`).
   */
  async seal(hasher: Hasher, opts: { sync?: boolean; onHashed?: () => void; closed?: { size: number; mtimeNs: bigint; sha1: string } } = {}): Promise<void> {
    this.stopDirect();
    await this.exclusive(async () => {
      this.stopDirect();
      this.assertMutable();
      if (this.live) {
        // Written by the kernel, which tells nothing of a write the disk refused: on a full disk, the
        // version may miss bytes its writer was refused, and fails whole.
        await this.checkRoomForKernelWrites();
        // Handed to the kernel: a small file is hashed from the spool now, a large one when it is uploaded
        // (its close does not wait for a pass over its bytes).
        this.refreshLive();
        const closed = opts.closed;
        if (closed && this.live.size === BigInt(closed.size) && this.live.mtimeNs === closed.mtimeNs) {
          this.hashed = { generation: this.generation, sha1: closed.sha1, size: closed.size };
        } else {
          const small = this.liveSmallContent();
          if (small) this.hashSmall(small);
        }
        this.live.small = undefined;
        this.sealed = true;
        this.liveChanged = false;
        opts.onHashed?.();
        if (opts.sync !== false) await (await this.handle()).sync().catch((err: unknown) => { throw this.fail(err, 'making the local copy durable'); });
        return;
      }
      if (this.memory && opts.sync === false && this.smallHash && this.smallBytes === this.size) {
        // Held in memory: hashed as written. The spool is written when something needs it (the upload, a
        // reader) while the shared budget has room, else right away, off the caller's way.
        this.hashed = { generation: this.generation, sha1: this.smallHash.copy().digest('hex'), size: this.size };
        this.sealed = true;
        opts.onHashed?.();
        this.dropSha1Stream();
        if (this.size > 0 && this.unwritten?.take(this.size)) {
          this.unwrittenBytes = this.size;
          return;
        }
        const writing = this.exclusive(() => this.handle().then(() => undefined));
        writing.catch(() => undefined); // a failure leaves the content in memory: the next user tries again
        return;
      }
      const fh = await this.handle();
      try {
        await this.padToSize(fh);
        const generation = this.generation;
        const synced = opts.sync === false ? Promise.resolve() : fh.sync();
        synced.catch(() => undefined); // awaited below, after the hash
        const h = await this.hashNow(hasher).catch(async (err: unknown) => {
          await synced.catch(() => undefined);
          throw err;
        });
        this.hashed = { generation, ...h };
        this.sealed = true;
        opts.onHashed?.();
        await synced;
      } catch (err) {
        throw this.fail(err, 'making the local copy durable');
      }
      this.dropSha1Stream();
    });
  }

  /**
   * Fails the version (ENOSPC) when the spool's disk has less than KERNEL_WRITE_MIN_FREE_BYTES free: the
   * kernel writes a live spool itself and tells nothing of a write the disk refused.
   */
  async checkRoomForKernelWrites(): Promise<void> {
    // The spool's folder is on local disk: looked at on the spot (counters the kernel holds in memory), as
    // a live spool's fstat is, with no round trip through the thread pool on every close.
    let st;
    try {
      st = statfsSync(this.spoolPath);
    } catch {
      return;
    }
    // Root may write into the blocks kept for it: those count as free for the gateway running as root.
    const free = (process.geteuid?.() === 0 ? st.bfree : st.bavail) * st.bsize;
    if (free >= KERNEL_WRITE_MIN_FREE_BYTES) return;
    throw this.fail(Object.assign(new Error(`ENOSPC: the data folder is full (${free} bytes free): a write of the file may have been refused`), { code: 'ENOSPC' }), 'journaling');
  }

  /**
   * The whole content, when the file is small and was written front to back from empty (its journal
   * record then carries it); undefined otherwise. Ask before `seal`, which lets go of it.
   */
  inlineContent(): Buffer | undefined {
    if (this.memory) return Buffer.concat(this.memory, this.size);
    if (this.live) return this.liveSmallContent();
    if (!this.smallData || !this.smallHash || this.smallBytes !== this.size || this.size > INLINE_MAX_BYTES) return undefined;
    return Buffer.concat(this.smallData, this.size);
  }

  /** The sealed content and its hash while it is held in memory (its spool not written): see PendingFile. */
  heldContent(): { generation: number; sha1: string; size: number; data: Buffer } | undefined {
    if (!this.memory || !this.sealed || !this.hashed || this.hashed.generation !== this.generation) return undefined;
    return { ...this.hashed, data: Buffer.concat(this.memory, this.size) };
  }

  /** The version was sealed with content of `sha1` and `size`, and nothing changed since. */
  sealedAs(sha1: string, size: number): boolean {
    return this.sealed && !this.liveChanged && this.currentSha1() === sha1 && this.size === size;
  }

  /** SHA-1 of the content now, when the last flush hashed it and nothing changed since. */
  currentSha1(): string | undefined {
    return this.hashed && this.hashed.generation === this.generation ? this.hashed.sha1 : undefined;
  }

  /**
   * SHA-1, size and generation of the spool now (reuses the flush's hash when nothing changed since: at
   * once, even while a flush still holds the file for its fsync; every change bumps the generation
   * before it touches the spool).
   */
  async snapshotHash(hasher: Hasher): Promise<{ generation: number; sha1: string; size: number }> {
    await this.onDisk(); // the upload reads the spool by its path
    if (this.hashed && this.hashed.generation === this.generation) return this.hashed;
    return this.exclusive(async () => {
      if (this.hashed && this.hashed.generation === this.generation) return this.hashed;
      const generation = this.generation;
      const h = await this.hashNow(hasher);
      this.hashed = { generation, ...h };
      return this.hashed;
    });
  }

  /** Resolves once the spool file holds the content (a file held in memory is written out now). */
  async onDisk(): Promise<void> {
    if (!this.memory) return;
    await this.exclusive(async () => {
      if (this.memory) await this.handle();
    });
  }

  /** Makes the spool's bytes durable. */
  async sync(): Promise<void> {
    this.stopDirect(); // what a direct writer wrote is counted before the generation is read
    await this.exclusive(async () => {
      this.stopDirect();
      const generation = this.generation;
      const fh = await this.handle();
      await this.padToSize(fh);
      await fh.sync();
      this.syncedGeneration = generation;
    });
  }

  /** Closes the spool's descriptor (the spool stays). */
  async closeSpool(): Promise<void> {
    this.stopDirect(); // before the descriptor can close: no write may reach a number reused by another file
    await this.exclusive(async () => {
      this.stopDirect();
      this.dropSha1Stream();
      const fh = this.fh;
      this.fh = undefined;
      await fh?.close();
    });
  }

  /** Whether the spool file may exist (false: a new file held in memory whose spool was never made). */
  get mayHaveSpool(): boolean {
    return this.spoolMade;
  }

  /** Marks the spool as discarded (done with the version). */
  retire(): void {
    this.stopDirect();
    this.state = 'retired';
    this.memory = undefined;
    this.releaseUnwritten();
  }

  private releaseUnwritten(): void {
    if (this.unwrittenBytes > 0) this.unwritten?.give(this.unwrittenBytes);
    this.unwrittenBytes = 0;
  }

  /**
   * A new version holding this one's content (a change of a journaled, immutable version): the spool is
   * cloned where the file system can (reflink), else copied.
   */
  async derive(id: string, spoolPath: string, opts: Pick<LocalVersionOptions, 'fetchChunk'> = {}): Promise<LocalVersion> {
    const next = new LocalVersion(id, spoolPath, this.library, this.fullpath, this.base, { baseSize: 0, mtimeMs: this.mtimeMs, fetchChunk: opts.fetchChunk });
    await this.exclusive(async () => {
      if (this.state === 'retired') throw new VfsError('EIO', `'${this.fullpath}': local copy already discarded`);
      if (this.memory) await this.handle();
      await copyFile(this.spoolPath, spoolPath, constants.COPYFILE_FICLONE).catch((err: unknown) => { throw fsErrorOf(err, `copying the local version of '${this.fullpath}'`); });
    });
    next.size = this.size;
    next.baseSize = this.size;
    next.baseReady = true;
    next.spoolLength = this.size;
    next.ctimeMs = this.ctimeMs;
    next.operator = this.operator;
    next.replaces = baseAfter(this.replaces, this.currentSha1());
    return next;
  }

  /** Reads the spool's size from disk (journal replay). */
  async loadSize(): Promise<void> {
    this.size = (await stat(this.spoolPath)).size;
  }

  /** What changes with every change of the content (the kernel's too, while live). */
  changeMark(): number {
    this.refreshLive();
    return this.generation;
  }

  /** A modification: new generation, new time. */
  touch(): void {
    this.generation++;
    this.mtimeMs = Date.now();
  }

  /** Records the first failure of a change (the version can no longer be journaled) and returns it as a VfsError. */
  private fail(err: unknown, what: string): VfsError {
    const e = fsErrorOf(err, `${what} of '${this.fullpath}'`);
    this.failed ??= e;
    return e;
  }

  private assertMutable(): void {
    if (this.failed) throw this.failed;
    if (this.state !== 'writing' || this.sealed) throw new VfsError('EIO', `'${this.fullpath}': a journaled version cannot change (state ${this.state})`);
    if (this.failed) throw this.failed;
  }

  /** The spool's descriptor for a change: only while writing, and not after a failed change. */
  private async changeHandle(): Promise<FsHandle> {
    this.assertMutable();
    return this.handle();
  }

  /** SHA-1 and size of the spool now: the running hash when the file was only appended to, else a full pass. */
  private async hashNow(hasher: Hasher): Promise<{ sha1: string; size: number }> {
    if (this.hashed && this.hashed.generation === this.generation && this.hashed.size === this.size) return { sha1: this.hashed.sha1, size: this.size };
    const due = this.directHash;
    this.directHash = undefined;
    if (due && due.generation === this.generation && due.size === this.size) {
      const sha1 = await due.sha1;
      if (sha1 !== undefined && due.generation === this.generation) return { sha1, size: due.size };
    }
    if (this.smallHash && this.smallBytes === this.size) return { sha1: this.smallHash.copy().digest('hex'), size: this.size };
    if (this.appended) {
      const h = await this.appended.digest().catch(() => undefined);
      if (h && h.size === this.size) return h;
      this.dropSha1Stream(); // failed or out of step: never trusted again for this spool
    }
    return hasher.hash(this.spoolPath);
  }

  private dropSha1Stream(): void {
    this.appended?.close();
    this.appended = undefined;
    this.smallHash = undefined;
    this.smallData = undefined;
  }

  /** Copies base bytes `[start, end)` into the spool. */
  private async fetch(start: number, end: number): Promise<void> {
    if (end <= start) return;
    if (!this.openBase) throw new VfsError('EIO', `'${this.fullpath}': part of its content is not local and has no source`);
    const fh = await this.handle();
    const source = await this.openBase(start, end - 1);
    try {
      await this.copyIn(fh, source, start, end);
    } catch (err) {
      throw err instanceof VfsError ? err : this.fail(err, `fetching bytes ${start}-${end - 1}`);
    }
    this.present = addRange(this.present, start, end);
    if (this.spoolLength !== undefined) this.spoolLength = Math.max(this.spoolLength, end);
    this.counters.fetches++;
    this.counters.fetchedBytes += end - start;
  }

  private async copyIn(fh: FsHandle, source: Readable, start: number, end: number): Promise<void> {
    let at = start;
    try {
      for await (const chunk of source as AsyncIterable<Buffer>) {
        const piece = chunk.subarray(0, Math.max(0, end - at));
        let done = 0;
        while (done < piece.length) {
          const { bytesWritten } = await fh.write(piece, done, piece.length - done, at + done);
          done += bytesWritten;
        }
        at += piece.length;
        if (at >= end) break;
      }
    } finally {
      source.destroy();
    }
    if (at !== end) throw new VfsError('EIO', `fetching '${this.fullpath}' bytes ${start}-${end - 1}: expected ${end - start} bytes, got ${at - start}`);
  }

  /**
   * While live and small: the spool's bytes (its journal record carries them). Kept until the seal, which
   * takes the same bytes when nothing changed meanwhile: the flush that journals a small file asks for
   * them (inlineContent) just before it seals.
   */
  private liveSmallContent(): Buffer | undefined {
    const live = this.live;
    if (!live) return undefined;
    this.refreshLive();
    if (this.size > INLINE_MAX_BYTES) return undefined;
    if (live.small?.generation === this.generation) return live.small.data;
    const data = readWhole(live.fd, this.size);
    live.small = data ? { generation: this.generation, data } : undefined;
    return data;
  }

  /** A logical size beyond the last byte written: the spool file gets that length (zeros). */
  private async padToSize(fh: FsHandle): Promise<void> {
    const length = this.spoolLength ?? (await fh.stat()).size;
    if (length < this.size) await fh.truncate(this.size);
    this.spoolLength = Math.max(length, this.size);
  }

  private async handle(): Promise<FsHandle> {
    if (this.state === 'retired') throw new VfsError('EIO', `'${this.fullpath}': local copy already discarded`);
    // Only a version being written makes its spool; a journaled one must find its own (never zeros for a lost file).
    if (this.memory) return this.writeOut(this.memory);
    const flags = this.state === 'writing' && !this.sealed ? constants.O_RDWR | constants.O_CREAT : constants.O_RDWR;
    this.fh ??= await open(this.spoolPath, flags, 0o600).catch((err: unknown) => { throw fsErrorOf(err, `opening the local copy of '${this.fullpath}'`); });
    this.spoolMade = true;
    return this.fh;
  }

  /** Writes a file held in memory to its spool (made now); from here on the spool holds the content. */
  private async writeOut(memory: Buffer[]): Promise<FsHandle> {
    const fh = await open(this.spoolPath, constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC, 0o600).catch((err: unknown) => { throw fsErrorOf(err, `opening the local copy of '${this.fullpath}'`); });
    this.spoolMade = true;
    try {
      const data = Buffer.concat(memory, this.size);
      let done = 0;
      while (done < data.length) done += (await fh.write(data, done, data.length - done, done)).bytesWritten;
    } catch (err) {
      await fh.close().catch(() => undefined);
      throw fsErrorOf(err, `writing the local copy of '${this.fullpath}'`);
    }
    this.fh = fh;
    this.spoolLength = this.size;
    this.memory = undefined;
    this.releaseUnwritten();
    return fh;
  }
}

/** `size` bytes from the start of the file `fd` (a spool, on local disk); undefined when it is shorter or unreadable. */
function readWhole(fd: number, size: number): Buffer | undefined {
  const data = Buffer.alloc(size);
  let done = 0;
  try {
    while (done < size) {
      const n = readSync(fd, data, done, size - done, done);
      if (n === 0) return undefined;
      done += n;
    }
  } catch {
    return undefined;
  }
  return data;
}
