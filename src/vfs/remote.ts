/**
 * Remote: the small interface the gateway core needs from one library of the service. Paths are the
 * service's `fullpath` (no leading slash; the library root is the empty string). Implementations throw
 * VfsError (protocol-neutral codes); anything they cannot do throws ENOSYS, never a default.
 *
 * Implemented by LibraryRemote (remote/library-remote.ts, the library file API), UserTokenRemote
 * (remote/user-token-remote.ts, the user file API as one member), MemoryRemote (the reference model and
 * the backend of unit tests) and wrapped by FaultyRemote (fault injection on command).
 */
import type { Readable } from 'node:stream';
import type { Operator } from './types.js';

export interface RemoteEntry {
  /** The service's `hash`: stable across rename and move. */
  id: string;
  /** Library-relative path, no leading slash. */
  fullpath: string;
  name: string;
  isDir: boolean;
  /** Bytes; 0 for folders. */
  size: number;
  /** SHA-1 of the content (lowercase hex); absent for folders. */
  contentHash?: string;
  /** Last change, ms since the epoch (the service keeps seconds). */
  mtimeMs: number;
  ctimeMs: number;
  lastModifiedBy?: string;
  tags?: string[];
  locked?: boolean;
}

export interface RemoteChange {
  /** `upsert`: created or changed (a move shows as the new path with the same id); `delete`: gone. */
  kind: 'upsert' | 'delete';
  entry: RemoteEntry;
}

export interface ChangesPage {
  /** Cursor to pass next time (the service's millisecond `fetch_dateline`). */
  cursor: number;
  changes: RemoteChange[];
}

export interface RemoteQuota {
  /** Capacity in bytes; undefined when unlimited. */
  total?: number;
  used: number;
  files?: number;
}

export interface RemoteInfo {
  /** The library's id on the service (stable; used for name collisions). */
  id: string;
  name: string;
}

export interface RemoteCallOptions {
  operator?: Operator;
  signal?: AbortSignal;
}

export interface CommitOptions extends RemoteCallOptions {
  /** Bytes of the content the service has so far, of `total` (at least once, at the end). */
  onProgress?: (sent: number, total: number) => void;
  /**
   * false: a file already at `fullpath` is left be, and the content lands at a numbered name the service
   * picks (`name (1).ext`: the returned entry's fullpath), decided by the service at once. Default true.
   */
  replace?: boolean;
}

export interface RangeCallOptions extends RemoteCallOptions {
  /** Content hash of the version expected. */
  contentHash?: string;
  /** The version `contentHash` itself or nothing (ENOENT): never the current content in its place. */
  exactVersion?: boolean;
}

/** One event of a file's history on the service that carries its content then (a version or a later event of it). */
export interface RemoteHistoryItem {
  /** The service's id of the event (`hid`). */
  id: string;
  /** SHA-1 of the file's content at that event (lowercase hex). */
  contentHash: string;
  size: number;
  /** When it happened, ms since the epoch (the service keeps seconds). */
  timeMs: number;
  /** Who did it (operator name), when known. */
  operator?: string;
}

/** A local file to commit as the content of `fullpath`. */
export interface CommitSource {
  /** Local file holding the bytes. */
  path: string;
  /** The bytes themselves, when the caller holds them (a small file kept in memory): `path` is then not read. */
  data?: Buffer;
  size: number;
  /** SHA-1 of the bytes, lowercase hex. */
  sha1: string;
}

export interface Remote {
  /** Library id and display name. */
  info(opts?: RemoteCallOptions): Promise<RemoteInfo>;
  /** Every entry of a folder (all pages). ENOENT when missing, ENOTDIR for a file. */
  list(fullpath: string, opts?: RemoteCallOptions): Promise<RemoteEntry[]>;
  /** One entry, or null when it does not exist. */
  stat(fullpath: string, opts?: RemoteCallOptions): Promise<RemoteEntry | null>;
  /**
   * Bytes `[start, end]` (inclusive) of a file's content. `contentHash` names the version expected; a
   * remote may use it to detect a change. Range past the end: what exists.
   */
  openRange(fullpath: string, start: number, end: number, opts?: RangeCallOptions): Promise<Readable>;
  /**
   * Optional: gets ready to read these files soon (a remote with per-file download links fetches them
   * now, together, so that each read is one request). Best effort: nothing is thrown, nothing waited for.
   */
  prepareReads?(files: { fullpath: string; contentHash?: string }[], opts?: RemoteCallOptions): void;
  /**
   * Optional: refuses (EACCES) a write the service would refuse, before the gateway takes it into its
   * journal: a remote acting as one member, whose writes are acknowledged before they are uploaded.
   * `existing`: the file's content is replaced (else a new file is added).
   */
  checkWrite?(fullpath: string, existing: boolean, opts?: RemoteCallOptions): Promise<void>;
  /** Replaces or creates the file with the local file's bytes (overwrite, unless `replace` is false; the service keeps the old version). */
  commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry>;
  /** Creates a folder; EEXIST when something exists there. */
  mkdir(fullpath: string, opts?: RemoteCallOptions): Promise<RemoteEntry>;
  /** Moves or renames. EEXIST when the target exists. */
  move(from: string, to: string, opts?: RemoteCallOptions): Promise<void>;
  /** Copies a file or folder inside the library. EEXIST when the target exists. */
  copy(from: string, to: string, opts?: RemoteCallOptions): Promise<void>;
  /** Removes to the recycle bin. */
  remove(fullpath: string, opts?: RemoteCallOptions): Promise<void>;
  /** Changes after `cursor` (0 = from the beginning), one page; an empty page means up to date. */
  changes(cursor: number, opts?: RemoteCallOptions): Promise<ChangesPage>;
  /** A cursor from which changes from now on will be seen (may be slightly early: changes are idempotent). */
  headCursor(opts?: RemoteCallOptions): Promise<number>;
  quota(opts?: RemoteCallOptions): Promise<RemoteQuota>;
  lock(fullpath: string, locked: boolean, opts?: RemoteCallOptions): Promise<void>;
  addTags(fullpath: string, tags: string[], opts?: RemoteCallOptions): Promise<void>;
  removeTags(fullpath: string, tags: string[], opts?: RemoteCallOptions): Promise<void>;
  /**
   * Optional: the history of file `fullpath`, newest first, the events that carry content only (at most
   * `max`, the newest). ENOENT when there is no such file. Without it, versions are not shown.
   */
  history?(fullpath: string, max: number, opts?: RemoteCallOptions): Promise<RemoteHistoryItem[]>;
  /**
   * Optional: the tags of an item, for a remote whose `stat` entries carry none (the user file API has
   * no tags); null when the item does not exist. Without it, `stat(...).tags`.
   */
  tags?(fullpath: string, opts?: RemoteCallOptions): Promise<string[] | null>;
}

/** Parent folder of a library-relative path ('' for the root's children). */
export function parentOf(fullpath: string): string {
  const i = fullpath.lastIndexOf('/');
  return i < 0 ? '' : fullpath.slice(0, i);
}

/** Last component of a library-relative path. */
export function baseName(fullpath: string): string {
  const i = fullpath.lastIndexOf('/');
  return i < 0 ? fullpath : fullpath.slice(i + 1);
}

/** `child` joined under `parent` ('' = library root). */
export function joinPath(parent: string, child: string): string {
  return parent === '' ? child : `${parent}/${child}`;
}

/** True when `path` is `ancestor` or below it. */
export function isWithin(path: string, ancestor: string): boolean {
  return ancestor === '' || path === ancestor || path.startsWith(`${ancestor}/`);
}

/** `fullpath` with ` (n)` before its extension, as the service numbers a file's name that is taken. */
export function numberedPath(fullpath: string, n: number): string {
  const name = baseName(fullpath);
  const dot = name.lastIndexOf('.');
  const numbered = dot <= 0 ? `${name} (${n})` : `${name.slice(0, dot)} (${n})${name.slice(dot)}`;
  return joinPath(parentOf(fullpath), numbered);
}
