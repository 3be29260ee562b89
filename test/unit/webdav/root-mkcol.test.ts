/** A client pointed at the WebDAV root (litmus, a careless script) is told why MKCOL there is refused. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMemoryDav, type MemoryDav } from '../../support/serve-memory-dav.js';
import { dav } from '../../support/dav-http.js';

let d: MemoryDav;
beforeAll(async () => { d = await startMemoryDav(); });
afterAll(async () => { await d?.close(); });

describe('MKCOL at the root', () => {
  it('403 with a body that says the root lists libraries and where to point the client', async () => {
    const r = await dav(d.url, 'MKCOL', '/litmus/');
    expect(r.status).toBe(403);
    expect(r.body).toContain('the root lists the libraries');
    expect(r.body).toContain('/<library>/');
    expect((await dav(d.url, 'MKCOL', '/Library/litmus/')).status).toBe(201);
  });
});

describe('requests served', () => {
  it('each authenticated request tells the Vfs an application is being served (its uploads give way); a refused one does not', async () => {
    const before = d.vfs.foreground.touches;
    expect((await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '0' } })).status).toBe(207);
    expect(d.vfs.foreground.touches).toBe(before + 1);
    expect((await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '0' }, auth: null })).status).toBe(401);
    expect(d.vfs.foreground.touches).toBe(before + 1);
  });
});
