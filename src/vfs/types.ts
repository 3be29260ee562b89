/**
 * The Vfs contract that both front ends (webdav/, fuse/) program against. Paths are absolute POSIX-style
 * gateway paths: `/` lists the libraries, `/<library>/<fullpath>` is a file or folder inside one.
 * Errors are VfsError with a protocol-neutral errno-like code; each front end translates them.
 */
import type { Readable } from 'node:stream';

export type VfsErrorCode =
  | 'ENOENT' // no such file or folder
  | 'EEXIST' // target exists (exclusive create, mkdir, rename with noReplace)
  | 'ENOTEMPTY' // rmdir of a non-empty folder
  | 'ENOTDIR' // a path component is a file, or rmdir of a file
  | 'EISDIR' // file operation on a folder
  | 'EACCES' // permission denied by the service
  | 'EPERM' // operation not permitted here (e.g. removing a library folder)
  | 'ENOSPC' // library capacity exceeded
  | 'EFBIG' // larger than the largest file allowed
  | 'EIO' // the service failed or is unreachable
  | 'EAGAIN' // try again (service temporarily unavailable)
  | 'ENAMETOOLONG' // a name over 255 UTF-8 bytes
  | 'EINVAL' // a name the service refuses, or a bad argument
  | 'EROFS' // read-only gateway or user
  | 'EXDEV' // not possible across libraries
  | 'EBUSY' // in use
  | 'ELOCKED' // locked by another member on the service
  | 'ENOSYS' // not supported
  | 'ENOTSUP'; // extended operation not supported on this object

/** Longest file or folder name the Vfs takes (the service's limit), in UTF-8 bytes: longer ones are ENAMETOOLONG. */
export const MAX_NAME_BYTES = 255;

/**
 * Free space the data folder must have for a file the kernel wrote itself (FUSE passthrough) to be
 * journaled at its close, bytes: a write the kernel made there and the disk refused is never seen, so
 * below this the close fails with ENOSPC and the file keeps its last version (a write that did not fit
 * leaves less free than the largest write, 1 MiB).
 */
export const KERNEL_WRITE_MIN_FREE_BYTES = 4 * 1024 * 1024;

export class VfsError extends Error {
  /** The service could not be reached (no answer, a cut connection): the library is offline. */
  readonly unreachable: boolean;

  constructor(readonly code: VfsErrorCode, message: string, options?: { cause?: unknown; unreachable?: boolean }) {
    super(`${code}: ${message}`, options);
    this.name = 'VfsError';
    this.unreachable = options?.unreachable ?? false;
  }
}

export interface Attr {
  /** Gateway path, e.g. `/Projects/docs/a.txt`. */
  path: string;
  name: string;
  isDir: boolean;
  /** Bytes; 0 for folders. */
  size: number;
  /** Last modification, ms since the epoch. */
  mtimeMs: number;
  /** Creation, ms since the epoch. */
  ctimeMs: number;
  /** Stable identifier of the object on the service (`hash`), unchanged by rename; absent for the root. */
  id?: string;
  /** Content hash (SHA-1) when known; absent for folders and for local data not yet hashed. */
  contentHash?: string;
  /** True while local data is waiting to be uploaded. */
  dirty?: boolean;
  /** Locked on the service (by anyone). */
  locked?: boolean;
  /** Tags of the service, if any. */
  tags?: string[];
  /** Operator name of the last change, if known. */
  lastModifiedBy?: string;
  /** The library is offline: this is what was known when it went away. */
  stale?: boolean;
}

export interface StatFs {
  /** Capacity in bytes (Number.MAX_SAFE_INTEGER when unlimited). */
  total: number;
  used: number;
  free: number;
  /** Files in the library (when known). */
  files?: number;
}

export interface OpenFlags {
  read?: boolean;
  write?: boolean;
  /** Create if missing. */
  create?: boolean;
  /** With create: fail with EEXIST if it exists. */
  exclusive?: boolean;
  /** Truncate to 0 on open. */
  truncate?: boolean;
  append?: boolean;
  /**
   * With create, for a new file: the id its version gets in the upload journal (16 hex digits), given by a
   * front end that writes the version's journal record itself (Vfs.sideJournal). Ignored otherwise.
   */
  journalId?: string;
}

/** Who acts: passed through to the service as op_id / op_name. */
export interface Operator { opId?: string; opName?: string }

export interface CallContext {
  operator?: Operator;
  /**
   * Who holds service locks taken with this call, and may write what they lock: a front end names its
   * callers (WebDAV: 'webdav'); calls without one (the mount, the control socket) share the holder ''.
   */
  lockHolder?: string;
  signal?: AbortSignal;
  /** A copy through the gateway (across libraries) reports bytes as the service takes them (each call: bytes added). */
  onCopied?: (bytes: number) => void;
}

export interface FileHandle {
  readonly path: string;
  /**
   * Reads up to `length` bytes at `position`; fewer at end of file, empty past it. `ctx.signal` stops a
   * read that goes to the service (its range fetch ends; the read fails with EIO).
   */
  read(position: number, length: number, ctx?: CallContext): Promise<Buffer>;
  /** As `read`, in pieces not joined into one buffer (when the handle has them that way). */
  readParts?(position: number, length: number, ctx?: CallContext): Promise<Buffer[]>;
  /** Writes at `position`; returns the number of bytes written. `data` is the caller's again once this settles. */
  write(position: number, data: Buffer): Promise<number>;
  truncate(size: number): Promise<void>;
  /** Current attributes as this handle sees them (local size while dirty). */
  stat(): Promise<Attr>;
  /**
   * Makes written data durable in the upload journal; the upload happens in the background. `closed`: the
   * front end already wrote the version's journal record to its side log (see EngineClose); the journal
   * takes that line as its own when the spool is still as the record saw it.
   */
  flush(closed?: EngineClose): Promise<void>;
  /** As flush. */
  fsync(): Promise<void>;
  /** Closes the handle; dirty data is journaled (durable) before this resolves. */
  release(): Promise<void>;
  /**
   * The spool this handle's writes may be made to directly, by a front end that receives them off the
   * main thread (the FUSE engine): undefined unless the handle is the only writer of a version being
   * written that has its spool on disk, no write of its own under way. See DirectSpool.
   */
  directSpool?(): DirectSpool | undefined;
  /**
   * Where the bytes a read of [position, position + length) answers are in a local file right now, for
   * a front end that reads them from there itself before control returns to the event loop (the FUSE
   * engine: they never enter JavaScript). Undefined whenever `read` has to answer (see LocalRange).
   */
  localRange?(position: number, length: number): LocalRange | undefined;
  /**
   * Hands the handle's version to a front end whose kernel reads and writes its spool itself (FUSE
   * passthrough): undefined unless the handle is the only writer of a version being written, every base
   * byte local. From then on nothing reads or writes the version through this handle; the version takes
   * its size and times from the spool, and flushes, fsyncs and truncates go on as before. `end` is called
   * once the kernel is done with the spool (no handle of the file open that way any more). See PassthroughSpool.
   */
  passthrough?(): Promise<PassthroughSpool | undefined>;
  /**
   * A new, empty file whose spool a front end made itself (in the journal's spool folder, under the id
   * the version was created with) and had the kernel write: that spool becomes the version's, its
   * content the file's, and the version is handed over as with `passthrough`. Undefined when the version
   * is not such a file (something was written to it through this handle).
   */
  adoptSpool?(): Promise<PassthroughSpool | undefined>;
}

/**
 * A close a front end answered itself, of a file handed over with a spool it made (FileHandle.adoptSpool):
 * the journal record it wrote to its side log (a put line, the file's bytes in it, read back from the
 * spool) and the spool's modification time when it read them. The version is sealed as that line says,
 * with nothing read or hashed again, when the spool still shows that size and time; otherwise as the
 * spool now is.
 */
export interface EngineClose {
  line: Buffer;
  spoolMtimeNs: bigint;
}

/** A file a front end created, had written and closed by itself (Vfs.createClosed). */
export interface ClosedCreate {
  path: string;
  journalId: string;
  closed: EngineClose;
}

/** A version handed to the kernel (FileHandle.passthrough): the spool's descriptor, and its end. */
export interface PassthroughSpool {
  readonly fd: number;
  end(): void;
}

/**
 * Bytes of a file in a local file: `length` bytes (the read clipped to the file's size, at least one)
 * at `position` of descriptor `fd`, valid until control returns to the event loop.
 */
export interface LocalRange {
  readonly fd: number;
  readonly position: number;
  readonly length: number;
}

/**
 * A spool handed to a direct writer. Between `begin` and the writer's `stop`, the writer writes the
 * handle's data at `fd` itself (pwrite) and reports each write with `wrote`, in order; the version keeps
 * its size, times and failure from those reports. Any other change of the version (a truncate, a flush,
 * a second writer, the spool's close) calls `stop` first, synchronously: no write reaches `fd` after it.
 */
export interface DirectSpool {
  readonly fd: number;
  /**
   * The spool's first `hashFrom` bytes are its whole content and were written front to back from empty:
   * a SHA-1 may be continued from them (read back). -1: the writer keeps no hash.
   */
  readonly hashFrom: number;
  /** Starts the direct writes; `stop` ends them and answers what was done (undefined: nothing). */
  begin(stop: () => DirectWritesDone | undefined): void;
  /** One write made at `fd`, or one that failed (`errno` > 0, nothing written), in the order they were made. */
  wrote(offset: number, length: number, errno: number): void;
  /** The writer is done (its handle closed): as any change of the version, it calls `stop` (once). */
  end(): void;
}

/** What a direct writer did, as its `stop` answers. */
export interface DirectWritesDone {
  /** Writes made (failed ones not counted) and the end of the furthest one. */
  count: number;
  end: number;
  /** errno of the first failed write, 0 if none failed. */
  errno: number;
  /** SHA-1 (hex) of the spool's first `hashed` bytes, when every write continued the hash. */
  sha1?: string;
  /**
   * The same hash when the writer is still computing it (it hashes behind its writes): resolves with it,
   * or undefined when it could not be finished (the spool is then hashed as without a writer's hash).
   */
  sha1Later?: Promise<string | undefined>;
  hashed: number;
}

export interface Vfs {
  /**
   * Attributes of a path. `fresh`: asked of the service itself, past the metadata cache (which is updated
   * with the answer), for a check that must not trust a cache that may predate another client's change
   * (a write's If-Match); a file with local changes waiting is answered as it is locally.
   */
  stat(path: string, ctx?: CallContext, opts?: { fresh?: boolean }): Promise<Attr>;
  readdir(path: string, ctx?: CallContext): Promise<Attr[]>;
  /**
   * Every name in folder `path` when they are known without asking the service (its listing is cached)
   * and there are at most `max`, as a lookup would find them now; undefined otherwise. For a front end
   * that answers lookups itself.
   */
  cachedNames?(path: string, max: number): string[] | undefined;
  /**
   * For a front end that answers a new small file's close itself once it has written the file's journal
   * record (the FUSE engine): the journal it writes to, undefined when closes must go through the Vfs
   * (durability "close", a read-only gateway).
   */
  sideJournal?(): SideJournal | undefined;
  /**
   * The library and library-relative path of folder `path` when a close there may be answered before the
   * Vfs has the file (a library whose writes the service does not check per user); undefined otherwise.
   */
  answeredClosesIn?(path: string): { library: string; fullpath: string } | undefined;
  /**
   * New files that a front end created, had written and closed all by itself before it told the Vfs
   * (the FUSE engine with passthrough): each spool is the journal's under its `journalId`, its journal
   * record `closed` (EngineClose). Each is made at its path at once as a closed file, its record taken as
   * the journal's own, as `open` (create, exclusive) with `adoptSpool`, `flush(closed)` and `release`
   * would make it; the records of all go to the journal in one write. For each, false, with nothing
   * changed for it, when it cannot be made so (a name or a local version at the path, no such folder, a
   * record that is not this file's, a spool that changed since the record): the front end then goes those
   * three steps for it.
   */
  createClosed?(files: readonly ClosedCreate[], ctx?: CallContext): Promise<boolean[]>;
  open(path: string, flags: OpenFlags, ctx?: CallContext): Promise<FileHandle>;
  mkdir(path: string, ctx?: CallContext): Promise<Attr>;
  /** Renames or moves a file or folder. `noReplace`: EEXIST when the target exists (else replaced). */
  rename(from: string, to: string, opts?: { noReplace?: boolean }, ctx?: CallContext): Promise<void>;
  unlink(path: string, ctx?: CallContext): Promise<void>;
  rmdir(path: string, ctx?: CallContext): Promise<void>;
  /** Copies a file or folder (recursive). `noReplace`: EEXIST when the target exists. */
  copy(from: string, to: string, opts?: { noReplace?: boolean }, ctx?: CallContext): Promise<void>;
  statfs(path: string, ctx?: CallContext): Promise<StatFs>;
  /** Sets the modification time as far as the service keeps it (locally until committed). */
  setTimes(path: string, mtimeMs: number, ctx?: CallContext): Promise<void>;

  /** Streams `[start, end]` (inclusive) of a file, fetching only that range. */
  createReadStream(path: string, range?: { start?: number; end?: number }, ctx?: CallContext): Promise<Readable>;
  /**
   * Replaces (or creates) a file with the stream's bytes, without holding them all in memory. Atomic: the
   * file changes only if the stream ends normally (then the new content is journaled before this
   * resolves); a failed or cut-off stream leaves the file as it was. `holdUploadMs`: the upload waits that
   * long (an empty new file whose content usually follows at once; a newer version replaces it unsent).
   */
  /** `opts.size`: the length the caller declares; refused before any byte when it may not be written (EFBIG, ENOSPC). */
  writeFile(path: string, source: Readable | Buffer | AsyncIterable<Buffer>, ctx?: CallContext, opts?: { holdUploadMs?: number; size?: number }): Promise<Attr>;

  getTags(path: string, ctx?: CallContext): Promise<string[]>;
  setTags(path: string, tags: string[], ctx?: CallContext): Promise<void>;
  /** Locks (or unlocks) the file on the service. */
  setLocked(path: string, locked: boolean, ctx?: CallContext): Promise<void>;
  /** Keeps (or stops keeping) a file or folder on this machine (pins; needs the content cache). */
  setPinned?(path: string, pinned: boolean, ctx?: CallContext): Promise<unknown>;
  /** True when the path is kept on this machine (itself or by a pinned folder above it). */
  pinned?(path: string, ctx?: CallContext): Promise<boolean>;

  /**
   * Journals what open files hold and waits until every pending upload has been confirmed by the service.
   * Throws when one failed meanwhile (it stays queued): ENOSPC when a library is full, else its error.
   */
  flushAll(opts?: { timeoutMs?: number }): Promise<void>;
  /** Stops feeds and queues; pending uploads stay in the journal. */
  close(): Promise<void>;
  /**
   * Where a front end says it is serving an application (at each request it takes), so background work
   * (the uploads) gives way meanwhile (ForegroundActivity). Optional.
   */
  readonly foreground?: { touch(): void };
}

/**
 * A writer of put records into logs of its own (the FUSE engine, which answers a small file's close
 * once the file's record is written to such a log: a crash then loses nothing, as when the Vfs answers).
 */
export interface SideLogWriter {
  /**
   * Makes the writer append to `path` from now on; resolves once every record it wrote to its earlier
   * logs is settled (sideRecordSettled or keepSideRecord called for it).
   */
  switchTo(path: string): Promise<void>;
  /** Resolves once every record it wrote so far (every close it answered) is settled. */
  settle(): Promise<void>;
}

/** What a SideLogWriter needs of the journal. */
export interface SideJournal {
  /** Starts the writer on a new side log (one writer at a time). */
  attachSideWriter(writer: SideLogWriter): Promise<void>;
  /**
   * The record of `id` was applied: the journal has its own line for the version (or the version went,
   * which a removal line says now): from here the journal's own lines decide what replay finds.
   */
  sideRecordSettled(id: string): Promise<void>;
  /** What a record (one of the writer's lines) put: the file's place and bytes; undefined when it is not such a record. */
  sideRecordContent(line: Buffer): { library: string; fullpath: string; data: Buffer } | undefined;
  /** A record that could not be applied: its line is kept as it is in the journal's own log, for the next start. */
  keepSideRecord(line: Buffer): Promise<void>;
  /** The writer stopped and every record of it is settled. */
  detachSideWriter(writer: SideLogWriter): void;
  /** The folder of the spools (a version's is its id there): a front end may make one itself (FileHandle.adoptSpool). */
  spoolFolderPath(): string;
  /** Spools nobody needs are kept, emptied, in a pool in that folder (`.pool`), for a front end to take instead of making one. */
  startSpoolPool(): Promise<void>;
  /** A spool a front end made for a version that never came to be: removed, never pooled (the kernel may still write it). */
  dropSpool(id: string): Promise<void>;
}
