/**
 * A small file kept open after an fsync has its bytes in the fsync's journal record. Written on and then
 * flushed, it is sealed with a record that carries no bytes: what was written after the fsync is in the
 * spool. A crash (kill -9) came next: replay took the fsync's record as still carrying the version's
 * bytes, wrote them over the spool, found the sealed version different from its record and set it
 * aside, so the flushed content never reached the service (regression; the reference model found it).
 */
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, MemoryRemote } from '../../../../src/vfs/index.js';
import { readAll } from '../../../support/vfs.js';
import { ManualClock } from '../../../support/manual-clock.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe('an fsync\'s record, then a seal of other bytes, then a crash', () => {
  it('regression: replay keeps the flushed bytes and uploads them', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-fsync-seal-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    // The write-back delay never ends here (a manual clock): the file is sealed by its flush alone.
    const clock = new ManualClock();
    const options = { libraries: [{ name: 'A', remote }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 5, retryMaxMs: 20, delayMs: 1000 }, clock };
    const vfs = await createVfs(options);
    cleanups.push(() => vfs.close());

    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    await h.write(0, Buffer.from('first'));
    await h.fsync();
    await h.write(0, Buffer.from('again'));
    await h.flush();
    expect(vfs.status().uploads, 'not uploaded before the crash').toEqual([]);
    // kill -9: the process is gone with its uploads; the journal stays.
    await vfs.writeBack.uploads.close();

    const again = await createVfs(options);
    cleanups.push(() => again.close());
    expect(await readAll(again, '/A/f')).toBe('again');
    await again.flushAll();
    expect(remote.read('f').toString()).toBe('again');
  });
});
