/**
 * One retry policy: a read against a failing service costs a bounded number of exchanges. Retries happen
 * at one layer (the client's, composed onto the HTTP dispatcher); the download link is renewed only by
 * LibraryRemote, once, when the download server refuses it. (Before, one read could ask for a link up to
 * 24 times: the client's retries × openRange twice × the RangeReader three times.)
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { ServiceClient } from '../../../src/api/client.js';
import { LibraryRemote } from '../../../src/remote/library-remote.js';
import { BlockCache } from '../../../src/vfs/block-cache.js';
import { RangeReader } from '../../../src/vfs/range-reader.js';
import { silentLogger } from '../../../src/shared/log.js';

const RETRIES = 3;
const DATA = randomBytes(256 * 1024);

type Mode = { downloadUrl: 'ok' | 503; range: 'ok' | 503 | 403 | 'cut-once' };

/** The service (download_url) and its download server in one, failing as told, counting every exchange. */
async function failingService(mode: Mode): Promise<{ url: string; calls: { downloadUrl: number; range: number }; server: Server }> {
  const calls = { downloadUrl: 0, range: 0 };
  let cut = false;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    if (req.url?.startsWith('/m-open/1/file/download_url')) {
      calls.downloadUrl++;
      if (mode.downloadUrl === 503) return void res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error_code: 50001, error_msg: 'failing' }));
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ urls: [`http://127.0.0.1:${port()}/dl/${calls.downloadUrl}`] }));
    }
    if (req.url?.startsWith('/dl/')) {
      calls.range++;
      if (mode.range === 503 || mode.range === 403) return void res.writeHead(mode.range).end('refused');
      const m = /bytes=(\d+)-(\d+)/.exec(String(req.headers.range))!;
      const start = Number(m[1]);
      const end = Math.min(Number(m[2]), DATA.length - 1);
      res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${DATA.length}`, 'content-length': String(end - start + 1) });
      if (mode.range === 'cut-once' && !cut) {
        cut = true;
        res.write(DATA.subarray(start, start + 1000));
        return void setImmediate(() => res.socket?.destroy());
      }
      return void res.end(DATA.subarray(start, end + 1));
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = () => (server.address() as { port: number }).port;
  servers.push(server);
  return { url: `http://127.0.0.1:${port()}`, calls, server };
}

const servers: Server[] = [];
const clients: ServiceClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
  for (const s of servers.splice(0)) await new Promise((r) => { s.closeAllConnections(); s.close(r); });
});

/** A read of the file's first 64 KiB, as the Vfs reads: RangeReader over LibraryRemote over the client. */
async function readOnce(url: string): Promise<Buffer> {
  const client = new ServiceClient({ baseUrl: url, credentials: { library: { org_client_id: 'c', org_client_secret: 's' } }, retries: RETRIES, retryBaseMs: 1 });
  clients.push(client);
  const reader = new RangeReader({
    remote: new LibraryRemote({ client }), fullpath: 'f', size: DATA.length, contentKey: 'f', blocks: new BlockCache({ blockSize: 4096 }), logger: silentLogger,
  });
  try {
    return await reader.read(0, 64 * 1024);
  } finally {
    reader.close();
  }
}

describe('the exchanges of one read against a failing service', { timeout: 20_000 }, () => {
  it('download_url failing: asked 1 + retries times, no more', async () => {
    const s = await failingService({ downloadUrl: 503, range: 'ok' });
    await expect(readOnce(s.url)).rejects.toMatchObject({ code: 'EAGAIN' });
    expect(s.calls).toEqual({ downloadUrl: 1 + RETRIES, range: 0 });
  });

  it('the download server failing (503): the range is asked 1 + retries times on one link', async () => {
    const s = await failingService({ downloadUrl: 'ok', range: 503 });
    await expect(readOnce(s.url)).rejects.toMatchObject({ code: 'EAGAIN' });
    expect(s.calls).toEqual({ downloadUrl: 1, range: 1 + RETRIES });
  });

  it('the download server refusing the link (403): the link is renewed once, then the read fails', async () => {
    const s = await failingService({ downloadUrl: 'ok', range: 403 });
    await expect(readOnce(s.url)).rejects.toMatchObject({ code: 'EACCES' });
    expect(s.calls).toEqual({ downloadUrl: 2, range: 2 });
  });

  it('a body cut mid-way is resumed where it stopped, on the same link', async () => {
    const s = await failingService({ downloadUrl: 'ok', range: 'cut-once' });
    expect((await readOnce(s.url)).equals(DATA.subarray(0, 64 * 1024))).toBe(true);
    expect(s.calls).toEqual({ downloadUrl: 1, range: 2 });
  });
});
