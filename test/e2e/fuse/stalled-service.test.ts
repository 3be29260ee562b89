/**
 * A service that stops answering (its process stopped), seen from a reader of the mount: a read of a
 * file that is not cached ends with EIO within the stall deadline instead of blocking its reader, also
 * one already part way through the file; once the service answers again the same reads succeed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { eventually, startMount, type MountHarness } from './harness.js';

const T = 180_000;
/** The documented stall deadline (15 s) and the service client's own timeout (30 s), with room to spare. */
const WITHIN_MS = 60_000;

describe('FUSE mount over a stalled service', () => {
  let h: MountHarness;
  let lib: string;
  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 0.2 }, env: { FUSE_TEST_BACKEND: 'service-process' } });
    lib = join(h.mnt, 'Lib');
  }, T);
  afterAll(async () => {
    await h?.call('signalService', { signal: 'SIGCONT' }).catch(() => undefined);
    await h?.stop();
  }, T);

  it('a read part way through an uncached file and a new read both fail with EIO, then work once it answers', async () => {
    const big = randomBytes(32 * 1024 * 1024);
    const small = randomBytes(300 * 1024);
    await h.call('remoteWrite', { path: '/Lib/big.bin', data: big.toString('base64') }, 60_000);
    await h.call('remoteWrite', { path: '/Lib/small.bin', data: small.toString('base64') });
    await eventually('the mount to show both files', async () => {
      const sizes = await Promise.all(['big.bin', 'small.bin'].map((n) => open(join(lib, n)).then(async (f) => { try { return (await f.stat()).size; } finally { await f.close(); } }, () => -1)));
      return sizes[0] === big.length && sizes[1] === small.length ? true : undefined;
    }, 20_000);

    const reader = await open(join(lib, 'big.bin'));
    try {
      const first = Buffer.alloc(512 * 1024);
      const { bytesRead } = await reader.read(first, 0, first.length, 0);
      expect(first.subarray(0, bytesRead).equals(big.subarray(0, bytesRead))).toBe(true);

      await h.call('signalService', { signal: 'SIGSTOP' });
      const started = Date.now();
      // The rest of the file, far past what one range request fetched before the stop: the reads return
      // what the kernel had, then EIO.
      const partWay = await (async () => {
        const piece = Buffer.alloc(1024 * 1024);
        for (let at = first.length; at < big.length;) {
          const n = await reader.read(piece, 0, piece.length, at).then((r) => r.bytesRead, (err: NodeJS.ErrnoException) => err.code ?? String(err));
          if (typeof n === 'string') return n;
          if (n === 0 || !piece.subarray(0, n).equals(big.subarray(at, at + n))) return `wrong bytes at ${at}`;
          at += n;
        }
        return 'whole';
      })();
      expect(partWay).toBe('EIO');
      const fresh = await readFile(join(lib, 'small.bin')).then(() => 'read', (err: NodeJS.ErrnoException) => err.code ?? String(err));
      expect(fresh).toBe('EIO');
      expect(Date.now() - started).toBeLessThan(WITHIN_MS);
    } finally {
      await reader.close();
    }

    await h.call('signalService', { signal: 'SIGCONT' });
    await eventually('small.bin to read whole once the service answers again', async () => {
      const data = await readFile(join(lib, 'small.bin')).catch(() => undefined);
      return data?.equals(small) ? true : undefined;
    }, 60_000);
    expect((await readFile(join(lib, 'big.bin'))).equals(big)).toBe(true);
  }, T);
});
