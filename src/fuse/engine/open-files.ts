/**
 * Open files: the handles the kernel opens and creates through the mount, and their end — release, and
 * unlink of a file still open here (renamed to `.fuse_hidden…` and removed at its last close, as libfuse's
 * high-level API does). Which inode each handle is open on is kept here for the rest of the mount
 * (`openInodes`); the backing file of an open handed to the kernel comes from passthrough-files.ts.
 */
import type { Logger } from 'pino';
import { Errno, errnoOf } from '../errno.js';
import type { FuseOperations } from '../operations.js';
import type { NativeCallback } from '../reply.js';
import type { KernelStat } from '../stat.js';
import type { Attr } from '../../vfs/types.js';
import type { Fuse3Binding, KernelRequest, NativeSession } from './binding.js';
import type { EngineRecords } from './engine-records.js';
import type { InodeNode, InodeTable } from './inode-table.js';
import type { PassthroughFiles } from './passthrough-files.js';
import type { PathOperations } from './path-operations.js';
import type { SpoolWrites } from './spool-writes.js';

/** What open files need of the mount. */
export interface OpenFilesMount {
  readonly binding: Fuse3Binding;
  /** The session while mounted. */
  session(): NativeSession | undefined;
  readonly inodes: InodeTable;
  readonly ops: PathOperations;
  readonly operations: FuseOperations;
  readonly logger: Logger;
  /** Seconds the kernel keeps names, attributes and negative lookups. */
  readonly timeout: number;
  /** File handle → the inode it was opened on, and whether for writing. */
  readonly openInodes: Map<number, { node: InodeNode; writable: boolean }>;
  readonly passthrough: PassthroughFiles;
  readonly writes: SpoolWrites;
  records(): EngineRecords;
  shown(node: InodeNode, st: KernelStat): void;
  /** A file whose size or mtime differs from what the kernel was last shown. */
  shownOtherwise(node: InodeNode, st: KernelStat): boolean;
  statArray(ino: number, st: KernelStat): Float64Array;
  safePath(ino: number): string;
}

// open(2) flags.
const O_ACCMODE = 0o3;
const O_WRONLY = 0o1;
const O_RDWR = 0o2;
const O_TRUNC = 0o1000;
const O_APPEND = 0o2000;
// Open reply flags of the native part.
const KEEP_CACHE = 2;

export class OpenFiles {
  /** The kernel's writeback cache was granted at INIT (it reads pages of files opened write-only). */
  writeback = false;

  constructor(private readonly mount: OpenFilesMount) {}

  private get se(): NativeSession {
    return this.mount.session()!;
  }

  /** OPEN: the Vfs opens the file; the answer carries a backing file when the kernel is handed it (passthrough). */
  open(id: number, req: KernelRequest): void {
    const b = this.mount.binding;
    const se = this.se;
    const node = this.mount.inodes.get(req.ino);
    const path = this.mount.inodes.pathOf(node);
    this.mount.ops.open(path, this.openFlags(req.flags!), (code, fh) => {
      if (code < 0) return void b.replyErr(se, id, -code);
      const handle = fh as number;
      // An emptying open: the kernel sets the size itself (and holds the file's lock until answered).
      const kernelsOwnSize = node.writers > 0 || (req.flags! & O_TRUNC) !== 0;
      this.opened(node, handle);
      // What the open holds, looked at once for both questions below (its time and size, its content).
      let held: Promise<Attr> | undefined;
      const attrs = (): Promise<Attr> => (held ??= this.mount.operations.handles.get(handle).handle.stat());
      void this.kernelAttributesFor(node, path, attrs, kernelsOwnSize).then(() => this.mount.passthrough.backingFor(node, handle, req.flags!)).then(async (backing) => {
        if (backing < 0) {
          // Refused (a write open of a file whose cache file the kernel reads): the handle goes.
          b.replyErr(se, id, -backing);
          return void this.closeUnanswered(path, handle);
        }
        const answered = backing ? b.replyOpenBacking(se, id, handle, backing) : b.replyOpen(se, id, handle, await this.cacheFlags(node, attrs));
        if (!answered) this.closeUnanswered(path, handle);
      });
    });
  }

  /**
   * Before an open is answered: when what it opened differs in size or mtime from what the kernel was last
   * shown of the inode (a change the Vfs found before the updates feed brought it, say when it looked up
   * the file's lock for this open), the kernel and the engine forget their attributes of it. The kernel
   * reads no further than the size it holds: else this open would read the new content cut to the old
   * size, until the feed's poll (which finds the change shown already). Not of a file a handle of this
   * mount writes, nor at an emptying open (the kernel's size is its own then). A file whose attributes
   * the kernel had from the engine only (a create it answered) counts as shown otherwise, unless the
   * kernel writes it itself: another front end may have written it while it was open here (regression: a
   * file left empty, replaced through WebDAV while kept open, read back empty after its close).
   */
  private async kernelAttributesFor(node: InodeNode, path: string, attrs: () => Promise<Attr>, kernelsOwnSize: boolean): Promise<void> {
    if (kernelsOwnSize || node.isDir) return;
    const unknown = node.shown === undefined;
    if (unknown && this.mount.passthrough.writesItself(node.ino)) return;
    try {
      let st: KernelStat;
      try {
        st = this.mount.operations.stat(await attrs());
      } catch {
        return; // released meanwhile: nothing to tell
      }
      const se = this.mount.session();
      if (!se || !(unknown || this.mount.shownOtherwise(node, st))) return;
      this.mount.binding.attrForget(se, node.ino);
      const rc = await this.mount.binding.invalidateInode(se, node.ino);
      if (rc < 0 && rc !== -Errno.ENOENT) this.mount.logger.debug({ path, rc }, 'fuse: telling the kernel of a file changed elsewhere failed');
    } catch (err) {
      this.mount.logger.warn({ path, err: String(err) }, 'fuse: telling the kernel of a file changed elsewhere failed');
    }
  }

  /**
   * KEEP_CACHE, unless this open reads another content than the one the kernel's pages were last filled
   * from: then the kernel drops them at the open. A change made elsewhere is also told to the kernel when
   * the feed brings it, but a read under way may fill pages with the old content after that; without
   * this, same-size same-time content would be read from those pages for as long as they stay.
   */
  private async cacheFlags(node: InodeNode, attrs: () => Promise<Attr>): Promise<number> {
    let hash: string | undefined;
    try {
      hash = (await attrs()).contentHash;
    } catch {
      return 0; // released meanwhile: nothing to keep
    }
    const before = node.pagesOf;
    if (hash !== undefined) node.pagesOf = hash;
    return before !== undefined && hash !== undefined && before !== hash ? 0 : KEEP_CACHE;
  }

  /**
   * open(2) flags as the Vfs should see them: with the writeback cache the kernel reads pages of files
   * opened write-only and computes append offsets itself.
   */
  openFlags(flags: number): number {
    if (!this.writeback) return flags;
    let f = flags;
    if ((f & O_ACCMODE) === O_WRONLY) f = (f & ~O_ACCMODE) | O_RDWR;
    return f & ~O_APPEND;
  }

  private opened(node: InodeNode, fh: number): void {
    let writable = false;
    try {
      writable = this.mount.operations.handles.get(fh).writable;
    } catch {
      // Released already (deadline): counted as read-only.
    }
    this.mount.inodes.opened(node, writable);
    this.mount.openInodes.set(fh, { node, writable });
  }

  /** The kernel closed `fh` (or never got it). */
  forgetHandle(fh: number): { node: InodeNode; writable: boolean } | undefined {
    const open = this.mount.openInodes.get(fh);
    this.mount.openInodes.delete(fh);
    return open;
  }

  /** An open the kernel gave up on (interrupted): release what it opened. */
  closeUnanswered(path: string, fh: number): void {
    const ino = this.mount.openInodes.get(fh)?.node.ino;
    if (ino !== undefined) this.mount.passthrough.liveHandleClosed(ino, fh);
    this.mount.ops.release(path, fh, () => {
      const open = this.forgetHandle(fh);
      if (open) this.mount.inodes.closed(open.node, open.writable);
    });
  }

  create(id: number, req: KernelRequest): void {
    const b = this.mount.binding;
    const se = this.se;
    const parent = req.ino;
    const name = req.name!;
    const path = this.mount.inodes.childPath(parent, name);
    this.mount.operations.createWithFlags(path, req.flags!, req.mode!, (code, fh) => {
      if (code < 0) return void b.replyErr(se, id, -code);
      const handle = fh as number;
      this.mount.ops.fgetattr(path, handle, (c, st) => {
        if (c < 0) {
          b.replyErr(se, id, -c);
          this.mount.ops.release(path, handle, () => undefined);
          return;
        }
        const stat = st as KernelStat;
        let node: InodeNode;
        try {
          node = this.mount.inodes.remember(parent, name, false, true);
        } catch (err) {
          b.replyErr(se, id, -errnoOf(err));
          this.mount.ops.release(path, handle, () => undefined);
          return;
        }
        this.mount.shown(node, stat);
        this.opened(node, handle);
        void this.mount.passthrough.backingFor(node, handle, req.flags!).then((backing) => {
          if (backing < 0) {
            b.replyErr(se, id, -backing);
            this.mount.inodes.forget(node.ino, 1);
            return void this.closeUnanswered(path, handle);
          }
          const attrs = this.mount.statArray(node.ino, stat);
          const answered = backing ? b.replyCreateBacking(se, id, attrs, this.mount.timeout, this.mount.timeout, handle, backing) : b.replyCreate(se, id, attrs, this.mount.timeout, this.mount.timeout, handle, KEEP_CACHE);
          if (!answered) {
            this.mount.inodes.forget(node.ino, 1);
            this.closeUnanswered(path, handle);
          }
        });
      });
    });
  }

  /**
   * unlink of a file still open here: renamed to `.fuse_hidden…` in its folder and removed at the last
   * close (as libfuse's high-level API does), so its data stays readable and writable through the open
   * descriptors and nothing written later recreates the name.
   */
  unlink(id: number, parent: number, name: string): void {
    const b = this.mount.binding;
    const se = this.se;
    const path = this.mount.inodes.childPath(parent, name);
    const node = this.mount.inodes.find(parent, name);
    if (node && node.opens > 0 && !node.isDir) {
      const hidden = `.fuse_hidden${node.ino.toString(16).padStart(8, '0')}${Date.now().toString(16).slice(-8)}`;
      this.mount.ops.rename(path, this.mount.inodes.childPath(parent, hidden), (code) => {
        if (code === 0) {
          this.mount.inodes.rename(parent, name, parent, hidden);
          node.hidden = true;
          this.mount.binding.namesForget(se, parent);
          // Its last handle was released while it was being renamed: nothing removes it at a close now.
          if (node.opens === 0 && !node.detached) this.removeHidden(node);
        }
        b.replyErr(se, id, code < 0 ? -code : 0);
      });
      return;
    }
    this.mount.ops.unlink(path, (code) => {
      if (code === 0) this.mount.inodes.removeName(parent, name);
      b.replyErr(se, id, code < 0 ? -code : 0);
    });
  }

  release(id: number, ino: number, fh: number): void {
    this.releaseHandle(ino, fh, (code) => this.mount.binding.replyErr(this.se, id, code < 0 ? -code : 0));
  }

  /** Releases `fh`; `done` gets the Vfs's answer, then the inode's bookkeeping follows. */
  releaseHandle(ino: number, fh: number, done: NativeCallback): void {
    // A file the kernel writes into a spool the Vfs could not take over: what it wrote since the last
    // flush goes into the version first (engine-records.ts).
    const copying = this.mount.records().copyStrayed(fh);
    if (!copying) return this.releaseNow(ino, fh, done);
    void copying.then((errno) => {
      if (errno) this.mount.logger.error({ path: this.mount.safePath(ino), errno }, 'fuse: what the kernel wrote after the last close of a file could not be kept');
      this.releaseNow(ino, fh, done);
    });
  }

  private releaseNow(ino: number, fh: number, done: NativeCallback): void {
    const path = this.mount.safePath(ino);
    // Before the Vfs's release: the version takes its last size from the spool while it is still open.
    this.mount.passthrough.liveHandleClosed(ino, fh);
    this.mount.ops.release(path, fh, (code) => {
      this.mount.records().handleReleased(fh);
      this.mount.writes.released(fh);
      done(code);
      const open = this.forgetHandle(fh);
      if (!open) return;
      const node = open.node;
      if (node.hidden && node.opens === 1 && !node.detached) {
        this.removeHidden(node, () => this.mount.inodes.closed(node, open.writable));
        return;
      }
      this.mount.inodes.closed(node, open.writable);
    });
  }

  /** Removes an unlinked file kept under its `.fuse_hidden…` name once nothing has it open; then `done`. */
  private removeHidden(node: InodeNode, done?: () => void): void {
    const hiddenPath = this.mount.inodes.pathOf(node);
    this.mount.ops.unlink(hiddenPath, (c) => {
      if (c < 0) this.mount.logger.warn({ path: hiddenPath, errno: -c }, 'fuse: removing an unlinked file at its last close failed');
      if (!node.detached && node.parent) this.mount.inodes.removeName(node.parent.ino, node.name);
      done?.();
    });
  }
}
