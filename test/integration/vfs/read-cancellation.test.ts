/**
 * Cancellation reaches the range fetch: a read whose caller gives up (an aborted signal, a FUSE
 * deadline passed, a WebDAV client gone) stops the fetch it started. The service here never answers a
 * range (openRange waits until its signal aborts), so only the signal can end the fetch.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { createVfs, MemoryRemote, type GatewayVfs } from '../../../src/vfs/index.js';
import type { RangeCallOptions } from '../../../src/vfs/remote.js';
import { DEFAULT_DEADLINES, FuseOperations } from '../../../src/fuse/operations.js';
import { createWebdavServer } from '../../../src/webdav/index.js';
import { silentLogger } from '../../../src/shared/log.js';

/** A library whose ranges never arrive: each openRange waits for its signal, and records how it ended. */
class StalledRangesRemote extends MemoryRemote {
  readonly fetches: { signal?: AbortSignal; ended: Promise<unknown> }[] = [];
  private onFetch: (() => void) | undefined;

  override openRange(_fullpath: string, _start: number, _end: number, opts?: RangeCallOptions): Promise<Readable> {
    const signal = opts?.signal;
    const ended = new Promise<Readable>((_resolve, reject) => {
      signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
    this.fetches.push({ signal, ended: ended.catch((err: unknown) => err) });
    this.onFetch?.();
    return ended;
  }

  /** Resolves when a range fetch has started. */
  fetchStarted(): Promise<void> {
    if (this.fetches.length > 0) return Promise.resolve();
    return new Promise((resolve) => { this.onFetch = resolve; });
  }
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function stalledVfs(size: number): Promise<{ vfs: GatewayVfs; remote: StalledRangesRemote }> {
  const remote = new StalledRangesRemote({ name: 'Lib', id: '1' });
  remote.putFile('big.bin', Buffer.alloc(size, 7));
  const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-cancel-'));
  const vfs = await createVfs({ libraries: [{ name: 'Lib', remote }], dataDir, feedIntervalMs: 0 });
  cleanups.push(async () => { await vfs.close(); await rm(dataDir, { recursive: true, force: true }); });
  return { vfs, remote };
}

describe('cancellation of reads', () => {
  it('FileHandle.read: aborting its signal stops the range fetch, and the read fails with EIO', async () => {
    const { vfs, remote } = await stalledVfs(64 * 1024);
    const handle = await vfs.open('/Lib/big.bin', { read: true });
    const gone = new AbortController();
    const read = handle.read(0, 4096, { signal: gone.signal });
    await remote.fetchStarted();
    gone.abort(new Error('caller gave up'));
    await expect(read).rejects.toMatchObject({ code: 'EIO' });
    expect(remote.fetches[0]!.signal?.aborted).toBe(true);
    expect(await remote.fetches[0]!.ended).toMatchObject({ message: 'caller gave up' });
    await handle.release();
  });

  it('FUSE: a read whose deadline passes answers EIO and stops its range fetch', async () => {
    const { vfs, remote } = await stalledVfs(64 * 1024);
    const ops = new FuseOperations({
      vfs, ownership: { uid: 1000, gid: 100, umask: 0o022, readOnly: false },
      deadlines: { ...DEFAULT_DEADLINES, dataMs: 50 }, logger: silentLogger,
    }).toNative();
    const call = (name: string, ...args: unknown[]): Promise<unknown[]> => new Promise((resolve) => ops[name]!(...args, (...answer: unknown[]) => resolve(answer)));
    const [code, fh] = await call('open', '/Lib/big.bin', 0);
    expect(code).toBe(0);
    expect(await call('read', '/Lib/big.bin', fh, Buffer.alloc(4096), 4096, 0)).toEqual([-5]);
    // The deadline aborted the fetch: it settles (it would wait for ever otherwise).
    expect(await remote.fetches[0]!.ended).toMatchObject({ message: expect.stringContaining('deadline') });
    expect(remote.fetches[0]!.signal?.aborted).toBe(true);
    await call('release', '/Lib/big.bin', fh);
  });

  it.each([['a small file (one range)', 64 * 1024], ['a large file (read-ahead windows)', 6 * 1024 * 1024]])('WebDAV: a GET whose client disconnects stops the range fetch: %s', async (_what, size) => {
    const { vfs, remote } = await stalledVfs(size);
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-cancel-dav-'));
    const server = createWebdavServer({ vfs, anonymous: { readOnly: true }, dataDir, logger: silentLogger });
    const url = new URL(await server.listen('127.0.0.1', 0));
    cleanups.push(async () => { await server.close(); await rm(dataDir, { recursive: true, force: true }); });
    const req = request({ host: url.hostname, port: url.port, path: '/Lib/big.bin', method: 'GET' });
    req.on('error', () => undefined); // destroyed below
    req.end();
    await remote.fetchStarted();
    req.destroy();
    expect(await remote.fetches[0]!.ended).toMatchObject({ message: expect.stringContaining('closed the connection') });
    expect(remote.fetches[0]!.signal?.aborted).toBe(true);
  });
});
