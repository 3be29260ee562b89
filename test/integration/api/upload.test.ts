/**
 * The uploader against the embedded service: instant upload, chunked upload, resumption after a
 * connection cut in the middle of a block, the upload server's answers as the uploader reads them (409
 * with `expect`, upload_req, CRC rejection, 202), upload_abort, and web upload.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { Agent, buildConnector, request } from 'undici';
import { ServiceClient } from '../../../src/api/client.js';
import { uploadFile, webUpload, type UploadSource } from '../../../src/api/upload.js';
import { UploadServerClient } from '../../../src/api/upload-server-client.js';
import { normalizeServer } from '../../../src/api/normalize.js';
import { crc32 } from '../../../src/shared/crc32.js';
import { startTestService, type TestService } from '../../support/service.js';

const BLOCK = 64 * 1024;
const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');

function source(data: Buffer): UploadSource {
  return { size: data.length, open: (start) => Readable.from([data.subarray(start)]) };
}

async function download(client: ServiceClient, fullpath: string): Promise<Buffer> {
  const { urls } = await client.file.downloadUrl({ fullpath });
  const res = await request(urls[0]!);
  expect(res.statusCode).toBe(200);
  return Buffer.from(await res.body.arrayBuffer());
}

describe('uploader against the embedded service', { timeout: 30_000 }, () => {
  let t: TestService;
  beforeAll(async () => { t = await startTestService(); });
  afterAll(async () => { await t?.close(); });

  it('chunked upload, then the same content again is instant', async () => {
    const data = randomBytes(3 * BLOCK + 1234);
    const first = await uploadFile(t.client, source(data), { fullpath: 'up/chunked.bin', blockSize: BLOCK });
    expect(first).toMatchObject({ fullpath: 'up/chunked.bin', filehash: sha1(data), filesize: data.length, instant: false });
    expect((await download(t.client, 'up/chunked.bin')).equals(data)).toBe(true);
    const info = await t.client.file.info({ fullpath: 'up/chunked.bin', attribute: 10 });
    expect(info).toMatchObject({ hash: first.hash, filehash: sha1(data), filesize: data.length });

    const again = await uploadFile(t.client, source(data), { fullpath: 'up/copy.bin', blockSize: BLOCK });
    expect(again.instant).toBe(true);
    expect((await download(t.client, 'up/copy.bin')).equals(data)).toBe(true);
  });

  it('a small file goes with create_file (one exchange), the empty file too; beyond the limit the chunked protocol', async () => {
    const endpoints: string[] = [];
    const c = t.service.credentials.library;
    const client = new ServiceClient({
      baseUrl: t.service.baseUrl, credentials: { library: { org_client_id: c.org_client_id, org_client_secret: c.org_client_secret } },
      retries: 0, onExchange: (e) => endpoints.push(e.endpoint),
    });
    try {
      const data = randomBytes(4096);
      const small = await uploadFile(client, source(data), { fullpath: 'inline/small.bin', inlineMaxBytes: 8192, operator: { op_name: 'inline' } });
      expect(small).toMatchObject({ fullpath: 'inline/small.bin', filehash: sha1(data), filesize: 4096, instant: false });
      expect(endpoints).toEqual(['file.create_file']); // nothing on the upload server
      expect((await download(client, 'inline/small.bin')).equals(data)).toBe(true);
      const info = await client.file.info({ fullpath: 'inline/small.bin', attribute: 10 });
      expect(info).toMatchObject({ hash: small.hash, filehash: sha1(data), filesize: 4096 });

      endpoints.length = 0;
      const empty = await uploadFile(client, source(Buffer.alloc(0)), { fullpath: 'inline/empty.bin', inlineMaxBytes: 8192 });
      expect(empty).toMatchObject({ filesize: 0, filehash: sha1(Buffer.alloc(0)) });
      expect(endpoints).toEqual(['file.create_file']);

      // A source that is not what it declared sends nothing.
      endpoints.length = 0;
      const short: UploadSource = { size: 5000, open: () => Readable.from([data]) };
      await expect(uploadFile(client, short, { fullpath: 'inline/short.bin', inlineMaxBytes: 8192 })).rejects.toThrow(/changed while being read/);
      const wrongHash: UploadSource = { size: 4096, filehash: sha1(Buffer.alloc(4096)), open: () => Readable.from([data]) };
      await expect(uploadFile(client, wrongHash, { fullpath: 'inline/wrong.bin', inlineMaxBytes: 8192 })).rejects.toThrow(/changed while being read/);
      expect(endpoints).toEqual([]);

      const large = randomBytes(8193);
      const chunked = await uploadFile(client, source(large), { fullpath: 'inline/large.bin', inlineMaxBytes: 8192 });
      expect(chunked.instant).toBe(false);
      expect((await download(client, 'inline/large.bin')).equals(large)).toBe(true);
      await expect(uploadFile(client, source(data), { fullpath: 'x', inlineMaxBytes: 51 * 1024 * 1024 })).rejects.toThrow(/inlineMaxBytes/);
    } finally {
      await client.close();
    }
  });

  it('a connection cut in the middle of a block: upload_req, then the rest', async () => {
    // A connector that cuts the first socket whose written bytes pass 1.5 blocks (inside the second block).
    const connect = buildConnector({});
    let cut = false;
    const agent = new Agent({
      connect: (opts, cb) => connect(opts, (err, socket) => {
        if (err || !socket) return cb(err, socket as never);
        const s = socket as Socket;
        let written = 0;
        const write = s.write.bind(s) as (...a: unknown[]) => boolean;
        (s as unknown as { write: (...a: unknown[]) => boolean }).write = (...args: unknown[]) => {
          const chunk = args[0] as Buffer | string;
          written += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
          if (!cut && written > BLOCK * 1.5) { cut = true; s.destroy(); return false; }
          return write(...args);
        };
        cb(null, s);
      }),
    });
    const client = new ServiceClient({ baseUrl: t.client.baseUrl, credentials: t.client.credentials, dispatcher: agent, retries: 0, retryBaseMs: 1 });
    try {
      const data = randomBytes(4 * BLOCK);
      const progress: number[] = [];
      await uploadFile(client, source(data), { fullpath: 'up/cut.bin', blockSize: BLOCK, onProgress: (s) => progress.push(s) });
      expect(cut).toBe(true);
      expect(progress).toEqual([0, BLOCK, 2 * BLOCK, 3 * BLOCK, 4 * BLOCK]);
      expect((await download(t.client, 'up/cut.bin')).equals(data)).toBe(true);
    } finally {
      await client.close();
      await agent.close();
    }
  });

  it('the real upload server answers what the uploader reads: 409 with expect, upload_req, 202 on the last block', async () => {
    const data = randomBytes(4 * BLOCK);
    const filehash = sha1(data);
    const created = await t.client.file.createFile({ fullpath: 'up/wire.bin', filehash, filesize: data.length, overwrite: 1 });
    const wire = new UploadServerClient(t.client, normalizeServer(created.server), { orgClientId: t.client.credentials.library!.org_client_id });
    const init = await wire.init({ filename: 'wire.bin', pathhash: created.hash, filehash, filesize: data.length });
    expect(init.kind).toBe('session');
    const session = (init as { session: string }).session;
    const block = (start: number) => data.subarray(start, start + BLOCK);
    for (const start of [0, BLOCK]) expect(await wire.part(session, start, block(start), crc32(block(start)))).toEqual({ kind: 'stored' });
    expect(await wire.part(session, 3 * BLOCK, block(3 * BLOCK), crc32(block(3 * BLOCK)))).toEqual({ kind: 'expect', offset: 2 * BLOCK });
    expect(await wire.received(session)).toBe(2 * BLOCK);
    await expect(wire.part(session, 2 * BLOCK, block(2 * BLOCK), 12345)).rejects.toMatchObject({ status: 400, code: 40001, endpoint: 'upload.upload_part' });
    expect(await wire.finish(session)).toEqual({ kind: 'incomplete', offset: 2 * BLOCK });
    expect(await wire.part(session, 2 * BLOCK, block(2 * BLOCK), crc32(block(2 * BLOCK)))).toEqual({ kind: 'stored' });
    expect(await wire.part(session, 3 * BLOCK, block(3 * BLOCK), crc32(block(3 * BLOCK)))).toEqual({ kind: 'complete' });
    expect((await wire.finish(session)).kind).toBe('done');
    expect((await download(t.client, 'up/wire.bin')).equals(data)).toBe(true);
  });

  it('upload_abort ends a session: the upload server no longer knows it', async () => {
    const data = randomBytes(2 * BLOCK);
    const created = await t.client.file.createFile({ fullpath: 'up/aborted.bin', filehash: sha1(data), filesize: data.length, overwrite: 1 });
    const wire = new UploadServerClient(t.client, normalizeServer(created.server), { orgClientId: t.client.credentials.library!.org_client_id });
    const init = await wire.init({ filename: 'aborted.bin', pathhash: created.hash, filehash: sha1(data), filesize: data.length });
    const session = (init as { session: string }).session;
    await wire.part(session, 0, data.subarray(0, BLOCK), crc32(data.subarray(0, BLOCK)));
    await wire.abort(session);
    await expect(wire.received(session)).rejects.toMatchObject({ endpoint: 'upload.upload_req' });
    await expect(t.client.file.info({ fullpath: 'up/aborted.bin' })).rejects.toMatchObject({ code: 40402 });
  });

  it('web upload with the library key', async () => {
    const data = randomBytes(200_000);
    const res = await webUpload(t.client, { path: 'web', name: 'form.bin', source: source(data) });
    expect(res).toMatchObject({ fullpath: 'web/form.bin', filesize: data.length });
    expect((await download(t.client, 'web/form.bin')).equals(data)).toBe(true);
  });
});
