/**
 * Attribute shapes for the kernel: Vfs Attr → `struct stat` fields, StatFs → `struct statvfs` fields,
 * as the engine passes them to the kernel. The service keeps no owner or mode: every object shows the
 * mount's owner and a mode derived from the umask (and read-only setting), unless chmod/chown asked for
 * another (RequestedOwnership in operations.ts).
 */
import { MAX_NAME_BYTES, type Attr, type StatFs } from '../vfs/types.js';

/** Owner and permission bits every object of the mount shows. */
export interface Ownership {
  uid: number;
  gid: number;
  /** Bits cleared from 0777 (folders) and 0666 (files). */
  umask: number;
  /** Show no write permission. */
  readOnly: boolean;
}

/** Fields of `struct stat` that the engine passes on (times in ms since the epoch). */
export interface KernelStat {
  mode: number;
  uid: number;
  gid: number;
  size: number;
  nlink: number;
  blksize: number;
  blocks: number;
  atime: number;
  mtime: number;
  ctime: number;
}

/** Fields of `struct statvfs` (each kept below 2^32, as tools that read 32-bit fields expect). */
export interface KernelStatFs {
  bsize: number;
  frsize: number;
  blocks: number;
  bfree: number;
  bavail: number;
  files: number;
  ffree: number;
  favail: number;
  fsid: number;
  flag: number;
  namemax: number;
}

/** The file type bits of a mode. */
export const S_IFMT = 0o170000;
export const S_IFDIR = 0o040000;
export const S_IFREG = 0o100000;
export const S_IFLNK = 0o120000;

/** Preferred I/O size shown to applications (cp, dd, tar size their buffers by it), bytes. */
export const PREFERRED_IO_SIZE = 128 * 1024;

/** Longest name, bytes (the Vfs's limit, the service's). */
export const NAME_MAX = MAX_NAME_BYTES;

const UINT32_MAX = 0xffff_ffff;

/** Mode bits of an object: from the umask, without write bits on a read-only mount or object (`readOnly`). */
export function permissionBits(isDir: boolean, own: Ownership, readOnly = false): number {
  let bits = (isDir ? 0o777 : 0o666) & ~own.umask;
  if (own.readOnly || readOnly) bits &= ~0o222;
  return bits;
}

/** Locked on the service, and not by the mount's own callers (whose lock holder is ''): the mount's writers are refused. */
function lockedForOthers(attr: Attr): boolean {
  return !attr.isDir && !!attr.locked && attr.lockHolder !== '';
}

export function toKernelStat(attr: Attr, own: Ownership): KernelStat {
  const size = attr.isDir ? 0 : Math.max(0, attr.size);
  const mtime = attr.mtimeMs;
  return {
    // A file locked on the service by someone else (not the mount's callers) shows read-only, so an
    // editor opens it read-only rather than fail at its save (EACCES), as SeaDrive shows it.
    mode: (attr.isDir ? S_IFDIR : S_IFREG) | (permissionBits(attr.isDir, own, attr.readOnly) & (lockedForOthers(attr) ? ~0o222 : 0o7777)),
    uid: own.uid,
    gid: own.gid,
    size,
    nlink: attr.isDir ? 2 : 1,
    blksize: PREFERRED_IO_SIZE,
    blocks: Math.ceil(size / 512),
    atime: mtime,
    mtime,
    // The service keeps no status-change time; the last change of content or name is the closest.
    ctime: Math.max(mtime, attr.ctimeMs),
  };
}

/** `st` of a link file shown as the symbolic link it holds: mode 0777 as every link's, size the target's length. */
export function showAsLink(st: KernelStat): KernelStat {
  return { ...st, mode: S_IFLNK | 0o777, nlink: 1 };
}

/**
 * statvfs of a library: capacity and use in blocks of `frsize` bytes, with `frsize` grown (4 KiB × 2^k)
 * until the block counts fit in 32 bits. statvfs cannot say "unlimited": an unlimited capacity
 * (Number.MAX_SAFE_INTEGER) shows as what is used plus 1 PiB free, as rclone's mount shows a remote of
 * unknown size, never as 8 PiB.
 */
export const UNLIMITED_FREE_BYTES = 2 ** 50;

export function toKernelStatFs(fs: StatFs, opts: { readOnly: boolean }): KernelStatFs {
  const unlimited = fs.total >= Number.MAX_SAFE_INTEGER;
  const total = unlimited ? Math.max(0, fs.used) + UNLIMITED_FREE_BYTES : Math.max(0, fs.total);
  const used = Math.max(0, Math.min(fs.used, total));
  const free = unlimited ? UNLIMITED_FREE_BYTES : Math.max(0, Math.min(fs.free, total - used));
  let frsize = 4096;
  while (total / frsize > UINT32_MAX && frsize < 2 ** 30) frsize *= 2;
  const blocks = Math.min(UINT32_MAX, Math.floor(total / frsize));
  const bfree = Math.min(blocks, Math.floor(free / frsize));
  const files = Math.min(UINT32_MAX, fs.files ?? 0);
  const ST_RDONLY = 1;
  return {
    bsize: PREFERRED_IO_SIZE,
    frsize,
    blocks,
    bfree,
    bavail: bfree,
    // The service has no inode limit: report what exists plus everything else as free.
    files: UINT32_MAX,
    ffree: UINT32_MAX - files,
    favail: UINT32_MAX - files,
    fsid: 0,
    flag: opts.readOnly ? ST_RDONLY : 0,
    namemax: NAME_MAX,
  };
}
