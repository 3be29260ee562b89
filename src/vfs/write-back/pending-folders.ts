/**
 * WriteBackFolders: folders made while their library was offline and deletes deferred while handles
 * still read a file — both journaled, done on the service when it is back or the last reader closes.
 */
import { baseAfter, NEW_FILE, type ConflictBase } from './conflicts.js';
import { fsErrorOf } from '../fs-errors.js';
import type { RemoteEntry } from '../remote.js';
import { VfsError } from '../types.js';
import { folderEntry, keyOf } from './slots.js';
import { WriteBackReplay } from './replay.js';


export abstract class WriteBackFolders extends WriteBackReplay {
  /** A file or folder is gone (WriteBack). */
  abstract removed(library: string, fullpath: string): Promise<void>;

  /** A folder made while the library is offline: journaled (fsynced), shown from now on, made on the service later. */
  async pendingFolder(library: string, fullpath: string): Promise<RemoteEntry> {
    const id = this.journal.newId();
    const now = this.clock.now();
    await this.journal.putRecord({ id, library, fullpath, size: 0, mtimeMs: now, createdMs: now, seq: this.nextSeq(), kind: 'folder' }).catch((err: unknown) => { throw fsErrorOf(err, `journaling the folder '${fullpath}'`); });
    const entry = folderEntry(id, fullpath, now);
    this.pendingFolders.set(keyOf(library, fullpath), { id, library, entry });
    return entry;
  }

  /** The library's service answers again: the waiting uploads start now, and folders made meanwhile are made. */
  online(library: string): void {
    this.uploads.retryNow(library);
    void this.makeFolders(library);
    void this.performDeletes(library);
  }

  // ---- deletes deferred while handles read the file ----------------------------------------------------------

  /**
   * A file unlinked while handles still read it: journaled (fsynced), removed on the service once the last
   * of them is closed (`performDeletes`), also after a crash.
   */
  async deferDelete(library: string, fullpath: string, objectId: string, contentHash?: string): Promise<void> {
    const id = this.journal.newId();
    const now = this.clock.now();
    await this.journal.putRecord({ id, library, fullpath, size: 0, mtimeMs: now, createdMs: now, seq: this.nextSeq(), kind: 'delete', objectId, replaces: contentHash ? [contentHash] : undefined }).catch((err: unknown) => { throw fsErrorOf(err, `journaling the delete of '${fullpath}'`); });
    this.pendingDeletes.set(keyOf(library, fullpath), { id, library, fullpath, objectId, ready: false, contentHash });
    // Gone from the path: its read handles no longer follow the path (a new file there is another file).
    await this.removed(library, fullpath);
  }

  /** A new file at a path whose delete was deferred replaces the object instead (its readers keep their version). */
  async cancelDelete(library: string, fullpath: string): Promise<void> {
    const d = this.pendingDeletes.get(keyOf(library, fullpath));
    if (!d) return;
    this.pendingDeletes.delete(keyOf(library, fullpath));
    if (d.contentHash) this.replacedObjects.set(keyOf(library, fullpath), d.contentHash);
    await this.journal.remove(d.id).catch(() => undefined);
  }

  /**
   * What a delete of the path is based on (conflicts.ts): the local version it shows and those it came
   * from, else `shown`, the service's version. Asked before `removed`.
   */
  deleteBase(library: string, fullpath: string, shown: RemoteEntry): ConflictBase {
    const v = this.slots.get(keyOf(library, fullpath))?.current;
    if (v) return baseAfter(v.replaces, v.currentSha1());
    if (shown.id.startsWith('local:')) return [NEW_FILE];
    return shown.contentHash ? [shown.contentHash] : undefined;
  }

  /** True when a delete based on `base` must leave the service's `current` be (ConflictKeeper.deleteKeeps). */
  deleteKeeps(library: string, fullpath: string, base: ConflictBase, current: RemoteEntry): boolean {
    return this.conflicts.deleteKeeps(library, fullpath, base, current);
  }

  /** The last reader of a path whose delete was deferred is gone: the delete may happen now. */
  async readersGone(library: string, fullpath: string): Promise<void> {
    const d = this.pendingDeletes.get(keyOf(library, fullpath));
    if (!d) return;
    d.ready = true;
    await this.performDeletes(library);
  }

  /** Removes on the service the deferred deletes that are ready (the object still at its path); an outage keeps them. */
  protected async performDeletes(library: string): Promise<void> {
    const remote = this.opts.host.remoteFor(library);
    if (!remote) return;
    for (const [key, d] of [...this.pendingDeletes]) {
      if (d.library !== library || !d.ready || this.closed) continue;
      try {
        const e = await remote.stat(d.fullpath);
        if (e && !e.isDir && e.id === d.objectId) {
          if (d.contentHash !== undefined && this.conflicts.deleteKeeps(library, d.fullpath, [d.contentHash], e)) {
            this.pendingDeletes.delete(key);
            this.opts.host.uploaded(library, e, e.mtimeMs); // the other version is what the path shows
            await this.journal.remove(d.id).catch(() => undefined);
            continue;
          }
          await remote.remove(d.fullpath);
        }
      } catch (err) {
        if (err instanceof VfsError && err.unreachable) return; // again when the service is back
        this.opts.logger.error({ library, path: d.fullpath, err: (err as Error).message }, 'a delete deferred for open readers failed on the service');
      }
      if (this.pendingDeletes.get(key) !== d) continue;
      this.pendingDeletes.delete(key);
      this.opts.host.deleted(library, d.fullpath);
      await this.journal.remove(d.id).catch(() => undefined);
    }
  }

  /** Makes the library's pending folders on the service, parents first; stops at the first unreachable call. */
  protected makeFolders(library: string): Promise<void> {
    const running = this.makingFolders.get(library);
    if (running) return running;
    const run = (async () => {
      const remote = this.opts.host.remoteFor(library);
      if (!remote) return;
      const mine = [...this.pendingFolders.entries()].filter(([, f]) => f.library === library)
        .sort(([, a], [, b]) => a.entry.fullpath.split('/').length - b.entry.fullpath.split('/').length);
      for (const [key, f] of mine) {
        if (this.closed) return;
        try {
          // ensureParents makes every missing folder above a path: above a child of this one, this one too.
          const made = (await remote.stat(f.entry.fullpath)) ?? (await this.opts.host.ensureParents(library, `${f.entry.fullpath}/-`).then(() => remote.stat(f.entry.fullpath)));
          if (made && !made.isDir) this.opts.logger.error({ library, path: f.entry.fullpath }, 'a folder made offline: a file of that name is on the service now; the folder is dropped');
          else if (made) this.opts.host.uploaded(library, made, f.entry.mtimeMs);
        } catch (err) {
          if (err instanceof VfsError && err.unreachable) return; // still away: again when it is back
          this.opts.logger.error({ library, path: f.entry.fullpath, err: (err as Error).message }, 'a folder made offline could not be made on the service; dropped');
        }
        this.pendingFolders.delete(key);
        await this.journal.remove(f.id).catch(() => undefined);
      }
    })().finally(() => this.makingFolders.delete(library));
    this.makingFolders.set(library, run);
    return run;
  }
}
