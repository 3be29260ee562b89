/**
 * VersionSpool: a LocalVersion's fields (local-version.ts says what each state means and which field is
 * guarded by what) and its spool storage — bytes held in memory until needed, the spool file, absent base
 * ranges fetched on demand — the layer LocalVersion's others build on.
 */
import { baseOf, type ConflictBase } from './conflicts.js';
import { open, stat, type FileHandle as FsHandle } from 'node:fs/promises';
import type { Hash } from 'node:crypto';
import { constants } from 'node:fs';
import type { Readable } from 'node:stream';
import { fsErrorOf } from '../fs-errors.js';
import type { DiskFaults } from '../disk-faults.js';
import type { RemoteEntry } from '../remote.js';
import { addRange, gaps, type ByteRange } from '../byte-ranges.js';
import type { Sha1Stream } from './sha1-streams.js';
import { VfsError, type Operator } from '../types.js';
import type { DirectWritesDone, LocalRange } from '../engine-lease.js';
import type { LocalVersion } from './local-version.js';
import { systemClock, type Clock } from '../clock.js';
import type { SpoolMark } from './spool-verification.js';


/** Opens bytes `[start, end]` (inclusive) of the base content. */
export type BaseOpener = (start: number, end: number) => Promise<Readable>;

export interface Hasher { hash(path: string): Promise<{ sha1: string; size: number }> }

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
  /** The time of its modifications (the real one by default). */
  clock?: Clock;
  /** Injected disk failures (tests). */
  faults?: DiskFaults;
  /** The spool does not exist yet (a fresh id): nothing to truncate or measure before the first write. */
  newSpool?: boolean;
  /** Where a sealed small file's bytes may wait for their spool (else it is written right after the seal). */
  unwritten?: UnwrittenSpools;
}


/** A direct writer of the spool: how to stop it, and how many of its writes were reported. */
export interface DirectAttachment { stop: () => DirectWritesDone | undefined; reported: number }

export type VersionState = 'writing' | 'journaled' | 'uploading' | 'uploaded' | 'retired';


export abstract class VersionSpool {
  /** Layers above (VersionEngineWrites, LocalVersion) that the spool's changes call. */
  abstract touch(): void;
  abstract stopDirect(): void;
  protected abstract dropSha1Stream(): void;

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
  /**
   * A commit of it was sent in this run and it is not known uploaded: the service may hold it (an answer
   * lost, or an upload cancelled under way), at its path or, renamed since, moved there with it.
   */
  commitSent = false;
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
  protected present: ByteRange[] = [];
  protected readonly openBase?: BaseOpener;
  protected readonly fetchChunk: number;
  /** SHA-1 of the spool as of `generation` (computed with the fsync of a flush). */
  protected hashed: { generation: number; sha1: string; size: number } | undefined;
  protected fh: FsHandle | undefined;
  protected readonly newSha1Stream?: () => Sha1Stream;
  protected readonly faults?: DiskFaults;
  /** The time of its modifications. */
  protected readonly clock: Clock;
  /** Set while the spool has been written only front to back since it was emptied: its running SHA-1. */
  protected appended: Sha1Stream | undefined;
  /** The same for a file still small: hashed here as it is written (`smallBytes` of it so far). */
  protected smallHash: Hash | undefined;
  protected smallBytes = 0;
  /** While the file is no larger than INLINE_MAX_BYTES: copies of what was appended, for its journal record. */
  protected smallData: Buffer[] | undefined;
  /**
   * A new file held in memory, without a spool file yet: copies of what was appended (at most
   * INLINE_MAX_BYTES; its journal record carries them). The spool is written when anything needs it (a
   * change other than an append, a reader of the file, the upload), and right after the seal, off the
   * caller's way. Undefined once the spool holds the content.
   */
  protected memory: Buffer[] | undefined;
  protected readonly unwritten?: UnwrittenSpools;
  /** Bytes of `memory` counted in `unwritten` (sealed, the spool's writing put off until it is needed). */
  protected unwrittenBytes = 0;
  /** Length of the spool file when known (saves an fstat, and a truncate of a spool that is empty). */
  protected spoolLength: number | undefined;
  /** False while a new version's spool file was never made (a file held in memory): nothing to remove. */
  protected spoolMade = true;
  /**
   * Made under the id of a spool a front end made itself (LeaseOpenFlags.journalId), not taken over
   * (adoptSpool): the file at `spoolPath` is the front end's, so this version never makes its own there.
   */
  lent = false;
  protected chain: Promise<unknown> = Promise.resolve();
  /** Runs of `exclusive` queued or under way. */
  protected queued = 0;
  /** Writes of this side under way (a spool is handed to a direct writer only with none). */
  protected writesUnderWay = 0;
  /** The direct writer of the spool, while it writes: how to stop it, and how many of its writes were reported. */
  protected direct: DirectAttachment | undefined;
  /** Handed to the kernel (passthrough): its spool descriptor, and the spool's size and mtime last seen. */
  protected live: { fd: number; size: bigint; mtimeNs: bigint; ctimeNs: bigint; ino: bigint; small?: { generation: number; data: Buffer } } | undefined;
  /** The spool as the kernel left it (`live`'s last look), once it is done with it. */
  protected lastLive: { size: bigint; mtimeNs: bigint; ctimeNs: bigint; ino: bigint } | undefined;
  /** Sealed by its spool's mark (a file the kernel wrote, not read at its seal): what its record names instead of a SHA-1. */
  protected marked: SpoolMark | undefined;
  /** Changed in place after its seal (while live): due for a new journal record. */
  liveChanged = false;
  /** The SHA-1 of the content of `generation` that a stopped direct writer is still finishing (see stopDirect). */
  protected directHash: { generation: number; size: number; sha1: Promise<string | undefined> } | undefined;
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
    this.clock = opts.clock ?? systemClock;
    this.mtimeMs = opts.mtimeMs ?? this.clock.now();
    this.ctimeMs = base?.ctimeMs ?? this.mtimeMs;
  }

  /** Bytes the service does not have yet (written, or journaled and not yet uploaded). */
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
   * Where a read of [position, position + length) finds its bytes in the spool right now (LeasedHandle.
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

  /** An append to a file held in memory (see `memory`). */
  protected append(data: Buffer): number {
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

  /** A spool lent by a front end is never made or opened as this version's own (two writers of one file). */
  protected assertOwnSpool(): void {
    if (this.lent) throw new VfsError('EIO', `'${this.fullpath}': its spool is a front end's, not taken over`);
  }

  /** Whether the spool file may exist (false: a new file held in memory whose spool was never made). */
  get mayHaveSpool(): boolean {
    return this.spoolMade;
  }

  protected releaseUnwritten(): void {
    if (this.unwrittenBytes > 0) this.unwritten?.give(this.unwrittenBytes);
    this.unwrittenBytes = 0;
  }

  /** Reads the spool's size from disk (journal replay). */
  async loadSize(): Promise<void> {
    this.size = (await stat(this.spoolPath)).size;
  }

  /** Records the first failure of a change (the version can no longer be journaled) and returns it as a VfsError. */
  protected fail(err: unknown, what: string): VfsError {
    const e = fsErrorOf(err, `${what} of '${this.fullpath}'`);
    this.failed ??= e;
    return e;
  }

  protected assertMutable(): void {
    if (this.failed) throw this.failed;
    if (this.state !== 'writing' || this.sealed) throw new VfsError('EIO', `'${this.fullpath}': a journaled version cannot change (state ${this.state})`);
    if (this.failed) throw this.failed;
  }

  /** The spool's descriptor for a change: only while writing, and not after a failed change. */
  protected async changeHandle(): Promise<FsHandle> {
    this.assertMutable();
    return this.handle();
  }

  /** Copies base bytes `[start, end)` into the spool. */
  protected async fetch(start: number, end: number): Promise<void> {
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

  protected async copyIn(fh: FsHandle, source: Readable, start: number, end: number): Promise<void> {
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

  /** A logical size beyond the last byte written: the spool file gets that length (zeros). */
  protected async padToSize(fh: FsHandle): Promise<void> {
    const length = this.spoolLength ?? (await fh.stat()).size;
    if (length < this.size) await fh.truncate(this.size);
    this.spoolLength = Math.max(length, this.size);
  }

  protected async handle(): Promise<FsHandle> {
    if (this.state === 'retired') throw new VfsError('EIO', `'${this.fullpath}': local copy already discarded`);
    this.assertOwnSpool();
    // Only a version being written makes its spool; a journaled one must find its own (never zeros for a lost file).
    if (this.memory) return this.writeOut(this.memory);
    const flags = this.state === 'writing' && !this.sealed ? constants.O_RDWR | constants.O_CREAT : constants.O_RDWR;
    this.fh ??= await open(this.spoolPath, flags, 0o600).catch((err: unknown) => { throw fsErrorOf(err, `opening the local copy of '${this.fullpath}'`); });
    this.spoolMade = true;
    return this.fh;
  }

  /** Writes a file held in memory to its spool (made now); from here on the spool holds the content. */
  protected async writeOut(memory: Buffer[]): Promise<FsHandle> {
    this.assertOwnSpool();
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
