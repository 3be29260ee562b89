/**
 * mountVfs: serves a Vfs as a FUSE mount through fuse-native (libfuse 2.9), and takes it down cleanly.
 *
 * MountedFuse fixes three spots of the binding: `fgetattr` reaches our handle table (the binding sends it
 * to `getattr`), getxattr/listxattr see the kernel's buffer (size queries and ERANGE), and the mount
 * options are ours (big writes, kernel cache timeouts, read-only).
 */
import Fuse from 'fuse-native';
import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Vfs } from '../vfs/types.js';
import { DEFAULT_DEADLINES, FuseOperations, type OperationDeadlines } from './operations.js';
import type { NativeCallback } from './reply.js';
import { clearStaleMount, detachMount, findFuseMount } from './stale-mount.js';

export interface MountOptions {
  vfs: Vfs;
  /** Folder to mount on; created if missing. */
  mountpoint: string;
  /** Owner shown for every file. Default: this process's uid. */
  uid?: number;
  /** Group shown for every file. Default: this process's gid. */
  gid?: number;
  /** Permission bits cleared (0o022 shows 0755 folders, 0644 files). Default 0o022. */
  umask?: number;
  /** Let other users use the mount (needs `user_allow_other` in /etc/fuse.conf unless root). Default false. */
  allowOther?: boolean;
  /** Refuse every change with EROFS. Default false. */
  readOnly?: boolean;
  /**
   * How long the kernel trusts attributes and names, seconds (tie it to the updates feed interval: a
   * change made elsewhere shows within feed interval + this). Default 2.
   */
  attrTimeoutS?: number;
  /** Per-class operation deadlines, ms (see OperationDeadlines). */
  deadlines?: Partial<OperationDeadlines>;
  /** On unmount, how long to wait for pending uploads to reach the service before unmounting anyway, ms. Default 10 000. */
  flushTimeoutMs?: number;
  /** Print libfuse's own trace of every request (very verbose). Default false. */
  debug?: boolean;
  logger: Logger;
}

export interface MountedVfs {
  readonly mountpoint: string;
  /** Makes open files durable, waits (bounded) for pending uploads, then unmounts. Idempotent. */
  unmount(): Promise<void>;
}

/** Largest write request the kernel sends, bytes. */
const MAX_WRITE = 128 * 1024;

interface MountedFuseConfig {
  allowOther: boolean;
  readOnly: boolean;
  attrTimeoutS: number;
  debug: boolean;
}

class MountedFuse extends Fuse {
  constructor(mnt: string, ops: Record<string, (...args: any[]) => void>, private readonly config: MountedFuseConfig) {
    super(mnt, ops, { timeout: false, mkdir: false, force: false });
  }

  protected override _fuseOptions(): string {
    const c = this.config;
    const t = String(c.attrTimeoutS);
    const options = [
      'fsname=cloudlib', 'subtype=cloudlib',
      'big_writes', `max_write=${MAX_WRITE}`, `max_read=${MAX_WRITE}`,
      // Keep file data in the page cache across opens while mtime and size are unchanged.
      'auto_cache',
      `entry_timeout=${t}`, `attr_timeout=${t}`, `negative_timeout=${t}`,
      // Permission checks by the kernel against the modes we show (owner, umask, read-only).
      'default_permissions',
    ];
    if (c.allowOther) options.push('allow_other');
    if (c.readOnly) options.push('ro');
    if (c.debug) options.push('debug');
    return `-o${options.join(',')}`;
  }

  // The binding routes fgetattr to getattr; ours answers from the open handle (local size while dirty).
  _op_fgetattr(signal: NativeCallback, path: string, fd: number): void {
    this.ops.fgetattr!(path, fd, (code: number, stat?: unknown) => {
      if (code < 0) return signal(code);
      return signal(0, toStatArray(stat));
    });
  }

  _op_getxattr(signal: NativeCallback, path: string, name: string, valueBuf: Buffer): void {
    this.ops.getxattr!(path, name, valueBuf, (code: number) => signal(code, valueBuf.buffer));
  }

  _op_listxattr(signal: NativeCallback, path: string, listBuf: Buffer): void {
    this.ops.listxattr!(path, listBuf, (code: number) => signal(code, listBuf.buffer));
  }
}

/** fuse-native's stat array layout (the binding's own helper is not exported). */
function toStatArray(stat: unknown): Uint32Array {
  const s = (stat ?? {}) as Record<string, number>;
  const ints = new Uint32Array(18);
  const setDouble = (idx: number, n: number): void => {
    ints[idx] = n % 4294967296;
    ints[idx + 1] = (n - ints[idx]!) / 4294967296;
  };
  ints[0] = s.mode ?? 0;
  ints[1] = s.uid ?? 0;
  ints[2] = s.gid ?? 0;
  setDouble(3, s.size ?? 0);
  ints[5] = 0;
  ints[6] = s.nlink ?? 1;
  ints[7] = 0;
  ints[8] = 0;
  ints[9] = s.blksize ?? 0;
  setDouble(10, s.blocks ?? 0);
  setDouble(12, s.atime ?? 0);
  setDouble(14, s.mtime ?? 0);
  setDouble(16, s.ctime ?? 0);
  return ints;
}

function validate(opts: MountOptions): void {
  const int = (v: unknown, what: string, max: number): void => {
    if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max)) {
      throw new TypeError(`${what}: expected an integer from 0 to ${max}, got ${JSON.stringify(v)}`);
    }
  };
  if (typeof opts.mountpoint !== 'string' || opts.mountpoint === '') throw new TypeError(`mountpoint: expected a folder path, got ${JSON.stringify(opts.mountpoint)}`);
  int(opts.uid, 'uid', 0xffff_fffe);
  int(opts.gid, 'gid', 0xffff_fffe);
  int(opts.umask, 'umask', 0o777);
  if (opts.attrTimeoutS !== undefined && !(typeof opts.attrTimeoutS === 'number' && opts.attrTimeoutS >= 0 && opts.attrTimeoutS <= 3600)) {
    throw new TypeError(`attrTimeoutS: expected seconds from 0 to 3600, got ${JSON.stringify(opts.attrTimeoutS)}`);
  }
  for (const [k, v] of Object.entries(opts.deadlines ?? {})) {
    if (typeof v !== 'number' || !(v >= 0)) throw new TypeError(`deadlines.${k}: expected milliseconds >= 0, got ${JSON.stringify(v)}`);
  }
}

export async function mountVfs(opts: MountOptions): Promise<MountedVfs> {
  validate(opts);
  const mnt = resolve(opts.mountpoint);
  const logger = opts.logger;
  await clearStaleMount(mnt, logger);
  await mkdir(mnt, { recursive: true });

  const readOnly = !!opts.readOnly;
  const operations = new FuseOperations({
    vfs: opts.vfs,
    ownership: {
      uid: opts.uid ?? process.getuid?.() ?? 0,
      gid: opts.gid ?? process.getgid?.() ?? 0,
      umask: opts.umask ?? 0o022,
      readOnly,
    },
    deadlines: { ...DEFAULT_DEADLINES, ...opts.deadlines },
    logger,
  });
  const fuse = new MountedFuse(mnt, operations.toNative(), {
    allowOther: !!opts.allowOther,
    readOnly,
    attrTimeoutS: opts.attrTimeoutS ?? 2,
    debug: !!opts.debug,
  });
  await new Promise<void>((resolveMount, reject) => {
    fuse.mount((err) => (err ? reject(new Error(`cannot mount ${mnt}: ${err.message}`)) : resolveMount()));
  });
  logger.info({ mountpoint: mnt, readOnly }, 'fuse: mounted');

  let unmounting: Promise<void> | undefined;
  const unmount = (): Promise<void> => {
    unmounting ??= (async () => {
      // 1. Data of open files into the upload journal; 2. pending uploads to the service (bounded).
      for (const file of operations.handles.list().filter((f) => f.writable)) {
        await file.handle.flush().catch((err: unknown) => logger.error({ path: file.handle.path, err: String(err) }, 'fuse: flushing an open file at unmount failed'));
      }
      await opts.vfs.flushAll({ timeoutMs: opts.flushTimeoutMs ?? 10_000 }).catch((err: unknown) => {
        logger.warn({ err: String(err) }, 'fuse: uploads still pending at unmount; they stay in the journal');
      });
      // 3. Unmount, then release whatever the kernel still held open.
      await new Promise<void>((resolveUnmount) => {
        fuse.unmount((err) => {
          if (err) logger.warn({ err: err.message }, 'fuse: unmount reported an error');
          resolveUnmount();
        });
      });
      if (await findFuseMount(mnt)) await detachMount(mnt, logger);
      await operations.inFlight.drained(5_000);
      for (const file of operations.handles.takeAll()) {
        await file.handle.release().catch((err: unknown) => logger.error({ path: file.handle.path, err: String(err) }, 'fuse: releasing an open file at unmount failed'));
      }
      logger.info({ mountpoint: mnt }, 'fuse: unmounted');
    })();
    return unmounting;
  };
  return { mountpoint: mnt, unmount };
}
