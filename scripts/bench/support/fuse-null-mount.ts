/**
 * The ceiling of a FUSE file system on this machine with the libfuse 3 engine: one file of BYTES whose
 * reads and writes are answered at once, with nothing read or stored (the same session settings as
 * `cloudlib mount`: 1 MiB requests, read-ahead, the writeback cache). Every request still crosses from
 * the kernel to the engine's reader thread to Node's main thread and back, which is all that this
 * measures. Run in a child process of the FUSE benchmark (a process serving a mount must never make a
 * synchronous call on it): argv MOUNTPOINT BYTES [SPOOL]; prints `mounted`, unmounts on SIGTERM.
 *
 * With SPOOL, each write is answered only once its bytes are written to that file (fsync syncs it): the
 * least that any mount keeping the data must do, with no hashing and no journal.
 *
 * With SPOOL and `passthrough` after it, the session asks for FUSE passthrough instead of the writeback
 * cache, and each open is answered with SPOOL as its backing file (one backing id for the file, kept
 * until the end): the kernel then reads and writes SPOOL itself, no request reaching the engine. When the
 * kernel does not grant passthrough (before Linux 6.9, or without CAP_SYS_ADMIN) opens are answered as
 * without it. On SIGTERM the mount prints `served {...}`: whether passthrough was granted and used, and
 * the write and read requests that reached it.
 */
import { fdatasync, openSync, write as writeToFile } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Op, loadFuse3Binding, type KernelRequest, type NativeSession } from '../../../src/fuse/engine/binding.js';
import { FUSE3_SETTINGS } from '../../../src/fuse/mount.js';

const [mountpoint, bytesArg, spoolPath, mode] = process.argv.slice(2);
const size = Number(bytesArg);
if (!mountpoint || !Number.isSafeInteger(size) || size <= 0 || (mode !== undefined && (mode !== 'passthrough' || !spoolPath))) {
  throw new Error('usage: fuse-null-mount.ts MOUNTPOINT BYTES [SPOOL [passthrough]]');
}
const passthrough = mode === 'passthrough';

const ENOENT = 2;
const EIO = 5;
const ENODATA = 61;
const ENOSYS = 38;
const FILE_INO = 2;
// Opened before the mount exists (never a synchronous call on the mount itself).
const spool = spoolPath ? openSync(spoolPath, passthrough ? 'w+' : 'w') : undefined;
const zeros = Buffer.alloc(FUSE3_SETTINGS.maxWrite);
const now = Date.now();
const uid = process.getuid?.() ?? 0;
const gid = process.getgid?.() ?? 0;
const dirStat = Float64Array.of(1, 0o40755, 2, uid, gid, 0, 0, 4096, now, now, now);
const fileStat = Float64Array.of(FILE_INO, 0o100644, 1, uid, gid, size, Math.ceil(size / 512), 1024 * 1024, now, now, now);
const fuse = loadFuse3Binding();
const served = { passthrough: false, backingId: 0, backingError: 0, opens: 0, writes: 0, reads: 0 };

/** The backing id of SPOOL, registered at the first open (0 when passthrough is not granted or was refused). */
function backing(se: NativeSession): number {
  if (!passthrough || spool === undefined || served.backingError) return 0;
  if (!served.backingId) {
    const id = fuse.backingOpen(se, spool);
    if (id > 0) served.backingId = id;
    else served.backingError = -id;
  }
  return served.backingId;
}

function serve(se: NativeSession, r: KernelRequest): void {
  switch (r.op) {
    case Op.INIT: case Op.END: case Op.FORGET:
      return;
    case Op.LOOKUP:
      if (r.ino === 1 && r.name === 'f') fuse.replyEntry(se, r.id, fileStat, 3600, 3600);
      else fuse.replyErr(se, r.id, ENOENT);
      return;
    case Op.GETATTR: case Op.SETATTR:
      fuse.replyAttr(se, r.id, r.ino === 1 ? dirStat : fileStat, 3600);
      return;
    case Op.OPEN: {
      served.opens++;
      const id = backing(se);
      if (id) fuse.replyOpenBacking(se, r.id, 1, id);
      else fuse.replyOpen(se, r.id, 1, 0);
      return;
    }
    case Op.OPENDIR:
      fuse.replyOpen(se, r.id, 1, 0);
      return;
    case Op.READ:
      served.reads++;
      fuse.replyData(se, r.id, [zeros], Math.max(0, Math.min(r.size!, size - r.offset!)));
      return;
    case Op.WRITE:
      served.writes++;
      if (spool === undefined) return void fuse.replyWrite(se, r.id, r.data!.length);
      writeToFile(spool, r.data!, 0, r.data!.length, r.offset!, (err, written) => (err ? fuse.replyErr(se, r.id, EIO) : fuse.replyWrite(se, r.id, written)));
      return;
    case Op.FSYNC:
      if (spool === undefined) return void fuse.replyErr(se, r.id, 0);
      fdatasync(spool, (err) => fuse.replyErr(se, r.id, err ? EIO : 0));
      return;
    case Op.FLUSH: case Op.RELEASE: case Op.RELEASEDIR: case Op.FSYNCDIR:
      fuse.replyErr(se, r.id, 0);
      return;
    case Op.READDIR:
      if (r.offset! > 0) return void fuse.replyData(se, r.id, [], 0);
      fuse.replyDir(se, r.id, r.size!, ['.', '..', 'f'], Float64Array.of(1, 1, FILE_INO), Uint8Array.of(1, 1, 0), 0);
      return;
    case Op.GETXATTR: case Op.LISTXATTR:
      fuse.replyErr(se, r.id, ENODATA);
      return;
    default:
      fuse.replyErr(se, r.id, ENOSYS);
  }
}

await mkdir(mountpoint, { recursive: true });
const session: NativeSession = fuse.mount(mountpoint, ['-o', 'fsname=cloudlib-null'], { ...FUSE3_SETTINGS, writeback: 1, passthrough: passthrough ? 1 : 0, asyncRead: 1, readers: 1 }, (batch) => {
  for (const r of batch) serve(session, r);
});
// As mountVfs does: the kernel's read-ahead window widened to what the session asks for.
const device = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((l) => l.split(' ')).find((f) => f[4] === resolve(mountpoint))?.[2];
if (device) await writeFile(`/sys/class/bdi/${device}/read_ahead_kb`, String(FUSE3_SETTINGS.maxReadahead / 1024)).catch(() => undefined);
process.stdout.write('mounted\n');
process.once('SIGTERM', () => {
  served.passthrough = fuse.transport(session).passthrough;
  process.stdout.write(`served ${JSON.stringify(served)}\n`);
  void fuse.unmount(session).then(() => process.exit(0));
});
