/**
 * Bytes waiting to upload are bounded: a writer waits while the queue is full and goes on once uploads
 * make room; one that waits too long gets ENOSPC; a file larger than the bound fails at once, before
 * anything of it is journaled.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UploadBackpressure } from '../../../src/vfs/upload-backpressure.js';
import { FaultyRemote, MemoryRemote, openVfs } from '../../../src/vfs/index.js';
import { vfsCode } from '../../support/vfs.js';
import { waitFor } from '../../support/wait-for.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe('upload backpressure', () => {
  it('a writer waits while the queue is full and goes on once uploads make room', async () => {
    let queued = 900;
    const bp = new UploadBackpressure({ maxBytes: 1000, pendingBytes: () => queued, pollMs: 5 });
    await bp.admit('/A/small', 100); // fits beside the queue
    let done = false;
    const writing = bp.admit('/A/f', 200).then(() => { done = true; });
    await waitFor('the writer to wait', () => bp.waiting, { until: (n) => n === 1 });
    expect(done).toBe(false);
    queued = 700; // an upload finished
    await writing;
    expect(bp.waiting).toBe(0);
  });

  it('ENOSPC when no room comes in time, and at once for what can never fit', async () => {
    const bp = new UploadBackpressure({ maxBytes: 1000, pendingBytes: () => 900, waitMs: 30, pollMs: 5 });
    const slow = await bp.admit('/A/f', 200).then(() => undefined, (e: Error & { code?: string }) => e);
    expect(slow?.code).toBe('ENOSPC');
    expect(slow?.message).toMatch(/900 bytes wait to upload on this machine and 200 more do not fit \(1000 bytes, journal\.max_pending_mb\)/);
    const never = await bp.admit('/A/huge', 1001).then(() => undefined, (e: Error & { code?: string }) => e);
    expect(never?.message).toMatch(/1001 bytes can never fit/);
    // At a seal nothing waits: only what can never fit is refused.
    await bp.admit('/A/f', 200, undefined, { wait: false });
    expect(() => new UploadBackpressure({ maxBytes: -1, pendingBytes: () => 0 })).toThrow(/maxBytes/);
  });

  it('through the Vfs: a file larger than the bound is refused before anything is journaled; writes wait for uploads', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    const faulty = new FaultyRemote(remote);
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-bp-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const vfs = await openVfs({ libraries: [{ name: 'A', id: '1', remote: faulty }], dataDir, feedIntervalMs: 0, maxPendingBytes: 256 * 1024, upload: { retryBaseMs: 10, retryMaxMs: 20 } });
    cleanups.push(() => vfs.close());
    expect(await vfsCode(vfs.writeFile('/A/huge.bin', Buffer.alloc(300 * 1024)))).toBe('ENOSPC');
    expect(await vfsCode(vfs.stat('/A/huge.bin'))).toBe('ENOENT');
    const h = await vfs.open('/A/big.bin', { write: true, create: true });
    expect(await vfsCode(h.write(0, Buffer.alloc(300 * 1024)))).toBe('ENOSPC');
    await h.release();

    // The service stalls: one file waits in the queue; a second one that does not fit beside it is
    // written once the service is back and the first one's upload made room.
    await vfs.readdir('/A'); // the listing known: new names are made while the service is away
    faulty.down(3_600_000);
    await vfs.writeFile('/A/first.bin', Buffer.alloc(200 * 1024, 1));
    await waitFor('first.bin in the upload queue with its size', () => vfs.status().uploads, { until: (u) => u.some((x) => x.fullpath === 'first.bin' && x.size === 200 * 1024) });
    const writing = vfs.writeFile('/A/second.bin', Buffer.alloc(100 * 1024, 2));
    faulty.heal();
    await writing;
    await vfs.flushAll();
    expect(await remote.stat('second.bin')).toMatchObject({ size: 100 * 1024 });
  });
});
