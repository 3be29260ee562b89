/**
 * A file kept open after an fsync is sealed by the write-back itself once unchanged for the write-back
 * delay (uploadWhenQuiet). That seal is no acknowledgement of a writer: when a replace comes after it, the
 * writers' next flush or close still acknowledges what they wrote, after the replace, so the last
 * acknowledged content wins whether or not the quiet seal came first.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, FaultyRemote, MemoryRemote } from '../../../../src/vfs/index.js';
import { readAll } from '../../../support/vfs.js';
import { waitFor } from '../../../support/wait-for.js';
import { ManualClock } from '../../../support/manual-clock.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe('a quiet seal, then a replace, then the writers\' close', () => {
  it('regression: the close acknowledges the written bytes after the replace; the service ends with them', async () => {
    // The model found it (seed 1160408617): the close found the version sealed by the write-back delay,
    // acknowledged nothing, and the replace made meanwhile was uploaded as the file's last content.
    const clock = new ManualClock();
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-wbq-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const faulty = new FaultyRemote(remote);
    const vfs = await createVfs({ libraries: [{ name: 'A', remote: faulty }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 5, retryMaxMs: 20, delayMs: 1000 }, clock });
    cleanups.push(() => vfs.close());

    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    await h.fsync();
    await h.write(1, Buffer.from([0]));
    faulty.inject({ kind: 'fail', code: 'EIO', methods: ['commit'] });
    // Unchanged for the delay after the write: the write-back seals what the handle holds and queues it.
    clock.advance(1000);
    clock.advance(1000);
    await waitFor('the quiet seal queued for upload', () => vfs.status().uploads.some((u) => u.fullpath === 'f'));
    await vfs.writeFile('/A/f', Buffer.alloc(0));
    expect(await readAll(vfs, '/A/f')).toBe('');
    // The close acknowledges the handle's bytes, after the replace.
    await h.release();
    expect(await readAll(vfs, '/A/f')).toBe('\0\0');
    faulty.heal();
    await vfs.flushAll();
    expect(remote.read('f')).toEqual(Buffer.from([0, 0]));
  });
});
