/**
 * Translation of Vfs errors into the negative errno values a FUSE operation answers with (Linux numbers,
 * as libfuse expects them). One table, one function: every operation of the adapter goes through it.
 */
import { VfsError, type VfsErrorCode } from '../vfs/types.js';

/** Linux errno numbers used by the FUSE front end (positive; operations answer their negation). */
export const Errno = {
  EPERM: 1,
  ENOENT: 2,
  EIO: 5,
  EBADF: 9,
  EAGAIN: 11,
  EACCES: 13,
  EBUSY: 16,
  EEXIST: 17,
  EXDEV: 18,
  ENOTDIR: 20,
  EISDIR: 21,
  EINVAL: 22,
  EFBIG: 27,
  ENOSPC: 28,
  EROFS: 30,
  ERANGE: 34,
  ENAMETOOLONG: 36,
  ENOSYS: 38,
  ENOTEMPTY: 39,
  ENODATA: 61,
  EILSEQ: 84,
  ENOTSUP: 95,
  ENOTCONN: 107,
  ETIMEDOUT: 110,
} as const;

export type ErrnoName = keyof typeof Errno;

/**
 * VfsError code → errno name. ELOCKED (locked by another member on the service) is EACCES: the caller
 * may not change the file now, which is how applications already treat a file locked elsewhere.
 */
export const VFS_ERRNO: Readonly<Record<VfsErrorCode, ErrnoName>> = {
  ENOENT: 'ENOENT',
  EEXIST: 'EEXIST',
  ENOTEMPTY: 'ENOTEMPTY',
  ENOTDIR: 'ENOTDIR',
  EISDIR: 'EISDIR',
  EACCES: 'EACCES',
  EPERM: 'EPERM',
  ENOSPC: 'ENOSPC',
  EFBIG: 'EFBIG',
  EIO: 'EIO',
  EAGAIN: 'EAGAIN',
  ENAMETOOLONG: 'ENAMETOOLONG',
  EINVAL: 'EINVAL',
  EROFS: 'EROFS',
  EXDEV: 'EXDEV',
  EBUSY: 'EBUSY',
  ELOCKED: 'EACCES',
  ENOSYS: 'ENOSYS',
  ENOTSUP: 'ENOTSUP',
};

/** An error the adapter raises itself (bad handle, unknown attribute…) with the errno to answer. */
export class FuseOpError extends Error {
  constructor(readonly errno: ErrnoName, message: string) {
    super(`${errno}: ${message}`);
    this.name = 'FuseOpError';
  }
}

/** The errno name for any thrown value: VfsError and FuseOpError by table, anything else is EIO. */
export function errnoNameOf(err: unknown): ErrnoName {
  if (err instanceof FuseOpError) return err.errno;
  if (err instanceof VfsError) return VFS_ERRNO[err.code] ?? 'EIO';
  // A VfsError from another copy of the module (e.g. a worker bundle) still carries its code.
  const code = (err as { code?: unknown } | null)?.code;
  if (err instanceof Error && err.name === 'VfsError' && typeof code === 'string' && code in VFS_ERRNO) {
    return VFS_ERRNO[code as VfsErrorCode];
  }
  return 'EIO';
}

/** The negative errno a FUSE operation answers for a thrown value. */
export function errnoOf(err: unknown): number {
  return -Errno[errnoNameOf(err)];
}
