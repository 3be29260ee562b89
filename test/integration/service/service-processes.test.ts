/**
 * Two `cloudlib service` processes on one PostgreSQL database (the run's cluster) and one S3-compatible
 * bucket (Swift from scripts/s3-server), each with its own data folder and nothing else shared: any
 * process answers any request. A chunked upload begun on one process, continued on the other (its
 * blocks staged in the bucket) and finished on the first is listed, downloaded and seen in the updates
 * feed through the other; an aborted upload leaves no staged object; a share link made on one is served by the
 * other and its visit limit holds across both, as do the limits on wrong link passwords; a signature used on one is refused for another endpoint
 * on the other; folder copies queued through both run once each; a library authorization removed, or an
 * enterprise's term ended, through one process is refused by the other on its next request though the
 * other holds it in its cache.
 *
 * Runs in the vitest project `service-on-postgresql` only (the SQLite service is one process).
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { normalizeServer } from '../../../src/api/normalize.js';
import { UploadServerClient } from '../../../src/api/upload-server-client.js';
import { crc32 } from '../../../src/shared/crc32.js';
import { ENDPOINTS } from '../../../src/shared/endpoints.js';
import { serviceDatabase } from '../../support/postgres-cluster.js';
import { listKeys, startS3Server, type S3Server } from '../../support/s3-server.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service-process.js';
import { codeOf, fetchFile, put } from './helpers.js';
import { waitFor } from '../../support/wait-for.js';

const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');

let s3: S3Server | undefined;
let shared: string;
let database: { url: string; drop(): Promise<void> } | undefined;
let a: ServiceProcess | undefined;
let b: ServiceProcess | undefined;

beforeAll(async () => {
  shared = await mkdtemp(join(tmpdir(), 'cloudlib-procs-'));
  [s3, database] = await Promise.all([startS3Server(), serviceDatabase(inject('postgresUrl'), shared)]);
  const args = ['--metadata', database.url, '--blobs', `s3://procs?endpoint=${s3.endpoint}`];
  const env = { AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' };
  // one after the other: the first creates the bootstrap records, the second finds them
  a = await startServiceProcess({ serviceArgs: args, env, readyTimeoutMs: 60_000 });
  b = await startServiceProcess({ serviceArgs: args, env, readyTimeoutMs: 60_000 });
}, 180_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  await s3?.stop();
  await database?.drop();
  if (shared) await rm(shared, { recursive: true, force: true });
}, 60_000);

describe('two service processes on one metadata database and one bucket', { timeout: 60_000 }, () => {
  it('share the bootstrap: the same library answers on both', async () => {
    expect(a!.baseUrl).not.toBe(b!.baseUrl);
    const [la, lb] = await Promise.all([a!.client.file.ls({ fullpath: '' }), b!.client.file.ls({ fullpath: '' })]);
    expect(la).toEqual(lb);
  });

  it('a chunked upload: init on A, parts on B (staged in the bucket), finish on A; listed, downloaded and in the feed through B', async () => {
    const cursor = (await b!.client.file.updates({ mode: 'compare', fetch_dateline: 0 })).fetch_dateline;
    const block = 64 * 1024;
    const data = randomBytes(3 * block + 17);
    const created = await a!.client.file.createFile({ fullpath: 'shared/big.bin', filehash: sha1(data), filesize: data.length, overwrite: 1 });
    const caller = { orgClientId: a!.client.credentials.library!.org_client_id };
    const onA = new UploadServerClient(a!.client, normalizeServer(created.server), caller);
    const onB = new UploadServerClient(b!.client, normalizeServer(`${b!.baseUrl}/upload`), caller);
    expect(created.server).toContain(a!.baseUrl);
    const init = await onA.init({ filename: 'big.bin', pathhash: created.hash, filehash: sha1(data), filesize: data.length });
    expect(init.kind).toBe('session');
    const session = (init as { session: string }).session;
    const slice = (at: number) => data.subarray(at, Math.min(at + block, data.length));
    expect(await onB.part(session, 0, slice(0), crc32(slice(0)))).toEqual({ kind: 'stored' });
    // a block sent again (the answer was lost) and one sent ahead of the next: the protocol takes a block
    // only at the count received, and says which (409, expect); nothing changes
    expect(await onA.part(session, 0, slice(0), crc32(slice(0)))).toEqual({ kind: 'expect', offset: block });
    expect(await onB.part(session, 2 * block, slice(2 * block), crc32(slice(2 * block)))).toEqual({ kind: 'expect', offset: block });
    expect(await onA.received(session)).toBe(block);
    for (let at = block; at < data.length; at += block) {
      expect((await onB.part(session, at, slice(at), crc32(slice(at)))).kind).toBe(at + block >= data.length ? 'complete' : 'stored');
    }
    expect(await onA.received(session)).toBe(data.length);
    expect(await listKeys(s3!, 'procs', `staging/${session}/`)).toHaveLength(4);
    const fin = await waitFor('the upload finished', () => onA.finish(session), { until: (f) => f.kind !== 'processing' });
    expect(fin).toMatchObject({ kind: 'done', body: { fullpath: 'shared/big.bin', filehash: sha1(data) } });
    expect((await onB.finish(session)).kind).toBe('done'); // the result, answered by the other process too
    const listed = await b!.client.file.ls({ fullpath: 'shared' });
    expect(listed.list.map((e) => [e.filename, e.filehash])).toEqual([['big.bin', sha1(data)]]);
    const got = await fetchFile(b!.client, 'shared/big.bin');
    expect(got.status).toBe(200);
    expect(sha1(got.body)).toBe(sha1(data));
    const feed = await b!.client.file.updates({ mode: 'compare', fetch_dateline: cursor });
    expect(feed.list.map((e) => e.fullpath)).toContain('shared/big.bin');
    expect(await listKeys(s3!, 'procs', `staging/${session}/`)).toEqual([]);
  });

  it('an upload aborted on B after parts on A leaves no staged bytes in the bucket', async () => {
    const data = randomBytes(100_000);
    const created = await a!.client.file.createFile({ fullpath: 'shared/aborted.bin', filehash: sha1(data), filesize: data.length, overwrite: 1 });
    const caller = { orgClientId: a!.client.credentials.library!.org_client_id };
    const onA = new UploadServerClient(a!.client, normalizeServer(created.server), caller);
    const onB = new UploadServerClient(b!.client, normalizeServer(`${b!.baseUrl}/upload`), caller);
    const init = await onA.init({ filename: 'aborted.bin', pathhash: created.hash, filehash: sha1(data), filesize: data.length });
    const session = (init as { session: string }).session;
    const first = data.subarray(0, 60_000);
    expect(await onA.part(session, 0, first, crc32(first))).toEqual({ kind: 'stored' });
    expect(await listKeys(s3!, 'procs', `staging/${session}/`)).toHaveLength(1);
    await onB.abort(session);
    expect(await listKeys(s3!, 'procs', `staging/${session}/`)).toEqual([]);
    await expect(onA.received(session)).rejects.toThrow();
    const db = new pg.Client({ connectionString: database!.url });
    await db.connect();
    try {
      expect((await db.query('SELECT * FROM upload_parts WHERE session_id = $1', [session])).rows).toEqual([]);
    } finally {
      await db.end();
    }
  });

  it('a share link made on A is served by B; its visit limit holds across both', async () => {
    await put(a!.client, 'shared/linked.txt', 'linked content');
    const link = await a!.client.file.link({ fullpath: 'shared/linked.txt', auth: 'download', access_limit: 1 });
    expect(link.link.startsWith(a!.baseUrl)).toBe(true);
    const onB = `${b!.baseUrl}/link/${link.code}`;
    const page = await request(onB);
    expect(page.statusCode).toBe(200);
    expect(await page.body.text()).toContain('linked.txt');
    const visit = [page.headers['set-cookie'] ?? []].flat().find((c) => c.includes('_visit='))!.split(';')[0]!;
    const download = await request(`${link.link}/download`, { headers: { cookie: visit } }); // the visit made on B, downloading on A
    expect(download.statusCode).toBe(200);
    expect(await download.body.text()).toBe('linked content');
    const again = await request(link.link); // the one visit allowed was made on B
    expect(again.statusCode).toBe(410);
    await again.body.dump();
    const direct = await request(`${onB}/download`); // a download outside that visit is a visit of its own
    expect(direct.statusCode).toBe(410);
    await direct.body.dump();
    expect((await b!.client.file.links({})).map((l) => l.code)).toContain(link.code);
  });

  it('wrong link passwords count over both processes: the sixth from one client is refused (429) on either', async () => {
    await put(a!.client, 'shared/secret.txt', 'secret');
    const link = await a!.client.file.link({ fullpath: 'shared/secret.txt', password: 'right one' });
    const guess = async (base: string, password: string) => {
      const res = await request(`${base}/link/${link.code}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ password }).toString() });
      await res.body.dump();
      return res.statusCode;
    };
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push(await guess(i % 2 ? b!.baseUrl : a!.baseUrl, `wrong ${i}`));
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    expect(await guess(a!.baseUrl, 'right one')).toBe(429);
    expect(await guess(b!.baseUrl, 'right one')).toBe(429);
  });

  it('a signature used on A is refused on B for another endpoint from another address (401043); from the first address it passes', async () => {
    await a!.client.file.createFolder({ fullpath: 'shared/keep' });
    const def = ENDPOINTS.file.info;
    const wire = new URLSearchParams(a!.client.signedParams(def, { fullpath: 'shared/keep' })).toString();
    const elsewhere = new Agent({ localAddress: '127.0.0.2' });
    const call = async (base: string, path: string, dispatcher?: Agent) => {
      const res = await request(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: wire, dispatcher });
      return { status: res.statusCode, body: (await res.body.json()) as { error_code?: number } };
    };
    try {
      expect((await call(a!.baseUrl, def.path)).status).toBe(200);
      const replay = await call(b!.baseUrl, ENDPOINTS.file.del.path, elsewhere);
      expect([replay.status, replay.body.error_code]).toEqual([401, 401043]);
      expect((await call(b!.baseUrl, def.path, elsewhere)).status).toBe(200);
      expect((await b!.client.file.info({ fullpath: 'shared/keep' })).fullpath).toBe('shared/keep');
      // the client that signed it: the same signature on del passes on B (an SDK's info then del in one second)
      expect((await call(b!.baseUrl, ENDPOINTS.file.del.path)).status).toBe(200);
    } finally {
      await elsewhere.close();
    }
  });

  it('an authorization unbound on A is refused by B on its next request, which held it in its cache', async () => {
    const creds = JSON.parse(await readFile(join(a!.dir, 'credentials.json'), 'utf8')) as { enterprise: { client_id: string; client_secret: string } };
    const ent = a!.client.withCredentials({ enterprise: creds.enterprise });
    const { org_id } = await ent.org.create({ org_name: 'Unbound' });
    const names = async (auth: { org_client_id: string; org_client_secret: string }) => (await b!.client.withCredentials({ library: auth }).file.ls({ fullpath: '' })).list.map((e) => e.filename);
    // a change first (its guard's record goes with its transaction), then a read
    const first = await ent.org.bind({ org_id: String(org_id), title: 'first' });
    await b!.client.withCredentials({ library: first }).file.createFolder({ fullpath: 'made' });
    expect(await names(first)).toEqual(['made']);
    await ent.org.unbind({ org_client_id: first.org_client_id });
    expect(await codeOf(b!.client.withCredentials({ library: first }).file.createFolder({ fullpath: 'after' }))).toBe(40103);
    const second = await ent.org.bind({ org_id: String(org_id), title: 'second' });
    expect(second.org_client_id).not.toBe(first.org_client_id);
    expect(await names(second)).toEqual(['made']);
    await ent.org.unbind({ org_client_id: second.org_client_id });
    expect(await codeOf(b!.client.withCredentials({ library: second }).file.ls({ fullpath: '' }))).toBe(40103);
    expect(await codeOf(b!.client.withCredentials({ library: second }).file.del({ fullpath: 'made' }))).toBe(40103);
    // a new authorization, read afresh: nothing of the refused calls happened
    expect(await names(await ent.org.bind({ org_id: String(org_id), title: 'third' }))).toEqual(['made']);
  });

  it("an enterprise's term ended through another process: B's next change is refused, its reads pass", async () => {
    const onB = b!.client;
    await onB.file.createFolder({ fullpath: 'term/open' });
    const db = new pg.Client({ connectionString: database!.url });
    await db.connect();
    const { rows } = await db.query<{ id: string; end_dateline: string }>('SELECT e.id, e.end_dateline FROM enterprises e JOIN libraries l ON l.ent_id = e.id WHERE l.id = (SELECT library_id FROM library_auths WHERE org_client_id = $1)', [onB.credentials.library!.org_client_id]);
    const { id, end_dateline } = rows[0]!;
    try {
      await db.query('UPDATE enterprises SET end_dateline = $1 WHERE id = $2', [Math.floor(Date.now() / 1000) - 60, id]);
      expect(await codeOf(onB.file.createFolder({ fullpath: 'term/closed' }))).toBe(40334);
      expect((await onB.file.ls({ fullpath: 'term' })).list.map((e) => e.filename)).toEqual(['open']);
    } finally {
      await db.query('UPDATE enterprises SET end_dateline = $1 WHERE id = $2', [end_dateline, id]);
      await db.end();
    }
    await onB.file.createFolder({ fullpath: 'term/reopened' });
  });

  it('folder copies queued through both processes run once each', async () => {
    for (let i = 0; i < 3; i++) await put(a!.client, `shared/src/f${i}.txt`, `file ${i}`);
    await a!.client.file.createFolder({ fullpath: 'shared/src/sub' });
    const copies = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? b! : a!).client.file.copy({ from_fullpath: 'shared/src', fullpath: `shared/copy${i}` })));
    for (const [i, c] of copies.entries()) {
      const via = (i % 3 ? a! : b!).client;
      const status = await waitFor(`copy ${i} finished`, () => via.file.queueStatus({ queue_id: c.queue_id! }), { until: (st) => st.status >= 2 });
      expect(status.status).toBe(2);
      const names = (await via.file.ls({ fullpath: c.fullpath })).list.map((e) => e.filename).sort();
      expect(names).toEqual(['f0.txt', 'f1.txt', 'f2.txt', 'sub']);
    }
    const db = new pg.Client({ connectionString: database!.url });
    await db.connect();
    try {
      const rows = (await db.query<{ claims: string; status: string }>('SELECT claims, status FROM copy_queue')).rows;
      expect(rows).toHaveLength(8);
      expect(rows.every((r) => Number(r.claims) === 1 && Number(r.status) === 2)).toBe(true);
    } finally {
      await db.end();
    }
  });
});
