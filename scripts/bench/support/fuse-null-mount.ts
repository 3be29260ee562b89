/**
 * The ceiling of a fuse-native file system on this machine: one file of BYTES whose reads and writes are
 * answered at once, with nothing read or stored (the same mount options as `cloudlib mount`: 128 KiB
 * requests). Every request still crosses from the kernel to a libfuse thread to Node's main thread and
 * back, which is all that this measures. Run in a child process of the FUSE benchmark (a process serving a
 * mount must never make a synchronous call on it): argv MOUNTPOINT BYTES [SPOOL]; prints `mounted`,
 * unmounts on SIGTERM.
 *
 * With SPOOL, each write is answered only once its bytes are written to that file (straight from the
 * kernel's buffer, no copy; fsync syncs it): the least that any mount keeping the data must do, with no
 * hashing and no journal.
 */
import { fdatasync, openSync, write as writeToFile } from 'node:fs';
import Fuse from 'fuse-native';

const [mountpoint, bytesArg, spoolPath] = process.argv.slice(2);
const size = Number(bytesArg);
if (!mountpoint || !Number.isSafeInteger(size) || size <= 0) throw new Error('usage: fuse-null-mount.ts MOUNTPOINT BYTES');

type Cb = (...args: unknown[]) => void;
// Opened before the mount exists (never a synchronous call on the mount itself).
const spool = spoolPath ? openSync(spoolPath, 'w') : undefined;
const now = new Date();
const attr = (mode: number, length: number): Record<string, unknown> => ({ mtime: now, atime: now, ctime: now, nlink: 1, size: length, mode, uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 });
const ops = {
  readdir: (path: string, cb: Cb) => cb(0, path === '/' ? ['f'] : []),
  getattr: (path: string, cb: Cb) => {
    if (path === '/') return cb(0, attr(0o40755, 4096));
    if (path === '/f') return cb(0, attr(0o100644, size));
    cb(-2); // ENOENT
  },
  open: (_path: string, _flags: number, cb: Cb) => cb(0, 1),
  release: (_path: string, _fd: number, cb: Cb) => cb(0),
  truncate: (_path: string, _size: number, cb: Cb) => cb(0),
  ftruncate: (_path: string, _fd: number, _size: number, cb: Cb) => cb(0),
  flush: (_path: string, _fd: number, cb: Cb) => cb(0),
  fsync: (_path: string, _fd: number, _datasync: boolean, cb: Cb) => (spool === undefined ? cb(0) : fdatasync(spool, (err) => cb(err ? -5 : 0))),
  read: (_path: string, _fd: number, _buf: Buffer, len: number, pos: number, cb: Cb) => cb(Math.max(0, Math.min(len, size - pos))),
  write: (_path: string, _fd: number, buf: Buffer, len: number, pos: number, cb: Cb) => {
    if (spool === undefined) return cb(len);
    writeToFile(spool, buf, 0, len, pos, (err, written) => cb(err ? -5 : written)); // EIO
  },
};

class NullMount extends Fuse {
  protected override _fuseOptions(): string {
    return '-ofsname=cloudlib-null,big_writes,max_write=131072,max_read=131072';
  }
}

const fuse = new NullMount(mountpoint, ops, { timeout: false, mkdir: true, force: true });
fuse.mount((err: Error | null) => {
  if (err) {
    process.stderr.write(`fuse-null-mount: ${err.message}\n`);
    process.exit(1);
  }
  process.stdout.write('mounted\n');
});
process.once('SIGTERM', () => fuse.unmount(() => process.exit(0)));
