/**
 * A file's state as the WebDAV property `state` in the cloudlib namespace (over the gateway's Vfs and
 * in-memory libraries): by name and in allprop, following a file from pending to synced to locked-by;
 * protected against PROPPATCH; folders have none.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dav, LOCK_BODY } from '../../support/dav-http.js';
import { startMemoryDav, type MemoryDav } from '../../support/serve-memory-dav.js';
import { CLOUDLIB_NS } from '../../../src/webdav/properties.js';

const ASK_STATE = `<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:C="${CLOUDLIB_NS}"><D:prop><C:state/></D:prop></D:propfind>`;

describe('file state as a WebDAV property', { timeout: 20_000 }, () => {
  let d: MemoryDav;
  const stateOf = async (path: string): Promise<string | undefined> => {
    const r = await dav(d.url, 'PROPFIND', path, { headers: { depth: '0' }, body: ASK_STATE });
    expect(r.status).toBe(207);
    return /<C:state>([^<]*)<\/C:state>/.exec(r.body)?.[1];
  };

  beforeAll(async () => {
    // Uploads wait for a flush: a file put is pending until then.
    d = await startMemoryDav({ vfsOptions: { upload: { delayMs: 600_000 } } });
  });
  afterAll(async () => {
    await d?.close();
  });

  it('follows a file from pending to synced to locked-by the WebDAV user', async () => {
    expect((await dav(d.url, 'PUT', '/Library/s.txt', { body: 'content' })).status).toBe(201);
    expect(await stateOf('/Library/s.txt')).toBe('pending');
    await d.vfs.flushAll();
    expect(await stateOf('/Library/s.txt')).toBe('synced');
    const lock = await dav(d.url, 'LOCK', '/Library/s.txt', { body: LOCK_BODY() });
    expect(lock.status).toBe(200);
    expect(await stateOf('/Library/s.txt')).toBe('locked-by Alice');
    const all = await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '1' } });
    expect(all.body).toContain('<C:state>locked-by Alice</C:state>');
  });

  it('is read-only, and folders have none', async () => {
    const patch = `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:C="${CLOUDLIB_NS}"><D:set><D:prop><C:state>synced</C:state></D:prop></D:set></D:propertyupdate>`;
    await d.vfs.writeFile('/Library/t.txt', Buffer.from('x'));
    const r = await dav(d.url, 'PROPPATCH', '/Library/t.txt', { body: patch });
    expect(r.status).toBe(207);
    expect(r.body).toContain('403 Forbidden');
    expect(await stateOf('/Library/t.txt')).toBe('pending');
    const folder = await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '0' }, body: ASK_STATE });
    expect(folder.body).toMatch(/<C:state\/>.*404 Not Found/s);
  });
});
