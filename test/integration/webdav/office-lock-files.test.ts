/**
 * Office lock files through WebDAV over the real embedded service: `~$report.docx` written next to
 * `report.docx` stays on the gateway (listed and read there, never on the service) and locks the
 * document on the service; its maker saves as before, another gateway's WebDAV client gets 423; deleting
 * the lock file unlocks it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serviceAvailable, type TestVfs } from '../../support/vfs.js';
import { startDavOverService, type DavOverService } from '../../support/dav-over-service.js';
import { dav, LOCK_BODY, lockTokenOf } from '../../support/dav-http.js';
import { createWebdavServer, type WebdavServer } from '../../../src/webdav/index.js';
import { silentLogger } from '../../../src/shared/log.js';
import type { GatewayVfs } from '../../../src/vfs/gateway-vfs.js';
import { waitFor } from '../../support/wait-for.js';

const withService = await serviceAvailable();

describe.skipIf(!withService)('Office lock files through WebDAV', { timeout: 60_000 }, () => {
  let t: TestVfs;
  let url: string;
  let d: DavOverService;
  let other: WebdavServer;
  let otherUrl: string;
  let otherDir: string;
  let otherVfs: GatewayVfs;
  beforeAll(async () => {
    d = await startDavOverService();
    ({ t, url } = d);
    // Another gateway on the same library, with a WebDAV server of its own.
    otherDir = await mkdtemp(join(tmpdir(), 'cloudlib-dav-other-'));
    otherVfs = await t.openVfs();
    other = createWebdavServer({ vfs: otherVfs, users: [{ name: 'alice', password: 'secret', opName: 'Bob' }], dataDir: otherDir, logger: silentLogger });
    otherUrl = await other.listen('127.0.0.1', 0);
  });
  afterAll(async () => {
    await other?.close();
    await d?.close();
    await rm(otherDir, { recursive: true, force: true });
  });

  const lockedOnService = async (fullpath: string): Promise<boolean> => Number((await t.client.file.info({ fullpath })).lock) === 1;

  it('a lock file locks the document for its maker, 423 for another gateway\'s client, and is never uploaded', async () => {
    expect((await dav(url, 'PUT', '/Library/report.docx', { body: 'v1' })).status).toBe(201);
    await t.vfs.flushAll();
    expect((await dav(url, 'PUT', '/Library/~$report.docx', { body: 'Ann' })).status).toBe(201);
    expect(await lockedOnService('report.docx')).toBe(true);
    // Listed and read in its folder here, absent from the service.
    const listing = await dav(url, 'PROPFIND', '/Library/', { headers: { depth: '1' } });
    expect(listing.body).toContain('~$report.docx');
    const got = await dav(url, 'GET', '/Library/~$report.docx');
    expect(got.status).toBe(200);
    expect(got.body).toBe('Ann');
    const names = (await t.client.file.ls({ fullpath: '' })).list.map((e: { filename: string }) => e.filename);
    expect(names.filter((n: string) => n.includes('~'))).toEqual([]);
    // The maker saves (and may take a WebDAV lock too, as Office does); the other gateway's client is refused.
    expect((await dav(url, 'PUT', '/Library/report.docx', { body: 'v2' })).status).toBe(204);
    const davLock = await dav(url, 'LOCK', '/Library/report.docx', { body: LOCK_BODY() });
    expect(davLock.status).toBe(200);
    expect((await dav(url, 'UNLOCK', '/Library/report.docx', { headers: { 'lock-token': `<${lockTokenOf(davLock)}>` } })).status).toBe(204);
    expect((await dav(otherUrl, 'PUT', '/Library/report.docx', { body: 'theirs' })).status).toBe(423);
    // Deleting the lock file unlocks the document (after a short grace, in which Office or LibreOffice may
    // make it again around a save).
    expect((await dav(url, 'DELETE', '/Library/~$report.docx')).status).toBe(204);
    await waitFor('the document unlocked on the service once the lock file is deleted', async () => !(await lockedOnService('report.docx')), { timeoutMs: 15_000, intervalMs: 100 });
    expect((await dav(url, 'GET', '/Library/~$report.docx')).status).toBe(404);
    await t.vfs.flushAll();
    await waitFor('the other gateway to see the document unlocked (its updates feed)', async () => !(await otherVfs.stat('/Library/report.docx')).locked);
    expect((await dav(otherUrl, 'PUT', '/Library/report.docx', { body: 'theirs' })).status).toBe(204);
    await otherVfs.flushAll();
    const { urls } = await t.client.file.downloadUrl({ fullpath: 'report.docx' });
    expect(await (await fetch(urls[0]!)).text()).toBe('theirs');
  });
});
