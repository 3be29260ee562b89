/**
 * A file kept open after an fsync has a record of what it held then in the journal; the crashes below
 * (kill -9) come before the writers flush again. Two regressions the reference model found:
 * - written on and flushed, a small file is sealed with a record that carries no bytes (what was written
 *   after the fsync is in the spool): replay took the fsync's record as still carrying the version's
 *   bytes, wrote them over the spool, found the sealed version different from its record and set it
 *   aside, so the flushed content never reached the service;
 * - written on, then replaced (a WebDAV PUT) and the replace uploaded: the fsync's record stayed, since
 *   the file had changed since it, and replay uploaded its older bytes over the replace.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';
import { readAll } from '../../../support/vfs.js';
import { ManualClock } from '../../../support/manual-clock.js';
import { waitFor } from '../../../support/wait-for.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/**
 * A gateway with a write-back delay of 1 s on a manual clock (it ends only when a test advances the
 * clock), and `restart`: kill -9 (the process gone with its uploads, the journal left) and a new gateway
 * on the same data folder.
 */
async function gateway(): Promise<{ vfs: GatewayVfs; remote: MemoryRemote; clock: ManualClock; restart: () => Promise<GatewayVfs> }> {
  const remote = new MemoryRemote({ name: 'A', id: '1' });
  const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-fsync-record-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const clock = new ManualClock();
  const options = { libraries: [{ name: 'A', remote }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 5, retryMaxMs: 20, delayMs: 1000 }, clock };
  const vfs = await createVfs(options);
  cleanups.push(() => vfs.close());
  const restart = async (): Promise<GatewayVfs> => {
    await vfs.writeBack.uploads.close();
    const again = await createVfs(options);
    cleanups.push(() => again.close());
    return again;
  };
  return { vfs, remote, clock, restart };
}

describe('an fsync\'s record of a file kept open, then a crash', () => {
  it('regression: replay keeps the flushed bytes and uploads them', async () => {
    // The write-back delay never ends here: the file is sealed by its flush alone.
    const { vfs, remote, restart } = await gateway();
    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    await h.write(0, Buffer.from('first'));
    await h.fsync();
    await h.write(0, Buffer.from('again'));
    await h.flush();
    expect(vfs.status().uploads, 'not uploaded before the crash').toEqual([]);
    const again = await restart();
    expect(await readAll(again, '/A/f')).toBe('again');
    await again.flushAll();
    expect(remote.read('f').toString()).toBe('again');
  });

  it('regression: a replace acknowledged after the fsync stays the file\'s content', async () => {
    // One write-back delay passes: the replace is uploaded; the open file, changed since its fsync, is
    // not yet quiet.
    const { vfs, remote, clock, restart } = await gateway();
    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    await h.fsync();
    await h.write(0, Buffer.from('unflushed'));
    await vfs.writeFile('/A/f', Buffer.from('replaced'));
    clock.advance(1000);
    await waitFor('the replace uploaded', () => remote.commits.some((c) => c.data.toString() === 'replaced') && vfs.status().uploads.length === 0);
    const again = await restart();
    await again.flushAll();
    expect(remote.paths()).toEqual(['f']);
    expect(remote.read('f').toString()).toBe('replaced');
  });
});
