/**
 * A file not on the service yet (written here, its upload to come) takes a lock and tags as an uploaded
 * one does: a WebDAV lock holds across the front ends from the moment it is granted (the mount's writer is
 * refused), the tags read back at once, and both reach the service with the file.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createVfs, MemoryRemote, type GatewayVfs } from '../../../src/vfs/index.js';
import { createWebdavServer } from '../../../src/webdav/index.js';
import { silentLogger } from '../../../src/shared/log.js';
import { vfsCode } from '../../support/vfs.js';
import { dav, LOCK_BODY, lockTokenOf } from '../../support/dav-http.js';
import { waitFor } from '../../support/wait-for.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** A gateway whose uploads wait for a flush: files stay "not on the service yet" until the test says. */
async function gateway(): Promise<{ vfs: GatewayVfs; remote: MemoryRemote; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'cloudlib-marks-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const remote = new MemoryRemote({ name: 'A', id: '1' });
  const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir: dir, feedIntervalMs: 0, upload: { delayMs: 60_000 } });
  cleanups.push(() => vfs.close());
  return { vfs, remote, dir };
}

async function until(cond: () => boolean, what: string): Promise<void> {
  await waitFor(what, cond);
}

describe('locks and tags of files not on the service yet', () => {
  it('PUT then LOCK (Office): the lock holds against the mount at once and reaches the service with the file', async () => {
    const { vfs, remote, dir } = await gateway();
    const server = createWebdavServer({ vfs, users: [{ name: 'alice', password: 'secret' }], dataDir: join(dir, 'webdav'), logger: silentLogger });
    const url = await server.listen('127.0.0.1', 0);
    cleanups.push(() => server.close());
    expect((await dav(url, 'PUT', '/A/newdoc.txt', { body: 'draft' })).status).toBe(201);
    expect(await remote.stat('newdoc.txt')).toBeNull();
    const lock = await dav(url, 'LOCK', '/A/newdoc.txt', { body: LOCK_BODY(), headers: { timeout: 'Second-600' } });
    expect(lock.status).toBe(200);
    const token = lockTokenOf(lock);
    // The mount (no lock holder) may not write it; the lock's holder may.
    expect(await vfsCode(vfs.open('/A/newdoc.txt', { write: true, append: true }))).toBe('ELOCKED');
    expect((await dav(url, 'PUT', '/A/newdoc.txt', { body: 'final', headers: { if: `(<${token}>)` } })).status).toBe(204);
    await vfs.flushAll({ timeoutMs: 10_000 });
    await until(() => remote.read('newdoc.txt').toString() === 'final', 'the upload');
    const onService = async () => (await remote.stat('newdoc.txt'))?.locked === true;
    expect(await waitFor('the lock on the service', onService)).toBe(true);
    expect((await dav(url, 'UNLOCK', '/A/newdoc.txt', { headers: { 'lock-token': `<${token}>` } })).status).toBe(204);
    expect((await remote.stat('newdoc.txt'))?.locked).toBe(false);
  });

  it('LOCK of an unmapped URL: the empty file it makes is locked against the mount too', async () => {
    const { vfs, dir } = await gateway();
    const server = createWebdavServer({ vfs, users: [{ name: 'alice', password: 'secret' }], dataDir: join(dir, 'webdav'), logger: silentLogger });
    const url = await server.listen('127.0.0.1', 0);
    cleanups.push(() => server.close());
    const lock = await dav(url, 'LOCK', '/A/locked-new.txt', { body: LOCK_BODY(), headers: { timeout: 'Second-600' } });
    expect(lock.status).toBe(201);
    expect(await vfsCode(vfs.open('/A/locked-new.txt', { write: true, truncate: true }))).toBe('ELOCKED');
    expect((await dav(url, 'UNLOCK', '/A/locked-new.txt', { headers: { 'lock-token': `<${lockTokenOf(lock)}>` } })).status).toBe(204);
    const h = await vfs.open('/A/locked-new.txt', { write: true, truncate: true });
    await h.release();
  });

  it('the tags of a file not uploaded yet read back at once and reach the service with it', async () => {
    const { vfs, remote } = await gateway();
    await vfs.writeFile('/A/pending.txt', Buffer.from('x'));
    expect(await vfs.getTags('/A/pending.txt')).toEqual([]);
    await vfs.setTags('/A/pending.txt', ['draft', 'q3']);
    expect(await vfs.getTags('/A/pending.txt')).toEqual(['draft', 'q3']);
    expect(await vfsCode(vfs.setTags('/A/pending.txt', ['bad;tag']))).toBe('EINVAL');
    await vfs.flushAll({ timeoutMs: 10_000 });
    const tagsOnService = async () => (await remote.stat('pending.txt'))?.tags ?? [];
    const tags = await waitFor('both tags on the service', tagsOnService, { until: (t) => t.length >= 2 });
    expect(tags.sort()).toEqual(['draft', 'q3']);
    expect((await vfs.getTags('/A/pending.txt')).sort()).toEqual(['draft', 'q3']);
  });
});
