/**
 * The versions view through WebDAV (over the gateway's Vfs and in-memory libraries): listed by PROPFIND
 * where asked for by name, read byte-exact and by range with GET, every change refused with 403 and
 * nothing changed, a COPY out restores a version.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dav, LOCK_BODY } from '../../support/dav-http.js';
import { startMemoryDav, type MemoryDav } from '../../support/serve-memory-dav.js';

describe('versions view through WebDAV', { timeout: 20_000 }, () => {
  let d: MemoryDav;
  let versions: string[];

  beforeAll(async () => {
    d = await startMemoryDav();
    const remote = d.remotes.get('Library')!;
    await remote.mkdir('docs');
    remote.putFile('docs/a.txt', Buffer.from('the first version'), { operator: { opName: 'bob' } });
    expect((await dav(d.url, 'PUT', '/Library/docs/a.txt', { body: 'second, put through WebDAV' })).status).toBe(204);
    await d.vfs.flushAll();
    const listing = await dav(d.url, 'PROPFIND', '/Library/.versions/docs/a.txt/', { headers: { depth: '1' } });
    expect(listing.status).toBe(207);
    versions = [...listing.body.matchAll(/<D:href>([^<]+)<\/D:href>/g)].map((m) => m[1]!).filter((h) => !h.endsWith('/'));
  });
  afterAll(async () => {
    await d?.close();
  });

  it('lists the versions of a file; the library root does not list the view', async () => {
    expect(versions).toHaveLength(2);
    expect(decodeURIComponent(versions[0]!)).toMatch(/^\/Library\/\.versions\/docs\/a\.txt\/\d{4}-\d\d-\d\d \d\d\.\d\d\.\d\d bob [0-9a-f]{7}\.txt$/);
    const root = await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '1' } });
    expect(root.body).toContain('/Library/docs/');
    expect(root.body).not.toContain('.versions');
  });

  it('reads each version byte-exact, and a range', async () => {
    expect((await dav(d.url, 'GET', versions[0]!)).body).toBe('the first version');
    expect((await dav(d.url, 'GET', versions[1]!)).body).toBe('second, put through WebDAV');
    const part = await dav(d.url, 'GET', versions[0]!, { headers: { range: 'bytes=4-8' } });
    expect([part.status, part.body]).toEqual([206, 'first']);
  });

  it('refuses every change inside it with 403, and nothing changes', async () => {
    const v = versions[0]!;
    const folder = '/Library/.versions/docs/a.txt/';
    const proppatch = '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:note>x</Z:note></D:prop></D:set></D:propertyupdate>';
    const statuses = {
      put: (await dav(d.url, 'PUT', v, { body: 'x' })).status,
      putNew: (await dav(d.url, 'PUT', `${folder}new.txt`, { body: 'x' })).status,
      putJunk: (await dav(d.url, 'PUT', `${folder}.DS_Store`, { body: 'x' })).status,
      mkcol: (await dav(d.url, 'MKCOL', `${folder}sub`)).status,
      mkcolView: (await dav(d.url, 'MKCOL', '/Library/.versions')).status,
      delete: (await dav(d.url, 'DELETE', v)).status,
      deleteFolder: (await dav(d.url, 'DELETE', folder)).status,
      moveOut: (await dav(d.url, 'MOVE', v, { headers: { destination: '/Library/out.txt' } })).status,
      moveIn: (await dav(d.url, 'MOVE', '/Library/docs/a.txt', { headers: { destination: `${folder}in.txt` } })).status,
      copyIn: (await dav(d.url, 'COPY', '/Library/docs/a.txt', { headers: { destination: `${folder}in.txt` } })).status,
      proppatch: (await dav(d.url, 'PROPPATCH', v, { body: proppatch })).status,
      lock: (await dav(d.url, 'LOCK', v, { body: LOCK_BODY() })).status,
    };
    expect(statuses).toEqual(Object.fromEntries(Object.keys(statuses).map((k) => [k, 403])));
    const after = await dav(d.url, 'PROPFIND', folder, { headers: { depth: '1' } });
    expect([...after.body.matchAll(/<D:href>([^<]+)<\/D:href>/g)].map((m) => m[1]!).filter((h) => !h.endsWith('/'))).toEqual(versions);
    expect(after.body).not.toContain('urn:z');
    expect((await dav(d.url, 'GET', '/Library/docs/a.txt')).body).toBe('second, put through WebDAV');
    expect((await dav(d.url, 'GET', '/Library/out.txt')).status).toBe(404);
  });

  it('restores a version with a COPY out of the view', async () => {
    const copy = await dav(d.url, 'COPY', versions[0]!, { headers: { destination: '/Library/docs/a.txt', overwrite: 'T' } });
    expect(copy.status).toBe(204);
    expect((await dav(d.url, 'GET', '/Library/docs/a.txt')).body).toBe('the first version');
  });
});
