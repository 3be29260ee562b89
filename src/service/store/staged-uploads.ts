/**
 * StagedUploads: where the bytes of chunked uploads in progress wait for their upload_finish, one
 * implementation per blob store (`BlobStore.stagedUploads`), so that a store shared by the processes of a
 * service stages in a place they all reach:
 * - FolderStagedUploads (folder blob store): one file `<staging>/<session>.part`, its length the count of
 *   bytes received; at finish the verified file is renamed into the blob folder.
 * - S3StagedUploads (s3-staged-uploads.ts): each received block one object of the bucket, its record a row
 *   of `upload_parts`; at finish the blocks are copied into the blob's object inside the store.
 *
 * Blocks arrive one after the other at the count of bytes received (the upload protocol has no other
 * order; the caller checks the offset under the session's lease). A block that fails (length, CRC, a cut
 * connection, the store) leaves nothing: the count stays at the block's start.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { fsyncFile, sizeIfPresent } from '../../shared/atomic-file.js';

/**
 * Writes one block into `file` at byte `at` (the upload server's receiver: length and CRC checked on the
 * way, nothing of the block left in the file on any failure) and returns the SHA-1 continued over it.
 */
export type BlockWriter = (file: string, at: number) => Promise<Hash>;

/**
 * Verified staged content the blob store places at its content address itself (no local file): the
 * SHA-1 and size were checked by the upload server against what upload_init declared.
 */
export interface StagedBlob {
  /** Places the bytes as blob `sha1` (the caller holds the blob's lock); the staged bytes stay until `StagedUploads.remove`. */
  place(): Promise<void>;
}

/** What upload_finish hands to the host: a local file it may rename (folder), or a StagedBlob (S3). */
export type FinishedUpload = { tempFilePath: string; sha1: string; size: number } | { staged: StagedBlob; sha1: string; size: number };

export interface StagedUploads {
  /** Where the staged bytes live, for logs (never carries a secret). */
  readonly location: string;
  /** Prepares the place (folder). */
  open(): Promise<void>;
  /** Starts the (empty) staged bytes of a new session. */
  create(session: string): Promise<void>;
  /** Bytes received so far, or undefined when the session has no staged bytes (never created, or lost). */
  receivedBytes(session: string): Promise<number | undefined>;
  /**
   * Stages the block of `length` bytes at `start` (the count of bytes received), written by `write`;
   * returns what `write` returned. On any failure (the writer's, the store's) nothing of the block stays.
   */
  append(session: string, start: number, length: number, write: BlockWriter): Promise<Hash>;
  /** Streams the first `length` bytes received. */
  read(session: string, length: number): Readable;
  /** The staged bytes of a finished session (`size` bytes, SHA-1 `sha1`, both verified) as content for the host. */
  finished(session: string, sha1: string, size: number): Promise<FinishedUpload>;
  /** Removes the session's staged bytes; missing ones are fine. */
  remove(session: string): Promise<void>;
  /**
   * Removes staged bytes of sessions `known` says do not exist, unchanged for `graceMs` (another process may
   * be between creating them and writing the session's record); returns how many sessions' bytes went.
   */
  removeStrays(known: (session: string) => Promise<boolean>, now: number, graceMs: number): Promise<number>;
}

export class FolderStagedUploads implements StagedUploads {
  constructor(readonly dir: string) {}

  get location(): string {
    return this.dir;
  }

  async open(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
  }

  partPath(session: string): string {
    return join(this.dir, `${session}.part`);
  }

  async create(session: string): Promise<void> {
    await writeFile(this.partPath(session), new Uint8Array(0), { mode: 0o600 });
  }

  receivedBytes(session: string): Promise<number | undefined> {
    return sizeIfPresent(this.partPath(session));
  }

  append(session: string, start: number, _length: number, write: BlockWriter): Promise<Hash> {
    return write(this.partPath(session), start);
  }

  read(session: string, length: number): Readable {
    if (length === 0) return Readable.from([]);
    return createReadStream(this.partPath(session), { start: 0, end: length - 1, highWaterMark: 1 << 20 });
  }

  async finished(session: string, sha1: string, size: number): Promise<FinishedUpload> {
    const tempFilePath = this.partPath(session);
    await fsyncFile(tempFilePath);
    return { tempFilePath, sha1, size };
  }

  async remove(session: string): Promise<void> {
    await rm(this.partPath(session), { force: true });
  }

  async removeStrays(known: (session: string) => Promise<boolean>, now: number, graceMs: number): Promise<number> {
    let removed = 0;
    for (const name of await readdir(this.dir)) {
      const m = /^([0-9a-f]{32})\.part$/.exec(name);
      if (m && await known(m[1]!)) continue;
      const path = join(this.dir, name);
      const mtime = await stat(path).then((st) => st.mtimeMs, () => undefined);
      if (mtime === undefined || now - mtime < graceMs) continue;
      await rm(path, { force: true, recursive: true });
      removed++;
    }
    return removed;
  }
}

/** SHA-1 of the first `length` staged bytes of a session, as a live Hash that later blocks continue. */
export async function sha1OfStaged(staging: StagedUploads, session: string, length: number): Promise<Hash> {
  const hash = createHash('sha1');
  for await (const chunk of staging.read(session, length)) hash.update(chunk as Buffer);
  return hash;
}
