/**
 * BlobStore: file content on disk, keyed by SHA-1 in fan-out folders (`ab/cd/abcd…`). A blob is written
 * once (temp file → fsync → rename → fsync of the folder) and never changed; equal content is stored
 * once. Which blobs exist and who references them is the database's business (table `blobs`); this
 * module only moves bytes. Callers hold `lock(sha1)` around an ingest or a removal and the database
 * change that goes with it.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, type ReadStream } from 'node:fs';
import { mkdir, open, rename, rm, stat, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { KeyedLock } from './keyed-lock.js';

export const SHA1_RE = /^[0-9a-f]{40}$/;

export interface BlobStoreOptions {
  /** Folder of the blobs. */
  root: string;
  /** Folder of temporary files; must be on the same file system as `root` (ingest is a rename). */
  tempDir: string;
}

export class BlobStore {
  readonly root: string;
  readonly tempDir: string;
  private readonly locks = new KeyedLock();

  constructor(opts: BlobStoreOptions) {
    this.root = opts.root;
    this.tempDir = opts.tempDir;
  }

  async open(): Promise<void> {
    await mkdir(this.root, { recursive: true });
    await mkdir(this.tempDir, { recursive: true });
  }

  pathOf(sha1: string): string {
    if (!SHA1_RE.test(sha1)) throw new TypeError(`blob id: expected 40 lowercase hex characters, got ${JSON.stringify(sha1)}`);
    return join(this.root, sha1.slice(0, 2), sha1.slice(2, 4), sha1);
  }

  /** Runs `fn` while no other ingest or removal of this blob runs. */
  lock<T>(sha1: string, fn: () => Promise<T> | T): Promise<T> {
    return this.locks.run(sha1, fn);
  }

  /** Size of the blob's file, or undefined when it is not on disk. */
  async sizeOnDisk(sha1: string): Promise<number | undefined> {
    try {
      return (await stat(this.pathOf(sha1))).size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /**
   * Moves a verified temporary file (same file system) into the store as blob `sha1`. The caller holds
   * `lock(sha1)`. When the blob is already on disk with the right size the temporary file is removed.
   */
  async ingest(tempFile: string, sha1: string, size: number): Promise<void> {
    const target = this.pathOf(sha1);
    if ((await this.sizeOnDisk(sha1)) === size) {
      await rm(tempFile, { force: true });
      return;
    }
    const fh = await open(tempFile, 'r+');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    await mkdir(dirname(target), { recursive: true });
    await rename(tempFile, target);
    await syncDir(dirname(target));
  }

  /** Removes blob `sha1` from disk (the caller holds `lock(sha1)`); a missing file is not an error. */
  async remove(sha1: string): Promise<void> {
    await unlink(this.pathOf(sha1)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  /** Streams bytes `start`..`end` (inclusive; default the whole blob). */
  read(sha1: string, range: { start?: number; end?: number } = {}): ReadStream {
    return createReadStream(this.pathOf(sha1), { start: range.start, end: range.end, highWaterMark: 4 * 1024 * 1024 });
  }

  /** A fresh temporary file name in `tempDir`. */
  tempPath(suffix = '.tmp'): string {
    return join(this.tempDir, `${randomBytes(12).toString('hex')}${suffix}`);
  }

  /** Streams `source` into a temporary file, hashing on the way. The caller ingests or removes it. */
  async spool(source: Readable): Promise<{ tempFilePath: string; sha1: string; size: number }> {
    const tempFilePath = this.tempPath();
    const hash = createHash('sha1');
    let size = 0;
    source.on('data', (chunk: Buffer) => { hash.update(chunk); size += chunk.length; });
    try {
      await pipeline(source, createWriteStream(tempFilePath));
    } catch (err) {
      await rm(tempFilePath, { force: true });
      throw err;
    }
    return { tempFilePath, sha1: hash.digest('hex'), size };
  }
}

async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } catch {
    // Some file systems refuse fsync on a folder; the rename is still atomic.
  } finally {
    await fh.close();
  }
}
