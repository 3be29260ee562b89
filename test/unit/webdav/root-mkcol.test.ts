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
