/** An outage through WebDAV: cached reads and listings, a PUT accepted into the journal, uploaded once the service is back. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDavOverService, type DavOverService } from '../../support/dav-over-service.js';
import { serviceReader } from '../../support/drive-scenarios.js';
import { dav } from '../../support/dav-http.js';
import type { FaultyRemote } from '../../../src/vfs/index.js';
import { waitFor } from '../../support/wait-for.js';

describe('WebDAV while the service is away', { timeout: 60_000 }, () => {
  let d: DavOverService;
  beforeAll(async () => { d = await startDavOverService({}, { faults: true, cache: { diskBytes: 64 * 1024 * 1024 } }); });
  afterAll(async () => { await d?.close(); });

  it('GET and PROPFIND of what it has, PUT into the journal, the upload when the service is back', async () => {
    const faulty = d.t.vfs.remoteOf('Library') as FaultyRemote;
    expect((await dav(d.url, 'PUT', '/Library/known.txt', { body: 'known content' })).status).toBe(201);
    await d.t.vfs.flushAll();
    expect((await dav(d.url, 'GET', '/Library/known.txt')).body).toBe('known content');
    expect((await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '1' } })).status).toBe(207);
    await waitFor('the content cache to hold known.txt', () => d.t.vfs.status().disk?.writtenBytes ?? 0, { until: (n) => n >= 13 });

    faulty.down(3_600_000);
    await d.t.vfs.refresh();
    expect(d.t.vfs.status().libraries[0]!.online).toBe(false);
    expect((await dav(d.url, 'GET', '/Library/known.txt')).body).toBe('known content');
    const listing = await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '1' } });
    expect(listing.status).toBe(207);
    expect(listing.body).toContain('known.txt');
    expect((await dav(d.url, 'PUT', '/Library/offline.txt', { body: 'made offline' })).status).toBe(201);
    expect((await dav(d.url, 'GET', '/Library/offline.txt')).body).toBe('made offline');

    faulty.heal();
    await d.t.vfs.refresh();
    await d.t.vfs.flushAll();
    expect((await serviceReader(() => d.t.client).read('offline.txt')).toString()).toBe('made offline');
  });
});
