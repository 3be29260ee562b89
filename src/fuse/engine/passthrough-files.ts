/**
 * Passthrough (docs/fuse.md): files handed to the kernel, which then reads and writes their spools itself
 * through a backing file. An open is answered with a backing file only when the version can be handed
 * over (LeasedHandle.passthrough); the hand-over ends with the last handle opened with it.
 */
import type { Logger } from 'pino';
import { Errno } from '../errno.js';
import type { FuseOperations } from '../operations.js';
import type { Fuse3Binding, NativeSession } from './binding.js';
import type { InodeNode } from './inode-table.js';
import type { DirectWriteCounters } from './spool-writes.js';
import type { LeasedHandle } from '../../vfs/engine-lease.js';

/**
 * An inode handed to the kernel (passthrough): the backing file's id, the handles opened with it (every
 * open of the inode is, while any is: the kernel takes no other), the version's end, and a promise
 * settled once the first open's hand-over is decided (later opens wait for it).
 */
export interface LiveInode {
  backingId: number;
  /** Read-only opens reading a content cache file (LeasedHandle.localFile): the content's name. */
  cacheFile?: string;
  handles: Set<number>;
  end?: () => void;
  decided: Promise<void>;
}

/** What the hand-over needs of the mount. */
export interface PassthroughMount {
  readonly binding: Fuse3Binding;
  /** The session while mounted. */
  session(): NativeSession | undefined;
  readonly operations: FuseOperations;
  readonly logger: Logger;
  readonly openInodes: Map<number, { node: InodeNode; writable: boolean }>;
  readonly directCounts: Omit<DirectWriteCounters, 'spoolWritebacks' | 'spoolSyncs'>;
  safePath(ino: number): string;
}

/** A file registered as a backing file: its descriptor, and its end (once the kernel is done with it). */
interface BackingFile {
  readonly fd: number;
  end(): void;
}

/** What an open does with its backing file: what is logged when the kernel refuses it, and how it is kept. */
interface BackingUse<F extends BackingFile> {
  /** Logged when this process may register no backing file (EPERM). */
  notPermitted: string;
  /** Logged, with the path and errno, when the kernel refuses this one. */
  refused: string;
  /** The file registered: keeps it in the live `entry` and counts it; false gives it up. */
  adopt(entry: LiveInode, file: F): boolean;
}

// open(2) flags.
const O_ACCMODE = 0o3;
const O_DIRECT = 0o40000;

export class PassthroughFiles {
  /** Inodes handed to the kernel. */
  readonly live = new Map<number, LiveInode>();
  /** Passthrough granted at INIT (known from the first open on). */
  private granted: boolean | undefined;

  constructor(private readonly mount: PassthroughMount) {}

  /**
   * Passthrough (docs/fuse.md): the backing file an open of `node` is answered with, 0 for none, -errno to
   * refuse the open. An inode already handed to the kernel: its backing file, whatever the open, except a
   * write open of one whose cache file the kernel reads (EBUSY). Otherwise only an open that is the
   * inode's only open handle: a write open when its version can be handed over (LeasedHandle.passthrough),
   * a read-only one when the Vfs grants it its cache file (LeasedHandle.localFile).
   */
  async backingFor(node: InodeNode, fh: number, flags: number): Promise<number> {
    const se = this.mount.session();
    if (!se || node.isDir) return 0;
    this.granted ??= this.mount.binding.transport(se).passthrough;
    if (!this.granted) return 0;
    const known = this.live.get(node.ino);
    if (known) {
      await known.decided;
      if (this.live.get(node.ino) !== known || !known.backingId) return 0;
      // The kernel takes every open of an inode with a backing file through that file: a write open
      // would write the cache file. Refused while the kernel reads it (docs/fuse.md).
      if (known.cacheFile !== undefined && (flags & O_ACCMODE) !== 0) return -Errno.EBUSY;
      known.handles.add(fh);
      this.mount.directCounts.passthroughOpens++;
      return known.backingId;
    }
    // Another handle open, or O_DIRECT (through a backing file it would follow the local disk's
    // alignment rules, which FUSE does not have).
    if (node.opens > 1 || flags & O_DIRECT) return 0;
    let handle: LeasedHandle;
    try {
      handle = this.mount.operations.handles.get(fh).handle;
    } catch {
      return 0; // released meanwhile
    }
    if ((flags & O_ACCMODE) === 0) return this.cacheFileFor(se, node, fh, handle);
    const passthrough = handle.passthrough?.bind(handle);
    if (!passthrough) return 0;
    return this.registerBacking(se, node, fh, passthrough, {
      notPermitted: 'fuse: the kernel lets only a process with CAP_SYS_ADMIN register backing files; files are written through the engine',
      refused: 'fuse: the kernel refused a backing file; the file is written through the engine',
      adopt: (entry, spool) => {
        // No attributes of the file from the engine's cache while the kernel writes it.
        if (!this.mount.binding.attrLive(se, node.ino, true, spool.fd)) return false;
        entry.end = spool.end;
        this.mount.directCounts.passthroughFiles++;
        return true;
      },
    });
  }

  /**
   * A read-only open: the content cache's file the Vfs grants it (LeasedHandle.localFile), registered as
   * its backing file; the grant (its hold on the content) ends with the last handle opened with it.
   */
  private async cacheFileFor(se: NativeSession, node: InodeNode, fh: number, handle: LeasedHandle): Promise<number> {
    const localFile = handle.localFile?.bind(handle);
    if (!localFile) return 0;
    return this.registerBacking(se, node, fh, localFile, {
      notPermitted: 'fuse: the kernel lets only a process with CAP_SYS_ADMIN register backing files; cached files are read through the engine',
      refused: 'fuse: the kernel refused a cached file as a backing file; the file is read through the engine',
      adopt: (entry, grant) => {
        entry.cacheFile = grant.content;
        entry.end = () => grant.end();
        this.mount.directCounts.passthroughReads++;
        return true;
      },
    });
  }

  /**
   * Registers the file `take` gives (a spool to hand over, a cache file to read) as the backing file of
   * open `fh` of `node`. The inode is live meanwhile: later opens wait until this one is decided. Returns
   * the backing file's id, or 0 when there is no file, the kernel refuses it (EPERM: no file will be
   * registered, said once; ENOTSUP: silently; otherwise said with the path), or `adopt` gives it up; the
   * file ends then.
   */
  private async registerBacking<F extends BackingFile>(se: NativeSession, node: InodeNode, fh: number, take: () => Promise<F | undefined>, use: BackingUse<F>): Promise<number> {
    let decide!: () => void;
    const entry: LiveInode = { backingId: 0, handles: new Set([fh]), decided: new Promise((r) => (decide = r)) };
    this.live.set(node.ino, entry);
    try {
      const file = await take().catch(() => undefined);
      if (!file) return this.notLive(node.ino, entry);
      const id = this.mount.session() === se ? this.mount.binding.backingOpen(se, file.fd) : -Errno.EIO;
      if (id <= 0) {
        file.end();
        if (id === -Errno.EPERM) {
          // Not allowed to this process (CAP_SYS_ADMIN): no file will be, said once.
          this.granted = false;
          this.mount.logger.warn(use.notPermitted);
        } else if (id !== -Errno.ENOTSUP) this.mount.logger.warn({ path: this.mount.safePath(node.ino), errno: -id }, use.refused);
        return this.notLive(node.ino, entry);
      }
      if (!use.adopt(entry, file)) {
        this.mount.binding.backingClose(se, id);
        file.end();
        return this.notLive(node.ino, entry);
      }
      entry.backingId = id;
      this.mount.directCounts.passthroughOpens++;
      return id;
    } finally {
      decide();
    }
  }

  /** True when the kernel writes inode `ino`'s file itself (a spool handed over, not a cache file it reads). */
  writesItself(ino: number): boolean {
    const live = this.live.get(ino);
    return live !== undefined && live.cacheFile === undefined;
  }

  /**
   * The session ended: the grants of cache files go (no release will come for their handles). A kernel
   * still reading one reads its own reference to the file, which nothing writes.
   */
  endCacheFiles(): void {
    for (const [ino, live] of this.live) {
      if (live.cacheFile === undefined) continue;
      this.live.delete(ino);
      live.end?.();
    }
  }

  notLive(ino: number, entry: LiveInode): number {
    if (this.live.get(ino) === entry) this.live.delete(ino);
    return 0;
  }

  /** Handle `fh` of inode `ino` is closed: the last one opened with the backing file ends the hand-over. */
  liveHandleClosed(ino: number, fh: number): void {
    const live = this.live.get(ino);
    if (!live || !live.handles.delete(fh) || live.handles.size > 0) return;
    this.live.delete(ino);
    live.end?.();
    const se = this.mount.session();
    if (live.cacheFile !== undefined) {
      // Read only: the kernel changed nothing of the file.
      if (se && live.backingId) this.mount.binding.backingClose(se, live.backingId);
      return;
    }
    // What the kernel shows of it now came from its own writes: the next attributes answered are the base
    // a change made elsewhere is told from.
    const open = this.mount.openInodes.get(fh);
    if (open) open.node.shown = undefined;
    if (se && live.backingId) {
      this.mount.binding.backingClose(se, live.backingId);
      this.mount.binding.attrLive(se, ino, false);
    }
  }
}
