/**
 * mountVfs refuses bad options before it touches anything (the mount point is not even looked at).
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { mountVfs, type MountOptions } from '../../../src/fuse/index.js';
import { wantsPassthrough } from '../../../src/fuse/mount.js';
import { silentLogger } from '../../../src/shared/log.js';
import { MemoryVfs } from '../../support/memory-vfs.js';

const base = (extra: Partial<MountOptions>): MountOptions => ({ vfs: new MemoryVfs(), mountpoint: '/nonexistent/never-made', logger: silentLogger, ...extra });

describe('mountVfs options', () => {
  it.each([
    [{ spoolWritebackAheadBytes: 1000 }, /spoolWritebackAheadBytes: expected a whole number of KiB/],
    [{ spoolWritebackAheadBytes: -1024 }, /spoolWritebackAheadBytes/],
    [{ spoolWritebackAheadBytes: 2 ** 33 }, /spoolWritebackAheadBytes/],
    [{ spoolSyncAheadBytes: 1000 }, /spoolSyncAheadBytes: expected a whole number of KiB/],
    [{ spoolSyncAheadBytes: 'big' }, /spoolSyncAheadBytes/],
    [{ readerThreads: 0 }, /readerThreads: expected an integer from 1 to 8/],
    [{ readerThreads: 9 }, /readerThreads/],
    [{ attrTimeoutS: -1 }, /attrTimeoutS/],
    [{ readAheadBytes: 0 }, /readAheadBytes: expected a whole number of 4 KiB pages/],
    [{ readAheadBytes: 6000 }, /readAheadBytes/],
    [{ readAheadBytes: 128 * 1024 * 1024 }, /readAheadBytes/],
    [{ transport: 'fast' }, /transport: expected one of "auto", "uring", "dev"/],
    [{ ringDepth: 0 }, /ringDepth: expected an integer from 1 to 256/],
    [{ ringDepth: 300 }, /ringDepth/],
    [{ writeMode: 'cached' }, /writeMode: expected one of "auto", "writeback", "passthrough"/],
  ] as const)('%j is refused', async (extra, message) => {
    await expect(mountVfs(base(extra as Partial<MountOptions>))).rejects.toThrow(message);
  });

  it('writeMode: passthrough asked for when told, never for writeback, and for auto only with CAP_SYS_ADMIN', () => {
    expect(wantsPassthrough('passthrough')).toBe(true);
    expect(wantsPassthrough('writeback')).toBe(false);
    const capEff = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '0';
    const admin = (BigInt(`0x${capEff}`) & (1n << 21n)) !== 0n;
    expect(wantsPassthrough('auto')).toBe(admin);
    expect(wantsPassthrough(undefined)).toBe(admin);
  });
});
