/**
 * Upload sessions across a service restart (the upload resumes where it stopped), two uploads to one
 * path at once (both land: one is current, the other a history version), and instant upload of content
 * the service holds (no block sent).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ServiceClient } from '../../../src/api/client.js';
import { uploadFile, type UploadSource } from '../../../src/api/upload.js';
import { UploadServerClient } from '../../../src/api/upload-server-client.js';
import { normalizeServer } from '../../../src/api/normalize.js';
import { crc32 } from '../../../src/shared/crc32.js';
import { EmbeddedService } from '../../../src/service/index.js';

const BLOCK = 64 * 1024;
const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f().catch(() => undefined);
});

async function start(dir: string, listen = '127.0.0.1:0'): Promise<{ service: EmbeddedService; client: ServiceClient }> {
  const service = await EmbeddedService.start({ dataDir: dir, listen });
  const client = new ServiceClient({ baseUrl: service.baseUrl, credentials: { library: service.credentials.library } });
  cleanup.push(async () => { await client.close(); await service.close(); });
  return { service, client };
}

function counting(data: Buffer): UploadSource & { opened: number } {
  const s = { size: data.length, opened: 0, open: (from: number) => { s.opened++; return Readable.from([data.subarray(from)]); } };
  return s;
}

describe('uploads and the service lifecycle', { timeout: 30_000 }, () => {
  it('a session survives a restart of the service: the upload resumes at the offset it had', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-restart-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const first = await start(dir);
    const data = randomBytes(4 * BLOCK);
    const filehash = sha1(data);
    const created = await first.client.file.createFile({ fullpath: 'resume/big.bin', filehash, filesize: data.length, overwrite: 1 });
    const caller = { orgClientId: first.service.credentials.library.org_client_id };
    const wire1 = new UploadServerClient(first.client, normalizeServer(created.server), caller);
    const init = await wire1.init({ filename: 'big.bin', pathhash: created.hash, filehash, filesize: data.length });
    const session = (init as { session: string }).session;
    const block = (at: number) => data.subarray(at, at + BLOCK);
    for (const at of [0, BLOCK]) await wire1.part(session, at, block(at), crc32(block(at)));
    // The service stops in the middle of the transfer and comes back on the same address.
    const port = new URL(first.service.baseUrl).port;
    await cleanup.pop()!();
    const second = await start(dir, `127.0.0.1:${port}`);
    const wire2 = new UploadServerClient(second.client, normalizeServer(created.server), caller);
    expect(await wire2.received(session)).toBe(2 * BLOCK);
    for (const at of [2 * BLOCK, 3 * BLOCK]) await wire2.part(session, at, block(at), crc32(block(at)));
    expect((await wire2.finish(session)).kind).toBe('done');
    const info = await second.client.file.info({ fullpath: 'resume/big.bin', attribute: 10 });
    expect(info).toMatchObject({ filehash, filesize: data.length });
  });

  it('two uploads to the same path at once both land: one current, the other in its history', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-race-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const { client } = await start(dir);
    const a = randomBytes(3 * BLOCK);
    const b = randomBytes(3 * BLOCK + 7);
    const [ra, rb] = await Promise.all([
      uploadFile(client, counting(a), { fullpath: 'race/same.bin', blockSize: BLOCK }),
      uploadFile(client, counting(b), { fullpath: 'race/same.bin', blockSize: BLOCK }),
    ]);
    expect(ra.instant || rb.instant).toBe(false);
    const info = await client.file.info({ fullpath: 'race/same.bin', attribute: 10 });
    expect([sha1(a), sha1(b)]).toContain(info.filehash);
    const history = await client.file.history({ fullpath: 'race/same.bin', size: 100 });
    const hashes = history.list.map((h) => h.filehash);
    expect(hashes).toEqual(expect.arrayContaining([sha1(a), sha1(b)]));
    const listing = await client.file.ls({ fullpath: 'race' });
    expect(listing.list.map((e) => e.filename)).toEqual(['same.bin']);
  });

  it('instant upload of content the service holds sends no block (the source is never read)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-instant-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const { client } = await start(dir);
    const data = randomBytes(2 * BLOCK);
    await uploadFile(client, counting(data), { fullpath: 'one.bin', blockSize: BLOCK });
    const again = counting(data);
    const res = await uploadFile(client, { ...again, filehash: sha1(data), open: again.open }, { fullpath: 'two.bin', blockSize: BLOCK });
    expect(res.instant).toBe(true);
    expect(again.opened).toBe(0);
  });
});
