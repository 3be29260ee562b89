/**
 * KeptOnMachine: what the namespace keeps on this machine on request: files and folders pinned
 * (pinned-content.ts; only with the disk cache), and space freed up under a path (free-up-space.ts)
 * of what is neither pinned, nor open, nor waiting to upload (those are the write-back's, never the cache's).
 */
import type { ContentCache } from './content-cache.js';
import { freeUpSpace } from './free-up-space.js';
import type { LibraryTarget, Target } from './library-folders.js';
import type { NamespaceLookups } from './namespace-lookups.js';
import type { PinnedContent } from './pinned-content.js';
import type { WriteBack } from './write-back/index.js';
import { VfsError, type CallContext } from './types.js';

export interface KeptOnMachineOptions {
  pins: PinnedContent | undefined;
  disk: ContentCache | undefined;
  lookups: NamespaceLookups;
  writeBack: WriteBack;
}

export class KeptOnMachine {
  constructor(private readonly opts: KeptOnMachineOptions) {}

  /**
   * Pins (keeps on this machine) or unpins a file or folder. A pin is refused with ENOSPC when its content
   * would not fit in the cache beside what is pinned; its files are then fetched in the background.
   */
  async setPinned(t: LibraryTarget, pinned: boolean): Promise<{ files: number; bytes: number } | undefined> {
    const { pins } = this.opts;
    if (!pins) throw new VfsError('ENOTSUP', `${t.path}: nothing can be kept on this machine without the disk cache (cache.disk_cache_mb is 0)`);
    if (!pinned) return void (await pins.unpin(t.lib.name, t.fullpath));
    return pins.pin(t.lib.name, t.fullpath);
  }

  /** True when the path is pinned (itself or by a folder above it). */
  async pinned(t: Target, ctx?: CallContext): Promise<boolean> {
    if (!t.lib) return false;
    if (!(await this.opts.lookups.lookup(t.lib, t.fullpath, ctx))) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    return this.opts.pins?.pinned(t.lib.name, t.fullpath) ?? false;
  }

  /** Resolves once every pinned file queued is fetched (or failed: see status). */
  async fetched(): Promise<void> {
    await this.opts.pins?.idle();
  }

  /** Free up space: drops the cached content of the files under a path that are not kept. */
  async evict(t: LibraryTarget, ctx?: CallContext): Promise<{ files: number; bytes: number }> {
    const { disk, pins, lookups, writeBack } = this.opts;
    const lib = t.lib;
    if (!disk) return { files: 0, bytes: 0 };
    return freeUpSpace({
      disk, root: t.fullpath,
      stat: (fp) => lookups.lookup(lib, fp, ctx),
      list: (fp) => lookups.listDir(lib, fp, ctx),
      kept: (fp) => !!pins?.pinned(lib.name, fp) || writeBack.dirty(lib.name, fp) || !!writeBack.entry(lib.name, fp),
    });
  }
}
