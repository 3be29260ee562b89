/**
 * S3BlobStore: blobs as objects of one bucket of an S3-compatible object store (AWS S3, OpenStack Swift
 * with s3api, …), the key being `prefix + sha1`. Uploads arrive in a local temporary file first; ingest
 * sends it with one PutObject, or as a multipart upload (parts of `partSize` bytes, each streamed from
 * its slice of the file) when it is larger, so no blob is ever held in memory. Reads are ranged GETs
 * streamed to the caller.
 *
 * Credentials come from the AWS SDK's usual chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or the
 * shared credentials file named by AWS_SHARED_CREDENTIALS_FILE and AWS_PROFILE), never from the location.
 */
import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { mkdir } from 'node:fs/promises';
import { PassThrough, type Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CreateBucketCommand, CreateMultipartUploadCommand,
  DeleteObjectCommand, GetObjectCommand, HeadBucketCommand, HeadObjectCommand, PutObjectCommand, S3Client, UploadPartCommand,
} from '@aws-sdk/client-s3';
import { LocalSpool, checkSha1, type BlobRange, type BlobStore } from './blob-store.js';
import type { MetadataStore } from './metadata-store.js';
import { S3StagedUploads } from './s3-staged-uploads.js';

export interface S3BlobStoreOptions {
  bucket: string;
  /** Endpoint of an S3-compatible server (`http://127.0.0.1:8080`); AWS itself when left out. */
  endpoint?: string;
  /** Default `us-east-1`. */
  region?: string;
  /** Prepended to every key (e.g. `blobs/`). Default none. */
  prefix?: string;
  /** Size of a multipart upload's parts and the threshold above which one is used. Default 16 MiB (at least 5 MiB). */
  partSize?: number;
  /** Local folder of temporary files. */
  tempDir: string;
  /**
   * How long `open()` waits for an object store that is not ready yet: one that answers "try later"
   * (HTTP 5xx, 429: still starting, or throttling) or does not answer at all. Default 30 s; 0: no wait.
   */
  readyWaitMs?: number;
}

const MIN_PART = 5 * 1024 * 1024;

export class S3BlobStore extends LocalSpool implements BlobStore {
  readonly bucket: string;
  readonly prefix: string;
  readonly partSize: number;
  readonly location: string;
  private readonly s3: S3Client;
  private readonly readyWaitMs: number;

  constructor(opts: S3BlobStoreOptions) {
    super(opts.tempDir);
    this.readyWaitMs = opts.readyWaitMs ?? 30_000;
    this.bucket = opts.bucket;
    this.prefix = opts.prefix ?? '';
    this.partSize = opts.partSize ?? 16 * 1024 * 1024;
    if (!Number.isSafeInteger(this.partSize) || this.partSize < MIN_PART) throw new TypeError(`S3 part size: expected at least ${MIN_PART} bytes, got ${this.partSize}`);
    this.location = `s3://${this.bucket}${opts.endpoint ? `?endpoint=${opts.endpoint}` : ''}`;
    this.s3 = new S3Client({
      region: opts.region ?? 'us-east-1',
      ...(opts.endpoint ? { endpoint: opts.endpoint, forcePathStyle: true } : {}),
      // Plain signed requests: S3-compatible servers do not all take the newer checksum trailers.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  /**
   * Checks the bucket (creating it when missing) and the temporary folder. An object store that is not
   * ready yet (see `readyWaitMs`) is asked again, less and less often, until it is or the wait is over;
   * any other answer (a refused access, a bad bucket name) fails at once.
   */
  async open(): Promise<void> {
    await mkdir(this.tempDir, { recursive: true, mode: 0o700 });
    const until = Date.now() + this.readyWaitMs;
    for (let pause = 100; ; pause = Math.min(pause * 2, 2000)) {
      let failed: { message: string; cause: unknown };
      try {
        await this.s3.send(new HeadBucketCommand({ Bucket: this.bucket }));
        return;
      } catch (err) {
        failed = { message: describe(err), cause: err };
        if (statusOf(err) === 404) {
          try {
            await this.s3.send(new CreateBucketCommand({ Bucket: this.bucket }));
            return;
          } catch (createErr) {
            // Another process made it meanwhile (two services starting on one bucket).
            if ((createErr as { name?: string }).name === 'BucketAlreadyOwnedByYou') return;
            failed = { message: `creating the bucket: ${describe(createErr)}`, cause: createErr };
          }
        }
      }
      if (!notReady(failed.cause) || Date.now() + pause > until) {
        const waited = this.readyWaitMs > 0 && notReady(failed.cause) ? ` (not ready within ${this.readyWaitMs} ms)` : '';
        throw new Error(`blob store ${this.location}: ${failed.message}${waited}`, { cause: failed.cause });
      }
      await new Promise((r) => setTimeout(r, pause));
    }
  }

  private key(sha1: string): string {
    return `${this.prefix}${checkSha1(sha1)}`;
  }

  /** A bucket says nothing of its free space. */
  async freeBytes(): Promise<number | undefined> {
    return undefined;
  }

  async sizeOf(sha1: string): Promise<number | undefined> {
    try {
      const head = await this.s3.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.key(sha1) }));
      return head.ContentLength ?? 0;
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  async ingest(tempFile: string, sha1: string, size: number): Promise<void> {
    try {
      if ((await this.sizeOf(sha1)) === size) return;
      if (size <= this.partSize) {
        await this.s3.send(new PutObjectCommand({
          Bucket: this.bucket, Key: this.key(sha1), Body: createReadStream(tempFile), ContentLength: size, ContentType: 'application/octet-stream',
        }));
        return;
      }
      await this.multipart(tempFile, sha1, size);
    } finally {
      await rm(tempFile, { force: true });
    }
  }

  private async multipart(tempFile: string, sha1: string, size: number): Promise<void> {
    const Key = this.key(sha1);
    const created = await this.s3.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key, ContentType: 'application/octet-stream' }));
    const UploadId = created.UploadId!;
    try {
      const parts: { ETag: string; PartNumber: number }[] = [];
      for (let start = 0, n = 1; start < size; start += this.partSize, n++) {
        const end = Math.min(size, start + this.partSize) - 1;
        const part = await this.s3.send(new UploadPartCommand({
          Bucket: this.bucket, Key, UploadId, PartNumber: n, Body: createReadStream(tempFile, { start, end }), ContentLength: end - start + 1,
        }));
        parts.push({ ETag: part.ETag!, PartNumber: n });
      }
      await this.s3.send(new CompleteMultipartUploadCommand({ Bucket: this.bucket, Key, UploadId, MultipartUpload: { Parts: parts } }));
    } catch (err) {
      await this.s3.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key, UploadId })).catch(() => undefined);
      throw err;
    }
  }

  async remove(sha1: string): Promise<void> {
    try {
      await this.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.key(sha1) }));
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
    }
  }

  read(sha1: string, range: BlobRange = {}): Readable {
    const Key = this.key(sha1);
    const out = new PassThrough({ highWaterMark: 4 * 1024 * 1024 });
    const Range = range.start === undefined && range.end === undefined ? undefined : `bytes=${range.start ?? 0}-${range.end ?? ''}`;
    const abort = new AbortController();
    out.once('close', () => abort.abort());
    this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key, Range }), { abortSignal: abort.signal }).then(
      (res) => {
        const body = res.Body as Readable | undefined;
        if (!body) return void out.end();
        body.once('error', (err) => out.destroy(err));
        body.pipe(out);
        out.once('close', () => body.destroy());
      },
      (err: unknown) => {
        // An empty blob has no byte to range over: the answer is no bytes.
        if (statusOf(err) === 416 && (range.start ?? 0) === 0) out.end();
        else if (statusOf(err) === 404) out.destroy(Object.assign(new Error(`blob ${sha1} is not stored`), { code: 'ENOENT' }));
        else out.destroy(err instanceof Error ? err : new Error(String(err)));
      },
    );
    return out;
  }

  /** Uploads in progress staged in the bucket (store/s3-staged-uploads.ts); a staging folder is refused. */
  stagedUploads(db: MetadataStore, folder?: string): S3StagedUploads {
    if (folder !== undefined) {
      throw new TypeError('upload staging: a staging folder goes with a file:// blob store only; with s3:// the uploads in progress are staged in the bucket');
    }
    return new S3StagedUploads({
      s3: this.s3, bucket: this.bucket, prefix: this.prefix, db, location: this.location,
      tempPath: () => this.tempPath('.block'), blobKey: (sha1) => this.key(sha1),
    });
  }

  /** Ends the client's connections. */
  close(): void {
    this.s3.destroy();
  }
}

function statusOf(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
}

/** An answer of an object store that is not ready yet (starting, throttling) or no answer at all. */
function notReady(err: unknown): boolean {
  const status = statusOf(err);
  return status === undefined || status >= 500 || status === 429;
}

function describe(err: unknown): string {
  const status = statusOf(err);
  const name = (err as { name?: string }).name ?? 'Error';
  return `${name}${status ? ` (HTTP ${status})` : ''}: ${(err as Error).message}`;
}
