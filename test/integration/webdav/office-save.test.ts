/**
 * The WebDAV front end over the gateway core over the real embedded service, checked through the service's
 * own API: an office save (LOCK, PUT a temp file, MOVE over the original, UNLOCK) leaves one file with the
 * new content and a history version, no temp file, and no lock; a 0-byte-then-content PUT is one version;
 * a PUT cut off mid-body changes nothing; two PUTs at once leave whole versions only; a WebDAV lock holds
 * against the gateway's other writers.
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { request } from 'node:http';
import { createHash } from 'node:crypto';
import { serviceAvailable, type TestVfs } from '../../support/vfs.js';
import { startDavOverService, type DavOverService } from '../../support/dav-over-service.js';
import { basicAuth, dav, LOCK_BODY, lockTokenOf } from '../../support/dav-http.js';
import { vfsCode } from '../../support/vfs.js';
import { waitFor } from '../../support/wait-for.js';

const withService = await serviceAvailable();

describe.skipIf(!withService)('WebDAV over the embedded service', { timeout: 60_000 }, () => {
  let t: TestVfs;
  let url: string;
  let d: DavOverService;
  beforeAll(async () => {
    d = await startDavOverService({ emptyCreateGraceMs: 1000 });
    ({ t, url } = d);
  });
  afterAll(async () => {
    await d?.close();
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

  /** A PUT whose body is sent by `send` on an open request (the caller ends or destroys it). */
  const putStream = (path: string, length: number, send: (req: ReturnType<typeof request>) => Promise<void>): Promise<number> =>
    new Promise((resolve, reject) => {
      const req = request(`${url}${path.slice(1)}`, { method: 'PUT', headers: { authorization: basicAuth(), 'content-length': length } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      send(req).catch(reject);
    });

  const settled = async (): Promise<void> => {
    // The server notices a cut-off body on its own time: wait until nothing local is left.
    await waitFor('nothing local left', () => ({ localFiles: t.vfs.status().localFiles, uploads: t.vfs.status().uploads.length }), { until: (n) => n.localFiles === 0 && n.uploads === 0, timeoutMs: 10_000, intervalMs: 50 });
  };

  it('a PUT cut off mid-body over an existing file changes nothing', async () => {
    expect((await dav(url, 'PUT', '/Library/keep.bin', { body: 'the original' })).status).toBe(201);
    await t.vfs.flushAll();
    const aborted = putStream('/Library/keep.bin', 8_000_000, async (req) => {
      await new Promise<void>((resolve) => req.write(Buffer.alloc(3_000_000, 1), () => resolve()));
      req.destroy();
    });
    await expect(aborted).rejects.toThrow();
    await settled();
    await t.vfs.flushAll();
    expect(await content('keep.bin')).toBe('the original');
    const history = await t.client.file.history({ fullpath: 'keep.bin' });
    expect(history.list.map((h) => h.filesize)).toEqual([12]);
  });

  it('two PUTs of one path at once: both acknowledged, only whole bodies become versions, the last wins', async () => {
    const a = Buffer.alloc(3_000_000, 0x61);
    const b = Buffer.alloc(1_000_000, 0x62);
    let secondDone!: () => void;
    const second = new Promise<void>((resolve) => { secondDone = resolve; });
    const slow = putStream('/Library/both.bin', a.length, async (req) => {
      await new Promise<void>((resolve) => req.write(a.subarray(0, 1_000_000), () => resolve()));
      await second;
      req.end(a.subarray(1_000_000));
    });
    expect((await dav(url, 'PUT', '/Library/both.bin', { body: b.toString() })).status).toBe(201);
    secondDone();
    expect([201, 204]).toContain(await slow); // 201 or 204: the path did not exist when it began
    await t.vfs.flushAll();
    const sha1 = (x: Buffer): string => createHash('sha1').update(x).digest('hex');
    const { urls } = await t.client.file.downloadUrl({ fullpath: 'both.bin' });
    expect(sha1(Buffer.from(await (await fetch(urls[0]!)).arrayBuffer()))).toBe(sha1(a));
    const history = await t.client.file.history({ fullpath: 'both.bin' });
    for (const h of history.list) expect([sha1(a), sha1(b)]).toContain(h.filehash);
  });

  it('a file locked through WebDAV refuses the gateway\'s other writers (the mount) until unlocked', async () => {
    expect((await dav(url, 'PUT', '/Library/held.txt', { body: 'v1' })).status).toBe(201);
    await t.vfs.flushAll();
    const token = lockTokenOf(await dav(url, 'LOCK', '/Library/held.txt', { body: LOCK_BODY() }));
    expect(await vfsCode(t.vfs.open('/Library/held.txt', { write: true }))).toBe('ELOCKED');
    expect(await vfsCode(t.vfs.writeFile('/Library/held.txt', Buffer.from('mount')))).toBe('ELOCKED');
    expect((await dav(url, 'PUT', '/Library/held.txt', { body: 'v2', headers: { if: `(<${token}>)` } })).status).toBe(204);
    expect((await dav(url, 'UNLOCK', '/Library/held.txt', { headers: { 'lock-token': `<${token}>` } })).status).toBe(204);
    await t.vfs.writeFile('/Library/held.txt', Buffer.from('mount'));
    await t.vfs.flushAll();
    expect(await content('held.txt')).toBe('mount');
  });
});
