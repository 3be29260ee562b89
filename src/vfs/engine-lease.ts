/**
 * The engine lease: what a Vfs that owns its local durable state (GatewayVfs, through its write-back) lends
 * the FUSE engine (native/, driven by src/fuse/), the lessee. The engine's fast paths — writes made into a
 * spool off the main thread, reads answered from a local file, closes answered before the Vfs has the file
 * (their records written to a side log the owner reads), files created and closed before the Vfs is told,
 * the kernel writing a spool or reading a cache file itself (passthrough) — are granted only through this one capability, offered
 * optionally as `Vfs.engineLease` (as rclone's VFS offers its `Features`). The protocol-neutral Vfs contract
 * (types.ts) carries nothing of it, and lint keeps webdav/ and control/ off this file (eslint.config.js).
 * The owner decides every state change: the engine only ever asks, and writes what it is lent.
 */
import type { CallContext, FileHandle, OpenFlags } from './types.js';

/**
 * Free space the data folder must have for a file the kernel wrote itself (FUSE passthrough) to be
 * journaled at its close, bytes: a write the kernel made there and the disk refused is never seen, so
 * below this the close fails with ENOSPC and the file keeps its last version (a write that did not fit
 * leaves less free than the largest write, 1 MiB).
 */
export const KERNEL_WRITE_MIN_FREE_BYTES = 4 * 1024 * 1024;

export interface EngineLease {
  /**
   * Opens as Vfs.open does, for the engine: the handle has the engine's members (LeasedHandle). `journalId`:
   * with create, for a new file, the id its version gets in the upload journal (16 hex digits), given by
   * an engine that writes the version's journal record itself (sideJournal). Ignored otherwise.
   */
  open(path: string, flags: OpenFlags, ctx?: CallContext, opts?: { journalId?: string; spoolMade?: boolean }): Promise<LeasedHandle>;
  /**
   * Every name in folder `path` when they are known without asking the service (its listing is cached)
   * and there are at most `max`, as a lookup would find them now (a name in doubt among them: a name left
   * out is known missing); undefined otherwise. For a front end that answers lookups itself.
   */
  cachedNames(path: string, max: number): string[] | undefined;
  /**
   * Whether nothing is at `path`, as a lookup would find now, known without asking the service (its
   * folder's listing is cached and has no such name, or the path is known missing); false when unknown.
   */
  knownMissing(path: string): boolean;
  /**
   * Names a lookup finds in folder `path` that its listing (`listed`, what readdir gave) does not show
   * (a library root's `.versions`), for a front end that answers lookups from a listing; undefined when
   * the listing cannot answer lookups at all (a folder of the versions view: it follows the library's
   * folders, which change under it).
   */
  unlistedNames(path: string, listed: readonly string[]): string[] | undefined;
  /**
   * For a front end that answers a new small file's close itself once it has written the file's journal
   * record (the FUSE engine): the journal it writes to, undefined when closes must go through the Vfs
   * (durability "close", a read-only gateway).
   */
  sideJournal(): SideJournal | undefined;
  /**
   * The library and library-relative path of folder `path` when a close there may be answered before the
   * Vfs has the file (a library whose writes the service does not check per user); undefined otherwise.
   */
  answeredClosesIn(path: string): { library: string; fullpath: string } | undefined;
  /**
   * New files that a front end created, had written and closed all by itself before it told the Vfs
   * (the FUSE engine with passthrough): each spool is the journal's under its `journalId`, its journal
   * record `closed` (EngineClose). Each is made at its path at once as a closed file, its record taken as
   * the journal's own, as `open` (create, exclusive, a journal id) with `adoptSpool`, `flush(closed)` and `release`
   * would make it; the records of all go to the journal in one write. For each, false, with nothing
   * changed for it, when it cannot be made so (a name or a local version at the path, no such folder, a
   * record that is not this file's, a spool that changed since the record): the front end then goes those
   * three steps for it.
   */
  createClosed(files: readonly ClosedCreate[], ctx?: CallContext): Promise<boolean[]>;
}

/**
 * Vfs.open's flags as the owner takes them from the lease (EngineLease.open's options among them):
 * `spoolMade`, the front end made the spool under `journalId` itself (the kernel writes it: passthrough).
 */
export type LeaseOpenFlags = OpenFlags & { journalId?: string; spoolMade?: boolean };

/** A file handle opened through the lease: a FileHandle with the engine's members. */
export interface LeasedHandle extends FileHandle {
  /**
   * As FileHandle.flush. `closed`: the engine already wrote the version's close record to its side log
   * (see EngineClose); the journal writes its own line from that record when the spool is still as the
   * record saw it.
   */
  flush(closed?: EngineClose): Promise<void>;
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
   * For a read-only handle: may a front end whose kernel reads a local file itself (FUSE passthrough)
   * have it read this one instead of the handle? Granted (see CacheFileGrant) only for a handle reading
   * the service's version of a file with no local version, whose content is wholly in the content cache
   * (pinned or cached); undefined otherwise, and then `read` answers as before.
   */
  localFile?(): Promise<CacheFileGrant | undefined>;
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
 * A close a front end answered itself: the close record it wrote to its side log (the FUSE engine's
 * format, write-back/engine-close-record.ts: the file's place, time, SHA-1 and bytes). Of a file handed
 * over with a spool it made (LeasedHandle.adoptSpool), with the spool's modification time when it read
 * the bytes back from it: the version is sealed as that record says, with nothing read or hashed again,
 * when the spool still shows that size and time; otherwise as the spool now is. Either way, when the
 * version sealed is the record's content, the record stands for it should the journal take no line of
 * it (a full disk): applying a close the front end answered needs no new disk space.
 */
export interface EngineClose {
  record: Buffer;
  spoolMtimeNs?: bigint;
}

/** A file a front end created, had written and closed by itself (EngineLease.createClosed). */
export interface ClosedCreate {
  path: string;
  journalId: string;
  closed: EngineClose;
}

/** A version handed to the kernel (LeasedHandle.passthrough): the spool's descriptor, and its end. */
export interface PassthroughSpool {
  readonly fd: number;
  end(): void;
}

/**
 * A local file a front end's kernel may read in place of a read-only handle (LeasedHandle.localFile):
 * the content cache's file of the version the handle opened, held (never evicted, replaced or written)
 * until `end`. `content` names the bytes: two grants with the same one are the same bytes.
 */
export interface CacheFileGrant {
  readonly fd: number;
  readonly content: string;
  /** The kernel is done with the file (no descriptor opened with it any more): the hold goes. Once. */
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
  /** What a close record of the writer put: the file's place and bytes; undefined when it is not such a record. */
  sideRecordContent(record: Buffer): { library: string; fullpath: string; data: Buffer } | undefined;
  /** A record that could not be applied: what it put is kept in the journal's own log (a line of its own), for the next start. */
  keepSideRecord(record: Buffer): Promise<void>;
  /** The writer stopped and every record of it is settled. */
  detachSideWriter(writer: SideLogWriter): void;
  /** The folder of the spools (a version's is its id there): a front end may make one itself (LeasedHandle.adoptSpool). */
  spoolFolderPath(): string;
  /** Spools nobody needs are kept, emptied, in a pool in that folder (`.pool`), for a front end to take instead of making one. */
  startSpoolPool(): Promise<void>;
  /** A spool a front end made for a version that never came to be: removed, never pooled (the kernel may still write it). */
  dropSpool(id: string): Promise<void>;
}
