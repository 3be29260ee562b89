/**
 * FolderBlobStore: blobs as files in fan-out folders (`ab/cd/abcd…`) of a local file system. A blob is
 * written as temp file → fsync → rename → fsync of the folder. With the temporary folder on the same file
 * system an ingest is a rename; otherwise a copy next to the target, then a rename.
 */
import { createReadStream, type ReadStream } from 'node:fs';
import { copyFile, mkdir, rename, statfs } from 'node:fs/promises';
import { fsyncFile, fsyncFolderIfSupported, removeFileIfPresent, sizeIfPresent } from '../../shared/atomic-file.js';
import { dirname, join } from 'node:path';
import { LocalSpool, checkSha1, type BlobRange, type BlobStore } from './blob-store.js';
import { FolderStagedUploads } from './staged-uploads.js';

export interface FolderBlobStoreOptions {
  /** Folder of the blobs. */
  root: string;
  /** Folder of temporary files; best on the same file system as `root` (an ingest is then a rename). */
  tempDir: string;
}

export class FolderBlobStore extends LocalSpool implements BlobStore {
  readonly root: string;

  constructor(opts: FolderBlobStoreOptions) {
    super(opts.tempDir);
    this.root = opts.root;
  }

  get location(): string {
    return `file://${this.root}`;
  }

  async open(): Promise<void> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    await mkdir(this.tempDir, { recursive: true, mode: 0o700 });
  }

  pathOf(sha1: string): string {
    checkSha1(sha1);
    return join(this.root, sha1.slice(0, 2), sha1.slice(2, 4), sha1);
  }

  sizeOf(sha1: string): Promise<number | undefined> {
    return sizeIfPresent(this.pathOf(sha1));
  }

  /** What the file system of the blobs has free for this process (its reserve for root not counted). */
  async freeBytes(): Promise<number | undefined> {
    const fs = await statfs(this.root);
    return fs.bavail * fs.bsize;
  }

  async ingest(tempFile: string, sha1: string, size: number): Promise<void> {
    const target = this.pathOf(sha1);
    if ((await this.sizeOf(sha1)) === size) {
      await removeFileIfPresent(tempFile);
      return;
    }
    await fsyncFile(tempFile);
    await mkdir(dirname(target), { recursive: true, mode: 0o700 });
    try {
      await rename(tempFile, target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
      // The blob folder is on another file system: copy next to the target, then rename there.
      const near = `${target}.${process.pid}.incoming`;
      await copyFile(tempFile, near);
      await fsyncFile(near);
      await rename(near, target);
      await removeFileIfPresent(tempFile);
    }
    await fsyncFolderIfSupported(dirname(target));
  }

  /** A staging folder (on the same file system, an upload's finish is a rename). */
  stagedUploads(_db: unknown, folder?: string): FolderStagedUploads {
    return new FolderStagedUploads(folder ?? join(this.tempDir, 'upload', 'sessions'));
  }

  close(): void {}

  async remove(sha1: string): Promise<void> {
    await removeFileIfPresent(this.pathOf(sha1));
  }

  read(sha1: string, range: BlobRange = {}): ReadStream {
    return createReadStream(this.pathOf(sha1), { start: range.start, end: range.end, highWaterMark: 4 * 1024 * 1024 });
  }
}

