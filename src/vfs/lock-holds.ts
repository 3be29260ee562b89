/**
 * Service locks taken through this gateway, and who holds each: a front end's lock holder, '' for callers
 * with none (the mount). Writers with another holder are refused (ELOCKED).
 */
import { gatewayPathOf } from './gateway-path.js';
import type { RemoteEntry } from './remote.js';
import { VfsError, type CallContext } from './types.js';

export class LockHolds {
  /** `library\0fullpath` → holder. */
  private readonly holds = new Map<string, string>();

  /** Refuses a lock change by a caller other than the holder of a lock taken through the gateway. */
  assertMayLock(library: string, fullpath: string, path: string, ctx?: CallContext): void {
    const held = this.holds.get(`${library}\0${fullpath}`);
    if (held !== undefined && held !== (ctx?.lockHolder ?? '')) throw new VfsError('ELOCKED', `${path} is locked through the gateway by another writer`);
  }

  /** The holder of a lock taken through the gateway, undefined when none is. */
  holderOf(library: string, fullpath: string): string | undefined {
    return this.holds.get(`${library}\0${fullpath}`);
  }

  /** The caller took (`locked`) or gave back the lock of a file. */
  set(library: string, fullpath: string, locked: boolean, ctx?: CallContext): void {
    const key = `${library}\0${fullpath}`;
    if (locked) this.holds.set(key, ctx?.lockHolder ?? '');
    else this.holds.delete(key);
  }

  /**
   * Refuses a change of a file locked on the service by someone other than the caller: a lock taken
   * through this gateway belongs to its holder (a WebDAV lock refuses the mount, and the other way round);
   * a lock taken elsewhere refuses callers that hold none (the mount), while a front end that tracks locks
   * itself (WebDAV) decides for its own callers.
   */
  assertHeld(library: string, e: RemoteEntry, ctx?: CallContext): void {
    if (e.isDir) return;
    const held = this.holds.get(`${library}\0${e.fullpath}`);
    const holder = ctx?.lockHolder ?? '';
    if (held !== undefined) {
      if (held !== holder) throw new VfsError('ELOCKED', `${gatewayPathOf(library, e.fullpath)} is locked by another writer of the gateway`);
      return;
    }
    if (e.locked && holder === '') throw new VfsError('ELOCKED', `${gatewayPathOf(library, e.fullpath)} is locked on the service`);
  }
}
