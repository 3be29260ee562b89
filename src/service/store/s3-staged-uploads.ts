/**
 * S3StagedUploads: the bytes of chunked uploads in progress in the bucket of an S3BlobStore, so the
 * processes of a service need no shared file system. Each accepted block is one object,
 * `PREFIX staging/<session>/<start, 15 digits>`, and one row of `upload_parts` (session, start, length);
 * the count of bytes received is the sum of the rows. A block is spooled to a local temporary file first
 * (its length and CRC-32 checked, the SHA-1 continued on the way), then sent with one PutObject streamed
 * from that file, then recorded: a block that fails leaves no row, and a block sent again at the same
 * start replaces its object.
 *
 * Why objects and not one S3 multipart upload per session: the protocol's blocks may be smaller than
 * S3's 5 MiB minimum part, and an unfinished multipart upload cannot be read back, which the finish of
 * another process needs to hash the content.
 *
 * At finish the blob's object is assembled inside the store: a multipart upload whose parts are the
 * blocks, each copied server-side (UploadPartCopy) when it is at least 5 MiB (or the last); runs of
 * smaller blocks are joined into one part streamed through this process. With the client's usual blocks
 * (8 MiB) no byte crosses the service twice.
 */
import type { Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CopyObjectCommand, CreateMultipartUploadCommand, DeleteObjectCommand,
  GetObjectCommand, ListMultipartUploadsCommand, ListObjectsV2Command, PutObjectCommand, UploadPartCommand, UploadPartCopyCommand, type S3Client,
} from '@aws-sdk/client-s3';
import type { MetadataStore } from './metadata-store.js';
import type { BlockWriter, FinishedUpload, StagedUploads } from './staged-uploads.js';

export interface S3StagedUploadsOptions {
  s3: S3Client;
  bucket: string;
  /** The blob store's key prefix; staged blocks go under `<prefix>staging/`. */
  prefix: string;
  /** Where the records of the blocks live (shared by the processes). */
  db: MetadataStore;
  /** A fresh local temporary file name (the blob store's spool). */
  tempPath: () => string;
  /** The blob's key. */
  blobKey: (sha1: string) => string;
  location: string;
}

/** S3's smallest part of a multipart upload (except the last). */
export const MIN_PART = 5 * 1024 * 1024;

/**
 * A multipart upload of a blob older than this is one a process left when it died placing or ingesting
 * the blob (ms): a day, far longer than any placement runs.
 */
export const ABANDONED_MULTIPART_MS = 86_400_000;

/** S3's largest part count of a multipart upload (10 000 blocks of the client's 8 MiB: 78 GiB). */
const MAX_PARTS = 10_000;

/** Deletions sent at once when a session's blocks are removed. */
const DELETE_CONCURRENCY = 8;

interface PartRow { start: number; length: number }

export class S3StagedUploads implements StagedUploads {
  readonly location: string;
  private readonly s3: S3Client;
  private readonly bucket: string;
  private readonly root: string;
  private readonly db: MetadataStore;

  constructor(private readonly opts: S3StagedUploadsOptions) {
    this.s3 = opts.s3;
    this.bucket = opts.bucket;
    this.root = `${opts.prefix}staging/`;
    this.db = opts.db;
    this.location = `${opts.location} (${this.root})`;
  }

  async open(): Promise<void> {}

  /** The key of the block of `session` starting at byte `start`. */
  blockKey(session: string, start: number): string {
    return `${this.root}${session}/${String(start).padStart(15, '0')}`;
  }

  async create(): Promise<void> {
    // Nothing to prepare: a session without rows has received 0 bytes.
  }

  private async parts(session: string): Promise<PartRow[]> {
    const rows = await this.db.all<PartRow>('SELECT start, length FROM upload_parts WHERE session_id = ? ORDER BY start', [session]);
    return rows.map((r) => ({ start: Number(r.start), length: Number(r.length) }));
  }

  async receivedBytes(session: string): Promise<number> {
    const row = await this.db.get<{ n: number | null }>('SELECT SUM(length) AS n FROM upload_parts WHERE session_id = ?', [session]);
    return Number(row?.n ?? 0);
  }

  async append(session: string, start: number, length: number, write: BlockWriter): Promise<Hash> {
    const spool = this.opts.tempPath();
    await writeFile(spool, new Uint8Array(0), { mode: 0o600 });
    try {
      const next = await write(spool, 0);
      await this.s3.send(new PutObjectCommand({
        Bucket: this.bucket, Key: this.blockKey(session, start), Body: createReadStream(spool), ContentLength: length,
        ContentType: 'application/octet-stream',
      }));
      await this.db.run('INSERT INTO upload_parts (session_id, start, length) VALUES (?, ?, ?) ON CONFLICT (session_id, start) DO NOTHING', [session, start, length]);
      return next;
    } finally {
      await rm(spool, { force: true });
    }
  }

  read(session: string, length: number): Readable {
    return Readable.from(this.blocks(session, length));
  }

  /** The bytes of the session's blocks, in order, up to `length`: one GET at a time. */
  private async *blocks(session: string, length: number): AsyncGenerator<Buffer> {
    let left = length;
    for (const p of await this.parts(session)) {
      if (left <= 0) break;
      const take = Math.min(p.length, left);
      yield* this.object(this.blockKey(session, p.start), take);
      left -= take;
    }
    if (left > 0) throw new Error(`staged upload ${session.slice(0, 8)}: ${length - left} of ${length} bytes staged`);
  }

  private async *object(key: string, length: number): AsyncGenerator<Buffer> {
    const res = await this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: `bytes=0-${length - 1}` }));
    for await (const chunk of res.Body as Readable) yield chunk as Buffer;
  }

  async finished(session: string, sha1: string, size: number): Promise<FinishedUpload> {
    return { sha1, size, staged: { place: () => this.place(session, sha1, size) } };
  }

  /** Writes the blob's object from the session's blocks (see the file's comment). */
  private async place(session: string, sha1: string, size: number): Promise<void> {
    const Key = this.opts.blobKey(sha1);
    const parts = await this.parts(session);
    const staged = parts.reduce((n, p) => n + p.length, 0);
    if (staged !== size) throw new Error(`staged upload ${session.slice(0, 8)}: ${staged} bytes staged, ${size} expected`);
    if (parts.length === 0) {
      await this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key, Body: new Uint8Array(0), ContentLength: 0, ContentType: 'application/octet-stream' }));
      return;
    }
    if (parts.length === 1) {
      await this.s3.send(new CopyObjectCommand({
        Bucket: this.bucket, Key, CopySource: `${this.bucket}/${encodeKey(this.blockKey(session, 0))}`,
      }));
      return;
    }
    const groups = groupParts(parts);
    if (groups.length > MAX_PARTS) throw new Error(`staged upload ${session.slice(0, 8)}: ${groups.length} parts, S3 takes at most ${MAX_PARTS}`);
    const created = await this.s3.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key, ContentType: 'application/octet-stream' }));
    const UploadId = created.UploadId!;
    try {
      const done: { ETag: string; PartNumber: number }[] = [];
      for (const [i, group] of groups.entries()) {
        const PartNumber = i + 1;
        if (group.length === 1) {
          const copied = await this.s3.send(new UploadPartCopyCommand({
            Bucket: this.bucket, Key, UploadId, PartNumber, CopySource: `${this.bucket}/${encodeKey(this.blockKey(session, group[0]!.start))}`,
          }));
          done.push({ ETag: copied.CopyPartResult!.ETag!, PartNumber });
        } else {
          const length = group.reduce((n, p) => n + p.length, 0);
          const body = Readable.from(this.joined(session, group));
          const sent = await this.s3.send(new UploadPartCommand({ Bucket: this.bucket, Key, UploadId, PartNumber, Body: body, ContentLength: length }));
          done.push({ ETag: sent.ETag!, PartNumber });
        }
      }
      await this.s3.send(new CompleteMultipartUploadCommand({ Bucket: this.bucket, Key, UploadId, MultipartUpload: { Parts: done } }));
    } catch (err) {
      await this.s3.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key, UploadId })).catch(() => undefined);
      throw err;
    }
  }

  private async *joined(session: string, group: PartRow[]): AsyncGenerator<Buffer> {
    for (const p of group) yield* this.object(this.blockKey(session, p.start), p.length);
  }

  async remove(session: string): Promise<void> {
    await this.removeKeys(await this.keysUnder(`${this.root}${session}/`));
    await this.db.run('DELETE FROM upload_parts WHERE session_id = ?', [session]);
  }

  private async keysUnder(prefix: string): Promise<{ key: string; modified: number }[]> {
    const out: { key: string; modified: number }[] = [];
    for await (const page of this.pagesUnder(prefix)) out.push(...page);
    return out;
  }

  /** The keys under `prefix` (in key order) a listing page at a time. */
  private async *pagesUnder(prefix: string): AsyncGenerator<{ key: string; modified: number }[]> {
    let ContinuationToken: string | undefined;
    do {
      const page = await this.s3.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken }));
      yield (page.Contents ?? []).flatMap((o) => (o.Key ? [{ key: o.Key, modified: o.LastModified?.getTime() ?? 0 }] : []));
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken);
  }

  private async removeKeys(keys: { key: string }[]): Promise<void> {
    for (let i = 0; i < keys.length; i += DELETE_CONCURRENCY) {
      await Promise.all(keys.slice(i, i + DELETE_CONCURRENCY).map(({ key }) => this.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }))));
    }
  }

  /**
   * Goes through the staging prefix in key order, so a session's objects come together: memory holds
   * one listing page and one session's keys at a time.
   */
  async removeStrays(known: (session: string) => Promise<boolean>, now: number, graceMs: number): Promise<number> {
    let removed = 0;
    let current: { session: string; objects: { key: string; modified: number }[] } | undefined;
    const decide = async (): Promise<void> => {
      if (!current || await known(current.session)) return;
      if (current.objects.some((o) => now - o.modified < graceMs)) return;
      await this.removeKeys(current.objects);
      removed++;
    };
    for await (const page of this.pagesUnder(this.root)) {
      for (const o of page) {
        const session = o.key.slice(this.root.length).split('/')[0]!;
        if (current?.session !== session) {
          await decide();
          current = { session, objects: [] };
        }
        current.objects.push(o);
      }
    }
    await decide();
    // Rows of sessions whose record is gone (a process stopped between the two deletions).
    await this.db.run('DELETE FROM upload_parts WHERE session_id NOT IN (SELECT id FROM upload_sessions)');
    await this.abortAbandonedMultipart(now);
    return removed;
  }

  /**
   * Aborts the multipart uploads of the store's keys started more than ABANDONED_MULTIPART_MS ago: a
   * process that died while placing or ingesting a blob leaves its parts stored (and billed) otherwise.
   */
  async abortAbandonedMultipart(now: number): Promise<number> {
    let aborted = 0;
    let KeyMarker: string | undefined;
    let UploadIdMarker: string | undefined;
    do {
      const page = await this.s3.send(new ListMultipartUploadsCommand({ Bucket: this.bucket, Prefix: this.opts.prefix, KeyMarker, UploadIdMarker }));
      for (const u of page.Uploads ?? []) {
        if (!u.Key || !u.UploadId || now - (u.Initiated?.getTime() ?? now) < ABANDONED_MULTIPART_MS) continue;
        await this.s3.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: u.Key, UploadId: u.UploadId }));
        aborted++;
      }
      [KeyMarker, UploadIdMarker] = page.IsTruncated ? [page.NextKeyMarker, page.NextUploadIdMarker] : [undefined, undefined];
    } while (KeyMarker !== undefined);
    return aborted;
  }
}

/**
 * The blocks grouped into the parts of a multipart upload: a block of at least MIN_PART (or the last
 * one, alone) is a part by itself, copied inside the store; smaller blocks are joined with the ones after
 * them until the group reaches MIN_PART or the end.
 */
export function groupParts<P extends { length: number }>(parts: readonly P[]): P[][] {
  const groups: P[][] = [];
  let current: P[] = [];
  let bytes = 0;
  for (const p of parts) {
    if (current.length === 0 && p.length >= MIN_PART) {
      groups.push([p]);
      continue;
    }
    current.push(p);
    bytes += p.length;
    if (bytes >= MIN_PART) {
      groups.push(current);
      current = [];
      bytes = 0;
    }
  }
  if (current.length > 0) groups.push(current);
  return groups;
}

/** A key as the `CopySource` header wants it (each path segment URL-encoded). */
function encodeKey(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}
