/**
 * An upload that stops moving (the service took some bytes, then nothing: a full disk, a stopped service)
 * shows it in the status: its bytes taken and since when nothing moved.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createVfs, MemoryRemote } from '../../../../src/vfs/index.js';
import type { CommitOptions, CommitSource } from '../../../../src/vfs/remote.js';

describe('a stalled upload', () => {
  it('status shows the bytes the service took and when it last took any', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cloudlib-stall-'));
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    let reached: () => void = () => undefined;
    const stalled = new Promise<void>((r) => { reached = r; });
    // The service takes 100 bytes, then nothing until the upload is called off.
    remote.commit = (_p: string, _s: CommitSource, opts?: CommitOptions) => new Promise((_resolve, reject) => {
      opts?.onProgress?.(100, 1000);
      reached();
      opts?.signal?.addEventListener('abort', () => reject(new Error('called off')), { once: true });
    });
    const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir: dir, feedIntervalMs: 0, upload: { delayMs: 0 } });
    try {
      const before = Date.now();
      await vfs.writeFile('/A/big.bin', Buffer.alloc(1000, 1));
      await stalled;
      const [u] = vfs.status().uploads;
      expect(u).toMatchObject({ state: 'uploading', sentBytes: 100, size: 1000 });
      expect(u!.progressMs).toBeGreaterThanOrEqual(before);
      expect(u!.progressMs).toBeLessThanOrEqual(Date.now());
    } finally {
      await vfs.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
