import { describe, expect, it } from 'vitest';
import { toKernelStat, toKernelStatFs } from '../../../src/fuse/stat.js';
import { parseMountInfo } from '../../../src/fuse/stale-mount.js';
import { decodeLock, decodeTags, encodeXattrNames, fillXattrBuffer } from '../../../src/fuse/xattr.js';

const own = { uid: 1, gid: 2, umask: 0o022, readOnly: false };

describe('kernel attributes', () => {
  it('files and folders get mode from the umask, blocks from the size', () => {
    const f = toKernelStat({ path: '/L/a', name: 'a', isDir: false, size: 1000, mtimeMs: 5000, ctimeMs: 1000 }, own);
    expect(f).toMatchObject({ mode: 0o100644, uid: 1, gid: 2, size: 1000, blocks: 2, nlink: 1, mtime: 5000, ctime: 5000 });
    const d = toKernelStat({ path: '/L', name: 'L', isDir: true, size: 77, mtimeMs: 1, ctimeMs: 1 }, { ...own, readOnly: true });
    expect(d).toMatchObject({ mode: 0o040555, size: 0, nlink: 2 });
  });

  it('a file locked on the service by someone other than the mount\'s callers shows read-only', () => {
    const file = { path: '/L/a', name: 'a', isDir: false, size: 1, mtimeMs: 1, ctimeMs: 1 };
    expect(toKernelStat({ ...file, locked: true }, own).mode).toBe(0o100444);
    expect(toKernelStat({ ...file, locked: true, lockHolder: 'webdav' }, own).mode).toBe(0o100444);
    expect(toKernelStat({ ...file, locked: true, lockHolder: '' }, own).mode).toBe(0o100644);
    expect(toKernelStat({ ...file, locked: false }, own).mode).toBe(0o100644);
  });

  it('statfs fits 32-bit block counts, also for unlimited capacity', () => {
    const small = toKernelStatFs({ total: 10 * 4096, used: 4096, free: 9 * 4096 }, { readOnly: false });
    expect(small).toMatchObject({ frsize: 4096, blocks: 10, bfree: 9, bavail: 9, flag: 0, namemax: 255 });
    // Unlimited: what is used plus 1 PiB free (as rclone's mount shows it), not 8 PiB.
    const huge = toKernelStatFs({ total: Number.MAX_SAFE_INTEGER, used: 2 ** 40, free: Number.MAX_SAFE_INTEGER - 2 ** 40 }, { readOnly: true });
    expect(huge.blocks).toBeLessThanOrEqual(0xffffffff);
    expect(huge.blocks * huge.frsize).toBe(2 ** 50 + 2 ** 40);
    expect(huge.bfree * huge.frsize).toBe(2 ** 50);
    expect(huge.flag).toBe(1);
    const big = toKernelStatFs({ total: 2 ** 45, used: 2 ** 44, free: 2 ** 44 }, { readOnly: false });
    expect([big.blocks * big.frsize, big.bfree * big.frsize]).toEqual([2 ** 45, 2 ** 44]);
  });
});

describe('xattr values', () => {
  it('tags parse from ; separated text', () => {
    expect(decodeTags(Buffer.from(' a ;b;;a\nc'))).toEqual(['a', 'b', 'c']);
    expect(decodeTags(Buffer.from(''))).toEqual([]);
    expect(() => decodeTags(Buffer.from('a\0b'))).toThrow(/EINVAL/);
  });

  it('lock values', () => {
    expect(decodeLock(Buffer.from('1\n'))).toBe(true);
    expect(decodeLock(Buffer.from('unlocked'))).toBe(false);
    expect(() => decodeLock(Buffer.from('x'))).toThrow(/expected 1 or 0, got 'x'/);
  });

  it('buffer filling follows getxattr rules', () => {
    expect(fillXattrBuffer(Buffer.alloc(0), Buffer.from('abc'))).toBe(3);
    expect(() => fillXattrBuffer(Buffer.alloc(2), Buffer.from('abc'))).toThrow(/ERANGE/);
    expect(encodeXattrNames(['a', 'b']).toString()).toBe('a\0b\0');
  });
});

describe('mountinfo', () => {
  it('parses FUSE entries with escaped mount points', () => {
    const text = [
      '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
      '97 22 0:52 / /tmp/my\\040mnt rw,nosuid,nodev,relatime shared:50 - fuse.cloudlib cloudlib rw,user_id=0,group_id=0',
    ].join('\n');
    const entries = parseMountInfo(text);
    expect(entries).toHaveLength(2);
    expect(entries[1]).toEqual({ device: '0:52', mountPoint: '/tmp/my mnt', fsType: 'fuse.cloudlib', source: 'cloudlib' });
  });
});
