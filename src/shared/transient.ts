/**
 * The one answer to "may asking again succeed?", for the client's retries, the range requests' and the
 * reads of the Vfs: a failure is transient when the service did not answer (a refused, reset or timed-out
 * connection) or answered that it is busy or failing (429, 5xx but 501); it is permanent when the service
 * refused the request (any other 4xx: no permission, no space, no such file, a bad parameter), when the
 * caller aborted, or when the error names such a refusal (EACCES, ENOSPC, ENOENT…). Errors are read
 * through their causes: a VfsError `EIO` carrying a service's 403 is permanent.
 */

/** HTTP statuses after which the same request may succeed. */
export const TRANSIENT_STATUS: readonly number[] = [429, 500, 502, 503, 504];

/** Transport failures (Node and undici codes) after which the same request may succeed. */
export const TRANSIENT_TRANSPORT_CODES: readonly string[] = [
  'ECONNRESET', 'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ENETDOWN', 'ENETUNREACH', 'EHOSTDOWN', 'EHOSTUNREACH',
  'EPIPE', 'ETIMEDOUT', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
];

/** Error codes (errno names, the Vfs's codes) of refusals that asking again does not change. */
const PERMANENT_CODES: readonly string[] = [
  'EACCES', 'EPERM', 'ENOSPC', 'EFBIG', 'ENOENT', 'EISDIR', 'ENOTDIR', 'EINVAL', 'EEXIST', 'ENOTEMPTY', 'ENAMETOOLONG',
  'EROFS', 'EXDEV', 'ELOCKED', 'ENOSYS', 'ENOTSUP', 'ABORT_ERR',
];

interface ErrorLike { name?: unknown; code?: unknown; status?: unknown; transport?: unknown; transportCode?: unknown; cause?: unknown }

export function isTransient(err: unknown): boolean {
  for (let e = err as ErrorLike | undefined, depth = 0; e && typeof e === 'object' && depth < 6; e = e.cause as ErrorLike | undefined, depth++) {
    if (e.name === 'AbortError') return false;
    // A service's answer (ServiceError) decides by its status; no answer at all is transient.
    if (typeof e.status === 'number' && e.status > 0) return TRANSIENT_STATUS.includes(e.status);
    if (e.transport === true) return true;
    if (typeof e.transportCode === 'string' && TRANSIENT_TRANSPORT_CODES.includes(e.transportCode)) return true;
    if (typeof e.code === 'string') {
      if (PERMANENT_CODES.includes(e.code)) return false;
      if (TRANSIENT_TRANSPORT_CODES.includes(e.code)) return true;
    }
    // EIO, EAGAIN and errors without a code: the cause may tell more.
  }
  return true;
}
