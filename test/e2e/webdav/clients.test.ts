/**
 * What real clients send, against the WebDAV server over an in-memory Vfs: curl (LOCK/PUT/UNLOCK, Digest),
 * Finder (chunked PUT without length, LOCK first, If lists, junk files), Explorer (0-byte PUT, content
 * PUT, Win32 PROPPATCH), an office save (LOCK, PUT temp, MOVE over the original, UNLOCK), range reads
 * that fetch only the range, locks on the service, tags, a browser's folder page, authentication.
 */
import { describe, it, expect, beforeAll, afterAll, vi } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { startMemoryDav, type MemoryDav } from '../../support/serve-memory-dav.js';
import { basicAuth, dav, LOCK_BODY, lockTokenOf } from '../../support/dav-http.js';

const run = promisify(execFile);

describe('WebDAV clients', { timeout: 30_000 }, () => {
  let d: MemoryDav;
  const lib = (): ReturnType<MemoryDav['remotes']['get']> & object => d.remotes.get('Library')!;
  beforeAll(async () => { d = await startMemoryDav({ emptyCreateGraceMs: 1000 }); });
  afterAll(async () => { await d?.close(); });

  it('curl: LOCK, PUT without the token is 423, PUT with it works, UNLOCK; Digest authentication', async () => {
    await dav(d.url, 'PUT', '/Library/curl.txt', { body: 'v1' });
    const { stdout: lockOut } = await run('curl', ['-s', '-i', '--digest', '-u', 'alice:secret', '-X', 'LOCK', '-H', 'Content-Type: application/xml', '--data', LOCK_BODY(), `${d.url}Library/curl.txt`]);
    expect(lockOut).toMatch(/^HTTP\/1\.1 200/m);
    const token = /lock-token: <([^>]+)>/i.exec(lockOut)![1]!;
    expect((await d.vfs.stat('/Library/curl.txt')).locked).toBe(true);
    expect((await dav(d.url, 'PUT', '/Library/curl.txt', { body: 'nope' })).status).toBe(423);
    const { stdout: putOut } = await run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--digest', '-u', 'alice:secret', '-X', 'PUT', '--data-binary', 'v2', '-H', `If: (<${token}>)`, `${d.url}Library/curl.txt`]);
    expect(['204', '201']).toContain(putOut);
    const { stdout: unlockOut } = await run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--digest', '-u', 'alice:secret', '-X', 'UNLOCK', '-H', `Lock-Token: <${token}>`, `${d.url}Library/curl.txt`]);
    expect(unlockOut).toBe('204');
    expect((await d.vfs.stat('/Library/curl.txt')).locked).toBeFalsy();
    expect((await run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--digest', '-u', 'alice:wrong', `${d.url}Library/curl.txt`])).stdout).toBe('401');
  });

  it('Finder: LOCK a new file, chunked PUT with If list and no Content-Length, junk stays local, UNLOCK', async () => {
    const lock = await dav(d.url, 'LOCK', '/Library/finder.bin', { body: LOCK_BODY(), headers: { timeout: 'Second-600' } });
    expect(lock.status).toBe(201);
    const token = lockTokenOf(lock);
    const parts = [randomBytes(70_000), randomBytes(5), randomBytes(300_000)];
    const put = await dav(d.url, 'PUT', '/Library/finder.bin', { chunked: parts, headers: { if: `<${d.url}Library/finder.bin> (<${token}>)` } });
    expect(put.status).toBe(204);
    const junk = await dav(d.url, 'PUT', '/Library/._finder.bin', { body: 'resource fork' });
    expect(junk.status).toBe(201);
    expect((await dav(d.url, 'PUT', '/Library/.DS_Store', { body: 'ds' })).status).toBe(201);
    expect((await dav(d.url, 'UNLOCK', '/Library/finder.bin', { headers: { 'lock-token': `<${token}>` } })).status).toBe(204);
    await d.vfs.flushAll();
    expect(lib().read('finder.bin').equals(Buffer.concat(parts))).toBe(true);
    expect(d.metrics.bytesWritten.get({ frontend: 'webdav' })).toBeGreaterThanOrEqual(370_005);
    expect(lib().paths()).not.toContain('._finder.bin');
    expect(lib().paths()).not.toContain('.DS_Store');
    expect((await dav(d.url, 'GET', '/Library/._finder.bin')).body).toBe('resource fork');
    const listing = await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '1' } });
    expect(listing.body).toContain('/Library/._finder.bin');
    expect(await readdir(join(d.dataDir, 'junk', 'Library'))).toEqual(expect.arrayContaining(['._finder.bin', '.DS_Store']));
  });

  it('Explorer: a 0-byte PUT then the content makes one version; Win32 properties are kept', async () => {
    const commits = vi.spyOn(lib(), 'commit');
    expect((await dav(d.url, 'PUT', '/Library/report.docx', { body: '' })).status).toBe(201);
    expect((await dav(d.url, 'PROPFIND', '/Library/report.docx', { headers: { depth: '0' } })).status).toBe(207);
    expect((await dav(d.url, 'PUT', '/Library/report.docx', { body: 'the report' })).status).toBe(204);
    const patch = `<?xml version="1.0" encoding="utf-8"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop>` +
      `<Z:Win32CreationTime>Mon, 02 Jan 2023 10:00:00 GMT</Z:Win32CreationTime><Z:Win32LastModifiedTime>Tue, 03 Jan 2023 11:00:00 GMT</Z:Win32LastModifiedTime>` +
      `<Z:Win32FileAttributes>00000020</Z:Win32FileAttributes></D:prop></D:set></D:propertyupdate>`;
    const pp = await dav(d.url, 'PROPPATCH', '/Library/report.docx', { body: patch });
    expect(pp.status).toBe(207);
    expect(pp.body).toContain('HTTP/1.1 200 OK');
    await d.vfs.flushAll();
    expect(commits.mock.calls.filter((c) => c[0] === 'report.docx')).toHaveLength(1);
    commits.mockRestore();
    expect(lib().read('report.docx').toString()).toBe('the report');
    const props = await dav(d.url, 'PROPFIND', '/Library/report.docx', { headers: { depth: '0' }, body: `<D:propfind xmlns:D="DAV:"><D:prop><Z:Win32FileAttributes xmlns:Z="urn:schemas-microsoft-com:"/><D:getlastmodified/></D:prop></D:propfind>` });
    expect(props.body).toContain('00000020</Win32FileAttributes>');
    expect(props.body).toContain('Tue, 03 Jan 2023 11:00:00 GMT');
  });

  it('office save: LOCK, PUT a temp file, MOVE over the original, UNLOCK: one file, new content, same id', async () => {
    await dav(d.url, 'PUT', '/Library/budget.xlsx', { body: 'version 1' });
    await d.vfs.flushAll();
    const id = (await d.vfs.stat('/Library/budget.xlsx')).id;
    const token = lockTokenOf(await dav(d.url, 'LOCK', '/Library/budget.xlsx', { body: LOCK_BODY() }));
    expect((await dav(d.url, 'PUT', '/Library/~budget.tmp', { body: 'version 2' })).status).toBe(201);
    const move = await dav(d.url, 'MOVE', '/Library/~budget.tmp', { headers: { destination: `${d.url}Library/budget.xlsx`, overwrite: 'T', if: `<${d.url}Library/budget.xlsx> (<${token}>)` } });
    expect(move.status).toBe(204);
    expect((await dav(d.url, 'UNLOCK', '/Library/budget.xlsx', { headers: { 'lock-token': `<${token}>` } })).status).toBe(204);
    await d.vfs.flushAll();
    expect(lib().read('budget.xlsx').toString()).toBe('version 2');
    expect(lib().paths().filter((p) => p.includes('budget'))).toEqual(['budget.xlsx']);
    expect((await d.vfs.stat('/Library/budget.xlsx')).id).toBe(id);
  });

  it('a range GET fetches only that range from the Vfs; If-Range with an old tag gets the whole file', async () => {
    const data = randomBytes(200_000);
    lib().putFile('big.bin', data);
    const stream = vi.spyOn(d.vfs, 'createReadStream');
    const r = await dav(d.url, 'GET', '/Library/big.bin', { headers: { range: 'bytes=1000-1999' } });
    expect(r.status).toBe(206);
    expect(r.headers['content-range']).toBe('bytes 1000-1999/200000');
    expect(Buffer.from(r.body, 'latin1').length).toBe(r.body.length);
    expect(stream.mock.calls.at(-1)?.[1]).toEqual({ start: 1000, end: 1999 });
    const whole = await dav(d.url, 'GET', '/Library/big.bin', { headers: { range: 'bytes=0-9', 'if-range': '"stale"' } });
    expect(whole.status).toBe(200);
    expect(stream.mock.calls.at(-1)?.[1]).toEqual({ start: 0, end: 199_999 });
    expect((await dav(d.url, 'GET', '/Library/big.bin', { headers: { range: 'bytes=300000-' } })).status).toBe(416);
    stream.mockRestore();
  });

  it('a file locked on the service by another member answers 423 to PUT, DELETE and LOCK', async () => {
    lib().putFile('theirs.txt', Buffer.from('x'));
    await lib().lock('theirs.txt', true);
    await d.vfs.stat('/Library/theirs.txt');
    expect((await dav(d.url, 'PUT', '/Library/theirs.txt', { body: 'y' })).status).toBe(423);
    expect((await dav(d.url, 'DELETE', '/Library/theirs.txt')).status).toBe(423);
    expect((await dav(d.url, 'LOCK', '/Library/theirs.txt', { body: LOCK_BODY() })).status).toBe(423);
  });

  it('tags are a property, set through PROPPATCH', async () => {
    await dav(d.url, 'PUT', '/Library/tagged.txt', { body: 't' });
    await d.vfs.flushAll();
    const set = `<D:propertyupdate xmlns:D="DAV:" xmlns:C="urn:cloudlib:props"><D:set><D:prop><C:tags><C:tag>red</C:tag><C:tag>urgent</C:tag></C:tags></D:prop></D:set></D:propertyupdate>`;
    expect((await dav(d.url, 'PROPPATCH', '/Library/tagged.txt', { body: set })).status).toBe(207);
    expect((await d.vfs.getTags('/Library/tagged.txt')).sort()).toEqual(['red', 'urgent']);
    const got = await dav(d.url, 'PROPFIND', '/Library/tagged.txt', { headers: { depth: '0' }, body: `<D:propfind xmlns:D="DAV:"><D:prop><C:tags xmlns:C="urn:cloudlib:props"/></D:prop></D:propfind>` });
    expect(got.body).toContain('<C:tag>red</C:tag>');
  });

  it('a browser gets an HTML page of a folder with download links', async () => {
    const page = await dav(d.url, 'GET', '/Library/', { headers: { accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(page.body).toContain('<a href="/Library/budget.xlsx" download>download</a>');
  });

  it('authentication: none is 401, a read-only user cannot change anything, Depth infinity is refused', async () => {
    expect((await dav(d.url, 'PROPFIND', '/', { auth: null, headers: { depth: '0' } })).status).toBe(401);
    const ro = basicAuth('reader', 'secret');
    expect((await dav(d.url, 'PROPFIND', '/Library/', { auth: ro, headers: { depth: '1' } })).status).toBe(207);
    expect((await dav(d.url, 'PUT', '/Library/ro.txt', { auth: ro, body: 'x' })).status).toBe(403);
    expect((await dav(d.url, 'LOCK', '/Library/budget.xlsx', { auth: ro, body: LOCK_BODY() })).status).toBe(403);
    const inf = await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: 'infinity' } });
    expect(inf.status).toBe(403);
    expect(inf.body).toContain('propfind-finite-depth');
  });

  it('quota properties come from statfs', async () => {
    const r = await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '0' }, body: `<D:propfind xmlns:D="DAV:"><D:prop><D:quota-available-bytes/><D:quota-used-bytes/></D:prop></D:propfind>` });
    const used = (await d.vfs.statfs('/Library')).used;
    expect(r.body).toContain(`<D:quota-used-bytes>${used}</D:quota-used-bytes>`);
    // Unlimited: no bytes available to say (left out, RFC 4331), never a made-up 8 PiB.
    expect(r.body).toMatch(/<D:prop><D:quota-available-bytes\/><\/D:prop><D:status>HTTP\/1.1 404/);
    const remote = d.remotes.get('Library')!;
    remote.capacity = 10 * 1024 ** 3;
    try {
      const limited = await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '0' }, body: `<D:propfind xmlns:D="DAV:"><D:prop><D:quota-available-bytes/></D:prop></D:propfind>` });
      expect(limited.body).toContain(`<D:quota-available-bytes>${10 * 1024 ** 3 - used}</D:quota-available-bytes>`);
    } finally {
      remote.capacity = undefined;
    }
  });
});
