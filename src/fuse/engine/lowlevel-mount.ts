/**
 * LowLevelMount: serves FuseOperations through the libfuse 3 engine. Requests arrive by inode number in
 * batches (one crossing from the native reader thread per batch); the InodeTable turns each into a
 * gateway path, the path-based operation table does the work (deadlines, errnos, xattrs), and the
 * answer goes back through the matching reply function. The records of what the engine answered itself
 * are replayed apart (EngineRecords, engine-records.ts), in order with the requests about the same inodes.
 */
import type { Logger } from 'pino';
import { Errno, errnoOf } from '../errno.js';
import type { FuseOperations } from '../operations.js';
import type { NativeCallback } from '../reply.js';
import { S_IFMT, type KernelStat, type KernelStatFs } from '../stat.js';
import { Op, type AnsweredCounts, type Fuse3Binding, type KernelRequest, type NativeSession, type SessionSettings, type TransportState } from './binding.js';
import { InodeTable, ROOT_INO, type InodeNode } from './inode-table.js';
import { EngineRecords } from './engine-records.js';
import { answerOf, type PathOperations } from './path-operations.js';
import type { DirectSpool, LeasedHandle } from '../../vfs/engine-lease.js';
import type { ChangeSource } from '../../vfs/types.js';
import { KernelInvalidation, type KernelInvalidationCounters } from './kernel-invalidation.js';

export interface LowLevelMountOptions {
  binding: Fuse3Binding;
  operations: FuseOperations;
  mountpoint: string;
  /** libfuse mount options (`-o` list). */
  mountOptions: string[];
  settings: SessionSettings;
  /** Seconds the kernel keeps names, attributes and negative lookups. */
  attrTimeoutS: number;
  logger: Logger;
  /** Changes made elsewhere: the kernel forgets what it cached of them (kernel-invalidation.ts). */
  changes?: ChangeSource;
}

/** The engine's direct spool writes so far. */
export interface DirectWriteCounters {
  /** Handles (versions) whose writes the engine took over. */
  spoolsAttached: number;
  /** Writes it made (reported; failed ones included). */
  directWrites: number;
  /** Attachments that ended with the SHA-1 of the whole content computed by the engine. */
  hashedByEngine: number;
  /** Reads answered from a local file's descriptor by the engine (LeasedHandle.localRange). */
  fdReads: number;
  /** Files handed to the kernel (passthrough: it read and wrote their spools itself), and the opens answered with a backing file. */
  passthroughFiles: number;
  passthroughOpens: number;
  /** Of those, files the engine created, had written and closed before JavaScript saw them, made closed in one step (EngineLease.createClosed). */
  madeClosed: number;
  /** Times the engine started the writeback to disk of spool bytes it wrote and hashed. */
  spoolWritebacks: number;
  /** Background fdatasyncs the engine made of spools it wrote. */
  spoolSyncs: number;
}

/** The engine's direct spool writes, and the requests it answered itself (see docs/fuse.md, The engine). */
export interface EngineCounters extends DirectWriteCounters {
  answered: AnsweredCounts;
  /** Notifications of the kernel about changes made elsewhere (kernel-invalidation.ts). */
  elsewhere: KernelInvalidationCounters;
  /** How the kernel's requests reach the engine (after unmount: as they did). */
  transport: TransportState;
}

/**
 * An inode handed to the kernel (passthrough): the backing file's id, the handles opened with it (every
 * open of the inode is, while any is: the kernel takes no other), the version's end, and a promise
 * settled once the first open's hand-over is decided (later opens wait for it).
 */
export interface LiveInode {
  backingId: number;
  handles: Set<number>;
  end?: () => void;
  decided: Promise<void>;
}

/** What the kernel agreed to at INIT. */
export interface NegotiatedSession {
  maxWrite: number;
  maxReadahead: number;
  maxBackground: number;
  writeback: boolean;
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
// open(2) flags.
const O_ACCMODE = 0o3;
const O_WRONLY = 0o1;
const O_RDWR = 0o2;
const O_APPEND = 0o2000;
const O_DIRECT = 0o40000;
// renameat2 flags.
const RENAME_NOREPLACE = 1;
// Open reply flags of the native part.
const KEEP_CACHE = 2;
/** Directory handles are numbered from here, apart from file handles (HandleTable, below 2^31). */
const DIR_FH_BASE = 2 ** 40;
/** Folders whose last offer of names is remembered, at most. */
const NAMES_OFFERED_MAX = 4096;
/** Names of one folder offered to the engine at most (a larger folder's lookups all go to the Vfs). */
const NAMES_OFFERED_MOST = 50_000;
/** d_ino of a listed entry the kernel has not looked up (FUSE_UNKNOWN_INO). */
const UNKNOWN_INO = 0xffff_ffff;
/** The smallest directory entry the kernel takes (24-byte header + name padded to 8). */
const MIN_DIRENT = 32;
/** Smallest entry of a readdirplus answer (fuse_entry_out and fuse_dirent with a short name), bytes. */
const MIN_DIRENT_PLUS = 152;
/** Fields of one stat as the native part takes them (see statArray). */
const STAT_FIELDS = 11;

interface DirListing {
  ino: number;
  names: string[];
  inos: Float64Array;
  dirs: Uint8Array;
  stats: KernelStat[];
}

export class LowLevelMount {
  readonly inodes = new InodeTable();
  private readonly binding: Fuse3Binding;
  private readonly ops: PathOperations;
  private readonly operations: FuseOperations;
  private readonly logger: Logger;
  private readonly timeout: number;
  private session: NativeSession | undefined;
  /** File handle → the inode it was opened on, and whether for writing. */
  private readonly openInodes = new Map<number, { node: InodeNode; writable: boolean }>();
  private readonly dirs = new Map<number, DirListing | undefined>();
  /** Inodes handed to the kernel (passthrough, see docs/fuse.md). */
  private readonly live = new Map<number, LiveInode>();
  /** Passthrough granted at INIT (known from the first open on). */
  private passthroughGranted: boolean | undefined;
  /** File handles whose writes the engine makes into their spools, and the number their records are above. */
  private readonly direct = new Map<number, { spool: DirectSpool; base: number }>();
  /** Hashes of detached spools the engine's hash thread is finishing, by their HASHED record's number. */
  private readonly hashesDue = new Map<number, { end: number; resolve: (sha1: string | undefined) => void }>();
  /** File handles with a write under way through JavaScript, and the writes waiting behind it. */
  private readonly writesWaiting = new Map<number, KernelRequest[]>();
  /** Writes the engine answered already, and where their outcome goes. */
  private readonly answeredWrites = new WeakMap<KernelRequest, NativeCallback>();
  /**
   * Writes the engine answered that are not made here yet, by handle. The handle gets no spool while it
   * has any: the kernel, told they were done, may send a later write over the same bytes, which the
   * engine would put in the spool before them.
   */
  private readonly answeredUnmade = new Map<number, Set<KernelRequest>>();
  private readonly directCounts: Omit<DirectWriteCounters, 'spoolWritebacks' | 'spoolSyncs'> = { spoolsAttached: 0, directWrites: 0, hashedByEngine: 0, fdReads: 0, passthroughFiles: 0, passthroughOpens: 0, madeClosed: 0 };
  /** What the engine answered itself, replayed into the Vfs (engine-records.ts). */
  private readonly records: EngineRecords;
  private nextDirFh = DIR_FH_BASE;
  /** The kernel's names being forgotten, one after the other (see invalidate). */
  private invalidations: Promise<void> = Promise.resolve();
  /** Stops telling the kernel of changes made elsewhere. */
  private stopFollowingChanges: (() => void) | undefined;
  private elsewhere: KernelInvalidation | undefined;
  /** When each folder's names were last offered to the engine (ms), oldest first. */
  private readonly namesOffered = new Map<number, number>();
  private writeback = false;
  private readonly scratch = new Float64Array(11);
  private endedResolve!: () => void;
  /** Resolves when the native readers have stopped (connection gone). */
  readonly ended = new Promise<void>((resolve) => (this.endedResolve = resolve));
  private startedResolve!: () => void;
  /** Resolves once the kernel's INIT is answered (its transport chosen), or the session ended first. */
  readonly started = new Promise<void>((resolve) => (this.startedResolve = resolve));
  negotiated: NegotiatedSession | undefined;
  /** The transport as it was when the session went (counters after unmount). */
  private lastTransport: TransportState | undefined;

  constructor(private readonly opts: LowLevelMountOptions) {
    this.binding = opts.binding;
    this.operations = opts.operations;
    this.ops = opts.operations.toNative() as unknown as PathOperations;
    this.logger = opts.logger;
    this.timeout = opts.attrTimeoutS;
    this.records = new EngineRecords({
      inodes: this.inodes,
      binding: this.binding,
      session: () => this.session,
      operations: this.operations,
      ops: this.ops,
      logger: this.logger,
      live: this.live,
      openInodes: this.openInodes,
      directCounts: this.directCounts,
      dispatch: (req) => this.dispatchSafely(req),
      listingReleased: (fh) => void this.dirs.delete(fh),
      write: (req, answered) => this.write(req, answered),
      answeredUnmadeAdd: (req) => this.answeredUnmadeAdd(req),
      answeredMade: (req) => this.answeredMade(req),
      releaseHandle: (ino, fh, done) => this.releaseHandle(ino, fh, done),
      forgetHandle: (fh) => this.forgetHandle(fh),
      notLive: (ino, entry) => this.notLive(ino, entry),
      invalidate: (node) => this.invalidate(node),
      staleKernelTimes: (node, path) => this.staleKernelTimes(node, path),
      shown: (node, st) => this.shown(node, st),
      safePath: (ino) => this.safePath(ino),
      pullQueued: () => {
        if (this.session) this.onBatch(this.binding.takeQueued(this.session));
      },
    }, { passthrough: !!opts.settings.passthrough, mountpoint: opts.mountpoint });
  }

  mount(): void {
    this.session = this.binding.mount(this.opts.mountpoint, this.opts.mountOptions, this.opts.settings, (batch) => this.onBatch(batch));
    this.records.pullQuietRecords();
    const elsewhere = this.elsewhere = new KernelInvalidation({
      binding: this.binding, inodes: this.inodes, session: () => this.session, isLive: (ino) => this.live.has(ino), logger: this.logger,
      notify: (what, call) => this.notifyKernel(what, call),
    });
    this.stopFollowingChanges = this.opts.changes?.subscribe((event) => elsewhere.changed(event));
  }

  /** Unmounts (lazily, off the main thread); the readers stop once the kernel lets go of the connection. */
  async unmount(): Promise<void> {
    this.stopFollowingChanges?.();
    if (this.session) await this.binding.unmount(this.session);
  }

  /**
   * After `ended`: joins the readers, answers anything still pending with EIO, frees the session. A
   * reader still blocked on the device (the kernel kept the connection) is left as it is: logged, and
   * the session no longer keeps the process alive.
   */
  destroy(): void {
    this.records.stopPulling();
    if (!this.session) return;
    this.lastTransport = this.binding.transport(this.session);
    if (!this.binding.destroy(this.session)) {
      this.logger.warn({ mountpoint: this.opts.mountpoint }, 'fuse: the connection is still held by the kernel; leaving its reader thread');
      this.dropHashesDue();
      return;
    }
    this.session = undefined;
    this.dropHashesDue();
  }

  /** The session is gone (or going): hashes still due will not come; their versions hash their spools. */
  private dropHashesDue(): void {
    for (const due of this.hashesDue.values()) due.resolve(undefined);
    this.hashesDue.clear();
  }

  get counters(): EngineCounters {
    const answered = this.session ? this.binding.answeredCounts(this.session) : { getattr: 0, writes: 0, times: 0, modes: 0, lookups: 0, creates: 0, closes: 0, spoolsMadeAhead: 0 };
    const se = this.session;
    const transport = se ? this.binding.transport(se) : (this.lastTransport ?? { transport: 'dev', why: 'not mounted', ringRequests: 0, devRequests: 0, queues: 0, depth: 0, passthrough: false });
    const elsewhere = { ...(this.elsewhere?.counters ?? { entries: 0, inodes: 0, deletes: 0, dropped: 0 }) };
    return { ...this.directCounts, spoolWritebacks: se ? this.binding.spoolWritebacks(se) : 0, spoolSyncs: se ? this.binding.spoolSyncs(se) : 0, answered, transport, elsewhere };
  }

  private get se(): NativeSession {
    return this.session!;
  }

  private onBatch(batch: KernelRequest[]): void {
    if (batch.length > 0) this.operations.serving();
    this.records.route(batch);
  }


  /**
   * Applies what the engine queued and has not handed over (answered writes and times wait for the next
   * request to travel with it), and resolves once every answered request is applied: at unmount, before
   * open files are flushed.
   */
  async applyQueued(): Promise<void> {
    if (this.session) this.onBatch(this.binding.takeQueued(this.session));
    await this.records.applied();
  }

  /**
   * Lets the engine answer the closes of small files it created (see docs/fuse.md, Closes answered by the
   * engine) when the Vfs has a journal for their records: from now on it writes them to a side log.
   */
  answerCloses(): Promise<void> {
    return this.records.answerCloses();
  }

  /**
   * The engine answers no more closes; once every close it answered is applied, the journal is told.
   * Bounded by `waitMs` (a close still being applied then leaves its record for the next start).
   */
  stopAnsweringCloses(waitMs: number): Promise<void> {
    return this.records.stopAnsweringCloses(waitMs);
  }

  private dispatchSafely(req: KernelRequest): void {
    try {
      this.dispatch(req);
    } catch (err) {
      if (req.id) this.binding.replyErr(this.se, req.id, -errnoOf(err));
    }
  }

  /** Answers a flush or fsync of `fh`: an answered request's failure first, else the operation's own code. */
  private replyDurable(id: number, fh: number): NativeCallback {
    return (code) => {
      const late = this.records.takeLateError(fh);
      this.binding.replyErr(this.se, id, late ?? (code < 0 ? -code : 0));
    };
  }

  /** Attributes for the kernel, with this inode's number. */
  private statArray(ino: number, st: KernelStat): Float64Array {
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

  private shown(node: InodeNode, st: KernelStat): void {
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

  private safePath(ino: number): string {
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
      case Op.INIT:
        this.writeback = !!req.writeback;
        this.negotiated = { maxWrite: req.maxWrite!, maxReadahead: req.maxReadahead!, maxBackground: req.maxBackground!, writeback: this.writeback };
        {
          const t = b.transport(se);
          this.logger.info({ ...this.negotiated, transport: t.transport, ...(t.why ? { why: t.why } : { queues: t.queues, depth: t.depth }) }, 'fuse: session started (libfuse 3)');
        }
        this.startedResolve();
        return;
      case Op.END:
        this.startedResolve();
        this.endedResolve();
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
        return this.unlink(id, req.ino, req.name!);
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
            this.inodes.rename(req.ino, req.name!, req.newparent!, req.newname!);
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
      case Op.OPEN: {
        const node = this.inodes.get(req.ino);
        const path = this.inodes.pathOf(node);
        this.ops.open(path, this.openFlags(req.flags!), (code, fh) => {
          if (code < 0) return void b.replyErr(se, id, -code);
          const handle = fh as number;
          this.opened(node, handle);
          void this.backingFor(node, handle, req.flags!).then((backing) => {
            const answered = backing ? b.replyOpenBacking(se, id, handle, backing) : b.replyOpen(se, id, handle, KEEP_CACHE);
            if (!answered) this.closeUnanswered(path, handle);
          });
        });
        return;
      }
      case Op.CREATE:
        return this.create(id, req);
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
        return this.write(req);
      case Op.WROTE: {
        const d = this.direct.get(req.fh!);
        this.directCounts.directWrites++;
        if (d && req.seq! > d.base) d.spool.wrote(req.offset!, req.size!, req.errno!);
        this.wroteTo(req.fh!);
        return;
      }
      case Op.HASHED: {
        const due = this.hashesDue.get(req.seq!);
        if (!due) return;
        this.hashesDue.delete(req.seq!);
        if (req.name !== undefined && req.size === due.end) this.directCounts.hashedByEngine++;
        due.resolve(req.name);
        return;
      }
      case Op.FLUSH:
        this.ops.flush(this.safePath(req.ino), req.fh!, this.replyDurable(id, req.fh!));
        return;
      case Op.FSYNC:
        this.ops.fsync(this.safePath(req.ino), req.flags!, req.fh!, this.replyDurable(id, req.fh!));
        return;
      case Op.FALLOCATE:
        this.ops.fallocate(this.safePath(req.ino), req.fh!, req.offset!, req.size!, (code) => b.replyErr(se, id, code < 0 ? -code : 0));
        return;
      case Op.RELEASE:
        return this.release(id, req.ino, req.fh!);
      case Op.OPENDIR: {
        this.inodes.path(req.ino);
        const fh = this.nextDirFh++;
        this.dirs.set(fh, undefined);
        b.replyOpen(se, id, fh, 0);
        return;
      }
      case Op.READDIR:
        return this.readdir(id, req, false);
      case Op.READDIRPLUS:
        return this.readdir(id, req, true);
      case Op.RELEASEDIR:
        this.dirs.delete(req.fh!);
        b.replyErr(se, id, 0);
        return;
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

  /**
   * A write that reached JavaScript. Those of one handle go to the Vfs one at a time (the version takes
   * them one at a time anyway), the others waiting here in order: after each, the handle may get its
   * spool (offerSpool), and then the waiting ones and all that follow are made by the engine.
   */
  private write(req: KernelRequest, answered?: NativeCallback): void {
    const fh = req.fh!;
    if (answered) this.answeredWrites.set(req, answered);
    if (this.direct.has(fh) && this.writeDirect(req)) return;
    const waiting = this.writesWaiting.get(fh);
    if (waiting) return void waiting.push(req);
    this.writesWaiting.set(fh, []);
    this.writeThroughVfs(req);
  }

  private answeredUnmadeAdd(req: KernelRequest): void {
    const fh = req.fh!;
    const unmade = this.answeredUnmade.get(fh);
    if (unmade) unmade.add(req);
    else this.answeredUnmade.set(fh, new Set([req]));
  }

  /** An answered write is made (or will never be): it no longer holds its handle's spool back. */
  private answeredMade(req: KernelRequest): void {
    const unmade = this.answeredUnmade.get(req.fh!);
    if (unmade?.delete(req) && unmade.size === 0) this.answeredUnmade.delete(req.fh!);
  }

  /** Answers a write: the kernel, or (a write the engine answered) whoever applies it. */
  private wrote(req: KernelRequest, code: number): void {
    const answered = this.answeredWrites.get(req);
    if (answered) {
      this.answeredWrites.delete(req);
      this.answeredMade(req);
      return answered(code);
    }
    if (code < 0) this.binding.replyErr(this.se, req.id, -code);
    else this.binding.replyWrite(this.se, req.id, code);
  }

  private writeThroughVfs(req: KernelRequest): void {
    const fh = req.fh!;
    this.operations.writeOwned(this.safePath(req.ino), fh, req.data!, req.offset!, (code) => {
      if (code < 0) this.wrote(req, code);
      else {
        this.wrote(req, code);
        this.wroteTo(fh);
        this.offerSpool(fh);
      }
      const waiting = this.writesWaiting.get(fh) ?? [];
      let next = waiting.shift();
      while (next && this.direct.has(fh) && this.writeDirect(next)) next = waiting.shift();
      if (next) this.writeThroughVfs(next);
      else this.writesWaiting.delete(fh);
    });
  }

  /** A write made the engine's way (the handle has its spool); false when it no longer has one. */
  private writeDirect(req: KernelRequest): boolean {
    if (!this.session) return false;
    const n = this.binding.spoolWrite(this.session, req.fh!, req.data!, req.offset!);
    if (n === undefined) return false;
    this.wrote(req, n);
    return true;
  }

  /** What this mount wrote is no change made elsewhere: compare again from the next attributes shown. */
  private wroteTo(fh: number): void {
    const open = this.openInodes.get(fh);
    if (open) open.node.shown = undefined;
  }

  /**
   * After a write made through JavaScript: when the handle's version can take its writes directly now
   * (its spool on disk, this handle its only writer, no write the engine answered still to be made), the
   * engine makes the following ones itself.
   */
  private offerSpool(fh: number): void {
    const se = this.session;
    if (!se || this.direct.has(fh) || this.answeredUnmade.has(fh)) return;
    let spool: DirectSpool | undefined;
    try {
      spool = this.operations.handles.get(fh).handle.directSpool?.();
    } catch {
      return; // released meanwhile
    }
    if (!spool) return;
    const base = this.binding.spoolAttach(se, fh, spool.fd, spool.hashFrom);
    if (base === undefined) return; // an answered write of the handle is still queued: offered again at the next write
    const entry = { spool, base };
    this.direct.set(fh, entry);
    this.directCounts.spoolsAttached++;
    spool.begin(() => {
      if (this.direct.get(fh) === entry) this.direct.delete(fh);
      const done = this.session ? this.binding.spoolDetach(this.session, fh) : undefined;
      if (!done) return undefined;
      if (done.sha1 !== undefined && done.hashed === done.end) this.directCounts.hashedByEngine++;
      const { hashing, ...rest } = done;
      if (hashing === undefined) return rest;
      // The hash thread is still behind the last writes: the version waits for its HASHED record.
      const sha1Later = new Promise<string | undefined>((resolve) => this.hashesDue.set(hashing, { end: done.end, resolve }));
      return { ...rest, sha1Later };
    });
  }

  /**
   * open(2) flags as the Vfs should see them: with the writeback cache the kernel reads pages of files
   * opened write-only and computes append offsets itself.
   */
  private openFlags(flags: number): number {
    if (!this.writeback) return flags;
    let f = flags;
    if ((f & O_ACCMODE) === O_WRONLY) f = (f & ~O_ACCMODE) | O_RDWR;
    return f & ~O_APPEND;
  }

  private opened(node: InodeNode, fh: number): void {
    let writable = false;
    try {
      writable = this.operations.handles.get(fh).writable;
    } catch {
      // Released already (deadline): counted as read-only.
    }
    this.inodes.opened(node, writable);
    this.openInodes.set(fh, { node, writable });
  }

  /** The kernel closed `fh` (or never got it). */
  private forgetHandle(fh: number): { node: InodeNode; writable: boolean } | undefined {
    const open = this.openInodes.get(fh);
    this.openInodes.delete(fh);
    return open;
  }

  /**
   * Passthrough (docs/fuse.md): the backing file an open of `node` is answered with, 0 for none. An inode
   * already handed to the kernel: its backing file, whatever the open. Otherwise only a write open that
   * is the inode's only open handle, when its version can be handed over (LeasedHandle.passthrough).
   */
  private async backingFor(node: InodeNode, fh: number, flags: number): Promise<number> {
    const se = this.session;
    if (!se || node.isDir) return 0;
    this.passthroughGranted ??= this.binding.transport(se).passthrough;
    if (!this.passthroughGranted) return 0;
    const known = this.live.get(node.ino);
    if (known) {
      await known.decided;
      if (this.live.get(node.ino) !== known || !known.backingId) return 0;
      known.handles.add(fh);
      this.directCounts.passthroughOpens++;
      return known.backingId;
    }
    // Read-only, another handle open, or O_DIRECT (through a backing file it would follow the local
    // disk's alignment rules, which FUSE does not have).
    if ((flags & O_ACCMODE) === 0 || node.opens > 1 || flags & O_DIRECT) return 0;
    let handle: LeasedHandle;
    try {
      handle = this.operations.handles.get(fh).handle;
    } catch {
      return 0; // released meanwhile
    }
    if (!handle.passthrough) return 0;
    let decide!: () => void;
    const entry: LiveInode = { backingId: 0, handles: new Set([fh]), decided: new Promise((r) => (decide = r)) };
    this.live.set(node.ino, entry);
    try {
      const spool = await handle.passthrough().catch(() => undefined);
      if (!spool) return this.notLive(node.ino, entry);
      const id = this.session === se ? this.binding.backingOpen(se, spool.fd) : -Errno.EIO;
      if (id <= 0) {
        spool.end();
        if (id === -Errno.EPERM) {
          // Not allowed to this process (CAP_SYS_ADMIN): no file will be, said once.
          this.passthroughGranted = false;
          this.logger.warn('fuse: the kernel lets only a process with CAP_SYS_ADMIN register backing files; files are written through the engine');
        } else if (id !== -Errno.ENOTSUP) this.logger.warn({ path: this.safePath(node.ino), errno: -id }, 'fuse: the kernel refused a backing file; the file is written through the engine');
        return this.notLive(node.ino, entry);
      }
      // No attributes of the file from the engine's cache while the kernel writes it.
      if (!this.binding.attrLive(se, node.ino, true, spool.fd)) {
        this.binding.backingClose(se, id);
        spool.end();
        return this.notLive(node.ino, entry);
      }
      entry.backingId = id;
      entry.end = spool.end;
      this.directCounts.passthroughFiles++;
      this.directCounts.passthroughOpens++;
      return id;
    } finally {
      decide();
    }
  }

  private notLive(ino: number, entry: LiveInode): number {
    if (this.live.get(ino) === entry) this.live.delete(ino);
    return 0;
  }

  /** Handle `fh` of inode `ino` is closed: the last one opened with the backing file ends the hand-over. */
  private liveHandleClosed(ino: number, fh: number): void {
    const live = this.live.get(ino);
    if (!live || !live.handles.delete(fh) || live.handles.size > 0) return;
    this.live.delete(ino);
    live.end?.();
    // What the kernel shows of it now came from its own writes: the next attributes answered are the base
    // a change made elsewhere is told from.
    const open = this.openInodes.get(fh);
    if (open) open.node.shown = undefined;
    const se = this.session;
    if (se && live.backingId) {
      this.binding.backingClose(se, live.backingId);
      this.binding.attrLive(se, ino, false);
    }
  }

  /** An open the kernel gave up on (interrupted): release what it opened. */
  private closeUnanswered(path: string, fh: number): void {
    const ino = this.openInodes.get(fh)?.node.ino;
    if (ino !== undefined) this.liveHandleClosed(ino, fh);
    this.ops.release(path, fh, () => {
      const open = this.forgetHandle(fh);
      if (open) this.inodes.closed(open.node, open.writable);
    });
  }

  private lookup(id: number, parent: number, name: string): void {
    const b = this.binding;
    const se = this.se;
    const path = this.inodes.childPath(parent, name);
    this.ops.getattr(path, (code, st) => {
      if (code === -Errno.ENOENT) {
        this.offerNames(id, parent);
        return void b.replyNegative(se, id, this.timeout);
      }
      this.replyNewEntry(id, parent, name, code, st as KernelStat, false);
    });
  }

  /** The names of folder `ino` are given to the engine now (the most recent such folders are remembered). */
  private namesOfferedNow(ino: number, now = Date.now()): void {
    this.namesOffered.delete(ino);
    this.namesOffered.set(ino, now);
    if (this.namesOffered.size > NAMES_OFFERED_MAX) this.namesOffered.delete(this.namesOffered.keys().next().value!);
  }

  /**
   * Gives the engine every name of folder `parent` when the Vfs knows them (its listing is cached), with
   * the lookup `id` that found one missing: later lookups of names it has not are answered by the engine
   * (see docs/fuse.md, The engine). At most once per half timeout a folder.
   */
  private offerNames(id: number, parent: number): void {
    if (this.timeout <= 0) return;
    const now = Date.now();
    const last = this.namesOffered.get(parent);
    if (last !== undefined && now - last < this.timeout * 500) return;
    this.namesOfferedNow(parent, now);
    let path: string;
    try {
      path = this.inodes.path(parent);
    } catch {
      return;
    }
    const names = this.operations.cachedNames(path, NAMES_OFFERED_MOST);
    if (names) this.binding.folderNames(this.se, id, parent, names, this.timeout, this.closesWhere(path));
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
  private closesWhere(path: string): { library: string; fullpath: string } | undefined {
    return this.records.answersCloses ? this.operations.answeredClosesIn(path) : undefined;
  }

  /** A file not open here whose size or mtime differs from what the kernel was last shown. */
  private changedElsewhere(node: InodeNode, st: KernelStat): boolean {
    // A file handed to the kernel changes through it, not elsewhere (see liveHandleClosed).
    if (this.kindChanged(node, st)) return true;
    if (this.live.has(node.ino)) return false;
    return !node.isDir && node.writers === 0 && node.shown !== undefined && (node.shown.size !== st.size || node.shown.mtimeMs !== st.mtime);
  }

  /** True when the file changed elsewhere since the kernel last saw it (then its cached times are stale). */
  private async staleKernelTimes(node: InodeNode, path: string): Promise<boolean> {
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
  private invalidate(node: InodeNode): void {
    if (this.session) this.binding.attrForget(this.session, node.ino);
    if (node.detached || !node.parent || !this.session) return;
    const se = this.session;
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
  private notifyKernel(what: Record<string, unknown>, call: (se: NativeSession) => Promise<number>): void {
    this.invalidations = this.invalidations.then(() => {
      const se = this.session;
      return se ? call(se) : 0;
    }).then(
      (rc) => {
        if (rc < 0 && rc !== -Errno.ENOENT) this.logger.debug({ ...what, rc }, 'fuse: telling the kernel of a change made elsewhere failed');
      },
      (err: unknown) => this.logger.warn({ ...what, err: String(err) }, 'fuse: telling the kernel of a change made elsewhere failed'),
    );
  }

  private create(id: number, req: KernelRequest): void {
    const b = this.binding;
    const se = this.se;
    const parent = req.ino;
    const name = req.name!;
    const path = this.inodes.childPath(parent, name);
    this.operations.createWithFlags(path, req.flags!, req.mode!, (code, fh) => {
      if (code < 0) return void b.replyErr(se, id, -code);
      const handle = fh as number;
      this.ops.fgetattr(path, handle, (c, st) => {
        if (c < 0) {
          b.replyErr(se, id, -c);
          this.ops.release(path, handle, () => undefined);
          return;
        }
        const stat = st as KernelStat;
        let node: InodeNode;
        try {
          node = this.inodes.remember(parent, name, false, true);
        } catch (err) {
          b.replyErr(se, id, -errnoOf(err));
          this.ops.release(path, handle, () => undefined);
          return;
        }
        this.shown(node, stat);
        this.opened(node, handle);
        void this.backingFor(node, handle, req.flags!).then((backing) => {
          const attrs = this.statArray(node.ino, stat);
          const answered = backing ? b.replyCreateBacking(se, id, attrs, this.timeout, this.timeout, handle, backing) : b.replyCreate(se, id, attrs, this.timeout, this.timeout, handle, KEEP_CACHE);
          if (!answered) {
            this.inodes.forget(node.ino, 1);
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
  private unlink(id: number, parent: number, name: string): void {
    const b = this.binding;
    const se = this.se;
    const path = this.inodes.childPath(parent, name);
    const node = this.inodes.find(parent, name);
    if (node && node.opens > 0 && !node.isDir) {
      const hidden = `.fuse_hidden${node.ino.toString(16).padStart(8, '0')}${Date.now().toString(16).slice(-8)}`;
      this.ops.rename(path, this.inodes.childPath(parent, hidden), (code) => {
        if (code === 0) {
          this.inodes.rename(parent, name, parent, hidden);
          node.hidden = true;
          this.binding.namesForget(se, parent);
        }
        b.replyErr(se, id, code < 0 ? -code : 0);
      });
      return;
    }
    this.ops.unlink(path, (code) => {
      if (code === 0) this.inodes.removeName(parent, name);
      b.replyErr(se, id, code < 0 ? -code : 0);
    });
  }

  private release(id: number, ino: number, fh: number): void {
    this.releaseHandle(ino, fh, (code) => this.binding.replyErr(this.se, id, code < 0 ? -code : 0));
  }

  /** Releases `fh`; `done` gets the Vfs's answer, then the inode's bookkeeping follows. */
  private releaseHandle(ino: number, fh: number, done: NativeCallback): void {
    const path = this.safePath(ino);
    // Before the Vfs's release: the version takes its last size from the spool while it is still open.
    this.liveHandleClosed(ino, fh);
    this.ops.release(path, fh, (code) => {
      this.records.handleReleased(fh);
      this.direct.get(fh)?.spool.end();
      done(code);
      const open = this.forgetHandle(fh);
      if (!open) return;
      const node = open.node;
      if (node.hidden && node.opens === 1 && !node.detached) {
        const hiddenPath = this.inodes.pathOf(node);
        this.ops.unlink(hiddenPath, (c) => {
          if (c < 0) this.logger.warn({ path: hiddenPath, errno: -c }, 'fuse: removing an unlinked file at its last close failed');
          if (!node.detached && node.parent) this.inodes.removeName(node.parent.ino, node.name);
          this.inodes.closed(node, open.writable);
        });
        return;
      }
      this.inodes.closed(node, open.writable);
    });
  }

  /**
   * readdir, and readdirplus (`plus`): the same listing, each entry with its attributes and inode, so that
   * `ls -l` of a folder costs no lookup a name. The kernel holds a reference to each entry it was given
   * that way, as after a lookup: counted here for the entries that went in.
   */
  private readdir(id: number, req: KernelRequest, plus: boolean): void {
    const b = this.binding;
    const se = this.se;
    const fh = req.fh!;
    const offset = req.offset!;
    const send = (listing: DirListing): void => {
      const count = Math.floor(req.size! / (plus ? MIN_DIRENT_PLUS : MIN_DIRENT)) + 1;
      const end = Math.min(listing.names.length, offset + count);
      if (offset >= end) return void b.replyData(se, id, [], 0);
      if (!plus) return void b.replyDir(se, id, req.size!, listing.names.slice(offset, end), listing.inos.subarray(offset, end), listing.dirs.subarray(offset, end), offset);
      this.replyDirPlus(id, req.size!, listing, offset, end);
    };
    const cached = this.dirs.get(fh);
    if (cached && offset > 0) return send(cached);
    const node = this.inodes.get(req.ino);
    const path = this.inodes.pathOf(node);
    this.ops.readdir(path, (code, names, stats) => {
      if (code < 0) return void b.replyErr(se, id, -code);
      const list = names as string[];
      const sts = stats as KernelStat[];
      const inos = new Float64Array(list.length);
      const dirs = new Uint8Array(list.length);
      for (let i = 0; i < list.length; i++) {
        const n = list[i]!;
        dirs[i] = (sts[i]!.mode & 0o170000) === 0o040000 ? 1 : 0;
        if (n === '.') inos[i] = node.ino;
        else if (n === '..') inos[i] = node.parent?.ino ?? ROOT_INO;
        else inos[i] = this.inodes.find(node.ino, n)?.ino ?? UNKNOWN_INO;
      }
      const listing: DirListing = { ino: node.ino, names: list, inos, dirs, stats: sts };
      if (this.dirs.has(fh)) this.dirs.set(fh, listing);
      // Every name of the folder, as the Vfs holds them: the engine answers lookups of others itself.
      if (this.timeout > 0 && !node.detached && list.length <= NAMES_OFFERED_MOST + 2) {
        this.namesOfferedNow(node.ino);
        const names = list.filter((n) => n !== '.' && n !== '..');
        const unlisted = this.operations.unlistedNames(path, names);
        if (unlisted) this.binding.folderNames(se, id, node.ino, [...names, ...unlisted], this.timeout, this.closesWhere(this.inodes.pathOf(node)));
      }
      send(listing);
    });
  }

  /** Entries `start` to `end` of `listing` as a readdirplus answer (see readdir). */
  private replyDirPlus(id: number, size: number, listing: DirListing, start: number, end: number): void {
    const dir = this.inodes.get(listing.ino);
    // A folder removed meanwhile lists nothing but itself and its parent (its names have no inodes now).
    const names = dir.detached ? listing.names.slice(start, end).filter((n) => n === '.' || n === '..') : listing.names.slice(start, end);
    const stats = new Float64Array(names.length * STAT_FIELDS);
    const counted: (InodeNode | undefined)[] = [];
    for (let i = 0; i < names.length; i++) {
      const name = names[i]!;
      const st = listing.stats[start + i]!;
      let ino: number;
      if (name === '.' || name === '..') {
        ino = name === '.' ? dir.ino : dir.parent?.ino ?? ROOT_INO;
        counted.push(undefined);
      } else {
        const isDir = (st.mode & 0o170000) === 0o040000;
        const known = this.inodes.find(dir.ino, name);
        const node = this.inodes.remember(dir.ino, name, isDir, known !== undefined && this.changedElsewhere(known, st));
        this.shown(node, st);
        counted.push(node);
        ino = node.ino;
      }
      stats.set(this.statArray(ino, st), i * STAT_FIELDS);
    }
    const added = this.binding.replyDirPlus(this.se, id, size, names, stats, this.timeout, this.timeout, start);
    // Entries that did not fit (or an answer nobody waits for): the kernel holds no reference to them.
    for (let i = Math.max(0, added); i < counted.length; i++) {
      const node = counted[i];
      if (node) this.inodes.forget(node.ino, 1);
    }
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
