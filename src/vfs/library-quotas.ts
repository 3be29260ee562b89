/**
 * The libraries' quotas as the service tells them: statfs asks at once (and answers the last figures
 * while offline); the free space writes are checked against is asked again in the background once
 * QUOTA_TTL_MS old, so a write never waits for it after the first.
 */
import type { Logger } from '../shared/log.js';
import type { RemoteQuota } from './remote.js';
import type { Clock } from './clock.js';
import { remoteCall, type Library, type LibraryFolders } from './library-folders.js';
import { VfsError, type CallContext, type StatFs } from './types.js';

/** How long a library's quota is used before it is asked again (in the background), ms. */
const QUOTA_TTL_MS = 10_000;

export class LibraryQuotas {
  /** When each library's quota was last asked, ms since the epoch. */
  private readonly askedMs = new Map<string, number>();

  constructor(private readonly libs: LibraryFolders, private readonly clock: Clock, private readonly logger: Logger) {}

  /** The capacity, use and file count of the libraries together (unlimited when one is). */
  async statfs(libs: Library[], ctx?: CallContext): Promise<StatFs> {
    let total = 0;
    let used = 0;
    let files = 0;
    let unlimited = false;
    for (const lib of libs) {
      let q: RemoteQuota;
      try {
        q = await lib.remote.quota(remoteCall(ctx));
        lib.quota = q;
      } catch (err) {
        // Offline: the last figures the service gave.
        if (!(err instanceof VfsError && err.unreachable && lib.quota)) throw err;
        q = lib.quota;
      }
      used += q.used;
      files += q.files ?? 0;
      if (q.total === undefined) unlimited = true;
      else total += q.total;
    }
    const cap = unlimited ? Number.MAX_SAFE_INTEGER : total;
    return { total: cap, used, free: Math.max(0, cap - used), files };
  }

  /**
   * Bytes library `name` may still grow by: its capacity less what it uses, as the service last told
   * (asked again in the background after QUOTA_TTL_MS); undefined when unlimited or not known.
   */
  async freeBytes(name: string, ctx?: CallContext): Promise<number | undefined> {
    const lib = this.libs.get(name);
    if (!lib) return undefined;
    const ask = async (): Promise<void> => {
      this.askedMs.set(name, this.clock.now());
      try {
        lib.quota = await lib.remote.quota(remoteCall(ctx));
      } catch (err) {
        this.logger.debug({ library: name, err: (err as Error).message }, 'quota not known: writes are not limited by it');
      }
    };
    if (!this.askedMs.has(name)) await ask();
    else if (this.clock.now() - this.askedMs.get(name)! > QUOTA_TTL_MS) void ask();
    const q = lib.quota;
    return q?.total === undefined ? undefined : Math.max(0, q.total - q.used);
  }

  /** As freeBytes, from what the service last told only (undefined when not told yet): never waits for it. */
  knownFreeBytes(name: string): number | undefined {
    const q = this.libs.get(name)?.quota;
    return q?.total === undefined ? undefined : Math.max(0, q.total - q.used);
  }
}
