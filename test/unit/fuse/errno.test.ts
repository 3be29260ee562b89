import { describe, expect, it } from 'vitest';
import { Errno, FuseOpError, VFS_ERRNO, errnoOf } from '../../../src/fuse/errno.js';
import { VfsError, type VfsErrorCode } from '../../../src/vfs/types.js';

/** What each Vfs error must become at the kernel (Linux errno numbers). */
const EXPECTED: Record<VfsErrorCode, number> = {
  ENOENT: -2,
  EEXIST: -17,
  ENOTEMPTY: -39,
  ENOTDIR: -20,
  EISDIR: -21,
  EACCES: -13,
  EPERM: -1,
  ENOSPC: -28,
  EFBIG: -27,
  EIO: -5,
  EAGAIN: -11,
  ENAMETOOLONG: -36,
  EINVAL: -22,
  EROFS: -30,
  EXDEV: -18,
  EBUSY: -16,
  ELOCKED: -13,
  ENOSYS: -38,
  ENOTSUP: -95,
};

describe('errno translation', () => {
  for (const [code, errno] of Object.entries(EXPECTED)) {
    it(`VfsError ${code} → ${errno}`, () => {
      expect(errnoOf(new VfsError(code as VfsErrorCode, 'x'))).toBe(errno);
    });
  }

  it('covers every Vfs error code', () => {
    expect(Object.keys(VFS_ERRNO).sort()).toEqual(Object.keys(EXPECTED).sort());
  });

  it('anything that is not a VfsError is EIO', () => {
    expect(errnoOf(new Error('socket hang up'))).toBe(-Errno.EIO);
    expect(errnoOf(undefined)).toBe(-5);
    expect(errnoOf(Object.assign(new Error('x'), { code: 'ENOENT' }))).toBe(-5);
  });

  it('adapter errors carry their own errno', () => {
    expect(errnoOf(new FuseOpError('EBADF', 'no handle'))).toBe(-9);
    expect(errnoOf(new FuseOpError('ERANGE', 'small buffer'))).toBe(-34);
  });

  it('a VfsError from another module copy is recognised by name and code', () => {
    const foreign = Object.assign(new Error('ENOTEMPTY: x'), { name: 'VfsError', code: 'ENOTEMPTY' });
    expect(errnoOf(foreign)).toBe(-39);
  });
});
