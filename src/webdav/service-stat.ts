/**
 * A file's state read from the service itself, past the Vfs's caches: what a write's preconditions
 * (If-Match, If-None-Match) are checked against, since the cache may not yet show another client's change.
 */
import type { Remote } from '../vfs/remote.js';
import type { Attr, CallContext } from '../vfs/types.js';

/** The service's view of a gateway path: its attributes, null when the service has nothing there, undefined when it cannot tell. */
export type ServiceStat = (path: string, ctx: CallContext) => Promise<Attr | null | undefined>;

/** A ServiceStat over the Remote of each library folder (what GatewayVfs.remoteOf gives). */
export function serviceStatThrough(vfs: { remoteOf(name: string): Remote | undefined }): ServiceStat {
  return async (path, ctx) => {
    const parts = path.split('/').filter((s) => s !== '');
    if (parts.length < 2) return undefined; // the root and the library folders are not files
    const remote = vfs.remoteOf(parts[0]!);
    if (!remote) return undefined;
    const e = await remote.stat(parts.slice(1).join('/'), { operator: ctx.operator, signal: ctx.signal });
    if (!e) return null;
    return { path, name: e.name, isDir: e.isDir, size: e.size, mtimeMs: e.mtimeMs, ctimeMs: e.ctimeMs, id: e.id, contentHash: e.contentHash, locked: e.locked, tags: e.tags, lastModifiedBy: e.lastModifiedBy };
  };
}
