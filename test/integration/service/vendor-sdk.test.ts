/**
 * The vendor's own clients against the embedded service: each request is sent exactly as the official
 * SDKs send it (gokuai/yunku-sdk-java, yunku-sdk-csharp, yunku-sdk-php, yunku-sdk-go, the dify data source
 * and skills adapters): their header names (`x-gk-`), methods (GET upload_req, GET abort with the session
 * as a URL parameter), parameter names (`fullpaths` on del, `orderSubscribe`…), signing (values of every
 * non-null parameter, empty ones included, sorted by name) and bodies (form, multipart with the file).
 * The signing code here is written from the SDKs' sources, not taken from src/shared/sign.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from '../../../src/shared/crc32.js';
import { Agent, request, type Dispatcher } from 'undici';
import { EmbeddedService } from '../../../src/service/index.js';
import { ServiceClient } from '../../../src/api/client.js';
import { startTestService, type TestService } from '../../support/service.js';
import { waitFor } from '../../support/wait-for.js';

const sha1 = (b: Buffer | string) => createHash('sha1').update(b).digest('hex');
const now = () => String(Math.floor(Date.now() / 1000));

/** SignAbility.generateSign of the Java SDK: null values dropped, keys sorted (String.compareTo), values joined by \n. */
function javaSign(params: Record<string, string | null>, secret: string): string {
  const keys = Object.keys(params).filter((k) => params[k] !== null).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return createHmac('sha1', secret).update(keys.map((k) => params[k]).join('\n'), 'utf8').digest('base64');
}

/** NetConnection.sendRequest of the Java SDK: a form body (POST) or a query string (GET), null values left out. */
async function javaCall(base: string, path: string, method: 'GET' | 'POST', params: Record<string, string | null>, dispatcher?: Dispatcher): Promise<{ status: number; body: unknown; text: string }> {
  const form = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null) form.append(k, v);
  const res = method === 'GET'
    ? await request(`${base}${path}?${form}`, { method: 'GET', dispatcher })
    : await request(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }, body: form.toString(), dispatcher });
  const text = await res.body.text();
  let body: unknown = text;
  try { body = JSON.parse(text); } catch { /* plain text */ }
  return { status: res.statusCode, body, text };
}

/** Token calls of the SDKs (OauthEngine.addAuthParams): no dateline, then sign. */
function withSign(params: Record<string, string | null>, secret: string): Record<string, string | null> {
  return { ...params, sign: javaSign(params, secret) };
}

/** A signed call the way the Java SDK makes it: its params + dateline, then sign. */
function signed(params: Record<string, string | null>, secret: string): Record<string, string | null> {
  const p = { ...params, dateline: now() };
  return { ...p, sign: javaSign(p, secret) };
}

let t: TestService;
let base: string;
let lib: { org_client_id: string; org_client_secret: string };
const fileCall = (path: string, method: 'GET' | 'POST', params: Record<string, string | null>) =>
  javaCall(base, `/m-open/1/file/${path}`, method, signed({ org_client_id: lib.org_client_id, ...params }, lib.org_client_secret));

beforeAll(async () => {
  t = await startTestService();
  base = t.service.baseUrl;
  lib = t.service.credentials.library;
});
afterAll(async () => { await t?.close(); });

/** Java UploadManager: create_file (filehash/filesize added after signing), upload_init with x-gk- headers. */
async function javaCreateFile(fullpath: string, data: Buffer, svc = base, creds = lib): Promise<{ hash: string; server: string; state: number }> {
  const params: Record<string, string | null> = { org_client_id: creds.org_client_id, dateline: now(), fullpath, op_name: 'sdk', mOverwrite: '1' };
  params.sign = javaSign(params, creds.org_client_secret);
  params.filesize = String(data.length);
  params.filehash = sha1(data);
  const res = await javaCall(svc, '/m-open/1/file/create_file', 'POST', params);
  expect(res.status).toBe(200);
  return res.body as { hash: string; server: string; state: number };
}

async function gkInit(server: string, orgClientId: string, hash: string, name: string, data: Buffer): Promise<{ status: number; session: string }> {
  const res = await request(`${server}/upload_init?org_client_id=${orgClientId}`, {
    method: 'POST',
    headers: {
      'x-gk-upload-pathhash': hash, 'x-gk-upload-filename': encodeURIComponent(name),
      'x-gk-upload-filehash': sha1(data), 'x-gk-upload-filesize': String(data.length),
    },
  });
  const text = await res.body.text();
  return { status: res.statusCode, session: res.statusCode === 200 ? (JSON.parse(text) as { session: string }).session : '' };
}

async function gkReq(server: string, session: string): Promise<{ status: number; text: string }> {
  const res = await request(`${server}/upload_req`, { method: 'GET', headers: { 'x-gk-upload-session': session } });
  return { status: res.statusCode, text: await res.body.text() };
}

async function gkPart(server: string, session: string, data: Buffer, at: number, len: number, contentType = 'application/octet-stream'): Promise<number> {
  const block = data.subarray(at, at + len);
  const res = await request(`${server}/upload_part`, {
    method: 'PUT',
    headers: {
      'content-type': contentType, 'x-gk-upload-session': session,
      'x-gk-upload-range': `${at}-${at + block.length - 1}`, 'x-gk-upload-crc': String(crc32(block)),
    },
    body: block,
  });
  await res.body.dump();
  return res.statusCode;
}

async function gkFinish(server: string, session: string): Promise<number> {
  // 202: the blocks are still being put together; asked again until the answer is final.
  return waitFor('upload_finish to answer other than 202', async () => {
    const res = await request(`${server}/upload_finish`, { method: 'POST', headers: { 'x-gk-upload-session': session } });
    await res.body.dump();
    return res.statusCode;
  }, { until: (code) => code !== 202, intervalMs: 50 });
}

describe('chunked upload as the official SDKs send it', { timeout: 30_000 }, () => {
  it('x-gk- headers, GET upload_req, PUT parts with a decimal CRC: the file lands', async () => {
    const data = randomBytes(200_000);
    const created = await javaCreateFile('sdk/upload.bin', data);
    expect(created.state).toBe(0);
    const init = await gkInit(created.server, lib.org_client_id, created.hash, 'upload.bin', data);
    expect(init.status).toBe(200);
    expect(await gkReq(created.server, init.session)).toEqual({ status: 200, text: '0' });
    const BLOCK = 65_536;
    const statuses: number[] = [];
    for (let at = 0; at < data.length; at += BLOCK) statuses.push(await gkPart(created.server, init.session, data, at, BLOCK));
    expect(statuses).toEqual([200, 200, 200, 202]);
    expect(await gkReq(created.server, init.session)).toEqual({ status: 200, text: String(data.length) });
    expect(await gkFinish(created.server, init.session)).toBe(200);
    const info = await fileCall('info', 'GET', { fullpath: 'sdk/upload.bin', attribute: '0' });
    expect(info.body).toMatchObject({ filesize: data.length, fullpath: 'sdk/upload.bin' });
    const basic = await fileCall('info', 'GET', { fullpath: 'sdk/upload.bin', attribute: '10' });
    expect(basic.body).toMatchObject({ filehash: sha1(data) });
  });

  it('the C# SDK: a raw (not URL-encoded) file name, and upload_abort as GET with the session as a URL parameter', async () => {
    const data = randomBytes(70_000);
    const created = await javaCreateFile('sdk/100%.bin', data);
    const init = async () => {
      const res = await request(`${created.server}/upload_init?org_client_id=${lib.org_client_id}`, {
        method: 'POST',
        headers: { 'x-gk-upload-pathhash': created.hash, 'x-gk-upload-filename': '100%.bin', 'x-gk-upload-filehash': sha1(data), 'x-gk-upload-filesize': String(data.length) },
      });
      expect(res.statusCode).toBe(200);
      return (JSON.parse(await res.body.text()) as { session: string }).session;
    };
    const session = await init();
    expect(await init()).toBe(session); // the same create_file step resumes the same session
    expect(await gkPart(created.server, session, data, 0, 65_536)).toBe(200);
    const abort = await request(`${created.server}/upload_abort?x-gk-upload-session=${session}`, { method: 'GET' });
    expect(abort.statusCode).toBe(200);
    await abort.body.dump();
    expect((await gkReq(created.server, session)).status).toBe(401);
  });

  it('the C# UploadManager: create_file with overwrite, 64 KiB blocks sent as a form content type, one finish', async () => {
    const data = randomBytes(3 * 65_536 + 500);
    // UploadManager.AddFile: org_client_id, dateline, fullpath, op_name, overwrite signed; filesize, filehash after
    const params: Record<string, string | null> = { org_client_id: lib.org_client_id, dateline: now(), fullpath: 'sdk/csharp.bin', op_name: 'sdk', overwrite: '1' };
    params.sign = javaSign(params, lib.org_client_secret);
    params.filesize = String(data.length);
    params.filehash = sha1(data);
    const created = (await javaCall(base, '/m-open/1/file/create_file', 'POST', params)).body as { hash: string; server: string };
    const init = await gkInit(created.server, lib.org_client_id, created.hash, 'csharp.bin', data);
    const codes: number[] = [];
    // HttpRequestSyn.DefautRequest: a PUT carries application/x-www-form-urlencoded unless told otherwise
    for (let at = 0; at < data.length; at += 65_536) codes.push(await gkPart(created.server, init.session, data, at, 65_536, 'application/x-www-form-urlencoded'));
    expect(codes).toEqual([200, 200, 200, 202]);
    // UploadCheck: a single upload_finish that must answer 200
    const fin = await request(`${created.server}/upload_finish`, { method: 'POST', headers: { 'x-gk-upload-session': init.session, 'content-type': 'application/x-www-form-urlencoded' } });
    expect(fin.statusCode).toBe(200);
    await fin.body.dump();
    expect((await fileCall('info', 'GET', { fullpath: 'sdk/csharp.bin', attribute: '10' })).body).toMatchObject({ filehash: sha1(data) });
  });

  it('after a restart, a repeated create_file (a new pathhash) takes over the session: upload_req reports what was kept', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-sdk-resume-'));
    try {
      let service = await EmbeddedService.start({ dataDir: dir, listen: '127.0.0.1:0' });
      const creds = service.credentials.library;
      const data = randomBytes(5 * 65_536 + 123);
      const first = await javaCreateFile('resume/big.bin', data, service.baseUrl, creds);
      const init = await gkInit(first.server, creds.org_client_id, first.hash, 'big.bin', data);
      for (const at of [0, 65_536, 131_072]) expect(await gkPart(first.server, init.session, data, at, 65_536)).toBe(200);
      const port = new URL(service.baseUrl).port;
      await service.close();
      service = await EmbeddedService.start({ dataDir: dir, listen: `127.0.0.1:${port}` });
      try {
        // The Java UploadManager repeats create_file after a failure: a new file gets a new pathhash.
        const again = await javaCreateFile('resume/big.bin', data, service.baseUrl, creds);
        expect(again.hash).not.toBe(first.hash);
        const init2 = await gkInit(again.server, creds.org_client_id, again.hash, 'big.bin', data);
        expect(init2).toEqual({ status: 200, session: init.session });
        expect(await gkReq(again.server, init2.session)).toEqual({ status: 200, text: String(3 * 65_536) });
        for (let at = 3 * 65_536; at < data.length; at += 65_536) await gkPart(again.server, init2.session, data, at, 65_536);
        expect(await gkFinish(again.server, init2.session)).toBe(200);
        const sessions = await readdir(join(dir, 'tmp', 'upload', 'sessions'));
        expect(sessions.filter((n) => n.endsWith('.part'))).toEqual([]);
        const wire = signed({ org_client_id: creds.org_client_id, fullpath: 'resume/big.bin', attribute: '10' }, creds.org_client_secret);
        const info = await javaCall(service.baseUrl, '/m-open/1/file/info', 'GET', wire);
        expect(info.body).toMatchObject({ filehash: sha1(data), filesize: data.length });
      } finally {
        await service.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('an upload across a crash of the service process (kill -9)', { timeout: 60_000 }, () => {
  it('the next start reports the bytes kept and the upload finishes from there', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-sdk-crash-'));
    const bin = fileURLToPath(new URL('../../../bin/cloudlib.js', import.meta.url));
    const run = async (listen: string) => {
      const child = spawn(process.execPath, [bin, 'service', '--data', dir, '--listen', listen, '--log-level', 'warn'], { stdio: 'ignore' });
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      return { child, exited };
    };
    const credentials = async (notBefore: number) => {
      return waitFor('fresh credentials.json', async () => {
        const c = await readFile(join(dir, 'credentials.json'), 'utf8').then((x) => JSON.parse(x) as { base_url: string; library: typeof lib }).catch(() => undefined);
        const fresh = await stat(join(dir, 'credentials.json')).then((st) => st.mtimeMs >= notBefore, () => false);
        return c && fresh ? c : undefined;
      }, { timeoutMs: 30_000, intervalMs: 100 }) as Promise<{ base_url: string; library: typeof lib }>;
    };
    let proc = await run('127.0.0.1:0');
    try {
      const c1 = await credentials(0);
      const data = randomBytes(4 * 65_536 + 9);
      const created = await javaCreateFile('crash/big.bin', data, c1.base_url, c1.library);
      const init = await gkInit(created.server, c1.library.org_client_id, created.hash, 'big.bin', data);
      for (const at of [0, 65_536]) expect(await gkPart(created.server, init.session, data, at, 65_536)).toBe(200);
      proc.child.kill('SIGKILL');
      await proc.exited;
      const restarted = Date.now();
      proc = await run(new URL(c1.base_url).host);
      const c2 = await credentials(restarted - 1);
      // the SDK repeats create_file, then upload_init and upload_req
      const again = await javaCreateFile('crash/big.bin', data, c2.base_url, c2.library);
      const init2 = await gkInit(again.server, c2.library.org_client_id, again.hash, 'big.bin', data);
      expect(init2.session).toBe(init.session);
      expect(await gkReq(again.server, init2.session)).toEqual({ status: 200, text: String(2 * 65_536) });
      for (let at = 2 * 65_536; at < data.length; at += 65_536) await gkPart(again.server, init2.session, data, at, 65_536);
      expect(await gkFinish(again.server, init2.session)).toBe(200);
      const info = await javaCall(c2.base_url, '/m-open/1/file/info', 'GET', signed({ org_client_id: c2.library.org_client_id, fullpath: 'crash/big.bin', attribute: '10' }, c2.library.org_client_secret));
      expect(info.body).toMatchObject({ filehash: sha1(data) });
      expect((await readdir(join(dir, 'tmp', 'upload', 'sessions'))).filter((n) => n.endsWith('.part'))).toEqual([]);
    } finally {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
      await proc.exited;
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('library file calls as the SDKs make them', { timeout: 30_000 }, () => {
  it('del with fullpaths (|-separated), destroy=0 and op_name: all go to the recycle bin', async () => {
    for (const name of ['d1.txt', 'd2.txt', 'dir/d3.txt']) await javaCreateFileWithContent(name, Buffer.from(name));
    const res = await fileCall('del', 'POST', { fullpaths: 'd1.txt|d2.txt|dir/d3.txt', destroy: '0', op_name: 'sdk' });
    expect(res.status).toBe(200);
    const bin = await fileCall('recycle', 'GET', { start: '0', size: '100' });
    expect((bin.body as { list: { fullpath: string }[] }).list.map((e) => e.fullpath)).toEqual(expect.arrayContaining(['d1.txt', 'd2.txt', 'dir/d3.txt']));
    const missing = await fileCall('del', 'POST', { fullpaths: 'gone.txt|dir', destroy: '0', op_name: 'sdk' });
    expect(missing.status).toBe(404);
    expect((await fileCall('info', 'GET', { fullpath: 'dir', attribute: '0' })).status).toBe(200); // nothing removed
  });

  it('the dify data source posts its parameters in the query string with no body; the skills adapter signs create_file whole', async () => {
    // GoKuai/base.py: requests.request('POST', url, data={}, params=body) — the body is empty
    const q = signed({ org_client_id: lib.org_client_id, fullpath: '', size: '100', start: '0' }, lib.org_client_secret);
    const res = await request(`${base}/m-open/1/file/ls?${new URLSearchParams(q as Record<string, string>)}`, { method: 'POST', headers: { 'user-agent': 'yunku-sdk-php/6.0.0' } });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    // adapters/goukuai.py: every parameter signed, filehash and filesize included; values quoted with safe=''
    const data = Buffer.from('skills adapter upload');
    const params: Record<string, string> = { org_client_id: lib.org_client_id, fullpath: 'skills/a b.txt', filehash: sha1(data), filesize: String(data.length), overwrite: '0', dateline: now() };
    params.sign = javaSign(params, lib.org_client_secret);
    const body = Object.entries(params).map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&');
    const created = await request(`${base}/m-open/1/file/create_file`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded; charset=UTF-8' }, body });
    expect(created.statusCode).toBe(200);
    expect(JSON.parse(await created.body.text())).toMatchObject({ state: 0, fullpath: 'skills/a b.txt' });
  });

  it('getFileList signs the empty fullpath and the values only; C# GetFileList asks with GET', async () => {
    const res = await fileCall('ls', 'GET', { fullpath: '', tag: null, start: '0', size: '100', order: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ count: expect.any(Number) });
  });

  it('createFile sends the content as a multipart part (Java: fields first; C#: the file first)', async () => {
    const data = Buffer.from('multipart content '.repeat(100));
    const r1 = await multipartCreate('mp/java.txt', data, 'fields-first');
    expect(r1.status).toBe(200);
    expect(r1.body).toMatchObject({ fullpath: 'mp/java.txt', filehash: sha1(data), filesize: data.length });
    const r2 = await multipartCreate('mp/csharp.txt', data, 'file-first');
    expect(r2.status).toBe(200);
    const info = await fileCall('info', 'GET', { fullpath: 'mp/csharp.txt', attribute: '10' });
    expect(info.body).toMatchObject({ filehash: sha1(data), filesize: data.length });
    const bad = await multipartCreate('mp/bad.txt', data, 'fields-first', 'not-the-secret');
    expect(bad.status).toBe(401);
    expect((await fileCall('info', 'GET', { fullpath: 'mp/bad.txt', attribute: '10' })).status).toBe(404);
  });

  it('plain parameters as multipart/form-data are read like a form', async () => {
    const p = signed({ org_client_id: lib.org_client_id, fullpath: '', start: '0', size: '10' }, lib.org_client_secret);
    const form = new FormData();
    for (const [k, v] of Object.entries(p)) if (v !== null) form.append(k, v);
    const res = await fetch(`${base}/m-open/1/file/ls`, { method: 'POST', body: form });
    expect(res.status).toBe(200);
    const withFile = new FormData();
    for (const [k, v] of Object.entries(signed({ org_client_id: lib.org_client_id, fullpath: '' }, lib.org_client_secret))) if (v !== null) withFile.append(k, v);
    withFile.append('file', new Blob([Buffer.from('x')]), 'x.txt');
    const refused = await fetch(`${base}/m-open/1/file/ls`, { method: 'POST', body: withFile });
    expect(refused.status).toBe(400);
  });

  it('servers: the upload server as the SDKs read a host item; an unknown kind is an empty list', async () => {
    const all = await fileCall('servers', 'GET', { type: '' });
    expect(all.status).toBe(200);
    const up = new URL(t.service.uploadServer);
    expect(all.body).toEqual([{ type: 'm-upload', hostname: up.hostname, 'hostname-in': up.hostname, port: up.port, https: 0, path: '/upload', sign: '' }]);
    expect((await fileCall('servers', 'POST', { type: 'm-upload' })).body).toHaveLength(1);
    expect((await fileCall('servers', 'POST', { type: 'm-doc' })).body).toEqual([]);
  });

  it('property.inherit reads 0 once inheritance is off, on the simple and the advanced call', async () => {
    await fileCall('create_folder', 'POST', { fullpath: 'perm/simple', op_name: 'sdk' });
    await fileCall('create_folder', 'POST', { fullpath: 'perm/advanced', op_name: 'sdk' });
    const inheritOf = async (name: string) => {
      const ls = await fileCall('ls', 'GET', { fullpath: 'perm', start: '0', size: '100' });
      const fromLs = (ls.body as { list: { filename: string; property: { inherit: number } }[] }).list.find((e) => e.filename === name)!.property.inherit;
      const info = await fileCall('info', 'GET', { fullpath: `perm/${name}`, attribute: '0' });
      expect((info.body as { property: { inherit: number } }).property.inherit).toBe(fromLs);
      return fromLs;
    };
    expect(await inheritOf('simple')).toBe(1);
    expect((await fileCall('set_permission_inherit', 'POST', { fullpath: 'perm/simple', inherit: '0' })).status).toBe(200);
    expect(await inheritOf('simple')).toBe(0);
    const adv = await javaCall(base, '/m-open/2/file/set_permission_inherit', 'POST',
      signed({ org_client_id: lib.org_client_id, fullpath: 'perm/advanced', inherit: '0', keep: '0' }, lib.org_client_secret));
    expect(adv.status).toBe(200);
    expect(await inheritOf('advanced')).toBe(0);
    await javaCall(base, '/m-open/2/file/set_permission_inherit', 'POST',
      signed({ org_client_id: lib.org_client_id, fullpath: 'perm/advanced', inherit: '1', keep: '0' }, lib.org_client_secret));
    expect(await inheritOf('advanced')).toBe(1);
  });

  it('setPermission: the C# SDK lowercases its enum names (fileread), the Java SDK sends file_read', async () => {
    await fileCall('create_folder', 'POST', { fullpath: 'perm/shared', op_name: 'sdk' });
    const memberId = String(t.service.credentials.member.member_id);
    const cs = await fileCall('file_permission', 'POST', { fullpath: 'perm/shared', permissions: JSON.stringify({ [memberId]: ['fileread', 'filepreview'] }).toLowerCase() });
    expect(cs.status).toBe(200);
    const got = await fileCall('get_permission', 'POST', { fullpath: 'perm/shared', member_id: memberId });
    expect(got.body).toEqual(expect.arrayContaining(['file_preview', 'file_read']));
    const java = await fileCall('file_permission', 'POST', { fullpath: 'perm/shared', permissions: JSON.stringify({ [memberId]: ['file_read', 'file_write'] }) });
    expect(java.status).toBe(200);
    expect((await fileCall('file_permission', 'POST', { fullpath: 'perm/shared', permissions: JSON.stringify({ [memberId]: ['filefly'] }) })).status).toBe(400);
  });
});

describe('enterprise, partner and token calls as the SDKs make them', { timeout: 30_000 }, () => {
  it('the demo enterprise synchronises: addSyncGroup and addSyncMember answer 200 on a fresh service', async () => {
    const ent = t.service.credentials.enterprise;
    const call = (name: string, params: Record<string, string | null>) =>
      javaCall(base, `/m-open/1/ent/${name}`, 'POST', signed({ client_id: ent.client_id, ...params }, ent.client_secret));
    expect((await call('add_sync_group', { out_id: 'sdk-g', name: 'SDK', parent_out_id: null })).status).toBe(200);
    const member = await call('add_sync_member', { out_id: 'sdk-u', member_name: 'SDK User', account: 'sdk-u@example.com', member_email: 'sdk-u@example.com', member_phone: null, password: null });
    expect(member.status).toBe(200);
    expect((await call('get_member_by_out_id', { out_ids: 'sdk-u' })).body).toMatchObject({ 'sdk-u': { account: 'sdk-u@example.com' } });
  });

  it('getMemberFileLink: the share links of a member\'s personal library', async () => {
    const ent = t.service.credentials.enterprise;
    const call = (path: string, method: 'GET' | 'POST', params: Record<string, string | null>) =>
      javaCall(base, path, method, signed({ client_id: ent.client_id, ...params }, ent.client_secret));
    const added = await call('/m-open/1/ent/add_member', 'POST', { account: 'links@example.com', member_name: 'Links', create_personal_org: '1', state: '1' });
    expect(added.status).toBe(200);
    const memberId = String((added.body as { member_id: number }).member_id);
    expect((await call('/m-open/1/ent/get_member_file_link', 'GET', { member_id: memberId, file: null })).body).toEqual([]);
    const personal = await call('/m-open/1/org/info_by_member', 'POST', { member_id: memberId });
    const orgId = String((personal.body as { info: { org_id: number } }).info.org_id);
    const auth = (await call('/m-open/1/org/bind', 'POST', { org_id: orgId, title: 'sdk', url: null })).body as { org_client_id: string; org_client_secret: string };
    const own = (name: string, params: Record<string, string | null>) =>
      javaCall(base, `/m-open/1/file/${name}`, 'POST', signed({ org_client_id: auth.org_client_id, ...params }, auth.org_client_secret));
    expect((await own('create_folder', { fullpath: 'shared', op_name: 'sdk' })).status).toBe(200);
    expect((await own('link', { fullpath: 'shared', dir: '1', password: null })).status).toBe(200);
    const links = await call('/m-open/1/ent/get_member_file_link', 'GET', { member_id: memberId, file: null });
    expect(links.body).toMatchObject([{ filename: 'shared' }]);
    expect((await call('/m-open/1/ent/get_member_file_link', 'GET', { member_id: memberId, file: '1' })).body).toEqual([]);
    expect((await call('/m-open/1/ent/get_member_file_link', 'GET', { member_id: '999999', file: null })).status).toBe(404);
  });

  it('order with the SDK type names; get_token, exchange_token and get_sso_url', async () => {
    const partner = t.service.credentials.partner;
    const call = (name: string, params: Record<string, string | null>) =>
      javaCall(base, `/m-api/1/thirdparty/${name}`, 'POST', signed({ client_id: partner.client_id, ...params }, partner.client_secret));
    const created = await call('create_ent', { out_id: 'sdk-ent', ent_name: 'SDK Ent', contact_name: 'A', contact_mobile: null, contact_email: null, contact_address: null, account: 'admin@sdk.example.com' });
    expect(created.status).toBe(200);
    expect((await call('order', { out_id: 'sdk-ent', type: 'orderSubscribe', member_count: '-1', space: '10', month: '2' })).status).toBe(200);
    expect((await call('order', { out_id: 'sdk-ent', type: 'orderUpgrade', member_count: '5', space: '0' })).status).toBe(200);
    expect((await call('order', { out_id: 'sdk-ent', type: 'orderRenew', month: '1' })).status).toBe(200);
    const info = await call('ent_info', { out_id: 'sdk-ent' });
    expect(info.body).toMatchObject({ trial: 0, member_limit: -1, space: 10 * 1024 ** 3 });
    expect((await call('order', { out_id: 'sdk-ent', type: 'orderUnsubscribe' })).status).toBe(200);
    expect((await call('order', { out_id: 'sdk-ent', type: 'orderNothing' })).status).toBe(400);

    // ent_info and get_token carry the same values: in the same second they sign alike. The Java SDK's
    // ThirdPartyManager calls getEntInfo then getEntToken: get_token (it hands out a credential) passes
    // from the address that made the first call, and is refused as a replay from any other address.
    const at = Number(now());
    const callAt = (dateline: number, name: string, params: Record<string, string>, dispatcher?: Dispatcher) => {
      const p: Record<string, string | null> = { client_id: partner.client_id, ...params, dateline: String(dateline) };
      return javaCall(base, `/m-api/1/thirdparty/${name}`, 'POST', { ...p, sign: javaSign(p, partner.client_secret) }, dispatcher);
    };
    const elsewhere = new Agent({ localAddress: '127.0.0.2' });
    try {
      expect((await callAt(at - 5, 'ent_info', { out_id: 'sdk-ent' })).status).toBe(200);
      const captured = await callAt(at - 5, 'get_token', { out_id: 'sdk-ent' }, elsewhere);
      expect([captured.status, (captured.body as { error_code: number }).error_code]).toEqual([401, 401043]);
      const sso = await callAt(at - 5, 'ent_sso_url', { out_id: 'sdk-ent' }, elsewhere);
      expect([sso.status, (sso.body as { error_code: number }).error_code]).toEqual([401, 401043]);
      expect((await callAt(at - 5, 'ent_sso_url', { out_id: 'sdk-ent' })).status).toBe(200);
    } finally {
      await elsewhere.close();
    }
    const token = await callAt(at - 5, 'get_token', { out_id: 'sdk-ent' });
    expect(token.status).toBe(200);
    const grant = token.body as { access_token: string; expires_in: number };
    expect(grant.expires_in).toBeGreaterThan(0);
    // The SDK signs the calls made with that token with the partner's secret.
    const mount = await javaCall(base, '/m-api/1/account/mount', 'GET', signed({ token: grant.access_token }, partner.client_secret));
    expect(mount.status).toBe(200);

    // OauthEngine with that token: the library management and enterprise APIs take token + token_type=ent
    const libs = await javaCall(base, '/m-open/1/org/ls', 'GET', { ...withSign({ token: grant.access_token, token_type: 'ent', type: '0' }, partner.client_secret) });
    expect(libs.status).toBe(200);
    expect(libs.body).toMatchObject({ list: [] }); // the new enterprise has no library yet
    // unsubscribed above: the enterprise reads (org/ls) but changes nothing until the partner renews it
    const createByToken = () => javaCall(base, '/m-open/1/org/create', 'POST', withSign({ token: grant.access_token, token_type: 'ent', org_name: 'By token', org_capacity: null }, partner.client_secret));
    const ended = await createByToken();
    expect([ended.status, (ended.body as { error_code: number }).error_code]).toEqual([403, 40334]);
    expect((await call('order', { out_id: 'sdk-ent', type: 'orderRenew', month: '1' })).status).toBe(200);
    const created2 = await createByToken();
    expect(created2.status).toBe(200);
    const roles = await javaCall(base, '/m-open/1/ent/get_roles', 'POST', withSign({ token: grant.access_token, token_type: 'ent' }, partner.client_secret));
    expect(roles.status).toBe(200);
    const memberToken = await javaCall(base, '/m-open/1/ent/get_roles', 'POST', withSign({ token: t.service.credentials.member.token, token_type: 'ent' }, t.service.credentials.member.client_secret));
    expect(memberToken.status).toBe(403); // the demo member administers nothing

    const member = t.service.credentials.member;
    const app = (await t.service.parts.tree.db.get('SELECT client_id FROM applications WHERE client_secret = ?', [member.client_secret]) as { client_id: string }).client_id;
    const exchanged = await javaCall(base, '/m-api/oauth2/token', 'POST', signed({ client_id: app, grant_type: 'exchange_token', token: grant.access_token }, member.client_secret));
    expect(exchanged.status).toBe(200);
    const mine = exchanged.body as { access_token: string };
    expect((await javaCall(base, '/m-api/1/account/mount', 'GET', signed({ token: mine.access_token }, member.client_secret))).status).toBe(200);
    const badGrant = await javaCall(base, '/m-api/oauth2/token', 'POST', signed({ client_id: app, grant_type: 'exchange_token', token: 'tk_nothing' }, member.client_secret));
    expect([badGrant.status, badGrant.body]).toEqual([400, expect.anything()]);

    const sso = await call('get_sso_url', { out_id: 'sdk-ent', ticket: 'partner-ticket' });
    expect(sso.status).toBe(200);
    expect((sso.body as { url: string }).url.startsWith(`${base}/sso/`)).toBe(true);
    expect((await call('get_sso_url', { out_id: 'sdk-ent', ticket: '' })).status).toBe(400);
  });

  it('the refresh_token grant without dateline (Java OauthEngine.refreshToken)', async () => {
    const member = t.service.credentials.member;
    const app = (await t.service.parts.tree.db.get('SELECT client_id FROM applications WHERE client_secret = ?', [member.client_secret]) as { client_id: string }).client_id;
    const first = (await t.service.parts.tree.db.get('SELECT refresh_token FROM access_tokens WHERE token = ?', [member.token]) as { refresh_token: string }).refresh_token;
    const p: Record<string, string | null> = { grant_type: 'refresh_token', refresh_token: first, client_id: app };
    p.sign = javaSign(p, member.client_secret);
    const res = await javaCall(base, '/m-api/oauth2/token2', 'POST', p);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ access_token: expect.any(String) });
  });
});

/** Calls with one pinned dateline: calls with equal values sign alike, as the SDKs' calls do within one second. */
function sameSecond(svc: string, secret: string, creds: Record<string, string>, dispatcher?: Dispatcher) {
  const dateline = now();
  return (path: string, params: Record<string, string>, on = dispatcher) => {
    const p: Record<string, string | null> = { ...creds, ...params, dateline };
    return javaCall(svc, path, 'POST', { ...p, sign: javaSign(p, secret) }, on);
  };
}
const codeOf = (r: { body: unknown }) => (r.body as { error_code?: number }).error_code;

describe('the SDKs\' call sequences within one second (equal values sign alike)', { timeout: 30_000 }, () => {
  it('create then delete, read then write, add then remove: every call is answered', async () => {
    const F = '/m-open/1/file/';
    const file = () => sameSecond(base, lib.org_client_secret, { org_client_id: lib.org_client_id });
    // PHP, Python: create_folder then del of the same path
    let call = file();
    expect((await call(F + 'create_folder', { fullpath: 'seq/a' })).status).toBe(200);
    expect((await call(F + 'del', { fullpath: 'seq/a' })).status).toBe(200);
    expect((await fileCall('info', 'POST', { fullpath: 'seq/a' })).status).toBe(404);
    // info then create_folder, then file_link (Python) and link_close (PHP)
    call = file();
    expect((await call(F + 'info', { fullpath: 'seq/b' })).status).toBe(404);
    expect((await call(F + 'create_folder', { fullpath: 'seq/b' })).status).toBe(200);
    expect((await call(F + 'link', { fullpath: 'seq/b' })).status).toBe(200);
    expect((await call(F + 'link_close', { fullpath: 'seq/b' })).status).toBe(200);
    // PHP: info of a deleted path, then recover
    expect((await fileCall('create_folder', 'POST', { fullpath: 'seq/c' })).status).toBe(200);
    expect((await fileCall('del', 'POST', { fullpath: 'seq/c' })).status).toBe(200);
    call = file();
    expect((await call(F + 'info', { fullpath: 'seq/c' })).status).toBe(404);
    expect((await call(F + 'recover', { fullpaths: 'seq/c' })).status).toBe(200);
    expect((await fileCall('info', 'POST', { fullpath: 'seq/c' })).status).toBe(200);
    // Java: getPermission then resetPermission
    call = file();
    expect((await call(F + 'get_permission', { fullpath: 'seq/c' })).status).toBe(200);
    expect((await call(F + 'reset_permission', { fullpath: 'seq/c' })).status).toBe(200);

    // Java: addGroupMember then delGroupMember; get_groups then org destroy
    const ent = t.service.credentials.enterprise;
    const entCall = (name: string, params: Record<string, string | null>) =>
      javaCall(base, `/m-open/1/ent/${name}`, 'POST', signed({ client_id: ent.client_id, ...params }, ent.client_secret));
    expect((await entCall('add_group', { group_name: 'SeqGroup' })).status).toBe(200);
    expect((await entCall('add_member', { account: 'seq@example.com', member_name: 'Seq', state: '1' })).status).toBe(200);
    call = sameSecond(base, ent.client_secret, { client_id: ent.client_id });
    expect((await call('/m-open/1/ent/add_group_member', { group_path: 'SeqGroup', members: 'seq@example.com' })).status).toBe(200);
    expect((await call('/m-open/1/ent/del_group_member', { group_path: 'SeqGroup', members: 'seq@example.com' })).status).toBe(200);
    const made = await javaCall(base, '/m-open/1/org/create', 'POST', signed({ client_id: ent.client_id, org_name: 'Seq library' }, ent.client_secret));
    const orgId = String((made.body as { org_id: number }).org_id);
    call = sameSecond(base, ent.client_secret, { client_id: ent.client_id });
    expect((await call('/m-open/1/org/get_groups', { org_id: orgId })).status).toBe(200);
    expect((await call('/m-open/1/org/destroy', { org_id: orgId })).status).toBe(200);
  });

  it('a signature used for another endpoint is refused from another address (401043) and changes nothing', async () => {
    await javaCreateFileWithContent('replay/keep.txt', Buffer.from('keep'));
    const elsewhere = new Agent({ localAddress: '127.0.0.2' });
    try {
      const call = sameSecond(base, lib.org_client_secret, { org_client_id: lib.org_client_id });
      expect((await call('/m-open/1/file/info', { fullpath: 'replay/keep.txt' })).status).toBe(200);
      const replay = await call('/m-open/1/file/del', { fullpath: 'replay/keep.txt' }, elsewhere);
      expect([replay.status, codeOf(replay)]).toEqual([401, 401043]);
      expect((await fileCall('info', 'POST', { fullpath: 'replay/keep.txt' })).status).toBe(200);
      // a read passes from anywhere; the same endpoint again (a retry) too
      expect((await call('/m-open/1/file/info', { fullpath: 'replay/keep.txt' }, elsewhere)).status).toBe(200);
    } finally {
      await elsewhere.close();
    }
  });

  it("the project's own client signs calls with equal values in one second alike, and each is answered", async () => {
    const frozen = Date.now(); // a clock that stands still: every call has the same dateline
    const c = new ServiceClient({ baseUrl: base, credentials: { library: lib }, retries: 0, clock: () => frozen });
    try {
      await c.file.createFolder({ fullpath: 'replay/own' });
      await c.file.info({ fullpath: 'replay/own' });
      await c.file.del({ fullpath: 'replay/own' });
    } finally {
      await c.close();
    }
    expect((await fileCall('info', 'POST', { fullpath: 'replay/own' })).status).toBe(404);
  });

  it('replay policy strict refuses a reused signature on a call that changes state; off accepts it from anywhere', async () => {
    const strict = await startTestService({ replayPolicy: 'strict' });
    const off = await startTestService({ replayPolicy: 'off' });
    const elsewhere = new Agent({ localAddress: '127.0.0.2' });
    try {
      const s = strict.service;
      let call = sameSecond(s.baseUrl, s.credentials.library.org_client_secret, { org_client_id: s.credentials.library.org_client_id });
      expect((await call('/m-open/1/file/create_folder', { fullpath: 'x' })).status).toBe(200);
      const refused = await call('/m-open/1/file/del', { fullpath: 'x' });
      expect([refused.status, codeOf(refused)]).toEqual([401, 401043]);
      expect((await call('/m-open/1/file/info', { fullpath: 'x' })).status).toBe(200); // reads pass
      const o = off.service;
      call = sameSecond(o.baseUrl, o.credentials.library.org_client_secret, { org_client_id: o.credentials.library.org_client_id });
      expect((await call('/m-open/1/file/create_folder', { fullpath: 'x' })).status).toBe(200);
      expect((await call('/m-open/1/file/del', { fullpath: 'x' }, elsewhere)).status).toBe(200);
    } finally {
      await elsewhere.close();
      await strict.close();
      await off.close();
    }
  });
});

async function javaCreateFileWithContent(fullpath: string, data: Buffer): Promise<void> {
  const res = await multipartCreate(fullpath, data, 'fields-first');
  expect(res.status).toBe(200);
}

/** EntFileManager.createFile: multipart with org_client_id, dateline, fullpath, op_name, overwrite, filefield, sign and the file. */
async function multipartCreate(fullpath: string, data: Buffer, order: 'fields-first' | 'file-first', secret = lib.org_client_secret): Promise<{ status: number; body: unknown }> {
  const params: Record<string, string> = { org_client_id: lib.org_client_id, dateline: now(), fullpath, op_name: 'sdk', overwrite: '1', filefield: 'file' };
  const fields = { ...params, sign: javaSign(params, secret) };
  const boundary = `----sdk${randomBytes(8).toString('hex')}`;
  const fieldParts = Object.entries(fields).map(([k, v]) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  const name = fullpath.split('/').pop()!;
  const filePart = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`),
    data, Buffer.from('\r\n'),
  ]);
  const body = Buffer.concat([...(order === 'file-first' ? [filePart, ...fieldParts] : [...fieldParts, filePart]), Buffer.from(`--${boundary}--\r\n`)]);
  const res = await request(`${base}/m-open/1/file/create_file`, { method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, body });
  const text = await res.body.text();
  return { status: res.statusCode, body: JSON.parse(text) as unknown };
}
