/**
 * S3BlobStore.open() against a stand-in object store: one that answers "try later" (still starting, or
 * throttling) is asked again until it is ready, within `readyWaitMs`; a refusal fails at once; a bucket
 * another process made meanwhile is taken as made.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { S3BlobStore } from '../../../../src/service/store/s3-blob-store.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

const s3Error = (res: ServerResponse, status: number, code: string, message: string): void => {
  res.writeHead(status, { 'content-type': 'application/xml' });
  res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`);
};

/** An object store whose answers `answer` decides; counts the requests by method. */
async function standIn(answer: (req: IncomingMessage, res: ServerResponse, n: { HEAD: number; PUT: number }) => void): Promise<{ endpoint: string; calls: { HEAD: number; PUT: number } }> {
  const calls = { HEAD: 0, PUT: 0 };
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method === 'HEAD' || req.method === 'PUT') calls[req.method]++;
      answer(req, res, calls);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls };
}

async function store(endpoint: string, readyWaitMs?: number): Promise<S3BlobStore> {
  const tempDir = await mkdtemp(join(tmpdir(), 's3-open-'));
  const s = new S3BlobStore({ bucket: 'blobs', endpoint, tempDir, readyWaitMs });
  cleanups.push(async () => {
    s.close();
    await rm(tempDir, { recursive: true, force: true });
  });
  return s;
}

describe('S3BlobStore.open', { timeout: 30_000 }, () => {
  process.env.AWS_ACCESS_KEY_ID ??= 'test';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'test';

  it('asks an object store that answers "reduce your request rate" again until it makes the bucket', async () => {
    const { endpoint, calls } = await standIn((req, res, n) => {
      if (req.method === 'HEAD') return void res.writeHead(404).end();
      // More refusals than the SDK's own attempts of one request.
      if (n.PUT <= 5) return s3Error(res, 503, 'SlowDown', 'Please reduce your request rate.');
      res.writeHead(200).end();
    });
    await (await store(endpoint)).open();
    expect(calls.PUT).toBe(6);
  });

  it('gives up once the wait is over, naming the last answer', async () => {
    const { endpoint } = await standIn((req, res) => (req.method === 'HEAD' ? void res.writeHead(404).end() : s3Error(res, 503, 'SlowDown', 'Please reduce your request rate.')));
    await expect((await store(endpoint, 300)).open()).rejects.toThrow(/blob store s3:\/\/blobs.*creating the bucket: .*503.*not ready within 300 ms/);
  });

  it('fails at once on a refusal (not a "try later")', async () => {
    const { endpoint, calls } = await standIn((_req, res) => void res.writeHead(403).end());
    const started = Date.now();
    await expect((await store(endpoint)).open()).rejects.toThrow(/blob store s3:\/\/blobs\?endpoint=\S+: .*HTTP 403/);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(calls.HEAD).toBe(1);
  });

  it('takes a bucket another process made meanwhile as made', async () => {
    const { endpoint, calls } = await standIn((req, res) => (req.method === 'HEAD' ? void res.writeHead(404).end() : s3Error(res, 409, 'BucketAlreadyOwnedByYou', 'Your previous request to create the named bucket succeeded and you already own it.')));
    await expect((await store(endpoint)).open()).resolves.toBeUndefined();
    // Asked once to make it, the refusal taken as made: not asked again.
    expect(calls).toEqual({ HEAD: 1, PUT: 1 });
  });
});
