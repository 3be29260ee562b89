/**
 * The mount's two kernel transports (docs/fuse.md, Transports): FUSE over io_uring when the kernel offers
 * it, /dev/fuse when it does not or when asked. The kernel offers the rings only while the fuse module's
 * `enable_uring` parameter is on (it reads it when it starts a connection): each test sets it as it
 * needs (root) until its mount has started, and puts it back.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { access, constants, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { TransportState } from '../../../src/fuse/engine/binding.js';
import { sh, startMount, type MountHarness } from './harness.js';
import { waitFor } from '../../support/wait-for.js';

const T = 120_000;
const PARAM = '/sys/module/fuse/parameters/enable_uring';
const offered = existsSync(PARAM);
const settable = offered && (await access(PARAM, constants.W_OK).then(() => true, () => false));

/**
 * The parameter is the machine's: another run of these tests (another clone) may be setting it too. Held
 * by one mount start at a time, across processes (a lock file; one left by a killed run goes after 2 min).
 */
async function paramLock(): Promise<() => Promise<void>> {
  const lock = join(tmpdir(), 'cloudlib-test-enable-uring.lock');
  const take = async (): Promise<(() => Promise<void>) | undefined> => {
    try {
      await writeFile(lock, String(process.pid), { flag: 'wx' });
      return () => rm(lock, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const age = await stat(lock).then((st) => Date.now() - st.mtimeMs, () => 0);
      if (age > 120_000) await rm(lock, { force: true });
      return undefined;
    }
  };
  const release = await waitFor(`the lock ${lock}`, take, { until: (r) => r !== undefined, timeoutMs: 180_000, intervalMs: 50 });
  return release!;
}

/** Starts a mount with the parameter at `value`, waits for the kernel to start its session, puts the parameter back. */
async function mountWithParam(value: 'Y' | 'N', mount: Record<string, unknown>): Promise<MountHarness> {
  const unlock = await paramLock();
  const before = (await readFile(PARAM, 'utf8')).trim();
  await writeFile(PARAM, value);
  try {
    const h = await startMount({ mount });
    // The first request waits for INIT: the kernel has read the parameter when it is answered.
    await stat(join(h.mnt, 'Lib'));
    return h;
  } finally {
    await writeFile(PARAM, before);
    await unlock();
  }
}

const sha1 = (b: Buffer): string => createHash('sha1').update(b).digest('hex');

/** Small files written and read back, a large one, a folder renamed, files removed, a listing. */
async function workload(h: MountHarness): Promise<void> {
  const dir = join(h.mnt, 'Lib/work');
  await mkdir(dir);
  const small = Array.from({ length: 120 }, (_, i) => Buffer.alloc(100 + i * 37, i));
  for (const [i, b] of small.entries()) await writeFile(join(dir, `s${i}.bin`), b);
  const big = join(h.local, 'big.bin');
  await sh('dd', ['if=/dev/urandom', `of=${big}`, 'bs=1M', 'count=24', 'status=none']);
  await sh('cp', [big, join(dir, 'big.bin')]);
  await rename(dir, join(h.mnt, 'Lib/moved'));
  for (const [i, b] of small.entries()) expect(sha1(await readFile(join(h.mnt, 'Lib/moved', `s${i}.bin`)))).toBe(sha1(b));
  // Read back cold: the kernel's copy dropped first.
  await sh('dd', [`if=${join(h.mnt, 'Lib/moved/big.bin')}`, 'iflag=nocache', 'count=0', 'status=none']);
  expect(sha1(await readFile(join(h.mnt, 'Lib/moved/big.bin')))).toBe(sha1(await readFile(big)));
  for (let i = 0; i < 60; i++) await rm(join(h.mnt, 'Lib/moved', `s${i}.bin`));
  expect((await readdir(join(h.mnt, 'Lib/moved'))).length).toBe(61);
  const { stdout } = await sh('ls', ['-l', join(h.mnt, 'Lib/moved')]);
  expect(stdout).toContain('big.bin');
}

const transportOf = async (h: MountHarness): Promise<TransportState> => ((await h.call('mountCounters')) as { transport: TransportState }).transport;

describe('the kernel transports of the mount', () => {
  let h: MountHarness | undefined;
  afterEach(async () => {
    await h?.stop();
    h = undefined;
  });

  it.skipIf(!settable)('over io_uring: every request of files big and small, renames, deletes and listings comes from the rings', async () => {
    h = await mountWithParam('Y', { transport: 'uring' });
    await workload(h);
    const t = await transportOf(h);
    expect(t.transport).toBe('uring');
    expect(t.why).toBeUndefined();
    // A ring a CPU the kernel may have, as many buffers each as asked.
    const possible = (await readFile('/sys/devices/system/cpu/possible', 'utf8')).trim().split(',').map((r) => Number(r.split('-').at(-1)));
    expect(t.queues).toBe(Math.max(...possible) + 1);
    expect(t.depth).toBe(16);
    expect(t.ringRequests).toBeGreaterThan(500);
    // /dev/fuse still carries what the kernel never sends over the rings (forgets, interrupts).
    expect(t.devRequests).toBeLessThan(t.ringRequests / 10);
  }, T);

  it.skipIf(!settable)('a ring of one buffer a CPU: requests wait in the kernel for it, and all are served', async () => {
    h = await mountWithParam('Y', { transport: 'uring', ringDepth: 1 });
    await workload(h);
    const t = await transportOf(h);
    expect([t.transport, t.depth]).toEqual(['uring', 1]);
  }, T);

  it.skipIf(!settable)('transport "dev": the same from /dev/fuse while the kernel offers the rings', async () => {
    h = await mountWithParam('Y', { transport: 'dev' });
    await workload(h);
    const t = await transportOf(h);
    expect(t.transport).toBe('dev');
    expect(t.why).toMatch(/not asked for/);
    expect(t.ringRequests).toBe(0);
    expect(t.devRequests).toBeGreaterThan(500);
  }, T);

  it.skipIf(!settable)('the kernel not offering it: "auto" stays on /dev/fuse and says why, "uring" refuses to mount', async () => {
    h = await mountWithParam('N', {});
    const t = await transportOf(h);
    expect(t.transport).toBe('dev');
    expect(t.why).toMatch(/kernel does not offer FUSE over io_uring/);
    await writeFile(join(h.mnt, 'Lib/a.txt'), 'a');
    expect(await readFile(join(h.mnt, 'Lib/a.txt'), 'utf8')).toBe('a');
    await h.stop();
    h = undefined;
    await expect(mountWithParam('N', { transport: 'uring' })).rejects.toThrow(/over io_uring \(transport "uring"\): the kernel does not offer FUSE over io_uring/);
  }, T);

  it.skipIf(offered)('a kernel without FUSE over io_uring: "auto" stays on /dev/fuse and says why', async () => {
    h = await startMount();
    await stat(join(h.mnt, 'Lib'));
    const t = await transportOf(h);
    expect(t.transport).toBe('dev');
    expect(t.why).toMatch(/kernel does not offer FUSE over io_uring/);
  }, T);
});
