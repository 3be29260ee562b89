/**
 * Renames and copies of files and folders, inside a library and between libraries: both ends checked
 * (the source there, not into itself, the target's folder there, noReplace), a replaced target removed
 * as its own removal would go, then the service asked to move or copy; what it cannot do itself (across
 * libraries, files with local versions) goes through a local spool (tree-transfer.ts). Local versions
 * move with their paths (the write-back's `moved`), their uploads stopped meanwhile.
 */
import { baseName, isWithin, parentOf, type RemoteEntry } from './remote.js';
import { remoteCall, type LibraryFolders, type LibraryTarget } from './library-folders.js';
import type { MetadataCache } from './metadata-cache.js';
import { isUnsent, type NamespaceLookups } from './namespace-lookups.js';
import type { UnlinkedWhileRead } from './unlinked-while-read.js';
import type { LockHolds } from './lock-holds.js';
import type { TreeTransfer } from './tree-transfer.js';
import type { WriteBack } from './write-back/index.js';
import { VfsError, type CallContext, type Vfs } from './types.js';

export interface LibraryMovesOptions {
  libs: LibraryFolders;
  cache: MetadataCache;
  lookups: NamespaceLookups;
  unlinked: UnlinkedWhileRead;
  writeBack: WriteBack;
  transfer: TreeTransfer;
  locks: LockHolds;
  /** Throws unless changes are taken now (EROFS, EIO once closed). */
  writable: (path: string) => void;
  /** The gateway's own removals: a target replaced goes as they remove it. */
  gateway: Pick<Vfs, 'unlink' | 'rmdir'>;
}

export class LibraryMoves {
  constructor(private readonly opts: LibraryMovesOptions) {}

  /** Renames `from` to `to` (a target replaced as its removal would go), on the service or, between libraries, by a copy and a removal. */
  async rename(from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext): Promise<void> {
    const { a, b, src, dst, localMove: unsentAtStart } = await this.ends('renamed', from, to, opts, ctx);
    if (dst) {
      if (src.isDir && !dst.isDir) throw new VfsError('ENOTDIR', `${b.path} is a file`);
      if (!src.isDir && dst.isDir) throw new VfsError('EISDIR', `${b.path} is a folder`);
      if (dst.isDir) await this.opts.gateway.rmdir(b.path, ctx);
      else await this.opts.gateway.unlink(b.path, ctx);
    }
    if (a.lib !== b.lib) {
      await this.opts.transfer.copyAcross(a.lib, a.fullpath, b.lib, b.fullpath, ctx);
      await this.opts.transfer.removeTree(a.lib, a.fullpath, src.isDir, ctx);
      return;
    }
    const lib = a.lib;
    if (!src.isDir) this.opts.locks.assertHeld(lib.name, src, ctx);
    // Uploads under the source stop first; the local versions move with it and their uploads restart there.
    await this.opts.writeBack.stopUploads(lib.name, a.fullpath);
    // Handed to the uploader while the rename was decided: what it sent (if it landed) moves on the service.
    const localMove = unsentAtStart && this.opts.writeBack.unsent(lib.name, a.fullpath);
    let onService: RemoteEntry | null = null;
    // The feed may bring the move before its answer: in doubt until the cache shows it.
    const moving = localMove ? undefined : this.opts.libs.ownChanging(lib.name, [a.fullpath, b.fullpath]);
    try {
      // A file made here of which nothing was ever sent has nothing to move on the service (a file someone
      // else made there meanwhile is theirs): no round trip (an rsync renames every file it writes).
      if (!localMove) {
        try {
          onService = await lib.remote.stat(a.fullpath, remoteCall(ctx));
          if (onService) {
            await lib.remote.move(a.fullpath, b.fullpath, remoteCall(ctx));
            this.opts.writeBack.movedOnService(lib.name, a.fullpath, b.fullpath);
          }
        } catch (err) {
          this.opts.writeBack.resumeUploads(lib.name, a.fullpath);
          throw err;
        }
      }
      await this.opts.writeBack.moved(lib.name, a.fullpath, b.fullpath);
      this.opts.libs.ownRemove(lib.name, a.fullpath, src.isDir);
      if (onService) this.opts.libs.ownUpsert(lib.name, { ...onService, fullpath: b.fullpath, name: baseName(b.fullpath) });
      if (src.isDir) this.opts.cache.invalidateListing(lib.name, b.fullpath);
    } finally {
      moving?.();
    }
  }

  /** Copies `from` to `to` (a target replaced): on the service where it can, else through a local spool (tree-transfer.ts). */
  async copy(from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext): Promise<void> {
    const { a, b, dst } = await this.ends('copied', from, to, opts, ctx);
    if (dst) {
      if (dst.isDir) await this.opts.transfer.removeTree(b.lib, b.fullpath, true, ctx);
      else await this.opts.gateway.unlink(b.path, ctx);
    }
    const hasLocal = !!this.opts.writeBack.current(a.lib.name, a.fullpath) || this.opts.writeBack.hasWithin(a.lib.name, a.fullpath);
    if (a.lib === b.lib && !hasLocal) {
      await a.lib.remote.copy(a.fullpath, b.fullpath, remoteCall(ctx));
      this.opts.libs.ownForget(b.lib.name, b.fullpath);
      return;
    }
    await this.opts.transfer.copyAcross(a.lib, a.fullpath, b.lib, b.fullpath, ctx);
  }

  /** Both ends of a rename or copy, checked: source exists, not into itself, target's folder exists, noReplace; `localMove`: a rename of a file the service has nothing of (moved here only). */
  private async ends(verb: string, from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext):
    Promise<{ a: LibraryTarget; b: LibraryTarget; src: RemoteEntry; dst: RemoteEntry | null; localMove: boolean }> {
    const a = this.opts.libs.target(from);
    const b = this.opts.libs.target(to);
    if (!a.lib || a.fullpath === '' || !b.lib || b.fullpath === '') throw new VfsError('EPERM', `libraries cannot be ${verb} or replaced: ${a.path} → ${b.path}`);
    this.opts.writable(b.path);
    const src = await this.opts.lookups.entryOf(a.lib, a.fullpath, ctx);
    if (!src) throw new VfsError('ENOENT', `no such file or folder: ${a.path}`);
    if (src.isDir && a.lib === b.lib && isWithin(b.fullpath, a.fullpath)) throw new VfsError('EINVAL', `cannot put ${a.path} into itself`);
    await this.opts.lookups.needFolder(b.lib, parentOf(b.fullpath), ctx);
    await this.opts.unlinked.settle(b.lib.name, b.fullpath);
    // A file of which the service has nothing from here moves here only: its target is found as a create
    // finds its name (the cache, following the updates feed; a name made elsewhere meanwhile meets the
    // upload as it would meet a new file's). Otherwise the service is asked.
    const localMove = verb === 'renamed' && !src.isDir && a.lib === b.lib && this.opts.writeBack.unsent(a.lib.name, a.fullpath);
    const dst = localMove ? await this.opts.lookups.lookup(b.lib, b.fullpath, ctx) : await this.opts.lookups.entryOf(b.lib, b.fullpath, ctx);
    if (dst && opts.noReplace) throw new VfsError('EEXIST', `${b.path} exists`);
    // Its upload will be a file made (or changed) at the target: a service that checks that per member is
    // asked now, as at a create, before anything changes.
    if (localMove) await b.lib.remote.checkWrite?.(b.fullpath, !!dst && !isUnsent(dst), remoteCall(ctx));
    return { a: a as LibraryTarget, b: b as LibraryTarget, src, dst, localMove };
  }
}
