/**
 * Translation of errors into HTTP statuses: one table for Vfs errors, and DavError for what the protocol
 * layer refuses itself (with an optional RFC 4918 precondition element for the response body).
 */
import { VfsError, type VfsErrorCode } from '../vfs/types.js';
import { XmlBodyError } from './xml.js';

/** An error the WebDAV layer answers with a given status. */
export class DavError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** RFC 4918 precondition/postcondition element (local name in DAV:), e.g. `lock-token-submitted`. */
    readonly condition?: string,
    /** Hrefs named inside the condition element. */
    readonly hrefs: string[] = [],
  ) {
    super(message);
    this.name = 'DavError';
  }
}

/** VfsError code → HTTP status. */
export const VFS_STATUS: Readonly<Record<VfsErrorCode, number>> = {
  ENOENT: 404,
  EEXIST: 412,
  ENOTEMPTY: 409,
  ENOTDIR: 409,
  EISDIR: 409,
  EACCES: 403,
  EPERM: 403,
  ENOSPC: 507,
  EFBIG: 507,
  EIO: 502,
  EAGAIN: 503,
  ENAMETOOLONG: 414,
  EINVAL: 400,
  EROFS: 403,
  EXDEV: 502,
  EBUSY: 423,
  ELOCKED: 423,
  ENOSYS: 501,
  ENOTSUP: 403,
};

/** The VfsError code of a thrown value (also from another copy of the module), if it is one. */
export function vfsCodeOf(err: unknown): VfsErrorCode | undefined {
  if (err instanceof VfsError) return err.code;
  const code = (err as { code?: unknown } | null)?.code;
  if (err instanceof Error && err.name === 'VfsError' && typeof code === 'string' && code in VFS_STATUS) return code as VfsErrorCode;
  return undefined;
}

/** The HTTP status for any thrown value: DavError and VfsError by table, a bad XML body 400, else 500. */
export function statusOf(err: unknown): number {
  if (err instanceof DavError) return err.status;
  if (err instanceof XmlBodyError) return 400;
  const code = vfsCodeOf(err);
  return code ? VFS_STATUS[code] : 500;
}

/** The message safe to show a client: the error's own text for known errors, a generic one otherwise. */
export function publicMessage(err: unknown): string {
  if (err instanceof DavError || err instanceof XmlBodyError || vfsCodeOf(err)) return (err as Error).message;
  return 'internal error';
}
