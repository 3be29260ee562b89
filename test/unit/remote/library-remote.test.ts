/**
 * LibraryRemote's mapping of the library file API, against a scripted service (undici MockAgent):
 * paging, error codes, the feed's records, download-link caching and refresh, ranges.
 */
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { MockAgent } from 'undici';
import { ServiceClient } from '../../../src/api/client.js';
import { LibraryRemote } from '../../../src/remote/library-remote.js';
import { enterpriseLibraries } from '../../../src/remote/service-vfs.js';
import { serveLibraries } from '../../../src/remote/served-libraries.js';

const BASE = 'http://svc.test';
const FILES = 'http://files.test';
let agent: MockAgent;
let client: ServiceClient;

function record(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { hash: `h-${name}`, dir: 0, fullpath: name, filename: name, filehash: 'a'.repeat(40), filesize: 3, create_member_name: 'x', create_dateline: 100, last_member_name: 'y', last_dateline: 200, property: { tag: 'red;blue' }, ...extra };
}

function bodyParams(body: unknown): URLSearchParams {
  return new URLSearchParams(String(body));
}

beforeEach(() => {
  agent = new MockAgent();
  agent.disableNetConnect();
  client = new ServiceClient({ baseUrl: BASE, credentials: { library: { org_client_id: 'cid', org_client_secret: 'secret' } }, dispatcher: agent, retries: 0 });
});
afterEach(async () => {
  await agent.close();
});

describe('LibraryRemote', () => {
  it('lists every page of ls and maps records', async () => {
    const pool = agent.get(BASE);
    const starts: string[] = [];
    pool.intercept({ path: '/m-open/1/file/ls', method: 'POST' }).reply((opts) => {
      const p = bodyParams(opts.body);
      starts.push(p.get('start')!);
      const start = Number(p.get('start'));
      const list = start === 0 ? [record('a'), record('b')] : [record('c', { dir: 1, filehash: '', filesize: 0 })];
      return { statusCode: 200, data: JSON.stringify({ count: 3, list }) };
    }).times(2);
    const remote = new LibraryRemote({ client, pageSize: 2 });
    const list = await remote.list('');
    expect(starts).toEqual(['0', '2']);
    expect(list.map((e) => [e.name, e.isDir, e.size])).toEqual([['a', false, 3], ['b', false, 3], ['c', true, 0]]);
    expect(list[0]).toMatchObject({ id: 'h-a', contentHash: 'a'.repeat(40), mtimeMs: 200_000, ctimeMs: 100_000, tags: ['red', 'blue'], lastModifiedBy: 'y' });
  });

  it('follows a service that gives fewer entries per page than asked, at the size it gives', async () => {
    const pool = agent.get(BASE);
    const asked: string[] = [];
    const names = ['a', 'b', 'c', 'd', 'e'];
    pool.intercept({ path: '/m-open/1/file/ls', method: 'POST' }).reply((opts) => {
      const p = bodyParams(opts.body);
      asked.push(`${p.get('start')}+${p.get('size')}`);
      const start = Number(p.get('start'));
      const list = names.slice(start, start + Math.min(2, Number(p.get('size')))).map((n) => record(n)); // caps its pages at 2
      return { statusCode: 200, data: JSON.stringify({ count: names.length, list }) };
    }).times(3);
    const remote = new LibraryRemote({ client, pageSize: 10 });
    expect((await remote.list('')).map((e) => e.name)).toEqual(names);
    expect(asked.sort()).toEqual(['0+10', '2+2', '4+2']);
  });

  it('asks again at the default page of 100 when the service refuses the page size, and keeps to it', async () => {
    const pool = agent.get(BASE);
    const sizes: string[] = [];
    pool.intercept({ path: '/m-open/1/file/ls', method: 'POST' }).reply((opts) => {
      const size = bodyParams(opts.body).get('size')!;
      sizes.push(size);
      if (Number(size) > 100) return { statusCode: 400, data: JSON.stringify({ error_code: 40003, error_msg: "parameter 'size': expected at most 100" }) };
      return { statusCode: 200, data: JSON.stringify({ count: 1, list: [record('a')] }) };
    }).times(3);
    const remote = new LibraryRemote({ client });
    expect((await remote.list('')).map((e) => e.name)).toEqual(['a']);
    expect((await remote.list('')).map((e) => e.name)).toEqual(['a']);
    expect(sizes).toEqual(['1000', '100', '100']);
  });

  it('maps service errors to VfsError codes; stat of a missing path is null', async () => {
    const pool = agent.get(BASE);
    pool.intercept({ path: '/m-open/1/file/info', method: 'POST' }).reply(404, { error_code: 40402, error_msg: 'missing' });
    pool.intercept({ path: '/m-open/1/file/create_folder', method: 'POST' }).reply(409, { error_code: 40901, error_msg: 'exists' });
    pool.intercept({ path: '/m-open/1/file/move', method: 'POST' }).reply(403, { error_code: 40321, error_msg: 'full' });
    pool.intercept({ path: '/m-open/1/file/del', method: 'POST' }).reply(423, { error_code: 42301, error_msg: 'locked' });
    const remote = new LibraryRemote({ client });
    expect(await remote.stat('nope')).toBeNull();
    await expect(remote.mkdir('d')).rejects.toMatchObject({ code: 'EEXIST' });
    await expect(remote.move('a', 'b')).rejects.toMatchObject({ code: 'ENOSPC' });
    await expect(remote.remove('a')).rejects.toMatchObject({ code: 'ELOCKED' });
  });

  it('reads the change feed in compare mode from the cursor', async () => {
    const pool = agent.get(BASE);
    let params: URLSearchParams | undefined;
    pool.intercept({ path: '/m-open/1/file/updates', method: 'POST' }).reply((opts) => {
      params = bodyParams(opts.body);
      return { statusCode: 200, data: JSON.stringify({ fetch_dateline: 5000, list: [{ ...record('gone'), cmd: 0 }, { ...record('new'), cmd: 1 }] }) };
    });
    const remote = new LibraryRemote({ client });
    const page = await remote.changes(1234);
    expect(params!.get('mode')).toBe('compare');
    expect(params!.get('fetch_dateline')).toBe('1234');
    expect(page.cursor).toBe(5000);
    expect(page.changes.map((c) => `${c.kind} ${c.entry.fullpath}`)).toEqual(['delete gone', 'upsert new']);
  });

  it('caches download links per version, sends Range, and fetches a fresh link when a range fails', async () => {
    const pool = agent.get(BASE);
    const files = agent.get(FILES);
    let links = 0;
    const filehashes: (string | null)[] = [];
    pool.intercept({ path: '/m-open/1/file/download_url', method: 'POST' }).reply((opts) => {
      links++;
      filehashes.push(bodyParams(opts.body).get('filehash'));
      return { statusCode: 200, data: JSON.stringify({ urls: [`${FILES}/dl/${links}`] }) };
    }).times(2);
    const ranges: string[] = [];
    files.intercept({ path: '/dl/1', method: 'GET' }).reply((opts) => {
      ranges.push(String((opts.headers as Record<string, string>).range));
      return { statusCode: 206, data: 'bcd', responseOptions: { headers: { 'content-range': 'bytes 1-3/10' } } };
    });
    files.intercept({ path: '/dl/1', method: 'GET' }).reply(403, 'expired');
    files.intercept({ path: '/dl/2', method: 'GET' }).reply(206, 'xyz', { headers: { 'content-range': 'bytes 4-6/10' } });
    const remote = new LibraryRemote({ client });
    const read = async (s: number, e: number): Promise<string> => {
      const chunks: Buffer[] = [];
      for await (const c of await remote.openRange('f', s, e, { contentHash: 'a'.repeat(40) })) chunks.push(c as Buffer);
      return Buffer.concat(chunks).toString();
    };
    expect(await read(1, 3)).toBe('bcd');
    expect(ranges).toEqual(['bytes=1-3']);
    expect(await read(4, 6)).toBe('xyz');
    expect(links).toBe(2);
    expect(filehashes).toEqual(['a'.repeat(40), 'a'.repeat(40)]);
  });

  it('a service that does not find the current version by its hash is asked for the current version', async () => {
    const pool = agent.get(BASE);
    const asked: (string | null)[] = [];
    pool.intercept({ path: '/m-open/1/file/download_url', method: 'POST' }).reply((opts) => {
      const fh = bodyParams(opts.body).get('filehash');
      asked.push(fh);
      return fh ? { statusCode: 404, data: JSON.stringify({ error_code: 40402, error_msg: 'no such version' }) } : { statusCode: 200, data: JSON.stringify({ urls: [`${FILES}/cur`] }) };
    }).times(2);
    agent.get(FILES).intercept({ path: '/cur', method: 'GET' }).reply(206, 'abc', { headers: { 'content-range': 'bytes 0-2/10' } });
    const chunks: Buffer[] = [];
    for await (const c of await new LibraryRemote({ client }).openRange('f', 0, 2, { contentHash: 'b'.repeat(40) })) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('abc');
    expect(asked).toEqual(['b'.repeat(40), null]);
  });

  it('a server that ignores Range: the wanted bytes are cut out of the whole body', async () => {
    agent.get(BASE).intercept({ path: '/m-open/1/file/download_url', method: 'POST' }).reply(200, { urls: [`${FILES}/whole`] });
    agent.get(FILES).intercept({ path: '/whole', method: 'GET' }).reply(200, '0123456789');
    const remote = new LibraryRemote({ client });
    const chunks: Buffer[] = [];
    for await (const c of await remote.openRange('f', 3, 5)) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('345');
  });

  it('a 206 for other bytes than asked (or with no Content-Range) fails the read with EIO instead of being read as them', async () => {
    agent.get(BASE).intercept({ path: '/m-open/1/file/download_url', method: 'POST' }).reply(200, { urls: [`${FILES}/dl`] }).persist();
    const files = agent.get(FILES);
    files.intercept({ path: '/dl', method: 'GET' }).reply(206, 'abc', { headers: { 'content-range': 'bytes 0-2/10' } });
    files.intercept({ path: '/dl', method: 'GET' }).reply(206, 'defgh', { headers: { 'content-range': 'bytes 3-7/10' } });
    files.intercept({ path: '/dl', method: 'GET' }).reply(206, 'def');
    files.intercept({ path: '/dl', method: 'GET' }).reply(206, 'de', { headers: { 'content-range': 'bytes 3-4/*' } });
    const remote = new LibraryRemote({ client });
    // Asked for 3-5: answered 0-2, then 3-7 (more than asked), then no Content-Range at all.
    await expect(remote.openRange('f', 3, 5)).rejects.toMatchObject({ code: 'EIO', message: expect.stringContaining('asked for bytes 3-5, answered "bytes 0-2/10"') });
    await expect(remote.openRange('f', 3, 5)).rejects.toMatchObject({ code: 'EIO', message: expect.stringContaining('asked for bytes 3-5, answered "bytes 3-7/10"') });
    await expect(remote.openRange('f', 3, 5)).rejects.toMatchObject({ code: 'EIO' });
    // Fewer bytes than asked, from the right start (the end of the file): read as they are.
    const chunks: Buffer[] = [];
    for await (const c of await remote.openRange('f', 3, 5)) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('de');
  });

  it('quota from stat: capacity ≤ 0 is unlimited', async () => {
    agent.get(BASE).intercept({ path: '/m-open/1/file/stat', method: 'POST' }).reply(200, { org_id: 1, org_name: 'L', mount_id: 1, capacity: -1, size: 42, size_recycle: 0, count_file: 3, storage_point: '' });
    const q = await new LibraryRemote({ client }).quota();
    expect(q).toEqual({ total: undefined, used: 42, files: 3 });
  });
});

describe('libraries of an enterprise', () => {
  it('lists them with org/ls, binds each with org/bind, names them (collisions get the library id)', async () => {
    const ent = new ServiceClient({ baseUrl: BASE, credentials: { enterprise: { client_id: 'ent', client_secret: 'es' } }, dispatcher: agent, retries: 0 });
    const pool = agent.get(BASE);
    pool.intercept({ path: '/m-open/1/org/ls', method: 'POST' }).reply(200, { list: [
      { org_id: 5, org_name: 'Docs', org_logo_url: '', size_org_total: -1, size_org_use: 0, mount_id: 50, owner_id: 0 },
      { org_id: 2, org_name: 'Docs', org_logo_url: '', size_org_total: -1, size_org_use: 0, mount_id: 20, owner_id: 0 },
      { org_id: 9, org_name: 'Team/A', org_logo_url: '', size_org_total: -1, size_org_use: 0, mount_id: 90, owner_id: 0 },
    ] });
    const bound: string[] = [];
    pool.intercept({ path: '/m-open/1/org/bind', method: 'POST' }).reply((opts) => {
      const p = bodyParams(opts.body);
      bound.push(`${p.get('org_id')}:${p.get('title')}:${p.get('client_id')}`);
      return { statusCode: 200, data: JSON.stringify({ org_client_id: `lib${p.get('org_id')}`, org_client_secret: `s${p.get('org_id')}` }) };
    }).times(3);
    pool.intercept({ path: '/m-open/1/file/stat', method: 'POST' }).reply((opts) => {
      const id = bodyParams(opts.body).get('org_client_id')!.slice(3);
      const names: Record<string, string> = { 5: 'Docs', 2: 'Docs', 9: 'Team/A' };
      return { statusCode: 200, data: JSON.stringify({ org_id: Number(id), org_name: names[id], mount_id: 1, capacity: -1, size: 0, size_recycle: 0, count_file: 0, storage_point: '' }) };
    }).times(3);
    const specs = await enterpriseLibraries(ent);
    expect(bound).toEqual(['5:cloudlib gateway:ent', '2:cloudlib gateway:ent', '9:cloudlib gateway:ent']);
    expect(specs.map((s) => s.client!.credentials.library!.org_client_id)).toEqual(['lib5', 'lib2', 'lib9']);
    const libs = await serveLibraries(specs);
    expect(libs.map((l) => [l.name, l.id])).toEqual([['Docs (5)', '5'], ['Docs', '2'], ['Team_A', '9']]);
  });
});
