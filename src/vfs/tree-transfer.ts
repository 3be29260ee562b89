/**
 * Copies of files and folders the service cannot make by itself (between libraries, or of files with
 * local versions): each file through a local spool, committed to the target; and the removal of the
 * source after a move between libraries.
 */
import { gatewayPathOf } from './gateway-path.js';
import { joinPath } from './remote.js';
import type { NamespaceLookups } from './namespace-lookups.js';
import { remoteCall, type Library, type LibraryFolders } from './library-folders.js';
import type { FileHasher, WriteBack } from './write-back/index.js';
import { VfsError, type CallContext } from './types.js';

export class TreeTransfer {
  constructor(private readonly opts: { libs: LibraryFolders; lookups: NamespaceLookups; writeBack: WriteBack; hasher: FileHasher }) {}

  /** Copies a file or folder between places, through a local spool; returns when the service has it. */
  async copyAcross(from: Library, fromPath: string, to: Library, toPath: string, ctx?: CallContext): Promise<void> {
    const { libs, lookups, writeBack, hasher } = this.opts;
    const src = await lookups.entryOf(from, fromPath, ctx);
    if (!src) throw new VfsError('ENOENT', `no such file or folder: ${gatewayPathOf(from.name, fromPath)}`);
    if (src.isDir) {
      libs.ownUpsert(to.name, await to.remote.mkdir(toPath, remoteCall(ctx)));
      for (const child of await lookups.listDir(from, fromPath, ctx)) {
        await this.copyAcross(from, joinPath(fromPath, child.name), to, joinPath(toPath, child.name), ctx);
      }
      return;
    }
    const { id, path: spool } = writeBack.scratchSpool();
    try {
      if (!(await writeBack.copyCurrent(from.name, fromPath, spool))) {
        await writeBack.fillScratch(id, spool, to.name, toPath, src, (start, end) => from.remote.openRange(fromPath, start, end, { ...remoteCall(ctx), contentHash: src.contentHash }));
      }
      const { sha1, size } = await hasher.hash(spool);
      // Bytes as the service takes them (all at once when it has the content already).
      let reported = 0;
      const progress = (sent: number): void => {
        if (sent > reported) ctx?.onCopied?.(sent - reported);
        reported = Math.max(reported, sent);
      };
      const entry = await to.remote.commit(toPath, { path: spool, size, sha1 }, { ...remoteCall(ctx), onProgress: progress });
      libs.ownUpsert(to.name, entry);
      progress(size);
    } finally {
      await writeBack.discardScratch(id);
    }
  }

  /** Removes a file or a whole folder (after a move between libraries). */
  async removeTree(lib: Library, fullpath: string, isDir: boolean, ctx?: CallContext): Promise<void> {
    await this.opts.writeBack.removed(lib.name, fullpath);
    if (await lib.remote.stat(fullpath, remoteCall(ctx))) await lib.remote.remove(fullpath, remoteCall(ctx));
    this.opts.libs.ownRemove(lib.name, fullpath, isDir);
  }
}
