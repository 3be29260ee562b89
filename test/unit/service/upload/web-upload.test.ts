import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { FormData, request } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { streamFilePart } from '../../../../src/service/upload/web-upload.js';
import { FakeUploadHost, listen } from './fake-host.js';

const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');

let host: FakeUploadHost;
let srv: Awaited<ReturnType<typeof listen>>;
let now: number;

beforeEach(async () => {
  now = Date.now();
  host = await FakeUploadHost.create();
  srv = await listen(host, { clock: () => now });
});

afterEach(async () => {
  await srv.close();
  await host.dispose();
});

/** Posts a form; fields in the given order, the file (if any) last unless `fileFirst`. */
async function post(fields: Record<string, string>, file?: Buffer, opts: { fileFirst?: boolean; fileField?: string } = {}) {
  const form = new FormData();
  const addFile = () => { if (file) form.append(opts.fileField ?? 'file', new Blob([new Uint8Array(file)]), 'upload.bin'); };
  if (opts.fileFirst) addFile();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  if (!opts.fileFirst) addFile();
  const res = await request(`${srv.url}/2/web_upload`, { method: 'POST', body: form });
  return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> };
}

async function key(timeoutSec = 60): Promise<string> {
  const issued = await srv.server.issueWebUploadKey({ libraryId: 1, fullpath: 'inbox', timeoutSec, serverUrl: srv.url });
  expect(issued['m-upload']).toEqual([srv.url]);
  return issued.key;
}

const leftovers = async () => readdir(join(host.tempDir, 'web'));

describe('web upload', () => {
  it('library form: stores the file with the key of upload_servers and answers {fullpath, filesize, hash}', { timeout: 10_000 }, async () => {
    const content = randomBytes(300_000);
    const r = await post({ org_client_id: 'oc_test', key: await key(), path: 'inbox', name: 'report.pdf', filefield: 'file' }, content);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ fullpath: 'inbox/report.pdf', filesize: content.length });
    expect(typeof r.json.hash).toBe('string');
    expect((await readFile(host.blobPath(sha1(content)))).equals(content)).toBe(true);
    expect(await leftovers()).toEqual([]);
  });

  it('accepts the file part before the credential fields', { timeout: 10_000 }, async () => {
    const content = randomBytes(5000);
    const r = await post({ org_client_id: 'oc_test', key: await key(), path: '', name: 'first.bin' }, content, { fileFirst: true });
    expect(r).toMatchObject({ status: 200, json: { fullpath: 'first.bin', filesize: 5000 } });
  });

  it('the key expires after its timeout; unknown keys and keys of another library are refused', { timeout: 10_000 }, async () => {
    const k = await key(30);
    now += 31_000;
    const r = await post({ org_client_id: 'oc_test', key: k, path: '', name: 'late.bin' }, randomBytes(10));
    expect(r).toMatchObject({ status: 401, json: { error_code: 40105, fullpath: 'late.bin' } });
    expect((await post({ org_client_id: 'oc_test', key: 'nope', path: '', name: 'x' }, randomBytes(10))).status).toBe(401);
    const other = (await srv.server.issueWebUploadKey({ libraryId: 2, fullpath: '', timeoutSec: 60, serverUrl: srv.url })).key;
    expect((await post({ org_client_id: 'oc_test', key: other, path: '', name: 'x' }, randomBytes(10))).json).toMatchObject({ error_code: 40105 });
    await expect(srv.server.issueWebUploadKey({ libraryId: 1, fullpath: '', timeoutSec: 0, serverUrl: srv.url })).rejects.toThrow(/expected an integer/);
    expect(host.files.size).toBe(0);
    expect(await leftovers()).toEqual([]);
  });

  it('user form: token + mount_id; errors carry fullpath', { timeout: 10_000 }, async () => {
    const content = randomBytes(2000);
    const ok = await post({ token: 'tok_test', mount_id: '11', path: 'me', name: 'n.txt', overwrite: '1' }, content);
    expect(ok).toMatchObject({ status: 200, json: { fullpath: 'me/n.txt', filesize: 2000 } });
    const dup = await post({ token: 'tok_test', mount_id: '11', path: 'me', name: 'n.txt' }, content);
    expect(dup).toMatchObject({ status: 409, json: { error_code: 40901, fullpath: 'me/n.txt' } });
    const bad = await post({ token: 'bad', mount_id: '11', path: 'me', name: 'n.txt' }, content);
    expect(bad).toMatchObject({ status: 401, json: { error_code: 40101, fullpath: 'me/n.txt' } });
  });

  it('400 for a missing file, missing name, a name with a slash, or no credential', { timeout: 10_000 }, async () => {
    const k = await key();
    expect(await post({ org_client_id: 'oc_test', key: k, path: '', name: 'x' })).toMatchObject({ status: 400, json: { error_code: 40003 } });
    expect((await post({ org_client_id: 'oc_test', key: k, path: '' }, randomBytes(5))).status).toBe(400);
    expect((await post({ org_client_id: 'oc_test', key: k, path: '', name: 'a/b' }, randomBytes(5))).status).toBe(400);
    expect((await post({ path: '', name: 'x' }, randomBytes(5))).status).toBe(400);
    expect((await post({ org_client_id: 'oc_test', key: k, name: 'x', filefield: 'data' }, randomBytes(5))).status).toBe(400);
    const notForm = await request(`${srv.url}/2/web_upload`, { method: 'POST', body: 'x', headers: { 'content-type': 'text/plain' } });
    expect(notForm.statusCode).toBe(400);
    await notForm.body.dump();
    expect(await leftovers()).toEqual([]);
  });

  it('403/40321 when the library would exceed its capacity, before anything is stored', { timeout: 10_000 }, async () => {
    host.capacity = 100_000;
    const early = await post({ org_client_id: 'oc_test', key: await key(), path: '', name: 'big.bin' }, randomBytes(400_000));
    expect(early).toMatchObject({ status: 403, json: { error_code: 40321 } });
    const late = await post({ org_client_id: 'oc_test', key: await key(), path: '', name: 'big.bin' }, randomBytes(100_001), { fileFirst: true });
    expect(late).toMatchObject({ status: 403, json: { error_code: 40321 } });
    expect(host.files.size).toBe(0);
    expect(await readdir(host.blobDir)).toEqual([]);
    expect(await leftovers()).toEqual([]);
  });
});

describe('streamFilePart', () => {
  it('a transfer stopped before its file was opened leaves no file behind, not even one opened after the stop', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cloudlib-part-'));
    try {
      for (let i = 0; i < 20; i++) {
        const path = join(dir, `${i}.upload`);
        // Over the limit with its first chunk: the transfer stops while the file is still being opened.
        await expect(streamFilePart(Readable.from([randomBytes(10)]), path, Promise.resolve(0))).rejects.toMatchObject({ code: 40321 });
        expect(existsSync(path)).toBe(false);
      }
      // Each refusal comes after its stream's file was closed and removed: nothing is left under way.
      expect(await readdir(dir)).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
