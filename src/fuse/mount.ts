/**
 * mountVfs: serves a Vfs as a FUSE mount, and takes it down cleanly. Two engines: `fuse3` (our own
 * N-API addon over libfuse 3's low-level API, engine/) and `fuse-native` (libfuse 2.9).
 *
 * For fuse-native:
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
import { clearStaleMount, detachMount, findFuseMount, abortConnection } from './stale-mount.js';
import { loadFuse3Binding } from './engine/binding.js';
import { LowLevelMount } from './engine/lowlevel-mount.js';

/** The FUSE engines: our libfuse 3 addon, or fuse-native (libfuse 2.9). */
export type FuseEngine = 'fuse3' | 'fuse-native';
export const FUSE_ENGINES: readonly FuseEngine[] = ['fuse3', 'fuse-native'];

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
  /** Which FUSE engine serves the mount. Default `fuse-native`. */
  engine?: FuseEngine;
  /** fuse3 engine: let the kernel cache writes and send them in large requests. Default true. */
  writebackCache?: boolean;
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
  if (opts.engine !== undefined && !FUSE_ENGINES.includes(opts.engine)) throw new TypeError(`engine: expected ${FUSE_ENGINES.join(' or ')}, got ${JSON.stringify(opts.engine)}`);
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
  const engine = opts.engine ?? 'fuse-native';
  const attrTimeoutS = opts.attrTimeoutS ?? 2;
  const served = engine === 'fuse3'
    ? mountFuse3(mnt, operations, { ...opts, attrTimeoutS, readOnly }, logger)
    : await mountFuseNative(mnt, operations, { allowOther: !!opts.allowOther, readOnly, attrTimeoutS, debug: !!opts.debug });
  logger.info({ mountpoint: mnt, readOnly, engine }, 'fuse: mounted');

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
      await served.unmount();
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

interface ServedMount {
  unmount(): Promise<void>;
}

async function mountFuseNative(mnt: string, operations: FuseOperations, config: MountedFuseConfig): Promise<ServedMount> {
  const fuse = new MountedFuse(mnt, operations.toNative(), config);
  await new Promise<void>((resolveMount, reject) => {
    fuse.mount((err) => (err ? reject(new Error(`cannot mount ${mnt}: ${err.message}`)) : resolveMount()));
  });
  return {
    unmount: () =>
      new Promise<void>((resolveUnmount) => {
        fuse.unmount((err) => {
          if (err) operations.logger.warn({ err: err.message }, 'fuse: unmount reported an error');
          resolveUnmount();
        });
      }),
  };
}

/** What the libfuse 3 engine asks the kernel for at INIT. */
export const FUSE3_SETTINGS = {
  /** Largest write request, bytes (the kernel's limit with max_pages is 1 MiB on 4 KiB pages). */
  maxWrite: 1024 * 1024,
  /** Read-ahead window, bytes. */
  maxReadahead: 1024 * 1024,
  /** Requests the kernel keeps in flight in the background (read-ahead, writeback). */
  maxBackground: 64,
  congestionThreshold: 48,
};

function mountFuse3(mnt: string, operations: FuseOperations, opts: MountOptions & { attrTimeoutS: number; readOnly: boolean }, logger: Logger): ServedMount {
  const binding = loadFuse3Binding();
  const options = ['fsname=cloudlib', 'subtype=cloudlib', 'default_permissions'];
  if (opts.allowOther) options.push('allow_other');
  if (opts.readOnly) options.push('ro');
  const args = ['-o', options.join(',')];
  if (opts.debug) args.push('-d');
  const session = new LowLevelMount({
    binding,
    operations,
    mountpoint: mnt,
    mountOptions: args,
    settings: { ...FUSE3_SETTINGS, writeback: opts.writebackCache === false ? 0 : 1, asyncRead: 1, readers: 1 },
    attrTimeoutS: opts.attrTimeoutS,
    logger,
  });
  try {
    session.mount();
  } catch (err) {
    throw new Error(`cannot mount ${mnt}: ${(err as Error).message}`);
  }
  return {
    async unmount() {
      const entry = await findFuseMount(mnt);
      await session.unmount();
      // The readers stop once the kernel lets go of the connection; files still open elsewhere keep it.
      const ended = await Promise.race([session.ended.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 5_000).unref())]);
      if (!ended && entry) {
        logger.warn({ mountpoint: mnt }, 'fuse: the kernel still holds the connection after unmount; aborting it');
        await abortConnection(entry, logger);
        await Promise.race([session.ended, new Promise<void>((r) => setTimeout(r, 5_000).unref())]);
      }
      session.destroy();
    },
  };
}
