/**
 * FileMarks: a file's tags and its service lock, read and set. On the service for a file it has; for a
 * file made here and not sent yet, held by the gateway (pending-marks.ts) and given to the file once
 * uploaded (`uploaded`). Every lock taken or released through the gateway is noted: its holder
 * (lock-holds.ts), the file's state (`locked-by <name>`) and a change event.
 */
import { remoteCall, type Library, type LibraryFolders, type Target } from './library-folders.js';
import type { NamespaceLookups } from './namespace-lookups.js';
import { isUnsent } from './namespace-lookups.js';
import type { PendingMarks } from './pending-marks.js';
import type { LockHolds } from './lock-holds.js';
import type { FileStates } from './file-state.js';
import type { ChangeEvents } from './change-events.js';
import type { WriteBack } from './write-back/index.js';
import { VfsError, type CallContext } from './types.js';

export interface FileMarksOptions {
  libs: LibraryFolders;
  lookups: NamespaceLookups;
  writeBack: WriteBack;
  marks: PendingMarks;
  locks: LockHolds;
  states: FileStates;
  changes: ChangeEvents;
  /** True when something else keeps the service lock of `document` for `holder` (an Office lock file). */
  keepsLock: (document: string, holder: string) => boolean;
}

export class FileMarks {
  constructor(private readonly opts: FileMarksOptions) {}

  async tags(lib: Library, t: Target, ctx?: CallContext): Promise<string[]> {
    const local = this.opts.writeBack.entry(lib.name, t.fullpath);
    if (local && isUnsent(local)) return this.opts.marks.tags(lib.name, t.fullpath) ?? local.tags ?? [];
    if (lib.remote.tags) {
      const tags = await lib.remote.tags(t.fullpath, remoteCall(ctx));
      if (tags === null) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
      return tags;
    }
    const e = await lib.remote.stat(t.fullpath, remoteCall(ctx));
    if (!e) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    return e.tags ?? [];
  }

  async setTags(lib: Library, t: Target, tags: string[], ctx?: CallContext): Promise<void> {
    const { libs, writeBack, marks } = this.opts;
    for (const tag of tags) {
      if (typeof tag !== 'string' || tag.trim() === '' || tag.includes(';')) throw new VfsError('EINVAL', `expected tags without ';' and not empty, got ${JSON.stringify(tag)}`);
    }
    const wanted = [...new Set(tags.map((x) => x.trim()))];
    const local = writeBack.entry(lib.name, t.fullpath);
    if (local && isUnsent(local)) {
      // Not on the service yet: the tags go there with the file.
      marks.setTags(lib.name, t.fullpath, wanted);
      return;
    }
    const current = await this.tags(lib, t, ctx);
    await lib.remote.removeTags(t.fullpath, current.filter((x) => !wanted.includes(x)), remoteCall(ctx));
    await lib.remote.addTags(t.fullpath, wanted.filter((x) => !current.includes(x)), remoteCall(ctx));
    libs.ownForget(lib.name, t.fullpath);
    writeBack.patchBase(lib.name, t.fullpath, { tags: wanted });
  }

  async setLocked(lib: Library, t: Target, locked: boolean, ctx?: CallContext): Promise<void> {
    const { libs, writeBack, marks, locks } = this.opts;
    const e = await this.opts.lookups.lookup(lib, t.fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (e.isDir) throw new VfsError('ENOTSUP', `folders cannot be locked: ${t.path}`);
    locks.assertMayLock(lib.name, t.fullpath, t.path, ctx);
    // An unlock (a WebDAV UNLOCK, say) while the holder's Office lock file stands: the lock file keeps it.
    if (!locked && this.opts.keepsLock(t.path, ctx?.lockHolder ?? '')) return;
    if (isUnsent(e)) {
      // Not on the service yet: the gateway holds the lock from now on, the service takes it with the file.
      marks.setLock(lib.name, t.fullpath, locked, ctx?.operator);
      this.noteLock(lib, t, locked, ctx);
      return;
    }
    await lib.remote.lock(t.fullpath, locked, remoteCall(ctx));
    this.noteLock(lib, t, locked, ctx);
    libs.ownForget(lib.name, t.fullpath);
    writeBack.patchBase(lib.name, t.fullpath, { locked });
  }

  /** What was set on a file before its upload goes to the service with it, now that it is there. */
  async uploaded(name: string, fullpath: string): Promise<void> {
    const lib = this.opts.libs.get(name);
    if (!lib) return;
    const done = await this.opts.marks.apply(name, fullpath, lib.remote);
    if (done.locked === undefined && done.tags === undefined) return;
    this.opts.libs.ownForget(name, fullpath);
    this.opts.writeBack.patchBase(name, fullpath, { ...(done.locked ? { locked: true } : {}), ...(done.tags ? { tags: done.tags } : {}) });
  }

  /** A lock taken or released through this gateway: its holder, the file's state (`locked-by <name>`), an event. */
  private noteLock(lib: Library, t: Target, locked: boolean, ctx?: CallContext): void {
    this.opts.locks.set(lib.name, t.fullpath, locked, ctx);
    if (locked) this.opts.states.lockTaken(lib.name, t.fullpath, ctx?.operator?.opName);
    else this.opts.states.lockReleased(lib.name, t.fullpath);
    this.opts.changes.lockChanged(t.path, locked, ctx?.operator?.opName);
  }
}
