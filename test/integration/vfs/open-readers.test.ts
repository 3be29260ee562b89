/**
 * A read handle keeps the version it opened, as a local disk keeps an unlinked file readable until it is
 * closed: through an unlink by the gateway, and through a new file written at the same name.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceAvailable, startTestVfs, vfsCode, type TestVfs } from '../../support/vfs.js';
import { serviceReader } from '../../support/drive-scenarios.js';
import { waitFor } from '../../support/wait-for.js';

const withService = await serviceAvailable();

describe.skipIf(!withService)('open read handles over the embedded service', { timeout: 60_000 }, () => {
  let t: TestVfs;
  beforeAll(async () => { t = await startTestVfs(); });
  afterAll(async () => { await t?.close(); });

  const content = (n: number, seed: number): Buffer => {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = (i * seed) & 0xff;
    return b;
  };

  it('unlinked while read: the handle reads it whole, the service deletes it when the handle closes', async () => {
    const data = content(20 * 1024 * 1024, 7);
    await t.vfs.writeFile('/Library/read-me.bin', data);
    await t.vfs.flushAll();
    const r = await t.vfs.open('/Library/read-me.bin', { read: true });
    const parts = [await r.read(0, 1024 * 1024)];
    await t.vfs.unlink('/Library/read-me.bin');
    expect(await vfsCode(t.vfs.stat('/Library/read-me.bin'))).toBe('ENOENT');
    for (let at = 1024 * 1024; at < data.length; at += 4 * 1024 * 1024) parts.push(await r.read(at, 4 * 1024 * 1024));
    expect(Buffer.concat(parts).equals(data)).toBe(true);
    await r.release();
    await waitFor('read-me.bin gone from the service', () => t.client.file.info({ fullpath: 'read-me.bin' }).then(() => 'still there', () => 'gone'), { until: (v) => v === 'gone' });
  });

  it('a new file at the name of one unlinked while read: the handle keeps the old bytes, the new ones land', async () => {
    const old = content(6 * 1024 * 1024, 3);
    await t.vfs.writeFile('/Library/swap.bin', old);
    await t.vfs.flushAll();
    const r = await t.vfs.open('/Library/swap.bin', { read: true });
    await r.read(0, 4096);
    await t.vfs.unlink('/Library/swap.bin');
    await t.vfs.writeFile('/Library/swap.bin', Buffer.from('the new file'));
    await t.vfs.flushAll();
    expect((await r.read(0, old.length + 1)).equals(old)).toBe(true);
    await r.release();
    await t.vfs.flushAll();
    expect((await serviceReader(() => t.client).read('swap.bin')).toString()).toBe('the new file');
  });
});
