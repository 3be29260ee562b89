/**
 * mountVfs: serves a Vfs as a FUSE mount through our libfuse 3 engine (engine/: an N-API addon over the
 * low-level API, requests handed to JavaScript in batches), and takes it down cleanly.
 */
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import { MAX_NAME_BYTES, type Vfs } from '../vfs/types.js';
import { KERNEL_WRITE_MIN_FREE_BYTES } from '../vfs/engine-lease.js';
import { DEFAULT_DEADLINES, FuseOperations, type OperationDeadlines } from './operations.js';
import { clearStaleMount, detachMount, findFuseMount, abortConnection } from './stale-mount.js';
import { loadFuse3Binding, type SessionSettings } from './engine/binding.js';
import { LowLevelMount, type EngineCounters } from './engine/lowlevel-mount.js';

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
  /** Symbolic links as `NAME.rclonelink` files (link-files.ts); false shows those as plain files. Default true. */
  links?: boolean;
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
  /** Let the kernel cache writes and send them in large requests (libfuse 3 writeback cache). Default true. */
  writebackCache?: boolean;
  /**
   * Threads taking requests from the kernel (1–8). Default 1: with more, the direct spool writes of one
   * file go in parallel, but on two cores they measured slower (docs/fuse.md, Using it).
   */
  readerThreads?: number;
  /**
   * Let the engine answer getattr from the attributes of earlier answers while they are valid, lookups of
   * names a folder whose names it knows does not have, and (with the writeback cache) creates in such
   * folders, small writes and the times written back at close, without waiting for JavaScript (see
   * docs/fuse.md, The engine). Default true.
   */
  engineAnswers?: boolean;
  /**
   * Bytes of a spool the engine wrote and hashed after which it starts their writeback to disk
   * (sync_file_range), so that an fsync or the group commit finds them written. 0: at the fsync only.
   * Default 8 MiB.
   */
  spoolWritebackAheadBytes?: number;
  /**
   * Bytes of a spool whose writeback the engine started after which it fdatasyncs the spool in the
   * background (a thread of its own, waiting for nobody): the disk's write cache is emptied while the
   * data still comes, so the application's fsync at the end waits only for the last of it. 0: never.
   * Default 64 MiB.
   */
  spoolSyncAheadBytes?: number;
  /**
   * The kernel's read-ahead window on the mount (its device's `read_ahead_kb`, root only): how far ahead of
   * a sequential reader it asks, in requests of up to 1 MiB, several in flight. Default 4 MiB.
   */
  readAheadBytes?: number;
  /**
   * How the kernel's requests reach the engine. "auto" (default): over io_uring when the kernel offers it
   * (FUSE over io_uring: Linux 6.14 or later, the fuse module's `enable_uring` on), else /dev/fuse.
   * "uring": the mount fails, saying why, when the kernel does not offer it. "dev": /dev/fuse only.
   * See docs/fuse.md, Transports.
   */
  transport?: FuseTransport;
  /** Request buffers of each CPU's ring over io_uring (1–256). Default 16. */
  ringDepth?: number;
  /**
   * How files written through the mount reach their spools. "passthrough": FUSE passthrough when the
   * kernel offers it (Linux 6.9 and later): a file created through the mount, or opened for writing as
   * its only handle and emptied, is handed to the kernel, which then writes and reads its spool itself,
   * no request per write (the connection then has no writeback cache: the kernel grants passthrough only
   * without it). "writeback": the kernel's writeback cache, every write a request to the engine. "auto"
   * (default): passthrough when the gateway may register backing files with the kernel (CAP_SYS_ADMIN:
   * root), else writeback. See docs/fuse.md, Passthrough.
   */
  writeMode?: FuseWriteMode;
  logger: Logger;
}

export type FuseTransport = 'auto' | 'uring' | 'dev';
export const FUSE_TRANSPORTS: readonly FuseTransport[] = ['auto', 'uring', 'dev'];
export type FuseWriteMode = 'auto' | 'writeback' | 'passthrough';
export const FUSE_WRITE_MODES: readonly FuseWriteMode[] = ['auto', 'writeback', 'passthrough'];

/** CAP_SYS_ADMIN in this process's effective set: the kernel lets it register backing files (passthrough). */
function mayRegisterBackingFiles(): boolean {
  try {
    const eff = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    return eff !== undefined && (BigInt(`0x${eff}`) & (1n << 21n)) !== 0n;
  } catch {
    return false;
  }
}

/** Whether a mount asks for passthrough (see MountOptions.writeMode). */
export function wantsPassthrough(mode: FuseWriteMode | undefined): boolean {
  if (mode === 'passthrough') return true;
  return (mode ?? 'auto') === 'auto' && mayRegisterBackingFiles();
}

export interface MountedVfs {
  readonly mountpoint: string;
  /** Makes open files durable, waits (bounded) for pending uploads, then unmounts. Idempotent. */
  unmount(): Promise<void>;
  /** Writes the engine made into spools itself, the handles it made them for, and the requests it answered itself (see docs/fuse.md, The engine). */
  readonly counters: EngineCounters;
}

/** Throws unless `value` is absent or one of `allowed`. */
function oneOf<T extends string>(name: string, value: T | undefined, allowed: readonly T[]): void {
  if (value !== undefined && !allowed.includes(value)) throw new TypeError(`${name}: expected one of ${allowed.map((t) => JSON.stringify(t)).join(', ')}, got ${JSON.stringify(value)}`);
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
  int(opts.readerThreads, 'readerThreads', 8);
  oneOf('transport', opts.transport, FUSE_TRANSPORTS);
  oneOf('writeMode', opts.writeMode, FUSE_WRITE_MODES);
  if (opts.ringDepth !== undefined && !(Number.isInteger(opts.ringDepth) && opts.ringDepth >= 1 && opts.ringDepth <= 256)) {
    throw new TypeError(`ringDepth: expected an integer from 1 to 256, got ${JSON.stringify(opts.ringDepth)}`);
  }
  if (opts.readerThreads === 0) throw new TypeError('readerThreads: expected an integer from 1 to 8, got 0');
  if (opts.readAheadBytes !== undefined && !(Number.isInteger(opts.readAheadBytes) && opts.readAheadBytes >= 4096 && opts.readAheadBytes % 4096 === 0 && opts.readAheadBytes <= MAX_READ_AHEAD)) {
    throw new TypeError(`readAheadBytes: expected a whole number of 4 KiB pages from 4 KiB to 64 MiB, got ${JSON.stringify(opts.readAheadBytes)}`);
  }
  for (const [what, v] of [['spoolWritebackAheadBytes', opts.spoolWritebackAheadBytes], ['spoolSyncAheadBytes', opts.spoolSyncAheadBytes]] as const) {
    if (v !== undefined && !(Number.isInteger(v) && v >= 0 && v % 1024 === 0 && v <= 2 ** 32)) {
      throw new TypeError(`${what}: expected a whole number of KiB from 0 to 4 GiB, got ${JSON.stringify(v)}`);
    }
  }
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
  const ownership = {
    uid: opts.uid ?? process.getuid?.() ?? 0,
    gid: opts.gid ?? process.getgid?.() ?? 0,
    umask: opts.umask ?? 0o022,
    readOnly,
  };
  const operations = new FuseOperations({
    vfs: opts.vfs,
    ownership,
    deadlines: { ...DEFAULT_DEADLINES, ...opts.deadlines },
    logger,
    links: opts.links,
  });
  const served = mountFuse3(mnt, operations, { ...opts, attrTimeoutS: opts.attrTimeoutS ?? 2, readOnly, uid: ownership.uid, gid: ownership.gid }, logger);
  if (opts.transport === 'uring') {
    const started = await Promise.race([served.started.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), TRANSPORT_CHECK_MS).unref())]);
    const t = served.counters.transport;
    if (!started || t.transport !== 'uring') {
      await served.unmount().catch((err: unknown) => logger.warn({ err: String(err) }, 'fuse: unmounting after the transport check failed'));
      throw new Error(`cannot mount ${mnt} over io_uring (transport "uring"): ${started ? t.why : 'the kernel did not start the session'}`);
    }
  }
  await served.answerCloses().catch((err: unknown) => logger.warn({ err: String(err) }, 'fuse: the engine answers no closes (its journal log could not be started)'));
  logger.info({ mountpoint: mnt, readOnly }, 'fuse: mounted');

  let unmounting: Promise<void> | undefined;
  const unmount = (): Promise<void> => {
    unmounting ??= (async () => {
      // 1. Data of open files into the upload journal (with the writes the engine answered and has not
      // handed over yet); 2. pending uploads to the service (bounded).
      await served.applyQueued();
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
  return {
    mountpoint: mnt,
    unmount,
    get counters() {
      return served.counters;
    },
  };
}

interface ServedMount {
  unmount(): Promise<void>;
  /** Resolves once INIT is answered (the transport chosen) or the session ended. */
  readonly started: Promise<void>;
  /** Applies the writes and times the engine answered and still holds (LowLevelMount.applyQueued). */
  applyQueued(): Promise<void>;
  /** Lets the engine answer closes of small files it created (LowLevelMount.answerCloses). */
  answerCloses(): Promise<void>;
  readonly counters: EngineCounters;
}

/** What the libfuse 3 engine asks the kernel for at INIT. */
export const FUSE3_SETTINGS = {
  /** Largest write request, bytes (the kernel's limit with max_pages is 1 MiB on 4 KiB pages). */
  maxWrite: 1024 * 1024,
  /** Read-ahead asked for at INIT, bytes (the kernel caps it at 128 KiB; mountVfs then sets `readAheadBytes`). */
  maxReadahead: 1024 * 1024,
  /** Requests the kernel keeps in flight in the background (read-ahead, writeback). */
  maxBackground: 64,
  congestionThreshold: 48,
};

/** With transport "uring", how long the kernel may take to start the session before the mount fails. */
const TRANSPORT_CHECK_MS = 10_000;
/** At unmount, how long the closes the engine answered may take to be applied before it goes on. */
const CLOSES_SETTLE_MS = 30_000;
/** Default of `spoolWritebackAheadBytes`. */
const DEFAULT_SPOOL_WRITEBACK_AHEAD = 8 * 1024 * 1024;
/** Default of `spoolSyncAheadBytes`. */
const DEFAULT_SPOOL_SYNC_AHEAD = 64 * 1024 * 1024;
/**
 * Default of `readAheadBytes`: four requests of 1 MiB ahead of the reader. A cold read of 1 GiB measured
 * 970–1,048 MB/s with it against 829–884 with 1 MiB, the two alternated on one mount (docs/fuse.md).
 */
const DEFAULT_READ_AHEAD = 4 * 1024 * 1024;
const MAX_READ_AHEAD = 64 * 1024 * 1024;
/**
 * Default of `ringDepth`: requests one CPU may have with the engine at once over io_uring. Each buffer
 * takes up to 1 MiB once a large write or read used it (16 MiB a CPU at most).
 */
const DEFAULT_RING_DEPTH = 16;

/** What the engine answers itself (see docs/fuse.md, The engine): all of it unless engineAnswers is false. */
function engineAnswerSettings(opts: { engineAnswers?: boolean; attrTimeoutS: number; uid: number; gid: number; readOnly: boolean }): Partial<SessionSettings> {
  if (opts.engineAnswers === false) return { attrCache: 0, answerSmallWrites: 0, folderNames: 0, answerCreates: 0 };
  const timeoutMs = Math.round(opts.attrTimeoutS * 1000);
  return { attrCache: 1, answerSmallWrites: 1, folderNames: 1, answerCreates: opts.readOnly || timeoutMs === 0 ? 0 : 1, nameMaxBytes: MAX_NAME_BYTES, spoolMinFreeBytes: KERNEL_WRITE_MIN_FREE_BYTES, uid: opts.uid, gid: opts.gid, timeoutMs };
}

/**
 * The kernel takes the read-ahead a FUSE file system asks for only up to its default window (128 KiB);
 * a wider one is set on the mount's backing device (/sys/class/bdi/MAJOR:MINOR/read_ahead_kb, root only).
 * Best effort: without it reads still work, in smaller requests.
 */
async function widenReadahead(mnt: string, bytes: number, logger: Logger): Promise<void> {
  try {
    const entry = await findFuseMount(mnt);
    if (!entry) return;
    await writeFile(`/sys/class/bdi/${entry.device}/read_ahead_kb`, String(Math.floor(bytes / 1024)));
  } catch (err) {
    logger.debug({ mountpoint: mnt, err: (err as Error).message }, 'fuse: could not widen the read-ahead window');
  }
}

function mountFuse3(mnt: string, operations: FuseOperations, opts: MountOptions & { attrTimeoutS: number; readOnly: boolean; uid: number; gid: number }, logger: Logger): ServedMount {
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
    settings: {
      ...FUSE3_SETTINGS, writeback: opts.writebackCache === false ? 0 : 1, asyncRead: 1, readers: opts.readerThreads ?? 1,
      writebackAheadKiB: (opts.spoolWritebackAheadBytes ?? DEFAULT_SPOOL_WRITEBACK_AHEAD) / 1024,
      syncAheadKiB: (opts.spoolSyncAheadBytes ?? DEFAULT_SPOOL_SYNC_AHEAD) / 1024, ...engineAnswerSettings(opts),
      transport: opts.transport === 'dev' ? 0 : 1, ringDepth: opts.ringDepth ?? DEFAULT_RING_DEPTH,
      passthrough: wantsPassthrough(opts.writeMode) ? 1 : 0,
    },
    attrTimeoutS: opts.attrTimeoutS,
    logger,
    changes: opts.vfs.changes,
  });
  try {
    session.mount();
  } catch (err) {
    throw new Error(`cannot mount ${mnt}: ${(err as Error).message}`);
  }
  // Once INIT is answered: the kernel cuts the window back to the session's max_readahead when it takes that answer.
  void session.started.then(() => widenReadahead(mnt, opts.readAheadBytes ?? DEFAULT_READ_AHEAD, logger));
  return {
    get counters() {
      return session.counters;
    },
    started: session.started,
    applyQueued: () => session.applyQueued(),
    answerCloses: () => session.answerCloses(),
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
      await session.stopAnsweringCloses(CLOSES_SETTLE_MS);
      session.destroy();
    },
  };
}
