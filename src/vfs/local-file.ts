/**
 * LocalFile: a file the gateway holds locally because it is being written or its upload is pending. Its
 * bytes live in a spool file of the UploadJournal; reads, writes and truncates go there, serialised. An
 * existing file opened for writing gets its current content (the "base") copied into the spool before
 * the first change, so an upload never carries a truncated file.
 *
 * Which field is guarded by what: `fh`, `size`, `generation`, `baseReady` change only inside `exclusive()`.
 * `library`/`fullpath` change only in GatewayVfs.rename (after the upload is cancelled). `openCount` and
 * the generations are touched only by GatewayVfs.
 */
import { open, stat, type FileHandle as FsHandle } from 'node:fs/promises';
import { constants } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { Writable, type Readable } from 'node:stream';
import type { PendingFile } from './upload-queue.js';
import type { RemoteEntry } from './remote.js';
import { VfsError, type Operator } from './types.js';

export class LocalFile implements PendingFile {
  /** Bumped by every modification. */
  generation = 0;
  /** Generation last written to the journal. */
  journaledGeneration = 0;
  /** Generation the service confirmed. */
  uploadedGeneration = 0;
  /** Handles open on this file. */
  openCount = 0;
  /** Unlinked while open: never committed, removed when the last handle closes. */
  deleted = false;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
  /** True when the spool holds the whole current content. */
  baseReady: boolean;
  operator?: Operator;
  /** SHA-1 of the spool as of `generation` (computed with the fsync of a flush). */
  private hashed: { generation: number; sha1: string; size: number } | undefined;
  private fh: FsHandle | undefined;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    readonly id: string,
    readonly spoolPath: string,
    public library: string,
    public fullpath: string,
    /** The service's version this local copy started from (undefined for a new file). */
    public base: RemoteEntry | undefined,
    opts: { baseReady: boolean; size: number; mtimeMs?: number },
  ) {
    this.baseReady = opts.baseReady;
    this.size = opts.size;
    this.mtimeMs = opts.mtimeMs ?? Date.now();
    this.ctimeMs = base?.ctimeMs ?? this.mtimeMs;
  }

  /** Local changes not yet confirmed by the service. */
  get dirty(): boolean {
    return this.generation > this.uploadedGeneration;
  }

  /** Runs `fn` with the file to itself (no other read, write, truncate or fill in between). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** Creates an empty spool (a new or truncated file). */
  async startEmpty(): Promise<void> {
    await this.exclusive(async () => {
      await this.handle(true);
      await this.fh!.truncate(0);
      this.size = 0;
      this.baseReady = true;
    });
  }

  /** Copies the base content into the spool (once), streaming. */
  async fillBase(openBase: () => Promise<Readable>): Promise<void> {
    if (this.baseReady) return;
    await this.exclusive(async () => {
      if (this.baseReady) return;
      const fh = await this.handle(true);
      await fh.truncate(0);
      let position = 0;
      const expected = this.base?.size ?? 0;
      if (expected > 0) {
        const source = await openBase();
        await pipeline(source, new Writable({
          write(chunk: Buffer, _enc, cb) {
            fh.write(chunk, 0, chunk.length, position).then(({ bytesWritten }) => { position += bytesWritten; cb(); }, cb);
          },
        }));
      }
      if (position !== expected) throw new VfsError('EIO', `fetching '${this.fullpath}' before changing it: expected ${expected} bytes, got ${position}`);
      this.size = position;
      this.baseReady = true;
    });
  }

  async read(position: number, length: number): Promise<Buffer> {
    return this.exclusive(async () => {
      const end = Math.min(this.size, position + length);
      if (end <= position) return Buffer.alloc(0);
      const fh = await this.handle(false);
      const buf = Buffer.allocUnsafe(end - position);
      let done = 0;
      while (done < buf.length) {
        const { bytesRead } = await fh.read(buf, done, buf.length - done, position + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      return buf.subarray(0, done);
    });
  }

  async write(position: number, data: Buffer): Promise<number> {
    return this.exclusive(async () => {
      if (!this.baseReady) throw new VfsError('EIO', `internal: write to '${this.fullpath}' before its content was fetched`);
      const fh = await this.handle(true);
      let done = 0;
      while (done < data.length) {
        const { bytesWritten } = await fh.write(data, done, data.length - done, position + done);
        done += bytesWritten;
      }
      this.size = Math.max(this.size, position + data.length);
      this.touch();
      return done;
    });
  }

  async truncate(size: number): Promise<void> {
    await this.exclusive(async () => {
      if (!this.baseReady) throw new VfsError('EIO', `internal: truncate of '${this.fullpath}' before its content was fetched`);
      const fh = await this.handle(true);
      await fh.truncate(size);
      this.size = size;
      this.touch();
    });
  }

  /** Makes the spool's bytes durable. */
  async sync(): Promise<void> {
    await this.exclusive(async () => {
      const fh = await this.handle(true);
      await fh.sync();
    });
  }

  /**
   * Makes the spool durable and hashes it, both at once (the hash runs in a worker while the kernel
   * writes the data out), with no change in between. The hash is kept for the upload.
   */
  async syncAndHash(hasher: { hash(path: string): Promise<{ sha1: string; size: number }> }): Promise<void> {
    await this.exclusive(async () => {
      const fh = await this.handle(true);
      const generation = this.generation;
      const [, h] = await Promise.all([fh.sync(), hasher.hash(this.spoolPath)]);
      this.hashed = { generation, ...h };
    });
  }

  /** SHA-1, size and generation of the spool now (reuses the flush's hash when nothing changed since). */
  async snapshotHash(hasher: { hash(path: string): Promise<{ sha1: string; size: number }> }): Promise<{ generation: number; sha1: string; size: number }> {
    return this.exclusive(async () => {
      if (this.hashed && this.hashed.generation === this.generation) return this.hashed;
      const generation = this.generation;
      const h = await hasher.hash(this.spoolPath);
      this.hashed = { generation, ...h };
      return this.hashed;
    });
  }

  /** Closes the spool's descriptor (the spool stays). */
  async closeSpool(): Promise<void> {
    await this.exclusive(async () => {
      const fh = this.fh;
      this.fh = undefined;
      await fh?.close();
    });
  }

  /** Reads the spool's size from disk (journal replay). */
  async loadSize(): Promise<void> {
    this.size = (await stat(this.spoolPath)).size;
  }

  /** A modification: new generation, new time. */
  touch(): void {
    this.generation++;
    this.mtimeMs = Date.now();
  }

  private async handle(create: boolean): Promise<FsHandle> {
    if (!this.fh) {
      const flags = create ? constants.O_RDWR | constants.O_CREAT : constants.O_RDWR;
      this.fh = await open(this.spoolPath, flags, 0o600);
    }
    return this.fh;
  }
}
