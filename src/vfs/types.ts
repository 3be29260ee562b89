/**
 * The Vfs contract that both front ends (webdav/, fuse/) program against. Paths are absolute POSIX-style
 * gateway paths: `/` lists the libraries, `/<library>/<fullpath>` is a file or folder inside one.
 * Errors are VfsError with a protocol-neutral errno-like code; each front end translates them.
 */
import type { Readable } from 'node:stream';
import type { EngineLease } from './engine-lease.js';

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
  /** Locked through this gateway: the CallContext.lockHolder of the callers who hold the lock. */
  lockHolder?: string;
  /** Tags of the service, if any. */
  tags?: string[];
  /** Operator name of the last change, if known. */
  lastModifiedBy?: string;
  /** The library is offline: this is what was known when it went away. */
  stale?: boolean;
  /** Never changed through the gateway (a view of the service's history): every write is EROFS. */
  readOnly?: boolean;
  /**
   * A file's state in one word (src/vfs/file-state.ts): `synced`, `pending`, `uploading`, `offline-only`,
   * `conflict` or `locked-by <name>`; absent for folders and versions.
   */
  state?: string;
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
  /** Makes written data durable in the upload journal; the upload happens in the background. */
  flush(): Promise<void>;
  /** As flush. */
  fsync(): Promise<void>;
  /** Closes the handle; dirty data is journaled (durable) before this resolves. */
  release(): Promise<void>;
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
   * Whether `path` is in a read-only view (a library's `.versions`), existing or not: every change there
   * is refused (EROFS). For a front end that keeps state of its own about paths (properties, locks).
   */
  readOnlyAt?(path: string, ctx?: CallContext): Promise<boolean>;
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
  /** Changes made elsewhere (the updates feeds), as events, for a front end that shows them (change-events.ts). Optional. */
  readonly changes?: ChangeSource;
  /**
   * What a Vfs that owns its local durable state lends the FUSE engine (engine-lease.ts), when it does:
   * the one declared capability through which the engine's fast paths are granted. Optional, as a front
   * end that does without it (WebDAV) never sees it.
   */
  readonly engineLease?: EngineLease;
}

/* ---- Changes made elsewhere, as events (published by change-events.ts) ---- */

export type ChangeKind = 'created' | 'changed' | 'deleted' | 'moved' | 'locked' | 'unlocked';

export const CHANGE_KINDS: readonly ChangeKind[] = ['created', 'changed', 'deleted', 'moved', 'locked', 'unlocked'];

export interface ChangeEvent {
  /** Numbered from 1 in the order published (per gateway run). */
  seq: number;
  kind: ChangeKind;
  /** Gateway path (`/Lib/a/b.txt`): where it is now (deleted: where it was). */
  path: string;
  /** moved: the gateway path it had. */
  from?: string;
  isDir: boolean;
  /** Bytes (files). */
  size?: number;
  /** Who made the change: the entry's last modifier as the service names them (absent when it does not say). */
  by?: string;
  /** When the service says the change was made, ms since the epoch (0 when it does not say: deletes). */
  timeMs: number;
  /**
   * The gateway showed this already before the feed brought it (its own change coming back, or one a
   * lookup found first): the same object with the same content at that path, a path known gone, or a
   * move the gateway is making (reported before the gateway applied the service's answer).
   */
  shown?: true;
}

export type ChangeListener = (event: ChangeEvent) => void;

/** Where a front end listens for changes (GatewayVfs.changes). */
export interface ChangeSource {
  /** Calls `listener` with every change from now on; returns the call that stops it. */
  subscribe(listener: ChangeListener): () => void;
}

/** Whether `event` concerns `path` (a gateway path) or something below it: where it is, or where it was. */
export function changeConcerns(event: ChangeEvent, path: string): boolean {
  const within = (p: string): boolean => path === '/' || p === path || p.startsWith(`${path}/`);
  return within(event.path) || (event.from !== undefined && within(event.from));
}
