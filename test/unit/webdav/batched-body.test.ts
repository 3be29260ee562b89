/** sendBatched: the GET body writer (batches of socket pieces, one writev each). */
import { describe, it, expect, afterEach } from 'vitest';
import { createServer, request, type Server, type ServerResponse } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { sendBatched } from '../../../src/webdav/batched-body.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

/** A server whose one route runs `handler`; resolves its URL. */
async function serve(handler: (res: ServerResponse) => void): Promise<string> {
  server = createServer((_req, res) => handler(res));
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

function get(url: string): Promise<{ body: Buffer; status: number }> {
  return new Promise((resolve, reject) => {
    request(url, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ body: Buffer.concat(parts), status: res.statusCode ?? 0 }));
      res.on('error', reject);
    }).on('error', reject).end();
  });
}

describe('sendBatched', () => {
  it('delivers every byte in order, through full batches, partial ones and backpressure', async () => {
    const data = randomBytes(9 * 1024 * 1024 + 777);
    const pieces: Buffer[] = [];
    for (let at = 0; at < data.length; at += 65536) pieces.push(data.subarray(at, at + 65536));
    let done: Promise<void> | undefined;
    const url = await serve((res) => {
      res.writeHead(200, { 'content-length': String(data.length) });
      done = sendBatched(Readable.from(pieces), res, { batchBytes: 1024 * 1024 });
    });
    const { body } = await get(url);
    await done;
    expect(createHash('sha1').update(body).digest('hex')).toBe(createHash('sha1').update(data).digest('hex'));
  });

  it('sends a partial batch after the delay when the source is slow', async () => {
    const source = new PassThrough();
    let firstAt = 0;
    const url = await serve((res) => {
      res.writeHead(200);
      void sendBatched(source, res, { batchBytes: 1024 * 1024, maxDelayMs: 5 });
    });
    const t0 = Date.now();
    const got = new Promise<Buffer>((resolve, reject) => {
      request(url, (res) => {
        res.once('data', (c: Buffer) => { firstAt = Date.now(); resolve(c); });
      }).on('error', reject).end();
    });
    source.write(Buffer.from('hello'));
    // The source stays open: only the delay can send these bytes.
    expect((await got).toString()).toBe('hello');
    expect(firstAt - t0).toBeLessThan(5_000);
    source.end();
  });

  it('a failing source rejects and cuts the response (the client sees a short body, not a clean end)', async () => {
    const source = new PassThrough();
    let done: Promise<string> | undefined;
    const url = await serve((res) => {
      res.writeHead(200, { 'content-length': '1000000' });
      done = sendBatched(source, res, { maxDelayMs: 1 }).then(() => 'resolved', (err: Error) => err.message);
      source.write(Buffer.alloc(1000, 1));
      setTimeout(() => source.destroy(new Error('range read failed')), 20);
    });
    const outcome = await get(url).then(() => 'ended', (err: Error) => err.message);
    expect(outcome).not.toBe('ended');
    expect(await done).toBe('range read failed');
  });

  it('a client that goes away rejects it and destroys the source', async () => {
    const source = new PassThrough();
    let done: Promise<string> | undefined;
    const url = await serve((res) => {
      res.writeHead(200, { 'content-length': String(64 * 1024 * 1024) });
      done = sendBatched(source, res, { maxDelayMs: 1 }).then(() => 'resolved', (err: Error) => err.message);
      source.write(Buffer.alloc(65536, 1));
    });
    await new Promise<void>((resolve) => {
      const req = request(url, (res) => res.once('data', () => { req.destroy(); resolve(); }));
      req.on('error', () => undefined).end();
    });
    expect(await done).toMatch(/client closed the connection/);
    expect(source.destroyed).toBe(true);
  });
});
