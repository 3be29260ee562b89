/**
 * FuseOperations: the path-based FUSE operation table over a Vfs (the engine resolves the kernel's
 * inode numbers to paths first). Each operation translates its arguments
 * into one or two Vfs calls and the result (or VfsError) back into what the kernel expects; nothing is
 * cached here (the Vfs owns caching) and every operation runs through `replyWithin`, so it answers
 * exactly once and within its deadline.
 */
import type { Logger } from 'pino';
import type { CallContext, FileHandle, OpenFlags, Vfs } from '../vfs/types.js';
import type { ClosedCreate, EngineClose, LeasedHandle, LocalRange, SideJournal } from '../vfs/engine-lease.js';
import { LinkFiles, type LinkAttr } from './link-files.js';
import { Errno, FuseOpError } from './errno.js';
import { HandleTable, type OpenFile } from './handles.js';
import { InFlightCounter, replyWithin, type NativeCallback, type OperationResult, type OperationScope } from './reply.js';
import { permissionBits, showAsLink, toKernelStat, toKernelStatFs, type Ownership } from './stat.js';
import {
  XATTR_CREATE, XATTR_NAMES, XATTR_PIN, XATTR_READABLE, XATTR_STATE, XATTR_TAGS, XATTR_VALUE_MAX,
  decodeLock, decodePin, decodeTags, encodeLock, encodeTags, encodeXattrNames, fillXattrBuffer,
} from './xattr.js';

/** Time budgets of operations; past it the operation answers EIO and its late result is dropped. */
export interface OperationDeadlines {
  /** getattr, readdir, mkdir, unlink, rmdir, rename, utimens, statfs, access, xattrs; ms. Default 30 000. */
  metadataMs: number;
  /** read and write; ms. Default 60 000. */
  dataMs: number;
  /** open, create, truncate, flush, fsync, release (may wait for the upload journal); ms. Default 120 000. */
  durableMs: number;
  /** fsync of a folder, which waits for every pending upload to reach the service; ms. Default 300 000. */
  syncMs: number;
}

export const DEFAULT_DEADLINES: Readonly<OperationDeadlines> = {
  metadataMs: 30_000,
  dataMs: 60_000,
  durableMs: 120_000,
  syncMs: 300_000,
};

export interface FuseOperationsOptions {
  vfs: Vfs;
  ownership: Ownership;
  deadlines: OperationDeadlines;
  logger: Logger;
  /** Show link files as symbolic links and make links as such files (src/fuse/link-files.ts). Default true. */
  links?: boolean;
}

type Op = (...args: any[]) => void;

// open(2) flags (Linux).
const O_ACCMODE = 0o3;
const O_WRONLY = 0o1;
const O_RDWR = 0o2;
const O_TRUNC = 0o1000;
const O_APPEND = 0o2000;
const O_EXCL = 0o200;
// access(2) mode.
const W_OK = 2;

/**
 * Answer for an attribute we do not store: ENODATA in the `user.` namespace (it could exist, it does
 * not); ENOTSUP for the others (security., system., trusted.), which tools cache per file system.
 */
export function unknownXattrErrno(name: string): number {
  return name.startsWith('user.') ? Errno.ENODATA : Errno.ENOTSUP;
}

/** A name the service can hold: the kernel's bytes were UTF-8 (see checkNewName). */
function validNewName(path: string): boolean {
  return !path.includes('\uFFFD');
}

/**
 * A name the kernel passed as bytes that are not UTF-8 reaches us with U+FFFD in their place (the
 * engine decodes names as UTF-8); the service stores UTF-8 names, so creating one would silently store
 * another name. Such names are refused with EILSEQ (so is, unavoidably, a name really containing U+FFFD).
 */
export function checkNewName(path: string): void {
  if (!validNewName(path)) throw new FuseOpError('EILSEQ', `expected a UTF-8 file name, got bytes that are not UTF-8 in '${path}'`);
}

/** Open flags of open(2) → Vfs OpenFlags. */
export function toOpenFlags(flags: number): OpenFlags {
  const access = flags & O_ACCMODE;
  const write = access === O_WRONLY || access === O_RDWR;
  return {
    read: access !== O_WRONLY,
    write,
    truncate: write && (flags & O_TRUNC) !== 0,
    append: write && (flags & O_APPEND) !== 0,
  };
}

/**
 * Buffers the data of write operations is copied into (the kernel's buffer lives only until the operation
 * answers). Reused rather than allocated per write: a sequential write is thousands of 128 KiB writes a
 * second, and fresh buffers of that size cost page faults and garbage collection. A buffer comes back
 * once the Vfs write has settled (a write answered early by its deadline still holds its own).
 */
class WriteBuffers {
  private readonly free: Buffer[] = [];

  constructor(private readonly size: number, private readonly keep: number) {}

  take(source: Buffer, length: number): Buffer {
    const b = length <= this.size ? this.free.pop() ?? Buffer.allocUnsafeSlow(this.size) : Buffer.allocUnsafeSlow(length);
    source.copy(b, 0, 0, length);
    return b.subarray(0, length);
  }

  give(b: Buffer): void {
    if (b.buffer.byteLength === this.size && this.free.length < this.keep) this.free.push(Buffer.from(b.buffer, b.byteOffset, this.size));
  }
}

/**
 * What a program sets that the service does not keep, kept in memory by path, as the Vfs keeps times it
 * has not committed yet: modes and owners asked for with chmod/chown, the access time utimens sets, the
 * status-change time (chmod, chown, utimens) and a folder's modification time when a name in it was made,
 * removed or renamed through the mount. Only what differs from what the mount shows by default is kept;
 * a rename moves the entries of what it moves, unlink and rmdir drop them; they are gone after a restart
 * of the mount. At most `TIMES_KEPT_MAX` paths keep times (the oldest are forgotten first: their access
 * and change times fall back to the modification time).
 */
export class RequestedOwnership {
  private readonly byPath = new Map<string, KeptAttributes>();
  /** Entries below each folder (every ancestor of a kept path): a rename of a file looks at no other entry. */
  private readonly below = new Map<string, number>();
  private timed = 0;

  get size(): number {
    return this.byPath.size;
  }

  get(path: string): KeptAttributes | undefined {
    return this.byPath.get(path);
  }

  set(path: string, change: { mode?: number; uid?: number; gid?: number }, defaults: { mode: number; uid: number; gid: number }): void {
    const next = { ...this.byPath.get(path), ...change };
    if (next.mode === defaults.mode) delete next.mode;
    if (next.uid === defaults.uid) delete next.uid;
    if (next.gid === defaults.gid) delete next.gid;
    if (isEmpty(next)) this.drop(path);
    else if (this.byPath.has(path)) this.byPath.set(path, next);
    else this.store(path, next);
  }

  /** Times set on `path`: `atimeMs` (utimens), `ctimeMs` (any change of its attributes), `mtimeMs` (a folder's content). */
  setTimes(path: string, times: { atimeMs?: number; ctimeMs?: number; mtimeMs?: number }): void {
    const next = { ...this.byPath.get(path), ...times };
    this.drop(path); // the newest last: the oldest are forgotten first
    if (isEmpty(next)) return;
    this.store(path, next);
    if (this.timed > TIMES_KEPT_MAX) this.forgetOldestTimes();
  }

  drop(path: string): void {
    const before = this.byPath.get(path);
    if (!before) return;
    if (hasTimes(before)) this.timed--;
    this.byPath.delete(path);
    this.count(path, -1);
  }

  /** Moves the entries of `from` and of everything under it to `to`; what `to` had is dropped. */
  move(from: string, to: string): void {
    if (this.byPath.size === 0) return;
    for (const [key] of this.within(to)) this.drop(key);
    const moved = this.within(from);
    for (const [key] of moved) this.drop(key);
    for (const [key, value] of moved) this.store(to + key.slice(from.length), value);
  }

  /** The entries of `path` and of everything under it (those under it looked for only when there are any). */
  private within(path: string): [string, KeptAttributes][] {
    const found: [string, KeptAttributes][] = [];
    const at = this.byPath.get(path);
    if (at) found.push([path, at]);
    if ((this.below.get(path) ?? 0) === 0) return found;
    const prefix = `${path}/`;
    for (const entry of this.byPath) if (entry[0].startsWith(prefix)) found.push(entry);
    return found;
  }

  /** Keeps `value` for `path`, which has no entry. */
  private store(path: string, value: KeptAttributes): void {
    if (hasTimes(value)) this.timed++;
    this.byPath.set(path, value);
    this.count(path, 1);
  }

  /** One entry more (1) or less (-1) at `path`, below each of its folders. */
  private count(path: string, by: 1 | -1): void {
    for (let i = path.lastIndexOf('/'); i > 0; i = path.lastIndexOf('/', i - 1)) {
      const folder = path.slice(0, i);
      const n = (this.below.get(folder) ?? 0) + by;
      if (n > 0) this.below.set(folder, n);
      else this.below.delete(folder);
    }
  }

  private forgetOldestTimes(): void {
    for (const [key, value] of this.byPath) {
      if (this.timed <= TIMES_KEPT_MAX) return;
      if (!hasTimes(value)) continue;
      const { atimeMs: _a, ctimeMs: _c, mtimeMs: _m, ...rest } = value;
      this.drop(key);
      if (!isEmpty(rest)) this.store(key, rest);
    }
  }
}

function isEmpty(k: KeptAttributes): boolean {
  return k.mode === undefined && k.uid === undefined && k.gid === undefined && !hasTimes(k);
}

/** What RequestedOwnership keeps of one path. */
export interface KeptAttributes { mode?: number; uid?: number; gid?: number; atimeMs?: number; ctimeMs?: number; mtimeMs?: number }

/** Paths whose times (access, status change, a folder's modification) are kept in memory, at most. */
export const TIMES_KEPT_MAX = 100_000;

function hasTimes(k: KeptAttributes | undefined): boolean {
  return k !== undefined && (k.atimeMs !== undefined || k.ctimeMs !== undefined || k.mtimeMs !== undefined);
}

/** The folder a path is in ('/' for a library). */
function parentPath(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

/** A FileHandle's readParts, or its read as one part; the operation's deadline (ctx.signal) stops its range fetch. */
async function readPieces(handle: FileHandle, pos: number, len: number, ctx: CallContext): Promise<Buffer[]> {
  return handle.readParts ? handle.readParts(pos, len, ctx) : [await handle.read(pos, len, ctx)];
}

export class FuseOperations {
  readonly handles = new HandleTable();
  readonly requested = new RequestedOwnership();
  private readonly writeBuffers = new WriteBuffers(128 * 1024, 64);
  readonly inFlight = new InFlightCounter();
  private readonly vfs: Vfs;
  private readonly own: Ownership;
  private readonly deadlines: OperationDeadlines;
  readonly logger: Logger;
  /** Symbolic links as link files; undefined when the mount shows those as plain files. */
  private readonly links: LinkFiles | undefined;

  constructor(opts: FuseOperationsOptions) {
    this.vfs = opts.vfs;
    this.links = opts.links === false ? undefined : new LinkFiles(opts.vfs);
    this.own = opts.ownership;
    this.deadlines = opts.deadlines;
    this.logger = opts.logger;
  }

  /** Requests of an application are being taken (the Vfs's background work gives way meanwhile). */
  serving(): void {
    this.vfs.foreground?.touch();
  }

  /** Runs `work` as operation `op` with the budget of its class. */
  private run(op: string, path: string | undefined, budget: keyof OperationDeadlines, cb: NativeCallback, work: (scope: OperationScope, ctx: CallContext) => Promise<OperationResult>): void {
    replyWithin({ op, path, deadlineMs: this.deadlines[budget], logger: this.logger, inFlight: this.inFlight }, cb, (scope) => work(scope, { get signal() { return scope.signal; } }));
  }

  /** As `run`, but answers EROFS at once on a read-only mount. */
  private mutate(op: string, path: string, budget: keyof OperationDeadlines, cb: NativeCallback, work: (scope: OperationScope, ctx: CallContext) => Promise<OperationResult>): void {
    if (this.own.readOnly) {
      cb(-Errno.EROFS);
      return;
    }
    this.run(op, path, budget, cb, work);
  }

  /** The attributes shown for `attr`: the mount's owner and modes, or what chmod/chown asked for. */
  stat(attr: LinkAttr): ReturnType<typeof toKernelStat> {
    const st = toKernelStat(attr, this.own);
    if (attr.isLink) return showAsLink(st);
    const asked = this.requested.get(attr.path);
    if (asked) {
      if (asked.mode !== undefined) st.mode = (st.mode & ~0o7777) | asked.mode;
      if (asked.uid !== undefined) st.uid = asked.uid;
      if (asked.gid !== undefined) st.gid = asked.gid;
      // A folder's content changed through the mount after the time the service shows for it.
      if (asked.mtimeMs !== undefined && asked.mtimeMs > st.mtime) st.mtime = asked.mtimeMs;
      if (asked.atimeMs !== undefined) st.atime = asked.atimeMs;
      st.ctime = Math.max(st.ctime, st.mtime, asked.ctimeMs ?? 0);
    }
    return st;
  }

  /** The attributes of what `path` shows: a link's when it is one. */
  private statShown(path: string, ctx: CallContext): Promise<LinkAttr> {
    return this.links ? this.links.stat(path, ctx) : this.vfs.stat(path, ctx);
  }

  /** `from` was renamed to `to`: what is kept of it moves, and both folders changed. */
  private renamed(from: string, to: string): void {
    this.requested.move(from, to);
    this.folderChanged(from);
    if (parentPath(to) !== parentPath(from)) this.folderChanged(to);
  }

  /** A name in `path`'s folder was made, removed or renamed through the mount: the folder changed now. */
  private folderChanged(path: string): void {
    const now = Date.now();
    this.requested.setTimes(parentPath(path), { mtimeMs: now, ctimeMs: now });
  }

  /**
   * create with the flags of open(2) (libfuse 3 passes them): O_EXCL fails on an existing file, O_TRUNC
   * empties one. Always open read-write: the handle also serves the writes of this open. `fh`: the
   * handle number the engine gave the kernel already (a create it answered itself); `journal`: the id
   * the engine gave the file's version (it journals the version's record itself when it answers the close),
   * and whether it made the version's spool under that id (passthrough: the kernel writes it).
   */
  createWithFlags(path: string, flags: number, mode: number, cb: NativeCallback, fh?: number, journal?: { journalId: string; spoolMade: boolean }): void {
    this.mutate('create', path, 'durableMs', cb, async (scope, ctx) => {
      checkNewName(path);
      const open = toOpenFlags(flags);
      const result = await this.openFile(path, { read: true, write: true, create: true, exclusive: (flags & O_EXCL) !== 0, truncate: open.truncate }, ctx, scope, fh, journal);
      this.keepCreatedMode(path, false, mode);
      return result;
    });
  }

  /**
   * New files the engine created, had the kernel write and closed by itself, told at once
   * (EngineLease.createClosed), each with the mode it was created with: answers [0, made], `made[i]` true once
   * file i is made closed, false when the three steps (createWithFlags, flush, release) have to make it.
   */
  createClosed(files: readonly (ClosedCreate & { mode: number })[], cb: NativeCallback): void {
    this.mutate('create', files[0]?.path ?? '/', 'durableMs', cb, async (_scope, ctx) => {
      const named = files.filter((f) => validNewName(f.path));
      const took = named.length > 0 ? ((await this.vfs.engineLease?.createClosed(named, ctx)) ?? []) : [];
      const made = new Set(named.filter((_f, i) => took[i] === true));
      for (const f of made) this.keepCreatedMode(f.path, false, f.mode);
      return [0, files.map((f) => made.has(f))];
    });
  }

  /** The mode a file or folder was created with (umask already applied by the kernel), kept as chmod's. */
  private keepCreatedMode(path: string, isDir: boolean, mode: number): void {
    this.requested.drop(path);
    this.requested.set(path, { mode: mode & 0o7777 }, { mode: permissionBits(isDir, this.own), uid: this.own.uid, gid: this.own.gid });
  }

  /** Where the bytes of a read of handle `fh` are in a local file right now (LeasedHandle.localRange), if they are. */
  localRange(fh: number, position: number, length: number): LocalRange | undefined {
    try {
      return this.handles.get(fh).handle.localRange?.(position, length);
    } catch {
      return undefined;
    }
  }

  /**
   * Makes `path` hold `data`, created or replaced (Vfs.writeFile): a close the engine answered whose
   * exclusive create the Vfs refused (a name made elsewhere meanwhile) is applied as a later writer's would be.
   */
  replaceWith(path: string, data: Buffer, cb: NativeCallback): void {
    this.mutate('create', path, 'durableMs', cb, async (_scope, ctx) => {
      checkNewName(path);
      await this.vfs.writeFile(path, data, ctx);
      return 0;
    });
  }

  /** The journal the engine writes the records of closes it answers to (EngineLease.sideJournal); undefined on a read-only mount. */
  sideJournal(): SideJournal | undefined {
    return this.own.readOnly ? undefined : this.vfs.engineLease?.sideJournal();
  }

  /** Where folder `path` is in the Vfs when the engine may answer closes there (EngineLease.answeredClosesIn). */
  answeredClosesIn(path: string): { library: string; fullpath: string } | undefined {
    try {
      return this.vfs.engineLease?.answeredClosesIn(path);
    } catch {
      return undefined;
    }
  }

  /**
   * Names a lookup finds in folder `path` though its listing (`listed`) does not show them; undefined when
   * the folder's lookups must all be asked (EngineLease.unlistedNames).
   */
  unlistedNames(path: string, listed: readonly string[]): string[] | undefined {
    try {
      return this.vfs.engineLease ? this.vfs.engineLease.unlistedNames(path, listed) : [];
    } catch {
      return undefined;
    }
  }

  /** Every name in folder `path` when the Vfs knows them without asking the service (at most `max`); undefined otherwise. */
  cachedNames(path: string, max: number): string[] | undefined {
    try {
      const names = this.vfs.engineLease?.cachedNames(path, max);
      // A link is found by its name (its link file's is kept: an extra name only sends its lookup here).
      return names && this.links ? LinkFiles.namesFound(names) : names;
    } catch {
      return undefined;
    }
  }

  /** rename with RENAME_NOREPLACE honoured by the Vfs (libfuse 3 passes the flag). */
  renameNoReplace(from: string, to: string, cb: NativeCallback): void {
    this.mutate('rename', from, 'metadataMs', cb, async (_s, ctx) => {
      checkNewName(to);
      if (this.links) await this.links.rename(from, to, true, ctx);
      else await this.vfs.rename(from, to, { noReplace: true }, ctx);
      this.renamed(from, to);
      return 0;
    });
  }

  /** read answering the pieces themselves (`cb(0, pieces)`), for a caller that writes them to the kernel. */
  readParts(path: string, fh: number, len: number, pos: number, cb: NativeCallback): void {
    this.run('read', path, 'dataMs', cb, async (_scope, ctx) => [0, await readPieces(this.handles.get(fh).handle, pos, len, ctx)]);
  }

  /** write of a buffer that is already the Vfs's to keep (no copy). */
  writeOwned(path: string, fh: number, data: Buffer, pos: number, cb: NativeCallback): void {
    this.run('write', path, 'dataMs', cb, async () => this.writableFile(fh).handle.write(pos, data));
  }

  /** Opens through the engine lease when the Vfs offers one (the handle then has the engine's members). */
  private async openFile(path: string, flags: OpenFlags, ctx: CallContext, scope: OperationScope, fh?: number, journal?: { journalId: string; spoolMade: boolean }): Promise<OperationResult> {
    if (this.own.readOnly && (flags.write || flags.create || flags.truncate)) throw new FuseOpError('EROFS', 'read-only mount');
    const lease = this.vfs.engineLease;
    const handle: LeasedHandle = lease ? await lease.open(path, flags, ctx, journal) : await this.vfs.open(path, flags, ctx);
    if (!scope.live()) {
      // The kernel was already told the open failed: nobody will ever release this handle.
      handle.release().catch((err: unknown) => this.logger.warn({ path, err: String(err) }, 'fuse: releasing a handle opened too late failed'));
      return -Errno.EIO;
    }
    try {
      return [0, this.handles.add(handle, !!flags.write, fh).fh];
    } catch (err) {
      await handle.release();
      throw err;
    }
  }

  private writableFile(fh: number): OpenFile {
    const file = this.handles.get(fh);
    if (!file.writable) throw new FuseOpError('EBADF', `handle ${fh} is not open for writing`);
    return file;
  }

  /**
   * The operation table by path: each takes its arguments and a callback `cb(code, ...values)` (`getxattr`
   * and `listxattr` fill the buffer they are given; size 0 asks for the length).
   */
  toNative(): Record<string, Op> {
    const vfs = this.vfs;
    /** Pins through `user.cloudlib.pin`: ENOTSUP where nothing can be kept on this machine. */
    const setPinned = async (path: string, pinned: boolean, ctx: CallContext): Promise<number> => {
      if (!vfs.setPinned) return -Errno.ENOTSUP;
      await vfs.setPinned(path, pinned, ctx);
      return 0;
    };
    return {
      getattr: (path: string, cb: NativeCallback) =>
        this.run('getattr', path, 'metadataMs', cb, async (_s, ctx) => [0, this.stat(await this.statShown(path, ctx))]),

      fgetattr: (path: string, fh: number, cb: NativeCallback) =>
        this.run('fgetattr', path, 'metadataMs', cb, async () => [0, this.stat(await this.handles.get(fh).handle.stat())]),

      readdir: (path: string, cb: NativeCallback) =>
        this.run('readdir', path, 'metadataMs', cb, async (_s, ctx) => {
          const listed = await vfs.readdir(path, ctx);
          const entries: LinkAttr[] = this.links ? LinkFiles.shown(listed) : listed;
          const dir = toKernelStat({ path, name: '', isDir: true, size: 0, mtimeMs: 0, ctimeMs: 0 }, this.own);
          const names = ['.', '..'];
          const stats = [dir, dir];
          for (const e of entries) {
            names.push(e.name);
            stats.push(this.stat(e));
          }
          return [0, names, stats];
        }),

      access: (path: string, mode: number, cb: NativeCallback) =>
        this.run('access', path, 'metadataMs', cb, async (_s, ctx) => {
          const attr = await vfs.stat(path, ctx);
          if ((mode & W_OK) !== 0 && (permissionBits(attr.isDir, this.own, attr.readOnly) & 0o222) === 0) return -Errno.EROFS;
          return 0;
        }),

      statfs: (path: string, cb: NativeCallback) =>
        this.run('statfs', path, 'metadataMs', cb, async (_s, ctx) => [0, toKernelStatFs(await vfs.statfs(path, ctx), { readOnly: this.own.readOnly })]),

      open: (path: string, flags: number, cb: NativeCallback) =>
        this.run('open', path, 'durableMs', cb, (scope, ctx) => this.openFile(path, toOpenFlags(flags), ctx, scope)),

      // Without the open flags (createWithFlags has them): open read-write, never truncating an existing file.
      create: (path: string, mode: number, cb: NativeCallback) =>
        this.mutate('create', path, 'durableMs', cb, async (scope, ctx) => {
          checkNewName(path);
          const result = await this.openFile(path, { read: true, write: true, create: true }, ctx, scope);
          this.keepCreatedMode(path, false, mode);
          return result;
        }),

      read: (path: string, fh: number, buf: Buffer, len: number, pos: number, cb: NativeCallback) =>
        this.run('read', path, 'dataMs', cb, async (scope, ctx) => {
          const parts = await readPieces(this.handles.get(fh).handle, pos, len, ctx);
          if (!scope.live()) return 0; // answered already: the kernel's buffer is gone
          let n = 0;
          for (const part of parts) {
            if (n >= len) break;
            n += part.copy(buf, n, 0, Math.min(part.length, len - n));
          }
          return n;
        }),

      write: (path: string, fh: number, buf: Buffer, len: number, pos: number, cb: NativeCallback) => {
        // The kernel's buffer lives only until this operation answers: the Vfs gets a copy of its own.
        const data = this.writeBuffers.take(buf, len);
        this.run('write', path, 'dataMs', cb, async () => {
          try {
            return await this.writableFile(fh).handle.write(pos, data);
          } finally {
            this.writeBuffers.give(data);
          }
        });
      },

      truncate: (path: string, size: number, cb: NativeCallback) =>
        this.mutate('truncate', path, 'durableMs', cb, async (_s, ctx) => {
          const handle = await vfs.open(path, { write: true }, ctx);
          try {
            await handle.truncate(size);
          } finally {
            await handle.release();
          }
          return 0;
        }),

      ftruncate: (path: string, fh: number, size: number, cb: NativeCallback) =>
        this.run('ftruncate', path, 'durableMs', cb, async () => {
          await this.writableFile(fh).handle.truncate(size);
          return 0;
        }),

      // fallocate mode 0 (the others are answered EOPNOTSUPP by the engine): space is not reserved (the
      // service is not a disk), but the file is as long as a local disk would make it, zeros added.
      fallocate: (path: string, fh: number, offset: number, length: number, cb: NativeCallback) =>
        this.run('fallocate', path, 'durableMs', cb, async () => {
          if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length <= 0) return -Errno.EINVAL;
          const file = this.writableFile(fh);
          const end = offset + length;
          if ((await file.handle.stat()).size < end) await file.handle.truncate(end);
          return 0;
        }),

      flush: (path: string, fh: number, cb: NativeCallback, closed?: EngineClose) =>
        this.run('flush', path, 'durableMs', cb, async () => {
          const file = this.handles.get(fh);
          if (file.writable) await file.handle.flush(closed);
          return 0;
        }),

      fsync: (path: string, _datasync: number, fh: number, cb: NativeCallback) =>
        this.run('fsync', path, 'durableMs', cb, async () => {
          const file = this.handles.get(fh);
          if (file.writable) await file.handle.fsync();
          return 0;
        }),

      // fsync of a folder (`sync <folder>`): every pending upload reaches the service.
      fsyncdir: (path: string, _datasync: number, _fh: number, cb: NativeCallback) =>
        this.run('fsyncdir', path, 'syncMs', cb, async () => {
          await vfs.flushAll({ timeoutMs: this.deadlines.syncMs });
          return 0;
        }),

      release: (path: string, fh: number, cb: NativeCallback) =>
        this.run('release', path, 'durableMs', cb, async () => {
          await this.handles.take(fh).handle.release();
          return 0;
        }),

      unlink: (path: string, cb: NativeCallback) =>
        this.mutate('unlink', path, 'metadataMs', cb, async (_s, ctx) => {
          if (this.links) await this.links.unlink(path, ctx);
          else await vfs.unlink(path, ctx);
          this.requested.drop(path);
          this.folderChanged(path);
          return 0;
        }),

      mkdir: (path: string, mode: number, cb: NativeCallback) =>
        this.mutate('mkdir', path, 'metadataMs', cb, async (_s, ctx) => {
          checkNewName(path);
          await vfs.mkdir(path, ctx);
          this.keepCreatedMode(path, true, mode);
          this.folderChanged(path);
          return 0;
        }),

      rmdir: (path: string, cb: NativeCallback) =>
        this.mutate('rmdir', path, 'metadataMs', cb, async (_s, ctx) => {
          await vfs.rmdir(path, ctx);
          this.requested.drop(path);
          this.folderChanged(path);
          return 0;
        }),

      // Replaces the target, as rename(2); RENAME_NOREPLACE goes to renameNoReplace.
      rename: (from: string, to: string, cb: NativeCallback) =>
        this.mutate('rename', from, 'metadataMs', cb, async (_s, ctx) => {
          checkNewName(to);
          if (this.links) await this.links.rename(from, to, false, ctx);
          else await vfs.rename(from, to, { noReplace: false }, ctx);
          this.renamed(from, to);
          return 0;
        }),

      // The service keeps the modification time; the access time is kept in memory (RequestedOwnership).
      utimens: (path: string, atime: number, mtime: number, cb: NativeCallback) =>
        this.mutate('utimens', path, 'metadataMs', cb, async (_s, ctx) => {
          if (this.links) await this.links.setTimes(path, mtime, ctx);
          else await vfs.setTimes(path, mtime, ctx);
          // Kept only where the mount would show otherwise: an access time other than the modification
          // time, a change time for a modification time set in the past (tar, cp -p, rsync -a).
          const now = Date.now();
          // The time set replaces one kept for a folder whose names changed through the mount.
          const times = { atimeMs: atime !== mtime ? atime : undefined, ctimeMs: mtime < now - 1000 ? now : undefined, mtimeMs: undefined };
          if (times.atimeMs !== undefined || times.ctimeMs !== undefined || this.requested.get(path)) this.requested.setTimes(path, times);
          return 0;
        }),

      accessTime: (path: string, atime: number, cb: NativeCallback) =>
        this.mutate('utimens', path, 'metadataMs', cb, async (_s, ctx) => {
          await this.statShown(path, ctx);
          this.requested.setTimes(path, { atimeMs: atime, ctimeMs: Date.now() });
          return 0;
        }),

      // The service keeps no owner or mode: what is asked for is kept in memory (RequestedOwnership).
      chmod: (path: string, mode: number, cb: NativeCallback) =>
        this.mutate('chmod', path, 'metadataMs', cb, async (_s, ctx) => {
          const attr = await vfs.stat(path, ctx);
          this.requested.set(path, { mode: mode & 0o7777 }, { mode: permissionBits(attr.isDir, this.own), uid: this.own.uid, gid: this.own.gid });
          this.requested.setTimes(path, { ctimeMs: Date.now() });
          return 0;
        }),

      chown: (path: string, uid: number, gid: number, cb: NativeCallback) =>
        this.mutate('chown', path, 'metadataMs', cb, async (_s, ctx) => {
          const attr = await this.statShown(path, ctx);
          const unchanged = (id: number): boolean => id === 0xffff_ffff || id === -1;
          const change: { uid?: number; gid?: number } = {};
          if (!unchanged(uid)) change.uid = uid;
          if (!unchanged(gid)) change.gid = gid;
          this.requested.set(path, change, { mode: permissionBits(attr.isDir, this.own), uid: this.own.uid, gid: this.own.gid });
          this.requested.setTimes(path, { ctimeMs: Date.now() });
          return 0;
        }),

      // POSIX: EPERM when the file system does not support links.
      link: (_from: string, _to: string, cb: NativeCallback) => cb(-Errno.EPERM),
      // A symbolic link is a link file (src/fuse/link-files.ts); without those, EPERM as for hard links.
      symlink: (target: string, path: string, cb: NativeCallback) => {
        const links = this.links;
        if (!links) return cb(-Errno.EPERM);
        this.mutate('symlink', path, 'durableMs', cb, async (_s, ctx) => {
          checkNewName(path);
          await links.make(target, path, ctx);
          this.requested.drop(path);
          this.folderChanged(path);
          return 0;
        });
      },

      // Answers [0, target].
      readlink: (path: string, cb: NativeCallback) => {
        const links = this.links;
        if (!links) return cb(-Errno.EINVAL);
        this.run('readlink', path, 'metadataMs', cb, async (_s, ctx) => [0, await links.readTarget(path, ctx)]);
      },
      mknod: (_path: string, _mode: number, _dev: number, cb: NativeCallback) => cb(-Errno.EPERM),

      setxattr: (path: string, name: string, value: Buffer, _position: number, flags: number, cb: NativeCallback) => {
        const copy = Buffer.from(value);
        if (name === XATTR_STATE) return cb(-Errno.EPERM);
        this.mutate('setxattr', path, 'metadataMs', cb, async (_s, ctx) => {
          if (!XATTR_NAMES.includes(name)) return -Errno.ENOTSUP;
          if (copy.length > XATTR_VALUE_MAX) return -Errno.ERANGE;
          // Both attributes always exist: XATTR_CREATE cannot succeed, XATTR_REPLACE always can.
          if (flags & XATTR_CREATE) return -Errno.EEXIST;
          if (name === XATTR_TAGS) await vfs.setTags(path, decodeTags(copy), ctx);
          else if (name === XATTR_PIN) return setPinned(path, decodePin(copy), ctx);
          else await vfs.setLocked(path, decodeLock(copy), ctx);
          return 0;
        });
      },

      removexattr: (path: string, name: string, cb: NativeCallback) => {
        if (name === XATTR_STATE) return cb(-Errno.EPERM);
        if (!XATTR_NAMES.includes(name)) return cb(-unknownXattrErrno(name));
        this.mutate('removexattr', path, 'metadataMs', cb, async (_s, ctx) => {
          if (name === XATTR_TAGS) await vfs.setTags(path, [], ctx);
          else if (name === XATTR_PIN) return setPinned(path, false, ctx);
          else await vfs.setLocked(path, false, ctx);
          return 0;
        });
      },

      // `target` is a buffer of the size the kernel asked for (length 0 = size query).
      getxattr: (path: string, name: string, target: Buffer, cb: NativeCallback) => {
        // Answered at once, without the service: ls -l asks for security.selinux and
        // system.posix_acl_access on every file, and caches ENOTSUP per device (not ENODATA).
        if (!XATTR_READABLE.includes(name)) return cb(-unknownXattrErrno(name));
        this.run('getxattr', path, 'metadataMs', cb, async (scope, ctx) => {
          let value: Buffer;
          if (name === XATTR_STATE) {
            const state = (await vfs.stat(path, ctx)).state;
            if (state === undefined) return -Errno.ENODATA;
            value = Buffer.from(state, 'utf8');
          } else value = name === XATTR_TAGS ? encodeTags(await vfs.getTags(path, ctx))
            : name === XATTR_PIN ? encodeLock(!!(await vfs.pinned?.(path, ctx))) : encodeLock(!!(await vfs.stat(path, ctx)).locked);
          if (!scope.live()) return -Errno.EIO;
          return fillXattrBuffer(target, value);
        });
      },

      listxattr: (path: string, target: Buffer, cb: NativeCallback) =>
        this.run('listxattr', path, 'metadataMs', cb, async (scope, ctx) => {
          const attr = await this.statShown(path, ctx);
          if (attr.isLink) return fillXattrBuffer(target, encodeXattrNames([]));
          const list = encodeXattrNames([...(attr.id === undefined ? [] : XATTR_NAMES), ...(attr.state === undefined ? [] : [XATTR_STATE])]);
          if (!scope.live()) return -Errno.EIO;
          return fillXattrBuffer(target, list);
        }),
    };
  }
}
