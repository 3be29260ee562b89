/**
 * The read-only views of the Vfs (a library's `.versions`) through WebDAV: every request that would change
 * something there is refused with 403 before it is served, whatever part of it the Vfs would not see (a
 * dead property, a WebDAV lock, a junk file kept on the gateway). A copy out of a view is allowed: it is
 * how a version is restored.
 */
import type { DavRequest } from './context.js';
import { DavError } from './errors.js';

/** Methods that change nothing at the request URI. */
const READING = new Set(['GET', 'HEAD', 'OPTIONS', 'PROPFIND', 'UNLOCK']);

/** Throws 403 when the request would change something in a read-only view (the URI, or a COPY/MOVE Destination). */
export async function refuseInReadOnlyView(r: DavRequest, method: string): Promise<void> {
  const readOnlyAt = r.vfs.readOnlyAt?.bind(r.vfs);
  if (!readOnlyAt) return;
  if (!READING.has(method) && method !== 'COPY' && (await readOnlyAt(r.path, r.call))) {
    throw new DavError(403, `${r.path} is in a read-only view: nothing in it can be changed (copy a version out of it to restore it)`);
  }
  if (method === 'COPY' || method === 'MOVE') {
    const dest = r.destination();
    if (await readOnlyAt(dest, r.call)) throw new DavError(403, `${dest} is in a read-only view: nothing can be put there`);
  }
}
