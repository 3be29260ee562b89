/**
 * Failures the reference model through a mount (reference-model.test.ts) found, each kept as a test of
 * its own: a mount with the engine's answers and, where the kernel grants it, passthrough on.
 */
import { constants } from 'node:fs';
import { mkdir, open, readFile, stat } from 'node:fs/promises';
import { release } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMount, type MountHarness } from './harness.js';

const T = 60_000;
const [major, minor] = release().split('.').map(Number) as [number, number];
/** Passthrough needs Linux 6.9 and CAP_SYS_ADMIN (root here). */
const passthrough = (major > 6 || (major === 6 && minor >= 9)) && process.getuid?.() === 0;

describe('regressions the reference model found', () => {
  let h: MountHarness;
  beforeAll(async () => {
    // The engine's names of a folder stay valid all through (no pause of a busy machine lets them lapse).
    h = await startMount({ mount: { attrTimeoutS: 600, ...(passthrough ? { writeMode: 'passthrough' } : {}) }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_UPLOAD_DELAY_MS: '600000' } });
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('regression: a create the engine answered of a name another front end made meanwhile opens that file emptied: no EEXIST at close', async () => {
    const folder = join(h.mnt, 'Lib', 'made-meanwhile');
    await mkdir(folder);
    // The engine holds the folder's names: it answers this lookup, and the create below, itself.
    await expect(stat(join(folder, 'f.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    await h.call('vfsWrite', { path: '/Lib/made-meanwhile/f.txt', data: Buffer.from('by another front end').toString('base64') });
    const creates = async (): Promise<number> => (await h.call<{ answered: { creates: number } }>('mountCounters')).answered.creates;
    const before = await creates();
    const fh = await open(join(folder, 'f.txt'), constants.O_CREAT | constants.O_WRONLY | constants.O_TRUNC, 0o644);
    try {
      await fh.write('through the mount');
    } finally {
      await fh.close();
    }
    expect(await creates()).toBe(before + 1);
    expect(await readFile(join(folder, 'f.txt'), 'utf8')).toBe('through the mount');
    await h.call('flushAll');
    expect(Buffer.from(await h.call<string>('remoteRead', { path: '/Lib/made-meanwhile/f.txt' }), 'base64').toString()).toBe('through the mount');
  }, T);
});
