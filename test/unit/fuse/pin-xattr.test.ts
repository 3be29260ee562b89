/** `user.cloudlib.pin` through the operation table (no kernel) over the gateway's Vfs: pin, read back, inherited, unpin, refused. */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_DEADLINES, FuseOperations } from '../../../src/fuse/operations.js';
import { silentLogger } from '../../../src/shared/log.js';
import { MemoryRemote, openVfs } from '../../../src/vfs/index.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe('user.cloudlib.pin', () => {
  it('pins and unpins a folder; what is inside reads as pinned; bad values and a pin too large are refused', async () => {
    const remote = new MemoryRemote({ name: 'Lib', id: '1' });
    await remote.mkdir('docs');
    remote.putFile('docs/a.txt', Buffer.from('alpha'));
    remote.putFile('big.bin', Buffer.alloc(512 * 1024));
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-pinx-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const vfs = await openVfs({ libraries: [{ name: 'Lib', id: '1', remote }], dataDir, feedIntervalMs: 0, cache: { diskBytes: 256 * 1024, minFreePercent: 0 } });
    cleanups.push(() => vfs.close());
    const ops = new FuseOperations({ vfs, ownership: { uid: 1000, gid: 100, umask: 0o027, readOnly: false }, deadlines: DEFAULT_DEADLINES, logger: silentLogger }).toNative();
    const call = (name: string, ...args: unknown[]): Promise<unknown[]> => new Promise((resolve) => ops[name]!(...args, (...answer: unknown[]) => resolve(answer)));
    const get = async (path: string): Promise<string> => {
      const buf = Buffer.alloc(4);
      const [n] = (await call('getxattr', path, 'user.cloudlib.pin', buf)) as [number];
      return n < 0 ? `errno ${n}` : buf.subarray(0, n).toString();
    };

    expect(await get('/Lib/docs/a.txt')).toBe('0');
    expect(await call('setxattr', '/Lib/docs', 'user.cloudlib.pin', Buffer.from('1'), 0, 0)).toEqual([0]);
    expect(await get('/Lib/docs')).toBe('1');
    expect(await get('/Lib/docs/a.txt')).toBe('1');
    await vfs.pinsFetched();
    expect(vfs.status().pins).toMatchObject({ pins: ['/Lib/docs'], files: 1, pendingFiles: 0 });
    expect(await call('setxattr', '/Lib/docs', 'user.cloudlib.pin', Buffer.from('maybe'), 0, 0)).toEqual([-22]);
    expect(await call('setxattr', '/Lib/big.bin', 'user.cloudlib.pin', Buffer.from('1'), 0, 0)).toEqual([-28]); // ENOSPC: larger than the cache
    expect(await get('/Lib/big.bin')).toBe('0');
    expect(await call('setxattr', '/Lib/nothing', 'user.cloudlib.pin', Buffer.from('1'), 0, 0)).toEqual([-2]);
    expect(await call('removexattr', '/Lib/docs', 'user.cloudlib.pin')).toEqual([0]);
    expect(await get('/Lib/docs/a.txt')).toBe('0');
    expect(vfs.status().pins).toMatchObject({ pins: [], files: 0 });
  });
});
