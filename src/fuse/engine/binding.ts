/**
 * The native part of the libfuse 3 engine (`native/fuse3`, built from source by `scripts/bootstrap`
 * with node-gyp against libfuse3-dev): a session over libfuse's low-level API whose reader thread hands
 * requests to JavaScript in batches, and the reply functions that answer them by id.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { DirectWritesDone } from '../../vfs/engine-lease.js';

/** Request kinds, as numbered by the native part. */
export const Op = {
  LOOKUP: 1, FORGET: 2, GETATTR: 3, SETATTR: 4, MKDIR: 5, UNLINK: 6, RMDIR: 7, RENAME: 8, OPEN: 9,
  READ: 10, WRITE: 11, FLUSH: 12, RELEASE: 13, FSYNC: 14, OPENDIR: 15, READDIR: 16, RELEASEDIR: 17,
  FSYNCDIR: 18, STATFS: 19, SETXATTR: 20, GETXATTR: 21, LISTXATTR: 22, REMOVEXATTR: 23, ACCESS: 24,
  CREATE: 25, WROTE: 26, READDIRPLUS: 27, HASHED: 28, FALLOCATE: 29, SYMLINK: 30, READLINK: 31, INIT: 98,
  END: 99,
} as const;

/** One request from the kernel; which fields are set depends on `op`. */
export interface KernelRequest {
  op: number;
  /** Answer with this id (0 for FORGET, INIT and END, which take no answer). */
  id: number;
  ino: number;
  fh?: number;
  name?: string;
  newparent?: number;
  /** RENAME: the engine's count of renames, this one included (see pathsKept). */
  pathsEpoch?: number;
  newname?: string;
  /** SYMLINK: the link's target (`name` the link's name in folder `ino`). */
  target?: string;
  flags?: number;
  mode?: number;
  size?: number;
  offset?: number;
  data?: Buffer;
  nlookup?: number;
  /** SETATTR: which fields to set (FUSE_SET_ATTR_*). */
  valid?: number;
  uid?: number;
  gid?: number;
  atimeMs?: number;
  mtimeMs?: number;
  /**
   * WROTE (a write the engine made into a spool itself): errno of a failed one, and the record's number.
   * HASHED (the hash of a detached spool, finished on the engine's hash thread): `seq` is the `hashing`
   * number spoolDetach answered, `size` the bytes hashed, `name` the SHA-1 (hex; absent when the spool
   * could not be read back).
   */
  errno?: number;
  seq?: number;
  /**
   * WRITE, SETATTR, CREATE and RELEASE: 1 when the engine answered the kernel already (a small write, the
   * times written back at close, a new file in a folder whose names it knows, the release of such a file
   * whose create was interrupted): JavaScript applies it, and an error it gets goes to the handle's next
   * flush or fsync.
   */
  answered?: number;
  /** CREATE answered by the engine: the new file's inode (`fh` its handle, `mtimeMs` the time it showed). */
  newIno?: number;
  /**
   * CREATE answered by the engine, when it follows the file for its close: the id the file's version gets
   * in the upload journal. FLUSH answered by the engine (a close, see journalSwitch): the same id.
   */
  journalId?: string;
  /**
   * CREATE answered by the engine with passthrough: the backing file's id. The file's spool is already
   * made (in the spoolFolder, under journalId) and the kernel writes it itself.
   */
  backingId?: number;
  /**
   * FLUSH answered by the engine: its record's number (from 1, across the logs), and the close record it
   * wrote (its own format: src/vfs/engine-close-record.ts).
   */
  record?: number;
  closeRecord?: Buffer;
  /**
   * FLUSH answered by the engine, of a file the kernel wrote (passthrough): the spool's modification time
   * (ns) when the engine read the bytes the record carries (unchanged while it read them).
   */
  spoolMtimeNs?: bigint;
  /** INIT: what the kernel agreed to. */
  maxWrite?: number;
  maxReadahead?: number;
  maxBackground?: number;
  writeback?: number;
}

/** What spoolDetach answers: DirectWritesDone, its hash either there (`sha1`) or still being computed (`hashing`). */
export type EngineWritesDone = Omit<DirectWritesDone, 'sha1Later'> & { hashing?: number };

/** Session settings asked for at INIT. */
export interface SessionSettings {
  maxWrite: number;
  maxReadahead: number;
  maxBackground: number;
  congestionThreshold: number;
  writeback: number;
  asyncRead: number;
  readers: number;
  /** 1: getattr answered from the attributes of JavaScript's answers, while they are valid (see The engine). */
  attrCache?: number;
  /** 1 (with attrCache and the writeback cache): small writes and the times written back at close answered by the engine. */
  answerSmallWrites?: number;
  /** 1: lookups of names a folder does not have answered by the engine, for folders whose names JavaScript gave it (folderNames). */
  folderNames?: number;
  /**
   * 1 (with folderNames, answerSmallWrites and the writeback cache): a create in a folder whose names are
   * known answered by the engine, the file shown with `uid`, `gid` and kept `timeoutMs`.
   */
  answerCreates?: number;
  /**
   * The longest name the Vfs takes, in UTF-8 bytes: the engine answers lookups and creates only of names
   * within it (well-formed UTF-8); every other name is JavaScript's to answer. 0 or absent: none.
   */
  nameMaxBytes?: number;
  /**
   * Free bytes the spools' disk must have for the engine to answer the close of a file the kernel wrote
   * itself (a write it refused is never seen): below, JavaScript closes it. 0 or absent: no close answered.
   */
  spoolMinFreeBytes?: number;
  uid?: number;
  gid?: number;
  timeoutMs?: number;
  /** KiB of a spool written and hashed by the engine after which their writeback to disk starts (0: never). */
  writebackAheadKiB?: number;
  /**
   * KiB of a spool whose writeback the engine started after which a thread of its own fdatasyncs it in
   * the background (0: never; needs writebackAheadKiB).
   */
  syncAheadKiB?: number;
  /**
   * 0: every request from /dev/fuse; 1 (default): over io_uring when the kernel offers it at INIT (FUSE
   * over io_uring, Linux 6.14+, the fuse module's `enable_uring` on), from /dev/fuse otherwise.
   */
  transport?: number;
  /**
   * 1: ask for passthrough when the kernel offers it (Linux 6.9 and later), instead of the writeback
   * cache (the kernel grants passthrough only to a connection without it).
   */
  passthrough?: number;
  /** Request buffers each CPU's ring registers (default 16): requests made on a CPU beyond them wait in the kernel. */
  ringDepth?: number;
  /**
   * 1: the null file system of the benchmarks (names and sizes in memory, every request answered by the
   * engine); only the `fuse3_bench` addon has it (`fuse3` throws).
   */
  nullFiles?: number;
}

/** Requests the engine answered itself from what JavaScript told it. */
export interface AnsweredCounts {
  getattr: number;
  writes: number;
  times: number;
  /** Modes set through a handle of a file the engine created and handed to the kernel (passthrough). */
  modes: number;
  /** Lookups answered "no such entry" from a folder's names. */
  lookups: number;
  /** Files created by the engine in folders whose names it knew. */
  creates: number;
  /** Closes of such files answered by the engine once their close record was written (journalSwitch). */
  closes: number;
  /** Files created with passthrough whose spool was one made ahead (docs/fuse.md, Spools made ahead). */
  spoolsMadeAhead: number;
}

/** How the kernel's requests reach the engine. */
export interface TransportState {
  /** "uring": from the rings of FUSE over io_uring; "dev": from /dev/fuse. */
  transport: 'uring' | 'dev';
  /** Why not over io_uring, when not. */
  why?: string;
  /** Requests that came from the rings, and from /dev/fuse (forgets and interrupts always do). */
  ringRequests: number;
  devRequests: number;
  /** Rings (one a CPU the kernel may have), and the request buffers of each. */
  queues: number;
  depth: number;
  /** Passthrough granted at INIT: opens may be answered with a backing file (backingOpen). */
  passthrough: boolean;
}

/** Where a folder is in the Vfs (for the close records of closes the engine answers). */
export interface FolderWhere {
  library: string;
  fullpath: string;
}

declare const sessionBrand: unique symbol;
export type NativeSession = { readonly [sessionBrand]: true };

export interface Fuse3Binding {
  mount(mountpoint: string, options: string[], settings: SessionSettings, onBatch: (batch: KernelRequest[]) => void): NativeSession;
  unmount(session: NativeSession): Promise<void>;
  /** False (nothing freed, nothing blocked) while a reader is still blocked on the device. */
  destroy(session: NativeSession): boolean;
  replyErr(session: NativeSession, id: number, errno: number): boolean;
  /** stat: Float64Array [ino, mode, nlink, uid, gid, size, blocks, blksize, atimeMs, mtimeMs, ctimeMs]. */
  replyEntry(session: NativeSession, id: number, stat: Float64Array, entryTimeoutS: number, attrTimeoutS: number): boolean;
  replyNegative(session: NativeSession, id: number, timeoutS: number): boolean;
  replyAttr(session: NativeSession, id: number, stat: Float64Array, attrTimeoutS: number): boolean;
  /** flags: 1 direct_io, 2 keep_cache. False when the open was interrupted (nothing will release it). */
  replyOpen(session: NativeSession, id: number, fh: number, flags: number): boolean;
  replyCreate(session: NativeSession, id: number, stat: Float64Array, entryTimeoutS: number, attrTimeoutS: number, fh: number, flags: number): boolean;
  /**
   * Passthrough (TransportState.passthrough): `fd` registered as a backing file; answers its id (> 0), or
   * -errno when the kernel refused it (-EOPNOTSUPP: passthrough was not granted).
   */
  backingOpen(session: NativeSession, fd: number): number;
  /** The backing file `id` is let go of (handles opened with it keep it): 0 or -errno. */
  backingClose(session: NativeSession, id: number): number;
  /** The open answered with the backing file `backingId`: the kernel reads and writes it itself for this handle. */
  replyOpenBacking(session: NativeSession, id: number, fh: number, backingId: number): boolean;
  replyCreateBacking(session: NativeSession, id: number, stat: Float64Array, entryTimeoutS: number, attrTimeoutS: number, fh: number, backingId: number): boolean;
  replyWrite(session: NativeSession, id: number, count: number): boolean;
  replyXattrSize(session: NativeSession, id: number, size: number): boolean;
  replyData(session: NativeSession, id: number, parts: readonly Buffer[], limit: number): boolean;
  /** A read answered with `length` bytes at `position` of `fd`, read by the engine (a failed read answers its errno). */
  replyFd(session: NativeSession, id: number, fd: number, position: number, length: number): boolean;
  /** Entries from `firstOffset` on, as many as fit in `size` bytes; answers how many went in (-1: not pending). */
  replyDir(session: NativeSession, id: number, size: number, names: readonly string[], inos: Float64Array, dirs: Uint8Array, firstOffset: number): number;
  /**
   * readdirplus: entries from `firstOffset` on with their attributes (`stats`: 11 fields an entry, as
   * replyAttr takes), as many as fit in `size` bytes; answers how many went in (-1: not pending). The
   * kernel counts a lookup for each entry that went in, "." and ".." excepted.
   */
  replyDirPlus(session: NativeSession, id: number, size: number, names: readonly string[], stats: Float64Array, entryTimeoutS: number, attrTimeoutS: number, firstOffset: number): number;
  /** statfs: Float64Array [bsize, frsize, blocks, bfree, bavail, files, ffree, favail, fsid, flag, namemax]. */
  replyStatfs(session: NativeSession, id: number, statfs: Float64Array): boolean;
  /**
   * The writes of `fh` go into the spool `fd` from now on, made by the engine on its reader threads (each
   * reported as a WROTE request; the engine writes through a duplicate of `fd`). hashFrom >= 0: the
   * spool's first hashFrom bytes start a SHA-1 that the engine's hash thread keeps up with the writes
   * that continue them (reading them back from the spool); -1: none. Answers the number the
   * attachment's WROTE records are above; undefined, and nothing attached, while a write of `fh` the
   * engine answered is still queued for JavaScript (the engine's later writes would reach the spool before
   * it: the caller likewise attaches none while it has such writes not yet made).
   */
  spoolAttach(session: NativeSession, fh: number, fd: number, hashFrom: number): number | undefined;
  /**
   * The writes of `fh` go through JavaScript again (writes under way finish first); what the engine did,
   * or undefined when it had no spool. The hash thread may not have caught up yet: then `sha1` is absent
   * and `hashing` numbers the HASHED request that brings it.
   */
  spoolDetach(session: NativeSession, fh: number): EngineWritesDone | undefined;
  /** A write received before `fh` got its spool, made the engine's way (bytes or -errno); undefined: no spool. */
  spoolWrite(session: NativeSession, fh: number, data: Buffer, offset: number): number | undefined;
  /**
   * Every name of folder `ino`, as the answer to the pending request `id` found them: lookups of other
   * names are answered "no such entry" by the engine for timeoutS seconds (names added through the mount
   * meanwhile are added by the engine as their requests arrive). False when not kept: a request that may
   * add a name arrived after `id`, or is unanswered.
   */
  folderNames(session: NativeSession, id: number, ino: number, names: readonly string[], timeoutS: number, where?: FolderWhere): boolean;
  /**
   * The close records of closes the engine answers (of small files it created, every byte answered by
   * it; its own format, see encodeCloseRecord) are appended to `path` from now on; null: closes are JavaScript's again. Answers how many records
   * were written before the switch (numbered from 1 across the files).
   */
  journalSwitch(session: NativeSession, path: string | null): number;
  /**
   * The close record the engine writes to that log for these fields (its own format: close_record.c,
   * read by src/vfs/engine-close-record.ts); for the tests both sides share. Throws on a field that does
   * not fit (a name over 65,535 bytes, content over 64 KiB, an id that is not 16 hex digits).
   */
  encodeCloseRecord(fields: { id: string; library: string; fullpath: string; mtimeNs: bigint; createdMs: number; seq: number; data: Buffer }): Buffer;
  /**
   * With passthrough: the files the engine creates get their spools in the folder `path` (the upload
   * journal's), under their ids, and are handed to the kernel at once; null: none (their creates are
   * JavaScript's). Throws when the folder cannot be opened.
   */
  spoolFolder(session: NativeSession, path: string | null): void;
  /** The names of folder `ino` changed in a way the engine cannot see: lookups there go to JavaScript again. */
  namesForget(session: NativeSession, ino: number): void;
  /**
   * The rename whose record carried `epoch` (pathsEpoch) was of a file: no folder's path changed.
   * When no rename came since, what the engine was told of folders' paths before it holds again (each
   * rename makes it unknown when it arrives). False when another rename came meanwhile.
   */
  pathsKept(session: NativeSession, epoch: number): boolean;
  /**
   * on: the kernel writes `ino` itself from now on (passthrough), so the engine answers no attributes of it
   * from its cache until off; false when the cache could not take the mark (then do not hand it over).
   * With `fd` (the spool's), getattr is answered by the engine meanwhile: the attributes last answered,
   * with the spool's size and times (until a change JavaScript makes, a mode or time, comes through).
   */
  attrLive(session: NativeSession, ino: number, on: boolean, fd?: number): boolean;
  /** The engine's cached attributes of `ino` are no longer valid (changed in a way it cannot see: a rename, another client). */
  attrForget(session: NativeSession, ino: number): void;
  /**
   * What is queued and not yet handed over (the records of answered writes and times wait quietly for
   * the next request otherwise).
   */
  takeQueued(session: NativeSession): KernelRequest[];
  /** What the engine answered itself so far. */
  answeredCounts(session: NativeSession): AnsweredCounts;
  /** How the kernel's requests reach the session. */
  transport(session: NativeSession): TransportState;
  /** Times the engine started the writeback of spool bytes it wrote (SessionSettings.writebackAheadKiB). */
  spoolWritebacks(session: NativeSession): number;
  /** Background fdatasyncs of spools the engine wrote, made so far (SessionSettings.syncAheadKiB). */
  spoolSyncs(session: NativeSession): number;
  /** The kernel forgets a cached name (off the main thread); resolves with libfuse's result (0 or -errno). */
  invalidateEntry(session: NativeSession, parentIno: number, name: string): Promise<number>;
  /**
   * The kernel forgets the attributes and cached pages of `ino` (a folder: its listing), and the engine its
   * attributes and a folder's names (off the main thread); resolves with libfuse's result (0 or -errno).
   */
  invalidateInode(session: NativeSession, ino: number): Promise<number>;
  /**
   * `name` in folder `parentIno`, the inode `childIno`, was removed elsewhere: the kernel drops the name and
   * tells inotify watchers (IN_DELETE); -ENOENT when it held no such name.
   */
  notifyDelete(session: NativeSession, parentIno: number, childIno: number, name: string): Promise<number>;
}

/** Where node-gyp puts the addons, from this file (src/fuse/engine) or its build (dist/fuse/engine). */
const BUILD_DIRS = ['../../../native/fuse3/build/Release/', '../../../../native/fuse3/build/Release/'];

/**
 * The addons native/fuse3 builds: `fuse3`, the engine; `fuse3_bench`, the same engine with the null file
 * system of the benchmarks (SessionSettings.nullFiles), which production code never loads.
 */
export type Fuse3Addon = 'fuse3' | 'fuse3_bench';

const loaded = new Map<Fuse3Addon, Fuse3Binding>();

/** Loads the addon; throws with what to do when it was not built. */
export function loadFuse3Binding(addon: Fuse3Addon = 'fuse3'): Fuse3Binding {
  const known = loaded.get(addon);
  if (known) return known;
  const require = createRequire(import.meta.url);
  for (const dir of BUILD_DIRS) {
    const file = fileURLToPath(new URL(`${dir}${addon}.node`, import.meta.url));
    if (existsSync(file)) {
      const binding = require(file) as Fuse3Binding;
      loaded.set(addon, binding);
      return binding;
    }
  }
  throw new Error('the libfuse 3 engine is not built: run scripts/bootstrap (it installs libfuse3-dev and runs `npm run build:fuse3`)');
}
