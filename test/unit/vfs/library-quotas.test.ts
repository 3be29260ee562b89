/**
 * The free space writes are checked against is the service's quota as last told: asked at the first
 * write, then asked again in the background once 10 s old, so that a write never waits for it after the
 * first. Time is a manual clock here.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createVfs, MemoryRemote } from '../../../src/vfs/index.js';
import { vfsCode } from '../../support/vfs.js';
import { waitFor } from '../../support/wait-for.js';
import { ManualClock } from '../../support/manual-clock.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe('library quotas', () => {
  it('writes are checked against the quota last told; it is asked again in the background once 10 s old', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1', capacity: 1000 });
    let asked = 0;
    const quota = remote.quota.bind(remote);
    remote.quota = async (...args) => { asked++; return quota(...args); };
    const clock = new ManualClock();
    const dir = await mkdtemp(join(tmpdir(), 'cloudlib-quotas-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir: dir, feedIntervalMs: 0, clock });
    cleanups.push(() => vfs.close());

    await vfs.writeFile('/A/first.bin', Buffer.alloc(100));
    expect(asked).toBe(1);
    // Another client fills the library; within 10 s the gateway goes by what it was told.
    remote.putFile('other.bin', Buffer.alloc(850));
    clock.advance(10_000);
    await vfs.writeFile('/A/within.bin', Buffer.alloc(100));
    expect(asked).toBe(1);
    // Older than that: this write still goes by the old figure, and the quota is asked behind it.
    clock.advance(1);
    await vfs.writeFile('/A/past.bin', Buffer.alloc(10));
    // Once the answer is in, a growth of 500 bytes is refused. The probe changes nothing either way: a
    // declared length refused is refused before the body is read, and a body that fails leaves no file.
    const body: AsyncIterable<Buffer> = { [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(new Error('500 bytes let through')) }) };
    await waitFor('a growth of 500 bytes refused', () => vfsCode(vfs.writeFile('/A/too-big.bin', body, undefined, { size: 500 })), { until: (c) => c === 'ENOSPC' });
    expect(asked).toBe(2);
    expect(await vfsCode(vfs.stat('/A/too-big.bin'))).toBe('ENOENT');
  });
});
