/**
 * An outage through the mount: with the service away, a file read before is read again, the folder is
 * listed, a new file is accepted; when the service is back the new file is uploaded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { eventually, startMount, type MountHarness } from './harness.js';
import { pause } from '../../support/wait-for.js';

const T = 90_000;

describe('FUSE mount while the service is away', () => {
  let h: MountHarness;
  let lib: string;
  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 0.2 }, env: { FUSE_TEST_BACKEND: 'service' } });
    lib = join(h.mnt, 'Lib');
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('reads what it read before, lists, takes a new file, and uploads it when the service is back', async () => {
    await h.call('remoteWrite', { path: '/Lib/report.txt', data: Buffer.from('the report').toString('base64') });
    await eventually('the mount to list report.txt', async () => ((await readdir(lib)).includes('report.txt') ? true : undefined), 10_000);
    expect(await readFile(join(lib, 'report.txt'), 'utf8')).toBe('the report');
    await h.call('faults', { down: true });
    // Past the kernel's caches (0.2 s): the gateway answers from its own.
    // eslint-disable-next-line no-restricted-syntax -- the kernel's caches expire with time; no event marks it
    await pause(500);
    expect(await readdir(lib)).toContain('report.txt');
    expect(await readFile(join(lib, 'report.txt'), 'utf8')).toBe('the report');
    await writeFile(join(lib, 'offline.txt'), 'written while the service was away');
    expect(await readFile(join(lib, 'offline.txt'), 'utf8')).toBe('written while the service was away');
    await h.call('faults', { down: false });
    await h.call('flushAll');
    expect(Buffer.from(await h.call<string>('remoteRead', { path: '/Lib/offline.txt' }), 'base64').toString()).toBe('written while the service was away');
  }, T);
});
