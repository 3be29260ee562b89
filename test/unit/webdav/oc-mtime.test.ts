/**
 * ownCloud's X-OC-Mtime on PUT (what rclone's `--webdav-vendor owncloud` sends): the file shows the
 * source's time, answered `X-OC-Mtime: accepted`; a bad value is a 400 that changes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dav } from '../../support/dav-http.js';
import { startMemoryDav, type MemoryDav } from '../../support/serve-memory-dav.js';
import { ocMtimeOf } from '../../../src/webdav/oc-mtime.js';
import { DavError } from '../../../src/webdav/errors.js';
import type { MemoryRemote } from '../../../src/vfs/memory-remote.js';

describe('X-OC-Mtime', { timeout: 20_000 }, () => {
  let d: MemoryDav;
  const lib = (): MemoryRemote => d.remotes.get('Library')!;
  beforeAll(async () => {
    d = await startMemoryDav();
  });
  afterAll(async () => {
    await d?.close();
  });

  it('reads whole and fractional seconds; refuses anything else', () => {
    expect(ocMtimeOf(undefined)).toBeUndefined();
    expect(ocMtimeOf('1700000000')).toBe(1_700_000_000_000);
    expect(ocMtimeOf(' 1700000000.25 ')).toBe(1_700_000_000_250);
    expect(ocMtimeOf('0')).toBe(0);
    for (const bad of ['', 'yesterday', '-5', '1e9', '0x10', '1700000000,1700000001', '1.', '.5', '99999999999999999999', 'Tue, 03 Jan 2023 11:00:00 GMT']) {
      expect(() => ocMtimeOf(bad), bad).toThrow(DavError);
    }
    expect(() => ocMtimeOf(['1', '2'])).toThrow(/X-OC-Mtime/);
  });

  it('a new file shows the time sent, before and after its upload', async () => {
    const put = await dav(d.url, 'PUT', '/Library/new.txt', { body: 'new', headers: { 'x-oc-mtime': '1600000000' } });
    expect(put.status).toBe(201);
    expect(put.headers['x-oc-mtime']).toBe('accepted');
    expect((await d.vfs.stat('/Library/new.txt')).mtimeMs).toBe(1_600_000_000_000);
    await d.vfs.flushAll();
    expect(lib().read('new.txt').toString()).toBe('new');
    expect((await d.vfs.stat('/Library/new.txt')).mtimeMs).toBe(1_600_000_000_000);
    const props = await dav(d.url, 'PROPFIND', '/Library/new.txt', { headers: { depth: '0' } });
    expect(props.body).toContain(new Date(1_600_000_000_000).toUTCString());
  });

  it('a fractional time replaces an uploaded file\'s, to the millisecond', async () => {
    await d.vfs.writeFile('/Library/old.txt', Buffer.from('before'));
    await d.vfs.flushAll();
    const put = await dav(d.url, 'PUT', '/Library/old.txt', { body: 'after', headers: { 'x-oc-mtime': '1500000000.123' } });
    expect(put.status).toBe(204);
    expect(put.headers['x-oc-mtime']).toBe('accepted');
    await d.vfs.flushAll();
    expect(lib().read('old.txt').toString()).toBe('after');
    expect((await d.vfs.stat('/Library/old.txt')).mtimeMs).toBe(1_500_000_000_123);
  });

  it('a bad value is a 400 that changes nothing: no file made, none replaced', async () => {
    const put = await dav(d.url, 'PUT', '/Library/never.txt', { body: 'x', headers: { 'x-oc-mtime': 'yesterday' } });
    expect(put.status).toBe(400);
    expect(put.body).toMatch(/X-OC-Mtime.*'yesterday'.*nothing was changed/);
    expect(put.headers['x-oc-mtime']).toBeUndefined();
    await expect(d.vfs.stat('/Library/never.txt')).rejects.toMatchObject({ code: 'ENOENT' });

    await d.vfs.writeFile('/Library/kept.txt', Buffer.from('kept'));
    await d.vfs.setTimes('/Library/kept.txt', 1_400_000_000_000);
    await d.vfs.flushAll();
    const versions = await lib().history('kept.txt', 100);
    const bad = await dav(d.url, 'PUT', '/Library/kept.txt', { body: 'replaced', headers: { 'x-oc-mtime': '-1' } });
    expect(bad.status).toBe(400);
    await d.vfs.flushAll();
    expect(lib().read('kept.txt').toString()).toBe('kept');
    expect(await lib().history('kept.txt', 100)).toEqual(versions);
    expect((await d.vfs.stat('/Library/kept.txt')).mtimeMs).toBe(1_400_000_000_000);
  });

  it('without the header, nothing is answered of it', async () => {
    const put = await dav(d.url, 'PUT', '/Library/plain.txt', { body: 'plain' });
    expect(put.status).toBe(201);
    expect(put.headers['x-oc-mtime']).toBeUndefined();
  });
});
