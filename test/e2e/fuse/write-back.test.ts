/**
 * The write-back's promises through a real mount over the embedded service: a file emptied and refilled
 * (`echo x > file`) never shows empty on the service; the time a program saw does not move back once the
 * upload lands; a lock another front end holds refuses the mount's writers (EACCES).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sh, startMount, type MountHarness } from './harness.js';

const T = 90_000;

describe('FUSE write-back over the embedded service', () => {
  let h: MountHarness;
  let lib: string;

  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 1 }, env: { FUSE_TEST_BACKEND: 'service' } });
    lib = join(h.mnt, 'Lib');
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('echo x > existing file: the service gets the new content, never an empty version', async () => {
    const file = join(lib, 'notes.txt');
    await writeFile(file, 'thirty bytes of the first text');
    await h.call('flushAll');
    await sh('sh', ['-c', `echo x > '${file}'`]);
    await sh('sh', ['-c', `cp /etc/hostname '${file}'`]);
    await h.call('flushAll');
    const sizes = await h.call<number[]>('remoteHistory', { path: '/Lib/notes.txt' });
    expect(sizes.length).toBeGreaterThanOrEqual(2);
    expect(sizes).not.toContain(0);
  }, T);

  it('the modification time a program saw stays after the upload', async () => {
    const file = join(lib, 'saved.txt');
    await writeFile(file, 'saved');
    const seen = (await stat(file)).mtimeMs;
    await h.call('flushAll');
    // Past the kernel's attribute cache (1 s here): the gateway answers again, from the service's entry.
    await new Promise((r) => setTimeout(r, 1500));
    expect((await stat(file)).mtimeMs).toBe(seen);
  }, T);

  it('a file locked through another front end of the gateway refuses the mount (EACCES) until unlocked', async () => {
    const file = join(lib, 'held.txt');
    await writeFile(file, 'v1');
    await h.call('flushAll');
    await h.call('lockAs', { path: '/Lib/held.txt', locked: true, holder: 'webdav' });
    await expect(writeFile(file, 'from the mount')).rejects.toMatchObject({ code: 'EACCES' });
    await h.call('lockAs', { path: '/Lib/held.txt', locked: false, holder: 'webdav' });
    await writeFile(file, 'from the mount');
    await h.call('flushAll');
    expect(Buffer.from(await h.call<string>('remoteRead', { path: '/Lib/held.txt' }), 'base64').toString()).toBe('from the mount');
  }, T);
});
