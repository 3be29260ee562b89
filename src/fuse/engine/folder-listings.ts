/**
 * Folder listings for the kernel: directory handles, readdir and readdirplus (each entry with its
 * attributes and inode, so that `ls -l` costs no lookup a name), and the names of folders given to the
 * engine, which then answers lookups of names a folder does not have itself (see docs/fuse.md, The engine).
 */
import type { FuseOperations } from '../operations.js';
import type { KernelStat } from '../stat.js';
import type { Fuse3Binding, KernelRequest, NativeSession } from './binding.js';
import { ROOT_INO, type InodeNode, type InodeTable } from './inode-table.js';
import type { PathOperations } from './path-operations.js';

/** Directory handles are numbered from here, apart from file handles (HandleTable, below 2^31). */
export const DIR_FH_BASE = 2 ** 40;
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

/** What the listings need of the mount. */
export interface ListingsMount {
  readonly binding: Fuse3Binding;
  /** The session while mounted. */
  session(): NativeSession | undefined;
  readonly inodes: InodeTable;
  readonly ops: PathOperations;
  readonly operations: FuseOperations;
  /** Seconds the kernel keeps names, attributes and negative lookups. */
  readonly timeout: number;
  /** A file not open here whose size or mtime differs from what the kernel was last shown. */
  changedElsewhere(node: InodeNode, st: KernelStat): boolean;
  /** The kernel was shown `st` of `node`. */
  shown(node: InodeNode, st: KernelStat): void;
  /** Attributes for the kernel, with this inode's number. */
  statArray(ino: number, st: KernelStat): Float64Array;
  /** Where folder `path` is in the Vfs, when the engine answers closes and may do so there. */
  closesWhere(path: string): { library: string; fullpath: string } | undefined;
}

export class FolderListings {
  /** Directory handles and their listing (read at offset 0, kept for the reads that go on from there). */
  private readonly dirs = new Map<number, DirListing | undefined>();
  private nextDirFh = DIR_FH_BASE;
  /** When each folder's names were last offered to the engine (ms), oldest first. */
  private readonly namesOffered = new Map<number, number>();

  constructor(private readonly mount: ListingsMount) {}

  private get se(): NativeSession {
    return this.mount.session()!;
  }

  /** OPENDIR of inode `ino`: a directory handle. */
  open(id: number, ino: number): void {
    this.mount.inodes.path(ino);
    const fh = this.nextDirFh++;
    this.dirs.set(fh, undefined);
    this.mount.binding.replyOpen(this.se, id, fh, 0);
  }

  /** RELEASEDIR: the handle's listing goes. */
  release(id: number, fh: number): void {
    this.dirs.delete(fh);
    this.mount.binding.replyErr(this.se, id, 0);
  }

  /** A directory handle the engine released itself: its listing goes. */
  released(fh: number): void {
    this.dirs.delete(fh);
  }

  /**
   * readdir, and readdirplus (`plus`): the same listing, each entry with its attributes and inode, so that
   * `ls -l` of a folder costs no lookup a name. The kernel holds a reference to each entry it was given
   * that way, as after a lookup: counted here for the entries that went in.
   */
  readdir(id: number, req: KernelRequest, plus: boolean): void {
    const b = this.mount.binding;
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
    const node = this.mount.inodes.get(req.ino);
    const path = this.mount.inodes.pathOf(node);
    this.mount.ops.readdir(path, (code, names, stats) => {
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
        else inos[i] = this.mount.inodes.find(node.ino, n)?.ino ?? UNKNOWN_INO;
      }
      const listing: DirListing = { ino: node.ino, names: list, inos, dirs, stats: sts };
      if (this.dirs.has(fh)) this.dirs.set(fh, listing);
      // Every name of the folder, as the Vfs holds them: the engine answers lookups of others itself.
      if (this.mount.timeout > 0 && !node.detached && list.length <= NAMES_OFFERED_MOST + 2) {
        this.namesOfferedNow(node.ino);
        const names = list.filter((n) => n !== '.' && n !== '..');
        const unlisted = this.mount.operations.unlistedNames(path, names);
        if (unlisted) this.mount.binding.folderNames(se, id, node.ino, [...names, ...unlisted], this.mount.timeout, this.mount.closesWhere(this.mount.inodes.pathOf(node)));
      }
      send(listing);
    });
  }

  /** Entries `start` to `end` of `listing` as a readdirplus answer (see readdir). */
  private replyDirPlus(id: number, size: number, listing: DirListing, start: number, end: number): void {
    const dir = this.mount.inodes.get(listing.ino);
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
        const known = this.mount.inodes.find(dir.ino, name);
        const node = this.mount.inodes.remember(dir.ino, name, isDir, known !== undefined && this.mount.changedElsewhere(known, st));
        this.mount.shown(node, st);
        counted.push(node);
        ino = node.ino;
      }
      stats.set(this.mount.statArray(ino, st), i * STAT_FIELDS);
    }
    const added = this.mount.binding.replyDirPlus(this.se, id, size, names, stats, this.mount.timeout, this.mount.timeout, start);
    // Entries that did not fit (or an answer nobody waits for): the kernel holds no reference to them.
    for (let i = Math.max(0, added); i < counted.length; i++) {
      const node = counted[i];
      if (node) this.mount.inodes.forget(node.ino, 1);
    }
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
  offerNames(id: number, parent: number): void {
    if (this.mount.timeout <= 0) return;
    const now = Date.now();
    const last = this.namesOffered.get(parent);
    if (last !== undefined && now - last < this.mount.timeout * 500) return;
    this.namesOfferedNow(parent, now);
    let path: string;
    try {
      path = this.mount.inodes.path(parent);
    } catch {
      return;
    }
    const names = this.mount.operations.cachedNames(path, NAMES_OFFERED_MOST);
    if (names) this.mount.binding.folderNames(this.se, id, parent, names, this.mount.timeout, this.mount.closesWhere(path));
  }
}
