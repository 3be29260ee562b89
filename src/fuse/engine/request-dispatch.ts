/**
 * RequestDispatch: the kernel's requests, each answered. A request names inodes; the InodeTable turns each
 * into a gateway path, the path-based operation table does the work (deadlines, errnos, xattrs), and the
 * answer goes back through the matching reply function. Open files (open-files.ts), writes
 * (spool-writes.ts), folder listings (folder-listings.ts) and files handed to the kernel
 * (passthrough-files.ts) are parts of their own; the session and the replay of what the engine answered
 * itself are the mount's (lowlevel-mount.ts).
 */
import type { Logger } from 'pino';
import { Errno, errnoOf } from '../errno.js';
import type { FuseOperations } from '../operations.js';
import type { NativeCallback } from '../reply.js';
import { S_IFMT, type KernelStat, type KernelStatFs } from '../stat.js';
import { Op, type Fuse3Binding, type KernelRequest, type NativeSession } from './binding.js';
import type { EngineRecords } from './engine-records.js';
import type { InodeNode, InodeTable } from './inode-table.js';
import { answerOf, type PathOperations } from './path-operations.js';
import { PassthroughFiles } from './passthrough-files.js';
import { DIR_FH_BASE, FolderListings } from './folder-listings.js';
import { OpenFiles } from './open-files.js';
import { SpoolWrites, type DirectWriteCounters } from './spool-writes.js';

/** What the kernel agreed to at INIT. */
export interface NegotiatedSession {
  maxWrite: number;
  maxReadahead: number;
  maxBackground: number;
  writeback: boolean;
}

/** What the dispatch needs of the mount. */
export interface DispatchMount {
  readonly binding: Fuse3Binding;
  readonly inodes: InodeTable;
  readonly operations: FuseOperations;
  readonly logger: Logger;
  /** Seconds the kernel keeps names, attributes and negative lookups. */
  readonly timeout: number;
  /** The session while mounted. */
  session(): NativeSession | undefined;
  /** The replay of what the engine answered itself (late errors, released handles, answered closes). */
  records(): EngineRecords;
  /** INIT is answered: what the kernel agreed to. */
  initialized(negotiated: NegotiatedSession): void;
  /** END: the connection is gone. */
  ended(): void;
}

// setattr `valid` bits (FUSE_SET_ATTR_*).
const SET_MODE = 1 << 0;
const SET_UID = 1 << 1;
const SET_GID = 1 << 2;
const SET_SIZE = 1 << 3;
const SET_ATIME = 1 << 4;
const SET_MTIME = 1 << 5;
const SET_ATIME_NOW = 1 << 7;
const SET_MTIME_NOW = 1 << 8;
// renameat2 flags.
const RENAME_NOREPLACE = 1;

export class RequestDispatch {
  readonly binding: Fuse3Binding;
  readonly inodes: InodeTable;
  readonly operations: FuseOperations;
  readonly ops: PathOperations;
  readonly logger: Logger;
  readonly timeout: number;
  /** File handle → the inode it was opened on, and whether for writing. */
  readonly openInodes = new Map<number, { node: InodeNode; writable: boolean }>();
  readonly directCounts: Omit<DirectWriteCounters, 'spoolWritebacks' | 'spoolSyncs'> = { spoolsAttached: 0, directWrites: 0, hashedByEngine: 0, fdReads: 0, passthroughFiles: 0, passthroughOpens: 0, passthroughReads: 0, madeClosed: 0 };
  /** Files handed to the kernel (passthrough, see docs/fuse.md). */
  readonly passthrough: PassthroughFiles;
  /** Directory handles and listings, and the names of folders given to the engine. */
  readonly listings: FolderListings;
  /** Writes of file handles, through the Vfs or into their spools by the engine. */
  readonly writes: SpoolWrites;
  /** Opens, creates, releases and unlinks of open files. */
  readonly files: OpenFiles;
  /** The kernel's names being forgotten, one after the other (see invalidate). */
  private invalidations: Promise<void> = Promise.resolve();
  private readonly scratch = new Float64Array(11);

  constructor(private readonly mount: DispatchMount) {
    this.binding = mount.binding;
    this.inodes = mount.inodes;
    this.operations = mount.operations;
    this.ops = mount.operations.toNative() as unknown as PathOperations;
    this.logger = mount.logger;
    this.timeout = mount.timeout;
    this.listings = new FolderListings(this);
    this.writes = new SpoolWrites(this);
    this.passthrough = new PassthroughFiles(this);
    this.files = new OpenFiles(this);
  }

  /** The session while mounted. */
  session(): NativeSession | undefined {
    return this.mount.session();
  }

  /** The replay of what the engine answered itself. */
  records(): EngineRecords {
    return this.mount.records();
  }

  private get se(): NativeSession {
    return this.mount.session()!;
  }

  /** Answers a request (not a record of the engine): a failure thrown on the way is answered as its errno. */
  dispatchSafely(req: KernelRequest): void {
    // A handle of a file the engine created and the Vfs refused: its requests answer the refusal.
    const refused = req.fh !== undefined && req.op !== Op.RELEASE ? this.mount.records().refusalOf(req.fh) : undefined;
    if (refused !== undefined && req.id) return void this.binding.replyErr(this.se, req.id, refused);
    try {
      this.dispatch(req);
    } catch (err) {
      if (req.id) this.binding.replyErr(this.se, req.id, -errnoOf(err));
    }
  }

  /** Answers a flush or fsync of `fh`: an answered request's failure first, else the operation's own code. */
  private replyDurable(id: number, fh: number): NativeCallback {
    return (code) => {
      const late = this.mount.records().takeLateError(fh);
      this.binding.replyErr(this.se, id, late ?? (code < 0 ? -code : 0));
    };
  }

  /**
   * Runs `durable` (a flush or fsync of `fh`) once a file the kernel writes into a spool the Vfs could not
   * take over has the spool's bytes in its version (engine-records.ts); a failure of that answers instead.
   */
  private afterStrayedCopy(id: number, fh: number, durable: () => void): void {
    const copying = this.mount.records().copyStrayed(fh);
    if (!copying) return durable();
    void copying.then((errno) => (errno ? this.binding.replyErr(this.se, id, errno) : durable()));
  }

  /** Attributes for the kernel, with this inode's number. */
  statArray(ino: number, st: KernelStat): Float64Array {
    const a = this.scratch;
    a[0] = ino;
    a[1] = st.mode;
    a[2] = st.nlink;
    a[3] = st.uid;
    a[4] = st.gid;
    a[5] = st.size;
    a[6] = st.blocks;
    a[7] = st.blksize;
    a[8] = st.atime;
    a[9] = st.mtime;
    a[10] = st.ctime;
    return a;
  }

  shown(node: InodeNode, st: KernelStat): void {
    node.shown = { size: st.size, mtimeMs: st.mtime, kind: st.mode & S_IFMT };
  }

  /**
   * The name of `node` now holds another kind of object than the kernel was shown (a link where a file
   * was, or the other way round). The kernel takes attributes of another kind for the same inode as a
   * corrupt inode: it marks it bad and answers EIO to everything on it from then on (readlink, stat).
   */
  private kindChanged(node: InodeNode, st: KernelStat): boolean {
    return node.shown?.kind !== undefined && node.shown.kind !== (st.mode & S_IFMT);
  }

  private replyCode(id: number): NativeCallback {
    return (code) => {
      this.binding.replyErr(this.se, id, code < 0 ? -code : 0);
    };
  }

  safePath(ino: number): string {
    try {
      return this.inodes.path(ino);
    } catch {
      return `(removed inode ${ino})`;
    }
  }

  private isFileHandle(fh: number | undefined): fh is number {
    return fh !== undefined && fh < DIR_FH_BASE;
  }

  private dispatch(req: KernelRequest): void {
    const se = this.se;
    const b = this.binding;
    const id = req.id;
    switch (req.op) {
      case Op.INIT: {
        this.files.writeback = !!req.writeback;
        const negotiated = { maxWrite: req.maxWrite!, maxReadahead: req.maxReadahead!, maxBackground: req.maxBackground!, writeback: this.files.writeback };
        const t = b.transport(se);
        this.logger.info({ ...negotiated, transport: t.transport, ...(t.why ? { why: t.why } : { queues: t.queues, depth: t.depth }) }, 'fuse: session started (libfuse 3)');
        this.mount.initialized(negotiated);
        return;
      }
      case Op.END:
        this.mount.ended();
        return;
      case Op.FORGET:
        this.inodes.forget(req.ino, req.nlookup!);
        return;
      case Op.LOOKUP:
        return this.lookup(id, req.ino, req.name!);
      case Op.GETATTR: {
        const path = this.inodes.path(req.ino);
        const node = this.inodes.get(req.ino);
        const reply: NativeCallback = (code, st) => {
          if (code < 0) return void b.replyErr(se, id, -code);
          const stat = st as KernelStat;
          // The object this inode was is gone, another kind of object took its name: ENOENT for it (the
          // next lookup of the name gives the new object an inode of its own).
          if (this.kindChanged(node, stat)) {
            this.invalidate(node);
            return void b.replyErr(se, id, Errno.ENOENT);
          }
          // Changed elsewhere: keep what was shown, so the next lookup gives the name a new inode, and
          // make the kernel look the name up again.
          if (this.changedElsewhere(node, stat)) this.invalidate(node);
          else this.shown(node, stat);
          b.replyAttr(se, id, this.statArray(req.ino, stat), this.timeout);
        };
        if (this.isFileHandle(req.fh) && !node.isDir) this.ops.fgetattr(path, req.fh, reply);
        else this.ops.getattr(path, reply);
        return;
      }
      case Op.SETATTR:
        void this.setattr(req);
        return;
      case Op.MKDIR: {
        const path = this.inodes.childPath(req.ino, req.name!);
        this.ops.mkdir(path, req.mode!, (code) => {
          if (code < 0) return void b.replyErr(se, id, -code);
          this.ops.getattr(path, (c, st) => this.replyNewEntry(id, req.ino, req.name!, c, st as KernelStat, true));
        });
        return;
      }
      case Op.UNLINK:
        return this.files.unlink(id, req.ino, req.name!);
      case Op.SYMLINK: {
        const path = this.inodes.childPath(req.ino, req.name!);
        this.ops.symlink(req.target!, path, (code) => {
          if (code < 0) return void b.replyErr(se, id, -code);
          this.ops.getattr(path, (c, st) => this.replyNewEntry(id, req.ino, req.name!, c, st as KernelStat, true));
        });
        return;
      }
      case Op.READLINK:
        this.ops.readlink(this.inodes.path(req.ino), (code, target) => {
          if (code < 0) return void b.replyErr(se, id, -code);
          const bytes = Buffer.from(target as string, 'utf8');
          b.replyData(se, id, [bytes], bytes.length);
        });
        return;
      case Op.RMDIR: {
        const path = this.inodes.childPath(req.ino, req.name!);
        this.ops.rmdir(path, (code) => {
          if (code === 0) this.inodes.removeName(req.ino, req.name!);
          b.replyErr(se, id, code < 0 ? -code : 0);
        });
        return;
      }
      case Op.RENAME: {
        if ((req.flags! & ~RENAME_NOREPLACE) !== 0) return void b.replyErr(se, id, Errno.EINVAL);
        const from = this.inodes.childPath(req.ino, req.name!);
        const to = this.inodes.childPath(req.newparent!, req.newname!);
        const moved = this.inodes.find(req.ino, req.name!);
        const done: NativeCallback = (code) => {
          if (code === 0) {
            // The moved file's ctime and the replaced one's attributes changed: the engine's copies go.
            for (const n of [this.inodes.find(req.ino, req.name!), this.inodes.find(req.newparent!, req.newname!)]) if (n) b.attrForget(se, n.ino);
            this.inodes.rename(req.ino, req.name!, req.newparent!, req.newname!, moved);
          }
          // A file moved (or did not): every folder is where it was, and the engine may go on closing files
          // in them (an rsync renames each file it wrote). Told before the answer: the next create sees it.
          if (moved && !moved.isDir && req.pathsEpoch !== undefined) b.pathsKept(se, req.pathsEpoch);
          b.replyErr(se, id, code < 0 ? -code : 0);
        };
        if (req.flags! & RENAME_NOREPLACE) this.operations.renameNoReplace(from, to, done);
        else this.ops.rename(from, to, done);
        return;
      }
      case Op.OPEN:
        return this.files.open(id, req);
      case Op.CREATE:
        return this.files.create(id, req);
      case Op.READ: {
        // Bytes in a local file (a spool): read by the engine from its descriptor, never entering JavaScript.
        const local = this.isFileHandle(req.fh) ? this.operations.localRange(req.fh, req.offset!, req.size!) : undefined;
        if (local) {
          this.directCounts.fdReads++;
          b.replyFd(se, id, local.fd, local.position, local.length);
          return;
        }
        this.operations.readParts(this.safePath(req.ino), req.fh!, req.size!, req.offset!, (code, parts) => {
          if (code < 0) return void b.replyErr(se, id, -code);
          b.replyData(se, id, parts as Buffer[], req.size!);
        });
        return;
      }
      case Op.WRITE:
        return this.writes.write(req);
      case Op.WROTE:
        return this.writes.wroteRecord(req);
      case Op.HASHED:
        return this.writes.hashed(req);
      case Op.FLUSH:
        return this.afterStrayedCopy(id, req.fh!, () => this.ops.flush(this.safePath(req.ino), req.fh!, this.replyDurable(id, req.fh!)));
      case Op.FSYNC:
        return this.afterStrayedCopy(id, req.fh!, () => this.ops.fsync(this.safePath(req.ino), req.flags!, req.fh!, this.replyDurable(id, req.fh!)));
      case Op.FALLOCATE:
        this.ops.fallocate(this.safePath(req.ino), req.fh!, req.offset!, req.size!, (code) => b.replyErr(se, id, code < 0 ? -code : 0));
        return;
      case Op.RELEASE:
        return this.files.release(id, req.ino, req.fh!);
      case Op.OPENDIR:
        return this.listings.open(id, req.ino);
      case Op.READDIR:
        return this.listings.readdir(id, req, false);
      case Op.READDIRPLUS:
        return this.listings.readdir(id, req, true);
      case Op.RELEASEDIR:
        return this.listings.release(id, req.fh!);
      case Op.FSYNCDIR:
        this.ops.fsyncdir(this.safePath(req.ino), req.flags!, req.fh!, this.replyCode(id));
        return;
      case Op.STATFS:
        this.ops.statfs(this.safePath(req.ino), (code, fs) => {
          if (code < 0) return void b.replyErr(se, id, -code);
          const s = fs as KernelStatFs;
          b.replyStatfs(se, id, Float64Array.of(s.bsize, s.frsize, s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.favail, s.fsid, s.flag, s.namemax));
        });
        return;
      case Op.SETXATTR:
        this.ops.setxattr(this.inodes.path(req.ino), req.name!, req.data!, 0, req.flags!, this.replyCode(id));
        return;
      case Op.REMOVEXATTR:
        this.ops.removexattr(this.inodes.path(req.ino), req.name!, this.replyCode(id));
        return;
      case Op.GETXATTR:
      case Op.LISTXATTR: {
        const size = req.size!;
        const target = Buffer.alloc(size);
        const reply: NativeCallback = (code) => {
          if (code < 0) return void b.replyErr(se, id, -code);
          if (size === 0) b.replyXattrSize(se, id, code);
          else b.replyData(se, id, [target], code);
        };
        const path = this.inodes.path(req.ino);
        if (req.op === Op.GETXATTR) this.ops.getxattr(path, req.name!, target, reply);
        else this.ops.listxattr(path, target, reply);
        return;
      }
      case Op.ACCESS:
        this.ops.access(this.inodes.path(req.ino), req.flags!, this.replyCode(id));
        return;
      default:
        b.replyErr(se, id, Errno.ENOSYS);
    }
  }

  private lookup(id: number, parent: number, name: string): void {
    const b = this.binding;
    const se = this.se;
    const path = this.inodes.childPath(parent, name);
    this.ops.getattr(path, (code, st) => {
      if (code === -Errno.ENOENT) {
        this.listings.offerNames(id, parent);
        return void b.replyNegative(se, id, this.timeout);
      }
      this.replyNewEntry(id, parent, name, code, st as KernelStat, false);
    });
  }

  /**
   * Answers a lookup (or mkdir) with the inode of `name`, counting the reference. A file whose size or
   * mtime changed since the kernel last saw it, and that is not open, gets a new inode: the kernel's
   * cached pages and size of the old one (kept as its own with the writeback cache) are then not used.
   */
  private replyNewEntry(id: number, parent: number, name: string, code: number, st: KernelStat, created: boolean): void {
    if (code < 0) return void this.binding.replyErr(this.se, id, -code);
    const isDir = (st.mode & 0o170000) === 0o040000;
    const known = this.inodes.find(parent, name);
    const changed = !created && known !== undefined && this.changedElsewhere(known, st);
    const node = this.inodes.remember(parent, name, isDir, created || changed);
    this.shown(node, st);
    // A folder just made is empty: the engine answers lookups in it (every file about to be made there).
    if (created && isDir) this.binding.folderNames(this.se, id, node.ino, [], this.timeout, this.closesWhere(this.inodes.pathOf(node)));
    if (!this.binding.replyEntry(this.se, id, this.statArray(node.ino, st), this.timeout, this.timeout)) this.inodes.forget(node.ino, 1);
  }

  /** Where folder `path` is in the Vfs, when the engine answers closes and may do so there. */
  closesWhere(path: string): { library: string; fullpath: string } | undefined {
    return this.mount.records().answersCloses ? this.operations.answeredClosesIn(path) : undefined;
  }

  /** A file not open here whose size or mtime differs from what the kernel was last shown. */
  changedElsewhere(node: InodeNode, st: KernelStat): boolean {
    if (this.kindChanged(node, st)) return true;
    return node.writers === 0 && this.shownOtherwise(node, st);
  }

  /** A file whose size or mtime differs from what the kernel was last shown (open here or not). */
  shownOtherwise(node: InodeNode, st: KernelStat): boolean {
    // A file handed to the kernel changes through it, not elsewhere (see liveHandleClosed).
    if (this.passthrough.writesItself(node.ino)) return false;
    return !node.isDir && node.shown !== undefined && (node.shown.size !== st.size || node.shown.mtimeMs !== st.mtime);
  }

  /** True when the file changed elsewhere since the kernel last saw it (then its cached times are stale). */
  async staleKernelTimes(node: InodeNode, path: string): Promise<boolean> {
    if (node.isDir || node.writers > 0 || !node.shown) return false;
    const [code, st] = await answerOf((cb) => this.ops.getattr(path, cb));
    return code === 0 && this.changedElsewhere(node, st as KernelStat);
  }

  /**
   * The kernel forgets `node`'s name. One at a time: each runs on a thread of Node's pool, where it may
   * wait for the folder's lock, held by a request that an operation on that same pool must finish
   * (measured: four invalidations at once in a folder where files were being removed took every thread
   * of the pool, and the removals hung to their deadline).
   */
  invalidate(node: InodeNode): void {
    const se = this.mount.session();
    if (se) this.binding.attrForget(se, node.ino);
    if (node.detached || !node.parent || !se) return;
    const name = node.name;
    const parent = node.parent.ino;
    this.invalidations = this.invalidations.then(() => this.binding.invalidateEntry(se, parent, name)).then(
      (rc) => {
        if (rc < 0 && rc !== -Errno.ENOENT) this.logger.debug({ name, rc }, 'fuse: invalidating a cached name failed');
      },
      (err: unknown) => this.logger.warn({ name, err: String(err) }, 'fuse: invalidating a cached name failed'),
    );
  }

  /** Runs a notification of the kernel after those queued before it (see invalidate); an answer other than 0 or ENOENT is logged. */
  notifyKernel(what: Record<string, unknown>, call: (se: NativeSession) => Promise<number>): void {
    this.invalidations = this.invalidations.then(() => {
      const se = this.mount.session();
      return se ? call(se) : 0;
    }).then(
      (rc) => {
        if (rc < 0 && rc !== -Errno.ENOENT) this.logger.debug({ ...what, rc }, 'fuse: telling the kernel of a change made elsewhere failed');
      },
      (err: unknown) => this.logger.warn({ ...what, err: String(err) }, 'fuse: telling the kernel of a change made elsewhere failed'),
    );
  }

  private async setattr(req: KernelRequest): Promise<void> {
    const b = this.binding;
    const se = this.se;
    const id = req.id;
    const valid = req.valid!;
    try {
      const node = this.inodes.get(req.ino);
      const path = this.inodes.pathOf(node);
      const fh = this.isFileHandle(req.fh) && !node.isDir ? req.fh : undefined;
      const step = async (start: (cb: NativeCallback) => void): Promise<boolean> => {
        const [code] = await answerOf(start);
        if (code < 0) b.replyErr(se, id, -code);
        return code >= 0;
      };
      if (valid & SET_SIZE) {
        const ok = await step((cb) => (fh !== undefined ? this.ops.ftruncate(path, fh, req.size!, cb) : this.ops.truncate(path, req.size!, cb)));
        if (!ok) return;
      }
      if (valid & SET_MODE && !(await step((cb) => this.ops.chmod(path, req.mode!, cb)))) return;
      if (valid & (SET_UID | SET_GID)) {
        const uid = valid & SET_UID ? req.uid! : 0xffff_ffff;
        const gid = valid & SET_GID ? req.gid! : 0xffff_ffff;
        if (!(await step((cb) => this.ops.chown(path, uid, gid, cb)))) return;
      }
      const atime = valid & SET_ATIME_NOW ? Date.now() : valid & SET_ATIME ? req.atimeMs : undefined;
      if (valid & (SET_MTIME | SET_MTIME_NOW)) {
        const mtime = valid & SET_MTIME_NOW ? Date.now() : req.mtimeMs!;
        if (!(valid & SET_SIZE) && (await this.staleKernelTimes(node, path))) {
          // The kernel writes back the times of what it cached long after: not over a newer version.
          this.logger.debug({ path }, 'fuse: kept the times of a file changed elsewhere');
        } else if (!(await step((cb) => this.ops.utimens(path, atime ?? mtime, mtime, cb)))) return;
      } else if (atime !== undefined && !(await step((cb) => this.ops.accessTime(path, atime, cb)))) return;
      const [code, st] = await answerOf((cb) => (fh !== undefined ? this.ops.fgetattr(path, fh, cb) : this.ops.getattr(path, cb)));
      if (code < 0) return void b.replyErr(se, id, -code);
      if (this.kindChanged(node, st as KernelStat)) {
        this.invalidate(node);
        return void b.replyErr(se, id, Errno.ENOENT);
      }
      if (this.changedElsewhere(node, st as KernelStat)) this.invalidate(node);
      else this.shown(node, st as KernelStat);
      b.replyAttr(se, id, this.statArray(req.ino, st as KernelStat), this.timeout);
    } catch (err) {
      b.replyErr(se, id, -errnoOf(err));
    }
  }
}
