/**
 * The gateway against a service a few milliseconds away (the latency proxy of the benchmarks in front of
 * the embedded service, whose public URL is the proxy's, so links and upload servers go through it too).
 * What is asserted is behaviour, never time: how many requests were in flight at once (a range request
 * from its call until its body stream closes; an ls page from its call until its answer), counted on the
 * remote and the client the gateway uses.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ServiceClient } from '../../../src/api/client.js';
import { LibraryRemote } from '../../../src/remote/library-remote.js';
import { uploadFile } from '../../../src/api/upload.js';
import { createVfs } from '../../../src/vfs/index.js';
import type { Readable as ReadableStream } from 'node:stream';
import { LatencyProxy } from '../../../scripts/bench/support/latency-proxy.js';
import { startTestService, type TestService } from '../../support/service.js';
import { freePort } from '../../support/free-port.js';

const MiB = 1024 * 1024;

/**
 * Length of `got` and the first byte where it differs from `want` (-1: none); then where in `want` the
 * bytes found there come from (-1: nowhere) and, with `pieces`, where the pieces around it start.
 */
function sameBytes(got: Buffer, want: Buffer, pieces?: number[]): { length: number; firstDifference: number; foundAt?: number; pieceStarts?: number[] } {
  const n = Math.min(got.length, want.length);
  let firstDifference = got.length === want.length ? -1 : n;
  for (let i = 0; i < n; i++) if (got[i] !== want[i]) { firstDifference = i; break; }
  if (firstDifference < 0) return { length: got.length, firstDifference };
  const foundAt = want.indexOf(got.subarray(firstDifference, firstDifference + 32));
  if (!pieces) return { length: got.length, firstDifference, foundAt };
  const starts: number[] = [];
  let at = 0;
  for (const p of pieces) { starts.push(at); at += p; }
  const k = starts.findIndex((st, i) => i === starts.length - 1 || starts[i + 1]! > firstDifference);
  return { length: got.length, firstDifference, foundAt, pieceStarts: starts.slice(Math.max(0, k - 2), k + 3) };
}

describe('gateway against a far-away service (latency proxy)', { timeout: 60_000 }, () => {
  let proxy: LatencyProxy;
  let t: TestService;
  let dir: string;
  const file = randomBytes(24 * MiB);
  const small = Array.from({ length: 40 }, () => randomBytes(3000));

  /** A client of the library through the proxy, with a connection pool of its own. */
  const freshClient = (): ServiceClient => {
    const c = t.service.credentials.library;
    return new ServiceClient({ baseUrl: t.service.baseUrl, credentials: { library: { org_client_id: c.org_client_id, org_client_secret: c.org_client_secret } }, retries: 0 });
  };

  /** A remote whose range requests in flight are counted (`peak`: the most at once). */
  const countedRemote = (client: ServiceClient): { remote: LibraryRemote; ranges: { now: number; peak: number; total: number } } => {
    const remote = new LibraryRemote({ client });
    const ranges = { now: 0, peak: 0, total: 0 };
    const openRange = remote.openRange.bind(remote);
    remote.openRange = async (...args: Parameters<LibraryRemote['openRange']>): Promise<ReadableStream> => {
      ranges.total++;
      ranges.peak = Math.max(ranges.peak, ++ranges.now);
      try {
        const stream = await openRange(...args);
        stream.once('close', () => { ranges.now--; });
        return stream;
      } catch (err) {
        ranges.now--;
        throw err;
      }
    };
    return { remote, ranges };
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cloudlib-far-'));
    proxy = new LatencyProxy({ delayMs: 5 });
    const proxyPort = await proxy.listen();
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      try {
        t = await startTestService({ listen: `127.0.0.1:${port}`, publicUrl: `http://127.0.0.1:${proxyPort}` });
        proxy.setTarget('127.0.0.1', port);
        break;
      } catch (err) {
        if (attempt >= 5 || (err as { code?: string }).code !== 'EADDRINUSE') throw err;
      }
    }
    expect(t.service.baseUrl).toBe(`http://127.0.0.1:${proxyPort}`);
    await uploadFile(t.client, { size: file.length, open: (start) => Readable.from([file.subarray(start)]) }, { fullpath: 'big.bin' });
    for (let i = 0; i < 60; i++) await t.client.file.createFolder({ fullpath: `many/d${String(i).padStart(2, '0')}` });
    for (const [i, data] of small.entries()) {
      await t.client.createFileWithContent({ fullpath: `walk/f${String(i).padStart(2, '0')}`, filehash: createHash('sha1').update(data).digest('hex'), filesize: data.length, overwrite: 1 }, data);
    }
  });
  afterAll(async () => {
    await t?.close();
    await proxy?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('a sequential read through a handle keeps several range requests in flight, and returns the right bytes', async () => {
    const client = freshClient();
    const { remote, ranges } = countedRemote(client);
    const vfs = await createVfs({ libraries: [{ name: 'Lib', remote }], dataDir: join(dir, 'read'), feedIntervalMs: 0 });
    try {
      const h = await vfs.open('/Lib/big.bin', { read: true });
      const parts: Buffer[] = [];
      for (let at = 0; at < file.length; at += 128 * 1024) parts.push(await h.read(at, 128 * 1024));
      await h.release();
      expect(sameBytes(Buffer.concat(parts), file)).toEqual({ length: file.length, firstDifference: -1 });
      // The window being read and the ones asked for ahead of it (default: up to four ranges at once).
      expect(ranges.peak).toBeGreaterThanOrEqual(3);
    } finally {
      await vfs.close();
      await client.close();
    }
  });

  it('a large createReadStream (a WebDAV GET) is read with several ranges in flight too', async () => {
    const client = freshClient();
    const { remote, ranges } = countedRemote(client);
    const vfs = await createVfs({ libraries: [{ name: 'Lib', remote }], dataDir: join(dir, 'stream'), feedIntervalMs: 0 });
    try {
      const chunks: Buffer[] = [];
      for await (const c of (await vfs.createReadStream('/Lib/big.bin', { start: 3 * MiB + 5 })) as AsyncIterable<Buffer>) chunks.push(c);
      // Where they differ, if they do (and how the pieces were cut there), says what went wrong.
      expect(sameBytes(Buffer.concat(chunks), file.subarray(3 * MiB + 5), chunks.map((c) => c.length))).toEqual({ length: file.length - 3 * MiB - 5, firstDifference: -1 });
      expect(ranges.peak).toBeGreaterThanOrEqual(3);
      expect(ranges.now).toBe(0); // every range closed at the end
    } finally {
      await vfs.close();
      await client.close();
    }
  });

  it('a folder read file after file: the next small files are fetched ahead, their reads need no request', async () => {
    const client = freshClient();
    const { remote, ranges } = countedRemote(client);
    const vfs = await createVfs({ libraries: [{ name: 'Lib', remote }], dataDir: join(dir, 'walk'), feedIntervalMs: 0, cache: { ttlMs: 600_000 } });
    try {
      const names = (await vfs.readdir('/Lib/walk')).map((a) => a.name).sort();
      expect(names).toHaveLength(small.length);
      const byOwnRead: number[] = [];
      for (const name of names) {
        const h = await vfs.open(`/Lib/walk/${name}`, { read: true });
        const before = ranges.total;
        const got = await h.read(0, 128 * 1024);
        byOwnRead.push(ranges.total - before);
        await h.release();
        expect(got.equals(small[Number(name.slice(1))]!)).toBe(true);
      }
      // The first two reads ask for their file; from the third on the bytes were fetched ahead.
      expect(byOwnRead.slice(0, 2)).toEqual([1, 1]);
      expect(byOwnRead.slice(2).every((n) => n === 0)).toBe(true);
      expect(ranges.total).toBe(small.length); // each file fetched once
    } finally {
      await vfs.close();
      await client.close();
    }
  });

  it("a large listing's pages after the first are asked for together (one page at a time when asked)", async () => {
    const names = Array.from({ length: 60 }, (_, i) => `d${String(i).padStart(2, '0')}`);
    for (const pageConcurrency of [16, 2, 1]) {
      const client = freshClient();
      const pages = { now: 0, peak: 0, total: 0 };
      const ls = client.file.ls;
      client.file.ls = async (...args: Parameters<typeof ls>) => {
        pages.total++;
        pages.peak = Math.max(pages.peak, ++pages.now);
        try { return await ls(...args); } finally { pages.now--; }
      };
      const remote = new LibraryRemote({ client, pageSize: 10, pageConcurrency });
      try {
        const entries = (await remote.list('many')).map((e) => e.name);
        expect(entries.sort()).toEqual(names);
        // The first page (it gives the count), then the other five together, within the limit.
        expect(pages.total).toBe(6);
        expect(pages.peak).toBe(Math.min(5, pageConcurrency));
      } finally {
        await client.close();
      }
    }
  });
});
