/**
 * BlobStore: where file content lives, keyed by its SHA-1. A blob is written once and never changed;
 * equal content is stored once. Which blobs exist and who references them is the metadata's business
 * (table `blobs`); a BlobStore only moves bytes. Two implementations: FolderBlobStore (fan-out folders
 * on a local file system, the default) and S3BlobStore (an S3-compatible object store). Callers hold
 * `lock(sha1)` around an ingest or a removal and the metadata change that goes with it.
 *
 * Uploads arrive in a local temporary folder first (`tempDir`, spooled while hashing); `ingest` then
 * moves the verified file into the store. The chunked upload protocol's bytes are staged by the store's
 * own StagedUploads instead, so that every process of a service reaches them.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { KeyedLock } from './keyed-lock.js';
import type { MetadataStore } from './metadata-store.js';
import type { StagedUploads } from './staged-uploads.js';

export const SHA1_RE = /^[0-9a-f]{40}$/;

/** Bytes `start`..`end` of a blob, both inclusive; either may be left out. */
export interface BlobRange { start?: number; end?: number }

export interface BlobStore {
  /** Folder of local temporary files (uploads being spooled). */
  readonly tempDir: string;
  /** Where the blobs live, for logs (never carries a secret). */
  readonly location: string;
  /** Prepares the store (folders, bucket); fails with a clear error when it cannot be reached. */
  open(): Promise<void>;
  /** Runs `fn` while no other ingest or removal of this blob runs in this process. */
  lock<T>(sha1: string, fn: () => Promise<T> | T): Promise<T>;
  /** Size of the stored blob, or undefined when it is not stored. */
  sizeOf(sha1: string): Promise<number | undefined>;
  /** Bytes the store can still take, or undefined when it cannot tell (a bucket). */
  freeBytes(): Promise<number | undefined>;
  /**
   * Moves a verified temporary file (in `tempDir`) into the store as blob `sha1`; the temporary file
   * is gone afterwards. When the blob is already stored with the right size nothing is written.
   */
  ingest(tempFile: string, sha1: string, size: number): Promise<void>;
  /** Removes blob `sha1`; a missing blob is not an error. */
  remove(sha1: string): Promise<void>;
  /** Streams the blob (or a range of it); a missing blob fails the stream. */
  read(sha1: string, range?: BlobRange): Readable;
  /** A fresh temporary file name in `tempDir`. */
  tempPath(suffix?: string): string;
  /** Streams `source` into a temporary file, hashing on the way. The caller ingests or removes it. */
  spool(source: Readable): Promise<{ tempFilePath: string; sha1: string; size: number }>;
  /**
   * Where the bytes of chunked uploads in progress wait (store/staged-uploads.ts): a folder beside a
   * folder store (`folder`, default `<tempDir>/upload/sessions`), the bucket of an S3 store (`folder` is
   * refused there). `db` holds the records the processes share.
   */
  stagedUploads(db: MetadataStore, folder?: string): StagedUploads;
  /** Releases connections (the store is not used afterwards). */
  close(): void;
}

/** What both implementations share: the local temporary folder and the per-blob lock. */
export abstract class LocalSpool {
  private readonly locks = new KeyedLock();

  constructor(readonly tempDir: string) {}

  lock<T>(sha1: string, fn: () => Promise<T> | T): Promise<T> {
    return this.locks.run(sha1, fn);
  }

  tempPath(suffix = '.tmp'): string {
    return join(this.tempDir, `${randomBytes(12).toString('hex')}${suffix}`);
  }

  async spool(source: Readable): Promise<{ tempFilePath: string; sha1: string; size: number }> {
    const tempFilePath = this.tempPath();
    const hash = createHash('sha1');
    let size = 0;
    source.on('data', (chunk: Buffer) => { hash.update(chunk); size += chunk.length; });
    try {
      await pipeline(source, createWriteStream(tempFilePath, { mode: 0o600 }));
    } catch (err) {
      await rm(tempFilePath, { force: true });
      throw err;
    }
    return { tempFilePath, sha1: hash.digest('hex'), size };
  }
}

export function checkSha1(sha1: string): string {
  if (!SHA1_RE.test(sha1)) throw new TypeError(`blob id: expected 40 lowercase hex characters, got ${JSON.stringify(sha1)}`);
  return sha1;
}
