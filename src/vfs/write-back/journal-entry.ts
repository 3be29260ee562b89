/**
 * A journal entry: what the upload journal keeps of one acknowledged version (or of a folder made offline,
 * or a deferred delete) until the service confirms it, and the rules every reader of entries shares — what
 * a journal id looks like, what makes an entry valid, the order of acknowledgement. The log's lines
 * (journal-lines.ts) and the engine's close records (engine-close-record.ts) both decode to it.
 */
import type { Operator } from '../types.js';
import type { SpoolMark } from './spool-verification.js';

export interface JournalEntry {
  id: string;
  /** Library folder name the file belongs to. */
  library: string;
  /** Library-relative path to commit to. */
  fullpath: string;
  /** Bytes in the spool when journaled. */
  size: number;
  /** Local modification time, ms. */
  mtimeMs: number;
  /** When the entry was first written, ms. */
  createdMs: number;
  /** SHA-1 of the spool's content (checked at replay: a power loss may have kept the entry but not its bytes). */
  sha1?: string;
  /**
   * Without `sha1`: the spool's mtime, ctime and inode at the seal of a file the kernel wrote itself
   * (passthrough; hashed at its upload), checked at replay with `size` (spool-verification.ts).
   */
  spoolMark?: SpoolMark;
  /**
   * Written by an fsync while the file was still open for writing: no hash, and the spool may hold more
   * than `size` says (writes after the fsync); replay takes it as it is.
   */
  open?: boolean;
  /**
   * `folder`: a folder made while the library was offline, to be made on the service (no spool).
   * `delete`: a file unlinked while handles still read it, to be removed on the service once they are
   * closed (no spool; `objectId` names the object). Default a file.
   */
  kind?: 'file' | 'folder' | 'delete';
  /** With `delete`: the service's id of the object to remove (a new file at the path is not it). */
  objectId?: string;
  /**
   * Order of acknowledgement across every entry (higher is newer). Of two entries for one path, the higher
   * wins at replay; entries of older runs without it count by `createdMs`.
   */
  seq?: number;
  operator?: Operator;
  /**
   * Content hashes the service may hold at the path for this version to replace it without a conflict
   * (conflicts.ts, ConflictBase): [] for a new file; absent in entries written before bases were recorded.
   */
  replaces?: string[];
}

/** Largest content carried in its record (a small file's spool then needs no fsync of its own). */
export const INLINE_MAX_BYTES = 64 * 1024;

/** A journal id: 16 lowercase hex digits (8 random bytes); it names the entry's spool file too. */
export const JOURNAL_ID_RE = /^[0-9a-f]{16}$/;

/** Acknowledgement order of an entry (see JournalEntry.seq). */
export function orderOf(e: JournalEntry): number {
  return e.seq ?? e.createdMs * 1000;
}

/** An entry as read back: an object with a journal id, a library and a path. */
export function validEntry(e: JournalEntry): boolean {
  return typeof e === 'object' && e !== null && JOURNAL_ID_RE.test(e.id) && typeof e.library === 'string' && typeof e.fullpath === 'string';
}
