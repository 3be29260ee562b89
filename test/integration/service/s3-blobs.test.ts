/**
 * Content in an S3-compatible object store: S3BlobStore against a real server (OpenStack Swift with
 * s3api, scripts/s3-server) — single and multipart ingest, ranged reads, removal — and the service run
 * with `blobs: s3://…`: uploads land in the bucket, downloads stream from it with ranges, collection
 * removes objects nothing references; S3StagedUploads, the uploads in progress staged in the bucket
 * (the contract of every StagedUploads, blocks copied into the blob's object inside the store).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { listKeys, startS3Server, type S3Server } from '../../support/s3-server.js';
import { stagedUploadsContract } from '../../support/staged-uploads-contract.js';
import { metadataStoreAt } from '../../../src/service/store/metadata-location.js';
import type { MetadataStore } from '../../../src/service/store/metadata-store.js';
import { ABANDONED_MULTIPART_MS, type S3StagedUploads } from '../../../src/service/store/s3-staged-uploads.js';
import { CreateMultipartUploadCommand, ListMultipartUploadsCommand, S3Client } from '@aws-sdk/client-s3';
import { startTestService } from '../../support/service.js';
import { stageBlock } from '../../../src/service/upload/block-receiver.js';
import { startServiceProcess } from '../../support/service-process.js';
import { S3BlobStore } from '../../../src/service/store/s3-blob-store.js';
import { blobStoreAt } from '../../../src/service/store/blob-location.js';
import { EmbeddedService } from '../../../src/service/index.js';
import { fetchFile, put, sha1 } from './helpers.js';

const MiB = 1024 * 1024;
let s3: S3Server;
let scratch: string;
const savedEnv = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };

beforeAll(async () => {
  s3 = await startS3Server();
  process.env.AWS_ACCESS_KEY_ID = s3.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = s3.secretAccessKey;
  scratch = await mkdtemp(join(tmpdir(), 'cloudlib-s3-test-'));
}, 150_000);

afterAll(async () => {
  if (savedEnv.id === undefined) delete process.env.AWS_ACCESS_KEY_ID; else process.env.AWS_ACCESS_KEY_ID = savedEnv.id;
  if (savedEnv.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY; else process.env.AWS_SECRET_ACCESS_KEY = savedEnv.secret;
  await s3?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
}, 60_000);

async function drain(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function tempFileOf(store: S3BlobStore, data: Buffer): Promise<string> {
  const file = store.tempPath();
  await writeFile(file, data);
  return file;
}

describe('S3BlobStore on Swift', () => {
  it('ingests, reads whole and by range, skips content already stored, removes', async () => {
    const store = new S3BlobStore({ bucket: 'store-small', endpoint: s3.endpoint, tempDir: scratch, prefix: 'blobs/' });
    await store.open();
    try {
      const data = Buffer.from('hello, object store');
      const id = sha1(data);
      expect(await store.sizeOf(id)).toBeUndefined();
      const first = await tempFileOf(store, data);
      await store.ingest(first, id, data.length);
      expect(existsSync(first)).toBe(false);
      expect(await store.sizeOf(id)).toBe(data.length);
      expect((await drain(store.read(id))).toString()).toBe('hello, object store');
      expect((await drain(store.read(id, { start: 7, end: 12 }))).toString()).toBe('object');
      expect((await drain(store.read(id, { start: 14 }))).toString()).toBe('store');
      const again = await tempFileOf(store, data);
      await store.ingest(again, id, data.length);
      expect(existsSync(again)).toBe(false);
      await store.remove(id);
      expect(await store.sizeOf(id)).toBeUndefined();
      await store.remove(id); // a missing blob is not an error
      await expect(drain(store.read(id))).rejects.toThrow(/not stored/);
    } finally {
      store.close();
    }
  });

  it('sends content larger than a part as a multipart upload and reads ranges across parts', async () => {
    const store = new S3BlobStore({ bucket: 'store-large', endpoint: s3.endpoint, tempDir: scratch, partSize: 5 * MiB });
    await store.open();
    try {
      const data = randomBytes(11 * MiB + 3);
      const id = createHash('sha1').update(data).digest('hex');
      await store.ingest(await tempFileOf(store, data), id, data.length);
      expect(await store.sizeOf(id)).toBe(data.length);
      const across = await drain(store.read(id, { start: 5 * MiB - 10, end: 10 * MiB + 9 }));
      expect(across.equals(data.subarray(5 * MiB - 10, 10 * MiB + 10))).toBe(true);
      const whole = await drain(store.read(id));
      expect(createHash('sha1').update(whole).digest('hex')).toBe(id);
    } finally {
      store.close();
    }
  });

  it('reads an empty blob as no bytes, also with a range', async () => {
    const store = new S3BlobStore({ bucket: 'store-small', endpoint: s3.endpoint, tempDir: scratch });
    await store.open();
    try {
      const id = sha1('');
      await store.ingest(await tempFileOf(store, Buffer.alloc(0)), id, 0);
      expect(await store.sizeOf(id)).toBe(0);
      expect((await drain(store.read(id))).length).toBe(0);
      expect((await drain(store.read(id, { start: 0 }))).length).toBe(0);
    } finally {
      store.close();
    }
  });

  it('refuses a bucket it cannot reach with a clear error', async () => {
    const store = new S3BlobStore({ bucket: 'store-small', endpoint: 'http://127.0.0.1:1', tempDir: scratch, readyWaitMs: 0 });
    try {
      await expect(store.open()).rejects.toThrow(/blob store s3:\/\/store-small/);
    } finally {
      store.close();
    }
  });
});

describe('S3StagedUploads on Swift', () => {
  let db: MetadataStore;
  let store: S3BlobStore;
  let staging: S3StagedUploads;
  beforeAll(async () => {
    db = await metadataStoreAt(undefined, scratch);
    store = new S3BlobStore({ bucket: 'staged', endpoint: s3.endpoint, tempDir: scratch, prefix: 'b/' });
    await store.open();
    staging = store.stagedUploads(db);
  });
  afterAll(async () => {
    store?.close();
    await db?.close();
  });
  const stagedSessions = async () => [...new Set((await listKeys(s3, 'staged', 'b/staging/')).map((k) => k.split('/')[2]!))];

  stagedUploadsContract(() => ({ staging, blobs: store, stagedSessions }), { bigBlocks: true });

  it('stages each block as one object under PREFIX staging/<session>/, recorded in upload_parts', async () => {
    const session = 'd'.repeat(32);
    await stageBlock(staging, session, Readable.from([Buffer.from('abc')]), { start: 0, length: 3 }, createHash('sha1'));
    await stageBlock(staging, session, Readable.from([Buffer.from('de')]), { start: 3, length: 2 }, createHash('sha1'));
    expect(await listKeys(s3, 'staged', `b/staging/${session}/`)).toEqual([`b/staging/${session}/000000000000000`, `b/staging/${session}/000000000000003`]);
    expect(await db.all('SELECT start, length FROM upload_parts WHERE session_id = ? ORDER BY start', [session])).toEqual([{ start: 0, length: 3 }, { start: 3, length: 2 }]);
    await staging.remove(session);
    expect(await listKeys(s3, 'staged', `b/staging/${session}/`)).toEqual([]);
    expect(await db.all('SELECT start FROM upload_parts WHERE session_id = ?', [session])).toEqual([]);
  });

  it('aborts multipart uploads of the store left for more than a day (a process died placing a blob)', async () => {
    const client = new S3Client({
      region: 'us-east-1', endpoint: s3.endpoint, forcePathStyle: true,
      credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    });
    try {
      const left = await client.send(new CreateMultipartUploadCommand({ Bucket: 'staged', Key: `b/${'e'.repeat(40)}` }));
      const open = async () => ((await client.send(new ListMultipartUploadsCommand({ Bucket: 'staged' }))).Uploads ?? []).map((u) => u.UploadId);
      expect(await open()).toContain(left.UploadId);
      expect(await staging.abortAbandonedMultipart(Date.now())).toBe(0); // younger than a day: may be running
      expect(await open()).toContain(left.UploadId);
      await staging.removeStrays(async () => true, Date.now() + ABANDONED_MULTIPART_MS + 60_000, 600_000);
      expect(await open()).not.toContain(left.UploadId);
    } finally {
      client.destroy();
    }
  });

  it('refuses a staging folder (the bucket is where an S3 store stages)', () => {
    expect(() => store.stagedUploads(db, '/srv/staging')).toThrow(/a staging folder goes with a file:\/\/ blob store only/);
  });
});

describe('blob store locations', () => {
  it('parses file:// and s3:// and refuses what it cannot use, credentials in the URL first', () => {
    expect(blobStoreAt(undefined, '/data', '/data/tmp').location).toBe('file:///data/blobs');
    expect(blobStoreAt('file:///srv/blobs', '/data', '/data/tmp').location).toBe('file:///srv/blobs');
    const s = blobStoreAt('s3://my-bucket?endpoint=http://127.0.0.1:8080&region=eu-west-1&prefix=b/&part_size_mb=8', '/data', '/data/tmp');
    expect(s).toBeInstanceOf(S3BlobStore);
    expect((s as S3BlobStore).partSize).toBe(8 * MiB);
    expect((s as S3BlobStore).prefix).toBe('b/');
    s.close();
    expect(() => blobStoreAt('s3://key:secret@my-bucket', '/d', '/t')).toThrow(/credentials do not go in the URL/);
    expect(() => blobStoreAt('s3://my-bucket?secret=x', '/d', '/t')).toThrow(/unknown parameter "secret"/);
    expect(() => blobStoreAt('s3://my-bucket?part_size_mb=1', '/d', '/t')).toThrow(/at least 5/);
    expect(() => blobStoreAt('s3://my-bucket/some/path', '/d', '/t')).toThrow(/no path/);
    expect(() => blobStoreAt('s3://my-bucket?endpoint=ftp://x', '/d', '/t')).toThrow(/endpoint/);
    expect(() => blobStoreAt('gs://bucket', '/d', '/t')).toThrow(/file:\/\/ or s3:\/\//);
    expect(() => blobStoreAt('not a url', '/d', '/t')).toThrow(/expected file/);
  });
});

describe('service with content in S3', () => {
  it('stores uploads in the bucket, serves ranged downloads from it and collects unreferenced objects', async () => {
    const t = await startTestService({ blobs: `s3://service-blobs?endpoint=${s3.endpoint}` });
    const check = new S3BlobStore({ bucket: 'service-blobs', endpoint: s3.endpoint, tempDir: scratch });
    try {
      const body = Buffer.from('0123456789'.repeat(1000));
      await put(t.client, 'docs/report.txt', body);
      expect(await check.sizeOf(sha1(body))).toBe(body.length);
      expect(existsSync(join(t.dir, 'blobs'))).toBe(false);

      const whole = await fetchFile(t.client, 'docs/report.txt');
      expect(whole.status).toBe(200);
      expect(whole.body.equals(body)).toBe(true);
      const part = await fetchFile(t.client, 'docs/report.txt', { range: 'bytes=10-19' });
      expect(part.status).toBe(206);
      expect(part.headers['content-range']).toBe(`bytes 10-19/${body.length}`);
      expect(part.body.toString()).toBe('0123456789');

      const instant = await put(t.client, 'docs/copy.txt', body);
      expect(instant.instant).toBe(true);
      await t.client.file.del({ fullpath: 'docs/report.txt', destroy: 1 });
      await t.client.file.del({ fullpath: 'docs/copy.txt', destroy: 1 });
      await t.service.parts.content.settled();
      expect(await check.sizeOf(sha1(body))).toBeUndefined();
      expect((await readdir(join(t.dir, 'tmp'))).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    } finally {
      check.close();
      await t.close();
    }
  });
});

describe('service with content in S3 and a staging folder', () => {
  it('is refused with a clear error: an S3 store stages uploads in its bucket', async () => {
    const dir = await mkdtemp(join(scratch, 'refused-'));
    await expect(EmbeddedService.start({ dataDir: dir, blobs: `s3://refused?endpoint=${s3.endpoint}`, uploadStaging: join(dir, 'staging') }))
      .rejects.toThrow('upload staging: a staging folder goes with a file:// blob store only; with s3:// the uploads in progress are staged in the bucket');
    expect(existsSync(join(dir, 'credentials.json'))).toBe(false);
  });
});

describe('cloudlib service --blobs s3://…', () => {
  it('runs with content in the bucket, credentials from the environment only', async () => {
    const proc = await startServiceProcess({
      serviceArgs: ['--blobs', `s3://cli-blobs?endpoint=${s3.endpoint}`],
      env: { AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey },
    });
    const check = new S3BlobStore({ bucket: 'cli-blobs', endpoint: s3.endpoint, tempDir: scratch });
    try {
      await put(proc.client, 'from-cli.txt', 'through the command line');
      expect(await check.sizeOf(sha1('through the command line'))).toBe('through the command line'.length);
      expect((await fetchFile(proc.client, 'from-cli.txt')).body.toString()).toBe('through the command line');
      expect(existsSync(join(proc.dir, 'blobs'))).toBe(false);
    } finally {
      check.close();
      await proc.close();
    }
  });
});
