/**
 * What the share-link feature needs from the rest of the embedded service. The service implements
 * `LinkHost`; the link modules own link records, their rules (deadline, start, password, visit limit,
 * auth) and the pages served at the link URL.
 */
import type { Readable } from 'node:stream';
import type { UploadedFile, VerifiedContent } from '../upload/types.js';

/** A file or folder as the link pages show it. */
export interface LinkEntry {
  /** Stable id of the file or folder (follows renames and moves). */
  hash: string;
  dir: boolean;
  fullpath: string;
  filename: string;
  filesize: number;
  /** Content SHA-1; empty for a folder. */
  filehash: string;
  /** Last modification, unix seconds. */
  lastDateline: number;
}

/** Operation codes of `org/log` written through the link feature. */
export const LinkLogAct = { Created: 1014, Visited: 1015, Downloaded: 1016, SavedToLibrary: 1017, Uploaded: 1018 } as const;

export interface LinkHost {
  /** Directory for temporary files of link uploads; same file system as the blob store. */
  readonly tempDir: string;
  /** The entry at `fullpath` (root = ''), or undefined when missing or deleted. */
  entryByPath(libraryId: number, fullpath: string): Promise<LinkEntry | undefined>;
  /** The entry with this `hash`, wherever it is now, or undefined when missing or deleted. */
  entryByHash(libraryId: number, hash: string): Promise<LinkEntry | undefined>;
  /** Children of a folder (folders first is the page's job). */
  listFolder(libraryId: number, fullpath: string): Promise<LinkEntry[]>;
  /** The content with this SHA-1 as a stream (current content, or a pinned version for `keep=1`). */
  openContent(libraryId: number, filehash: string): Promise<Readable>;
  /** Bytes the library may still grow by (Infinity when unlimited). */
  remainingCapacity(libraryId: number): Promise<number>;
  /** Stores a file uploaded through a link as `folder/name` (a number is appended when the name exists). */
  storeUpload(libraryId: number, folder: string, name: string, content: VerifiedContent, opName: string): Promise<UploadedFile>;
  /** Appends an `org/log` record (act 1014–1018). */
  log(libraryId: number, act: number, fullpath: string, operator: { opId?: string; opName?: string; ip?: string }): Promise<void>;
}
