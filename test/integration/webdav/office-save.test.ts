/**
 * The WebDAV front end over the gateway core over the real embedded service, checked through the service's
 * own API: an office save (LOCK, PUT a temp file, MOVE over the original, UNLOCK) leaves one file with the
 * new content and a history version, no temp file, and no lock; a 0-byte-then-content PUT is one version.
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serviceAvailable, startTestVfs, type TestVfs } from '../../support/vfs.js';
import { createWebdavServer, type WebdavServer } from '../../../src/webdav/index.js';
import { silentLogger } from '../../../src/shared/log.js';
import { dav, LOCK_BODY, lockTokenOf } from '../../e2e/webdav/http.js';

const withService = await serviceAvailable();

describe.skipIf(!withService)('WebDAV over the embedded service', { timeout: 60_000 }, () => {
  let t: TestVfs;
  let server: WebdavServer;
  let url: string;
  let dataDir: string;
  beforeAll(async () => {
    t = await startTestVfs();
    dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-dav-int-'));
    server = createWebdavServer({ vfs: t.vfs, users: [{ name: 'alice', password: 'secret', opName: 'Alice' }], dataDir, logger: silentLogger, emptyCreateGraceMs: 1000 });
    url = await server.listen('127.0.0.1', 0);
  });
  afterAll(async () => {
    await server?.close();
    await t?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  const content = async (fullpath: string): Promise<string> => {
    const { urls } = await t.client.file.downloadUrl({ fullpath });
    return (await fetch(urls[0]!)).text();
  };

  it('office save: one file, new content, a history version, no leftovers, unlocked', async () => {
    expect((await dav(url, 'PUT', '/Library/plan.docx', { body: 'draft 1' })).status).toBe(201);
    await t.vfs.flushAll();
    const before = await t.client.file.info({ fullpath: 'plan.docx' });
    const lock = await dav(url, 'LOCK', '/Library/plan.docx', { body: LOCK_BODY() });
    expect(lock.status).toBe(200);
    const token = lockTokenOf(lock);
    expect((await dav(url, 'PUT', '/Library/~WRL0001.tmp', { body: 'draft 2' })).status).toBe(201);
    const move = await dav(url, 'MOVE', '/Library/~WRL0001.tmp', { headers: { destination: `${url}Library/plan.docx`, overwrite: 'T', if: `<${url}Library/plan.docx> (<${token}>)` } });
    expect(move.status).toBe(204);
    expect((await dav(url, 'UNLOCK', '/Library/plan.docx', { headers: { 'lock-token': `<${token}>` } })).status).toBe(204);
    await t.vfs.flushAll();

    expect(await content('plan.docx')).toBe('draft 2');
    const after = await t.client.file.info({ fullpath: 'plan.docx' });
    expect(after.hash).toBe(before.hash);
    const history = await t.client.file.history({ fullpath: 'plan.docx' });
    expect(history.list.length).toBeGreaterThanOrEqual(2);
    const names = (await t.client.file.ls({ fullpath: '' })).list.map((e: { filename: string }) => e.filename);
    expect(names).toContain('plan.docx');
    expect(names.filter((n: string) => n.includes('WRL'))).toEqual([]);
    const stat = await t.vfs.stat('/Library/plan.docx');
    expect(stat.locked).toBeFalsy();
  });

  it('a 0-byte PUT followed by the content is one version on the service', async () => {
    expect((await dav(url, 'PUT', '/Library/new.txt', { body: '' })).status).toBe(201);
    expect((await dav(url, 'PUT', '/Library/new.txt', { body: 'content' })).status).toBe(204);
    await t.vfs.flushAll();
    expect(await content('new.txt')).toBe('content');
    const history = await t.client.file.history({ fullpath: 'new.txt' });
    expect(history.list.filter((h) => h.dir === 0).length).toBe(1);
  });
});
