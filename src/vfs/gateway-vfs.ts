/**
 * GatewayVfs: the Vfs over a set of libraries. The root lists one folder per library; inside, gateway
 * paths map one to one to the library's `fullpath`. Metadata comes from the MetadataCache (kept coherent by
 * one UpdatesFeed per library and updated at once by the gateway's own changes) and reads from
 * RangeReaders. Everything written is handed to the WriteBack, the one owner of local versions, their
 * journal and their uploads. What is and is not POSIX here is written down in docs/semantics.md.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import type { Logger } from '../shared/log.js';
import { BlockCache } from './block-cache.js';
import { ContentCache } from './content-cache.js';
import { CacheBudget } from './cache-budget.js';
import { PinMarks } from './pin-marks.js';
import { PinnedContent, type PinStatus } from './pinned-content.js';
import { freeUpSpace } from './free-up-space.js';
import { UploadBackpressure } from './upload-backpressure.js';
import { FileHasher } from './file-hasher.js';
import { Sha1Streams } from './sha1-streams.js';
import { gatewayPathOf, parseGatewayPath } from './gateway-path.js';
import { LocalVersion } from './local-version.js';
import { MetadataCache } from './metadata-cache.js';
import { RangeReader, ReadAheadBudget } from './range-reader.js';
import { baseName, isWithin, joinPath, parentOf, type Remote, type RemoteCallOptions, type RemoteEntry, type RemoteQuota } from './remote.js';
import { UpdatesFeed, type UpdatesFeedStatus } from './updates-feed.js';
import { Connectivity, ReportingRemote, type LibraryConnectivity } from './connectivity.js';
import { SizeLimits } from './size-limits.js';
import { PendingMarks } from './pending-marks.js';
import type { PendingFile, UploadStatus } from './upload-queue.js';
import { TimeOverrides } from './time-overrides.js';
import { WriteBack, type FollowedFile } from './write-back.js';
import type { ClosedCreate, EngineClose, SideJournal } from './types.js';
import { ForegroundActivity } from './foreground-activity.js';
import type { DiskFaults } from './disk-faults.js';
import { VfsError, type Attr, type CallContext, type FileHandle, type LocalRange, type OpenFlags, type StatFs, type Vfs } from './types.js';
import type { ResolvedLibrary } from './library-set.js';

/** How long a library's quota is used before it is asked again (in the background), ms. */
const QUOTA_TTL_MS = 10_000;

export interface GatewayVfsOptions {
  libraries: ResolvedLibrary[];
  /** Folder of the journal, the content cache and the feed cursors. */
  dataDir: string;
  /** Updates feed poll interval, ms; 0 = no feed (cache entries then expire after `cache.ttlMs`). Default 2000. */
  feedIntervalMs?: number;
  cache?: {
    /** Metadata entries kept. Default 100 000. */
    metadataEntries?: number;
    /** Memory bound of the metadata cache, bytes. Default 64 MiB. */
    metadataBytes?: number;
    /** Trust limit of cached metadata, ms (0 = until changed). Default 0 with a feed, else 1000. */
    ttlMs?: number;
    /** In-memory block cache, bytes. Default 64 MiB. */
    blockBytes?: number;
    /** Block size of random reads, bytes. Default 64 KiB. */
    blockSize?: number;
    /** On-disk content cache, bytes; 0 = off (and no pins). Default 0. */
    diskBytes?: number;
    /** Share of the cache's disk always left free, percent. Default 5. */
    minFreePercent?: number;
  };
  /**
   * Read-ahead of sequential reads: first and largest window (bytes; default 1 MiB and 8 MiB), ranges
   * in flight at once (default 4), bytes asked for ahead of one reader at most (default 32 MiB) and of
   * all readers together (default 256 MiB).
   */
  readAhead?: { initial?: number; max?: number; streams?: number; bytes?: number; totalBytes?: number };
  upload?: {
    /** Uploads of files over 256 KiB at once. Default 4. */
    concurrency?: number;
    /** Uploads of files up to 256 KiB at once (each one exchange with the service), beside those. Default 16. */
    smallConcurrency?: number;
    /** First retry delay, ms. Default 1000. */
    retryBaseMs?: number;
    /** Longest retry delay, ms. Default 30 000. */
    retryMaxMs?: number;
    /** An upload the service refused (ENOSPC, a lock, EACCES) is asked again after this long, ms. Default 600 000. */
    refusedRetryMs?: number;
    /**
     * Write-back delay, ms: a file closed is uploaded this long after its last close (one fsynced and kept
     * open, once it stayed unchanged this long), so a burst of writes is not competing with its own
     * uploads, and a file rewritten meanwhile is uploaded once. flushAll and `ctl flush` upload at once.
     * Default 0.
     */
    delayMs?: number;
  };
  /**
   * When a closed file is safe against power loss: `group` (default) fsyncs the journal within
   * `groupCommitMs` (default 1000) of the close, and at once on fsync, flushAll and `ctl flush` (a crash of
   * the gateway loses nothing either way); `close` fsyncs at every close.
   */
  durability?: { mode?: 'group' | 'close'; groupCommitMs?: number };
  /**
   * Bytes of closed small files (up to 64 KiB each, carried by their journal entries) that may wait in
   * memory for their spool files until the upload or a reader needs them. Default 16 MiB.
   */
  unwrittenSpoolBytes?: number;
  /** Existing files opened for writing: up to `wholeMaxBytes` fetched whole at the first change (default 8 MiB); larger ones on demand, at least `chunkBytes` per fetch (default 1 MiB). */
  partialFetch?: { wholeMaxBytes?: number; chunkBytes?: number };
  /** Injected failures of the gateway's own disk (tests, fault drills). */
  diskFaults?: DiskFaults;
  /** Refuse every change with EROFS. Default false. */
  readOnly?: boolean;
  /** Largest file a write may make, bytes (EFBIG beyond it); 0 or undefined for no limit. */
  maxFileBytes?: number;
  /** Bytes waiting to upload at most: writers wait for room, ENOSPC when none comes (upload-backpressure.ts); 0 or undefined for no bound. */
  maxPendingBytes?: number;
  logger: Logger;
  /** Called by close() after everything else (closes what the factory opened). */
  onClose?: () => Promise<void>;
}

interface Library {
  name: string;
  id: string;
  /** The library's Remote as the gateway calls it: every outcome reported to the Connectivity. */
  remote: Remote;
  /** The Remote as given (remoteOf: tests reach fault injection through it). */
  given: Remote;
  feed?: UpdatesFeed;
  /** The last quota the service told (statfs answers it while offline). */
  quota?: RemoteQuota;
}

/** Where a gateway path points. */
interface Target {
  path: string;
  lib?: Library;
  fullpath: string;
}

export interface GatewayStatus {
  /** Per library: online, or offline since when (serving what it has), and its uploads waiting. */
  libraries: (LibraryConnectivity & { pendingUploads: number })[];
  uploads: UploadStatus[];
  /** Journal entries whose library is not configured (kept, not uploaded). */
  stranded: { id: string; library: string; fullpath: string }[];
  feeds: UpdatesFeedStatus[];
  localFiles: number;
  metadata: ReturnType<MetadataCache['stats']>;
  blocks: ReturnType<BlockCache['stats']>;
  disk?: ReturnType<ContentCache['stats']>;
  /** Files kept on this machine (pins): bytes, what is still being fetched, errors. */
  pins?: PinStatus;
}

const LIB_ROOT_ATTR_TIME = Date.now();


/** Files after the one opened whose reads are prepared when a folder is read file after file. */
const WALK_AHEAD = 16;
/** Small files of a walk fetched at once, at most. */
const WALK_FETCHES = 16;

/** Ranges of createReadStream larger than this are read with several windows in flight. */
const PARALLEL_STREAM_BYTES = 4 * 1024 * 1024;

export class GatewayVfs implements Vfs {
  private readonly libs = new Map<string, Library>();
  readonly cache: MetadataCache;
  private readonly blocks: BlockCache;
  private readonly disk: ContentCache | undefined;
  /** The cache's limit, and what it never evicts (pinned, open). */
  private readonly budget: CacheBudget | undefined;
  /** Files and folders kept on this machine (pinned-content.ts); only with a disk cache. */
  private readonly pins: PinnedContent | undefined;
  private readonly hasher = new FileHasher();
  /** Front ends say here when they serve applications; the uploads give way meanwhile. */
  readonly foreground = new ForegroundActivity();
  private readonly sha1Streams = new Sha1Streams();
  /** The owner of every local version: spools, journal, uploads. */
  readonly writeBack: WriteBack;
  /** Times programs saw, shown instead of the service's for as long as that version is current. */
  private readonly times: TimeOverrides;
  /**
   * Service locks taken through this gateway (`library\0fullpath` → who holds it: a front end's lock
   * holder, '' for callers with none). Writers with another holder are refused (ELOCKED).
   */
  private readonly lockHolds = new Map<string, string>();
  /** Read handles open on service files, by `library\0fullpath` (an unlink then waits for the last). */
  private readonly readers = new Map<string, number>();
  /** Files unlinked while read: gone from the namespace at once, removed on the service after their last reader. */
  private readonly hidden = new Set<string>();
  /** Which libraries' service answers; offline ones are served from what the gateway has. */
  readonly connectivity: Connectivity;
  /** Writes beyond the largest file or the library's free space are refused (size-limits.ts). */
  private readonly limits: SizeLimits;
  /** Locks and tags of files not on the service yet, given to them once uploaded (pending-marks.ts). */
  private readonly marks: PendingMarks;
  /** When each library's quota was last asked, ms since the epoch. */
  private readonly quotaAskedMs = new Map<string, number>();
  /** Per library, the folder a service file was last opened for reading in (two in a row: a walk). */
  private readonly lastReadFolder = new Map<string, string>();
  /** The read-ahead memory of every reader together. */
  private readonly readAheadBudget: ReadAheadBudget;
  /** Small files of a walk being fetched into the block cache, by content key. */
  private readonly walkFetches = new Map<string, Promise<void>>();
  private readonly logger: Logger;
  private closed = false;

  private constructor(private readonly opts: GatewayVfsOptions) {
    this.logger = opts.logger;
    const feedOn = (opts.feedIntervalMs ?? 2000) > 0;
    this.cache = new MetadataCache({
      maxEntries: opts.cache?.metadataEntries, maxBytes: opts.cache?.metadataBytes, ttlMs: opts.cache?.ttlMs ?? (feedOn ? 0 : 1000),
    });
    this.blocks = new BlockCache({ maxBytes: opts.cache?.blockBytes, blockSize: opts.cache?.blockSize });
    this.readAheadBudget = new ReadAheadBudget(opts.readAhead?.totalBytes ?? 256 * 1024 * 1024);
    const diskBytes = opts.cache?.diskBytes ?? 0;
    const contentDir = join(opts.dataDir, 'content');
    this.budget = diskBytes > 0 ? new CacheBudget({ dir: contentDir, maxBytes: diskBytes, minFreeFraction: (opts.cache?.minFreePercent ?? 5) / 100 }) : undefined;
    this.disk = this.budget ? new ContentCache({ dir: contentDir, maxBytes: diskBytes, budget: this.budget, logger: opts.logger }) : undefined;
    this.pins = this.disk && this.budget ? new PinnedContent({
      marks: new PinMarks(join(opts.dataDir, 'pins', 'marks.json')), disk: this.disk, budget: this.budget, dir: join(opts.dataDir, 'pins'),
      remoteFor: (name) => this.libs.get(name)?.remote, logger: opts.logger,
    }) : undefined;
    this.times = new TimeOverrides(join(opts.dataDir, 'times.jsonl'), opts.logger);
    this.marks = new PendingMarks(opts.logger);
    const backpressure = opts.maxPendingBytes ? new UploadBackpressure({ maxBytes: opts.maxPendingBytes, pendingBytes: () => this.writeBack.uploads.status().reduce((n, u) => n + (u.size ?? 0), 0) }) : undefined;
    this.limits = new SizeLimits({
      maxFileBytes: opts.maxFileBytes, freeBytes: (name, ctx) => this.freeBytes(name, ctx),
      ...(backpressure ? { room: (path: string, size: number, ctx: CallContext | undefined, wait: boolean) => backpressure.admit(path, size, ctx, { wait }) } : {}),
    });
    this.connectivity = new Connectivity({
      onOffline: (name, err) => this.logger.warn({ library: name, err: err.message }, 'library offline: the service cannot be reached; serving what is cached, writes go to the journal'),
      onOnline: (name, offlineMs) => {
        this.logger.info({ library: name, offlineMs }, 'library online again: uploads and folders made meanwhile go to the service');
        this.writeBack.online(name);
        void this.libs.get(name)?.feed?.pollNow().catch(() => undefined);
        this.pins?.resync(name);
      },
    });
    this.writeBack = new WriteBack({
      journalDir: join(opts.dataDir, 'journal'), hasher: this.hasher, sha1Streams: this.sha1Streams,
      // Bytes written where no handle's write saw them (the FUSE engine's, the kernel's) are checked at the seal.
      sizeCheck: (name, fullpath, size, oldSize) => this.limits.check(gatewayPathOf(name, fullpath), name, size, oldSize, undefined, this.knownFreeBytes(name)),
      upload: opts.upload, foreground: this.foreground, partialFetch: opts.partialFetch, unwrittenSpoolBytes: opts.unwrittenSpoolBytes, logger: opts.logger, diskFaults: opts.diskFaults, durability: opts.durability,
      host: {
        remoteFor: (name) => this.libs.get(name)?.remote,
        baseReader: (name, base, ctx) => this.reader(this.libs.get(name)!, base, ctx),
        uploaded: (name, entry, mtimeMs) => {
          this.ownUpsert(name, entry);
          if (entry.contentHash) this.times.set(name, entry.id, versionOf(entry), mtimeMs);
          void this.applyMarks(name, entry.fullpath);
        },
        ensureParents: (name, fullpath) => this.ensureParents(name, fullpath),
        deleted: (name, fullpath) => {
          this.hidden.delete(`${name}\0${fullpath}`);
          this.ownRemove(name, fullpath, false);
        },
        attrOf: (name, entry) => {
          const lib = this.libs.get(name);
          return lib ? this.toAttr(lib, entry) : { path: gatewayPathOf(name, entry.fullpath), name: entry.name, isDir: false, size: entry.size, mtimeMs: entry.mtimeMs, ctimeMs: entry.ctimeMs, dirty: true };
        },
      },
    });
  }

  /** What was set on a file before its upload goes to the service with it. */
  private async applyMarks(name: string, fullpath: string): Promise<void> {
    const lib = this.libs.get(name);
    if (!lib) return;
    const done = await this.marks.apply(name, fullpath, lib.remote);
    if (done.locked === undefined && done.tags === undefined) return;
    this.ownForget(name, fullpath);
    this.writeBack.patchBase(name, fullpath, { ...(done.locked ? { locked: true } : {}), ...(done.tags ? { tags: done.tags } : {}) });
  }

  /** The upload queue (status, tests). */
  get uploads(): WriteBack['uploads'] {
    return this.writeBack.uploads;
  }

  private library(l: ResolvedLibrary): Library {
    return { name: l.name, id: l.id, remote: new ReportingRemote(l.remote, l.name, this.connectivity), given: l.remote };
  }

  /** Opens the gateway: journal replay, feeds started. */
  static async open(opts: GatewayVfsOptions): Promise<GatewayVfs> {
    const vfs = new GatewayVfs(opts);
    await vfs.init();
    return vfs;
  }

  private async init(): Promise<void> {
    await mkdir(this.opts.dataDir, { recursive: true, mode: 0o700 });
    await this.writeBack.init();
    await this.times.load();
    await this.disk?.init();
    await this.pins?.init();
    for (const l of this.opts.libraries) {
      if (this.libs.has(l.name)) throw new TypeError(`libraries: expected unique folder names, got '${l.name}' twice`);
      this.libs.set(l.name, this.library(l));
      // Named from what was known, the service not answering: offline from the start (journal, pending folders).
      if (l.unreachable) this.connectivity.failed(l.name, l.unreachable);
    }
    await Promise.all([...this.libs.values()].map((l) => this.startFeed(l)));
    await this.writeBack.replay((name) => this.libs.has(name));
    for (const l of this.libs.values()) if (this.connectivity.online(l.name)) this.pins?.resync(l.name);
  }

  private async startFeed(lib: Library): Promise<void> {
    const interval = this.opts.feedIntervalMs ?? 2000;
    if (interval <= 0) return;
    lib.feed = new UpdatesFeed({
      library: lib.name, remote: lib.remote, cache: this.cache, intervalMs: interval, logger: this.logger,
      cursorFile: join(this.opts.dataDir, 'feeds', `${safeFileName(lib.id)}.json`),
      onChange: (change) => this.pins?.changed(lib.name, change),
    });
    await lib.feed.start();
  }

  /**
   * Serves one more library folder at run time. Journal entries kept for a library of that name (from a
   * previous run) are uploaded now.
   */
  async addLibrary(l: ResolvedLibrary): Promise<void> {
    if (this.closed) throw new VfsError('EIO', 'the gateway is closing');
    if (this.libs.has(l.name)) throw new VfsError('EEXIST', `a library folder named '${l.name}' is already served`);
    const lib = this.library(l);
    this.libs.set(l.name, lib);
    try {
      await this.startFeed(lib);
    } catch (err) {
      this.libs.delete(l.name);
      throw err;
    }
    const requeued = await this.writeBack.resumeLibrary(l.name);
    this.logger.info({ library: l.name, id: l.id, requeued }, 'library added');
  }

  /**
   * Stops serving a library folder. Refused (EBUSY) while it has open or pending local files: flush
   * first. The service's data is not touched.
   */
  async removeLibrary(name: string): Promise<void> {
    const lib = this.libs.get(name);
    if (!lib) throw new VfsError('ENOENT', `no library folder named '${name}' is served`);
    const busy = this.writeBack.busy(name);
    if (busy > 0) throw new VfsError('EBUSY', `library '${name}' has ${busy} open or pending file(s): flush, close them, then remove`);
    this.libs.delete(name);
    await lib.feed?.stop();
    this.cache.dropLibrary(name);
    this.connectivity.forget(name);
    this.logger.info({ library: name }, 'library removed');
  }

  /** Drops cached metadata and blocks (not local files or pending uploads). */
  dropCaches(): void {
    for (const name of this.libs.keys()) this.cache.dropLibrary(name);
    this.blocks.clear();
  }

  // ---- metadata -------------------------------------------------------------------------------------------

  async stat(path: string, ctx?: CallContext, opts: { fresh?: boolean } = {}): Promise<Attr> {
    const t = this.target(path);
    if (!t.lib) return this.rootAttr();
    const e = opts.fresh && t.fullpath !== '' ? await this.entryOf(t.lib, t.fullpath, ctx) : await this.lookup(t.lib, t.fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    return this.toAttr(t.lib, e);
  }

  async readdir(path: string, ctx?: CallContext): Promise<Attr[]> {
    const t = this.target(path);
    if (!t.lib) return [...this.libs.values()].map((l) => this.libraryAttr(l));
    const entries = await this.listDir(t.lib, t.fullpath, ctx);
    return entries.map((e) => this.toAttr(t.lib!, e));
  }

  async statfs(path: string, ctx?: CallContext): Promise<StatFs> {
    const t = this.target(path);
    const libs = t.lib ? [t.lib] : [...this.libs.values()];
    let total = 0;
    let used = 0;
    let files = 0;
    let unlimited = false;
    for (const lib of libs) {
      let q: RemoteQuota;
      try {
        q = await lib.remote.quota(this.call(ctx));
        lib.quota = q;
      } catch (err) {
        // Offline: the last figures the service gave.
        if (!(err instanceof VfsError && err.unreachable && lib.quota)) throw err;
        q = lib.quota;
      }
      used += q.used;
      files += q.files ?? 0;
      if (q.total === undefined) unlimited = true;
      else total += q.total;
    }
    const cap = unlimited ? Number.MAX_SAFE_INTEGER : total;
    return { total: cap, used, free: Math.max(0, cap - used), files };
  }

  // ---- reads and writes -----------------------------------------------------------------------------------

  async open(path: string, flags: OpenFlags, ctx?: CallContext): Promise<FileHandle> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'open');
    const writing = !!(flags.write || flags.create || flags.truncate || flags.append);
    if (writing) this.writable(t.path);
    const existing = await this.lookup(lib, t.fullpath, ctx);
    if (existing?.isDir) throw new VfsError('EISDIR', `${t.path} is a folder`);
    if (existing && flags.create && flags.exclusive) throw new VfsError('EEXIST', `${t.path} exists`);
    if (!existing && !flags.create) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (!writing) {
      const local = this.writeBack.openRead(lib.name, t.fullpath);
      if (local) return local;
      this.walkAhead(lib, existing!, ctx);
      // Fetched ahead already (a walk): its bytes are on the way, no request of its own.
      await this.walkFetches.get(this.contentKey(lib, existing!));
      const key = `${lib.name}\0${t.fullpath}`;
      this.readers.set(key, (this.readers.get(key) ?? 0) + 1);
      const unhold = this.budget?.hold(existing!.contentHash);
      const released = (): void => {
        unhold?.();
        const left = (this.readers.get(key) ?? 1) - 1;
        if (left > 0) this.readers.set(key, left);
        else {
          this.readers.delete(key);
          void this.writeBack.readersGone(lib.name, t.fullpath);
        }
      };
      const file = this.writeBack.follow(lib.name, t.fullpath);
      return new RemoteReadHandle(t.path, this.reader(lib, existing!, ctx), file, () => this.toAttr(lib, existing!), released);
    }
    if (existing) this.assertLockHeld(lib, existing, ctx);
    else {
      await this.needFolder(lib, parentOf(t.fullpath), ctx);
      await this.reuseHidden(lib, t.fullpath);
    }
    await lib.remote.checkWrite?.(t.fullpath, !!existing, this.call(ctx));
    // The service's version is the base when nothing is local (else the local version is).
    const base = existing && !this.writeBack.current(lib.name, t.fullpath) ? existing : undefined;
    const handle = await this.writeBack.openWrite(lib.name, t.fullpath, existing ? base ?? existing : undefined, flags, ctx);
    return this.limits.limit(handle, lib.name, (await handle.stat()).size, ctx);
  }

  /**
   * Bytes library `name` may still grow by: its capacity less what it uses, as the service last told
   * (asked again in the background after QUOTA_TTL_MS); undefined when unlimited or not known.
   */
  /** As freeBytes, from what the service last told only (undefined when not told yet): never waits for it. */
  private knownFreeBytes(name: string): number | undefined {
    const q = this.libs.get(name)?.quota;
    return q?.total === undefined ? undefined : Math.max(0, q.total - q.used);
  }

  private async freeBytes(name: string, ctx?: CallContext): Promise<number | undefined> {
    const lib = this.libs.get(name);
    if (!lib) return undefined;
    const ask = async (): Promise<void> => {
      this.quotaAskedMs.set(name, Date.now());
      try {
        lib.quota = await lib.remote.quota(this.call(ctx));
      } catch (err) {
        this.logger.debug({ library: name, err: (err as Error).message }, 'quota not known: writes are not limited by it');
      }
    };
    if (!this.quotaAskedMs.has(name)) await ask();
    else if (Date.now() - this.quotaAskedMs.get(name)! > QUOTA_TTL_MS) void ask();
    const q = lib.quota;
    return q?.total === undefined ? undefined : Math.max(0, q.total - q.used);
  }

  async createReadStream(path: string, range: { start?: number; end?: number } = {}, ctx?: CallContext): Promise<Readable> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'read');
    const entry = await this.lookup(lib, t.fullpath, ctx);
    if (!entry) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (entry.isDir) throw new VfsError('EISDIR', `${t.path} is a folder`);
    const start = range.start ?? 0;
    const end = Math.min(range.end ?? entry.size - 1, entry.size - 1);
    if (!Number.isInteger(start) || start < 0) throw new VfsError('EINVAL', `expected a range start >= 0, got ${range.start}`);
    if (end < start) return Readable.from([]);
    const local = await this.writeBack.readStream(lib.name, t.fullpath, start, end);
    if (local) return local;
    if (this.disk && entry.contentHash && this.disk.has(entry.contentHash, start, end + 1)) {
      return this.heldWhileRead(Readable.from(this.diskChunks(entry.contentHash, start, end + 1)), entry.contentHash);
    }
    // A large range is read as a sequential streak (several ranged windows in flight); a small one is one request.
    if (end - start + 1 > PARALLEL_STREAM_BYTES) {
      const reader = this.reader(lib, entry, ctx, { startAt: start });
      // The first bytes before the stream is handed out: a failure to open is the call's, as for one request.
      const first = await reader.readParts(start, 1024 * 1024, ctx).catch((err: unknown) => { reader.close(); throw err; });
      return this.heldWhileRead(Readable.from(this.streakChunks(reader, first, start, end + 1, ctx)), entry.contentHash);
    }
    const stream = await lib.remote.openRange(t.fullpath, start, end, { ...this.call(ctx), contentHash: entry.contentHash });
    if (!this.disk || !entry.contentHash) return stream;
    // What is streamed is kept in the content cache as it passes (read again later, or while offline).
    const disk = this.disk;
    const hash = entry.contentHash;
    let at = start;
    const tee = new Transform({
      transform(chunk: Buffer, _enc, done) {
        void disk.write(hash, at, chunk);
        at += chunk.length;
        done(null, chunk);
      },
    });
    stream.on('error', (err) => tee.destroy(err));
    tee.on('close', () => stream.destroy());
    return this.heldWhileRead(stream.pipe(tee), hash);
  }

  /** The content of a stream being read is not evicted until the stream closes (cache-budget.ts). */
  private heldWhileRead(stream: Readable, hash: string | undefined): Readable {
    const release = this.budget?.hold(hash);
    if (release) stream.once('close', release);
    return stream;
  }

  /**
   * Replaces (or creates) a file with the source's bytes, atomically: nothing changes unless the source
   * ends normally and the new version is journaled (see WriteBack.replace).
   */
  async writeFile(path: string, source: Readable | Buffer | AsyncIterable<Buffer>, ctx?: CallContext, opts: { holdUploadMs?: number; size?: number } = {}): Promise<Attr> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'write');
    this.writable(t.path);
    const existing = await this.lookup(lib, t.fullpath, ctx);
    if (existing?.isDir) throw new VfsError('EISDIR', `${t.path} is a folder`);
    if (existing) this.assertLockHeld(lib, existing, ctx);
    else {
      await this.needFolder(lib, parentOf(t.fullpath), ctx);
      await this.reuseHidden(lib, t.fullpath);
    }
    await lib.remote.checkWrite?.(t.fullpath, !!existing, this.call(ctx));
    const oldSize = existing?.size ?? 0;
    if (Buffer.isBuffer(source)) await this.limits.check(t.path, lib.name, Math.max(source.length, opts.size ?? 0), oldSize, ctx);
    const chunks = Buffer.isBuffer(source) ? source : this.limits.limitSource(asBuffers(source), t.path, lib.name, oldSize, ctx, opts.size);
    const entry = await this.writeBack.replace(lib.name, t.fullpath, existing ?? undefined, chunks, ctx, opts);
    return this.toAttr(lib, entry);
  }

  // ---- namespace changes ----------------------------------------------------------------------------------

  async mkdir(path: string, ctx?: CallContext): Promise<Attr> {
    const p = parseGatewayPath(path);
    if (!p.library) throw new VfsError('EEXIST', 'the root exists');
    if (p.fullpath === '') throw new VfsError(this.libs.has(p.library) ? 'EEXIST' : 'EPERM', `libraries are not created through the gateway: ${p.path}`);
    const t = this.target(path);
    this.writable(t.path);
    const lib = t.lib!;
    await this.settleHidden(lib, t.fullpath);
    if (await this.lookup(lib, t.fullpath, ctx)) throw new VfsError('EEXIST', `${t.path} exists`);
    await this.needFolder(lib, parentOf(t.fullpath), ctx);
    let entry: RemoteEntry;
    try {
      entry = await lib.remote.mkdir(t.fullpath, this.call(ctx));
    } catch (err) {
      if (!(err instanceof VfsError && err.unreachable)) throw err;
      // Offline: the folder is journaled, shown at once, and made on the service when it is back.
      const pending = await this.writeBack.pendingFolder(lib.name, t.fullpath);
      this.cache.setListing(lib.name, t.fullpath, []);
      return this.toAttr(lib, pending);
    }
    this.ownUpsert(lib.name, entry);
    // The service makes a folder only where there was none (an existing name is refused): it is empty, so
    // looking up names in it (every file about to be created there) needs no request.
    this.cache.setListing(lib.name, entry.fullpath, []);
    return this.toAttr(lib, entry);
  }

  async unlink(path: string, ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'unlink');
    if (t.fullpath === '') throw new VfsError('EPERM', `cannot remove a library: ${t.path}`);
    this.writable(t.path);
    const entry = await this.lookup(lib, t.fullpath, ctx);
    if (!entry) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (entry.isDir) throw new VfsError('EISDIR', `${t.path} is a folder (use rmdir)`);
    this.assertLockHeld(lib, entry, ctx);
    const key = `${lib.name}\0${t.fullpath}`;
    if ((this.readers.get(key) ?? 0) > 0 && !this.writeBack.entry(lib.name, t.fullpath) && !entry.id.startsWith('local:')) {
      // Handles still read it: gone from the namespace now, removed on the service after the last one
      // (as a local disk keeps an unlinked file readable until it is closed). Journaled: a crash still deletes it.
      await this.writeBack.deferDelete(lib.name, t.fullpath, entry.id);
      this.hidden.add(key);
      this.ownRemove(lib.name, t.fullpath, false);
      return;
    }
    await this.writeBack.removed(lib.name, t.fullpath);
    this.marks.forget(lib.name, t.fullpath);
    const remoteEntry = await lib.remote.stat(t.fullpath, this.call(ctx));
    if (remoteEntry) await lib.remote.remove(t.fullpath, this.call(ctx));
    this.ownRemove(lib.name, t.fullpath, remoteEntry?.isDir ?? entry.isDir);
  }

  async rmdir(path: string, ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'rmdir');
    if (t.fullpath === '') throw new VfsError('EPERM', `cannot remove a library: ${t.path}`);
    this.writable(t.path);
    const entry = await this.lookup(lib, t.fullpath, ctx);
    if (!entry) throw new VfsError('ENOENT', `no such folder: ${t.path}`);
    if (!entry.isDir) throw new VfsError('ENOTDIR', `${t.path} is a file`);
    // Emptiness is checked on the service itself (not the cache) and against pending local files.
    const children = await lib.remote.list(t.fullpath, this.call(ctx));
    const pending = this.writeBack.hasWithin(lib.name, t.fullpath);
    if (children.length > 0 || pending) throw new VfsError('ENOTEMPTY', `${t.path} is not empty`);
    await lib.remote.remove(t.fullpath, this.call(ctx));
    this.ownRemove(lib.name, t.fullpath, true);
  }

  async rename(from: string, to: string, opts: { noReplace?: boolean } = {}, ctx?: CallContext): Promise<void> {
    if (this.target(from).path === this.target(to).path) {
      this.writable(from);
      return;
    }
    const { a, b, src, dst, localMove } = await this.transferEnds('renamed', from, to, opts, ctx);
    if (dst) {
      if (src.isDir && !dst.isDir) throw new VfsError('ENOTDIR', `${b.path} is a file`);
      if (!src.isDir && dst.isDir) throw new VfsError('EISDIR', `${b.path} is a folder`);
      if (dst.isDir) await this.rmdir(b.path, ctx);
      else await this.unlink(b.path, ctx);
    }
    if (a.lib !== b.lib) {
      await this.copyAcross(a.lib, a.fullpath, b.lib, b.fullpath, ctx);
      await this.removeTree(a.lib, a.fullpath, src.isDir, ctx);
      return;
    }
    const lib = a.lib;
    if (!src.isDir) this.assertLockHeld(lib, src, ctx);
    // Uploads under the source stop first; the local versions move with it and their uploads restart there.
    await this.writeBack.stopUploads(lib.name, a.fullpath);
    let onService: RemoteEntry | null = null;
    // A file made here of which nothing was ever sent has nothing to move on the service (a file someone
    // else made there meanwhile is theirs): no round trip (an rsync renames every file it writes).
    if (!localMove) {
      try {
        onService = await lib.remote.stat(a.fullpath, this.call(ctx));
        if (onService) await lib.remote.move(a.fullpath, b.fullpath, this.call(ctx));
      } catch (err) {
        this.writeBack.resumeUploads(lib.name, a.fullpath);
        throw err;
      }
    }
    await this.writeBack.moved(lib.name, a.fullpath, b.fullpath);
    this.ownRemove(lib.name, a.fullpath, src.isDir);
    if (onService) this.ownUpsert(lib.name, { ...onService, fullpath: b.fullpath, name: baseName(b.fullpath) });
    if (src.isDir) this.cache.invalidateListing(lib.name, b.fullpath);
  }

  async copy(from: string, to: string, opts: { noReplace?: boolean } = {}, ctx?: CallContext): Promise<void> {
    const { a, b, dst } = await this.transferEnds('copied', from, to, opts, ctx);
    if (dst) {
      if (dst.isDir) await this.removeTree(b.lib, b.fullpath, true, ctx);
      else await this.unlink(b.path, ctx);
    }
    const hasLocal = !!this.writeBack.current(a.lib.name, a.fullpath) || this.writeBack.hasWithin(a.lib.name, a.fullpath);
    if (a.lib === b.lib && !hasLocal) {
      await a.lib.remote.copy(a.fullpath, b.fullpath, this.call(ctx));
      this.ownForget(b.lib.name, b.fullpath);
      return;
    }
    await this.copyAcross(a.lib, a.fullpath, b.lib, b.fullpath, ctx);
  }

  /**
   * A new file where one unlinked while read is waiting for its readers: the new content replaces that
   * object on the service instead (its readers keep reading their version, by its content hash).
   */
  private async reuseHidden(lib: Library, fullpath: string): Promise<void> {
    const key = `${lib.name}\0${fullpath}`;
    if (!this.hidden.has(key)) return;
    await this.writeBack.cancelDelete(lib.name, fullpath);
    this.hidden.delete(key);
  }

  /** A folder or a rename target where a file unlinked while read is waiting: it is removed now. */
  private async settleHidden(lib: Library, fullpath: string): Promise<void> {
    if (!this.hidden.has(`${lib.name}\0${fullpath}`)) return;
    await this.writeBack.readersGone(lib.name, fullpath);
  }

  /** Both ends of a rename or copy, checked: source exists, not into itself, target's folder exists, noReplace; `localMove`: a rename of a file the service has nothing of (moved here only). */
  private async transferEnds(verb: string, from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext):
    Promise<{ a: Target & { lib: Library }; b: Target & { lib: Library }; src: RemoteEntry; dst: RemoteEntry | null; localMove: boolean }> {
    const a = this.target(from);
    const b = this.target(to);
    if (!a.lib || a.fullpath === '' || !b.lib || b.fullpath === '') throw new VfsError('EPERM', `libraries cannot be ${verb} or replaced: ${a.path} → ${b.path}`);
    this.writable(b.path);
    const src = await this.entryOf(a.lib, a.fullpath, ctx);
    if (!src) throw new VfsError('ENOENT', `no such file or folder: ${a.path}`);
    if (src.isDir && a.lib === b.lib && isWithin(b.fullpath, a.fullpath)) throw new VfsError('EINVAL', `cannot put ${a.path} into itself`);
    await this.needFolder(b.lib, parentOf(b.fullpath), ctx);
    await this.settleHidden(b.lib, b.fullpath);
    // A file of which the service has nothing from here moves here only: its target is found as a create
    // finds its name (the cache, following the updates feed; a name made elsewhere meanwhile meets the
    // upload as it would meet a new file's). Otherwise the service is asked.
    const localMove = verb === 'renamed' && !src.isDir && a.lib === b.lib && this.writeBack.unsent(a.lib.name, a.fullpath);
    const dst = localMove ? await this.lookup(b.lib, b.fullpath, ctx) : await this.entryOf(b.lib, b.fullpath, ctx);
    if (dst && opts.noReplace) throw new VfsError('EEXIST', `${b.path} exists`);
    // Its upload will be a file made (or changed) at the target: a service that checks that per member is
    // asked now, as at a create, before anything changes.
    if (localMove) await b.lib.remote.checkWrite?.(b.fullpath, !!dst, this.call(ctx));
    return { a: a as Target & { lib: Library }, b: b as Target & { lib: Library }, src, dst, localMove };
  }

  async setTimes(path: string, mtimeMs: number, ctx?: CallContext): Promise<void> {
    if (!Number.isFinite(mtimeMs)) throw new VfsError('EINVAL', `expected a time in ms, got ${mtimeMs}`);
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setTimes');
    this.writable(t.path);
    if (await this.writeBack.setTimes(lib.name, t.fullpath, mtimeMs)) return;
    const e = await this.lookup(lib, t.fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    this.times.set(lib.name, e.id, versionOf(e), mtimeMs);
  }

  // ---- extended operations ---------------------------------------------------------------------------------

  async getTags(path: string, ctx?: CallContext): Promise<string[]> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'getTags');
    if (t.fullpath === '') throw new VfsError('ENOTSUP', `libraries have no tags: ${t.path}`);
    const local = this.writeBack.entry(lib.name, t.fullpath);
    if (local && isUnsent(local)) return this.marks.tags(lib.name, t.fullpath) ?? local.tags ?? [];
    if (lib.remote.tags) {
      const tags = await lib.remote.tags(t.fullpath, this.call(ctx));
      if (tags === null) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
      return tags;
    }
    const e = await lib.remote.stat(t.fullpath, this.call(ctx));
    if (!e) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    return e.tags ?? [];
  }

  async setTags(path: string, tags: string[], ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setTags');
    if (t.fullpath === '') throw new VfsError('ENOTSUP', `libraries have no tags: ${t.path}`);
    this.writable(t.path);
    for (const tag of tags) {
      if (typeof tag !== 'string' || tag.trim() === '' || tag.includes(';')) throw new VfsError('EINVAL', `expected tags without ';' and not empty, got ${JSON.stringify(tag)}`);
    }
    const wanted = [...new Set(tags.map((x) => x.trim()))];
    const local = this.writeBack.entry(lib.name, t.fullpath);
    if (local && isUnsent(local)) {
      // Not on the service yet: the tags go there with the file.
      this.marks.setTags(lib.name, t.fullpath, wanted);
      return;
    }
    const current = await this.getTags(path, ctx);
    await lib.remote.removeTags(t.fullpath, current.filter((x) => !wanted.includes(x)), this.call(ctx));
    await lib.remote.addTags(t.fullpath, wanted.filter((x) => !current.includes(x)), this.call(ctx));
    this.ownForget(lib.name, t.fullpath);
    this.writeBack.patchBase(lib.name, t.fullpath, { tags: wanted });
  }

  async setLocked(path: string, locked: boolean, ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setLocked');
    if (t.fullpath === '') throw new VfsError('ENOTSUP', `libraries cannot be locked: ${t.path}`);
    this.writable(t.path);
    const e = await this.lookup(lib, t.fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (e.isDir) throw new VfsError('ENOTSUP', `folders cannot be locked: ${t.path}`);
    const key = `${lib.name}\0${t.fullpath}`;
    const holder = ctx?.lockHolder ?? '';
    const held = this.lockHolds.get(key);
    if (held !== undefined && held !== holder) throw new VfsError('ELOCKED', `${t.path} is locked through the gateway by another writer`);
    if (isUnsent(e)) {
      // Not on the service yet: the gateway holds the lock from now on, the service takes it with the file.
      this.marks.setLock(lib.name, t.fullpath, locked, ctx?.operator);
      if (locked) this.lockHolds.set(key, holder);
      else this.lockHolds.delete(key);
      return;
    }
    await lib.remote.lock(t.fullpath, locked, this.call(ctx));
    if (locked) this.lockHolds.set(key, holder);
    else this.lockHolds.delete(key);
    this.ownForget(lib.name, t.fullpath);
    this.writeBack.patchBase(lib.name, t.fullpath, { locked });
  }

  /**
   * Refuses a change of a file locked on the service by someone other than the caller: a lock taken
   * through this gateway belongs to its holder (a WebDAV lock refuses the mount, and the other way round);
   * a lock taken elsewhere refuses callers that hold none (the mount), while a front end that tracks locks
   * itself (WebDAV) decides for its own callers.
   */
  private assertLockHeld(lib: Library, e: RemoteEntry, ctx?: CallContext): void {
    if (e.isDir) return;
    const held = this.lockHolds.get(`${lib.name}\0${e.fullpath}`);
    const holder = ctx?.lockHolder ?? '';
    if (held !== undefined) {
      if (held !== holder) throw new VfsError('ELOCKED', `${gatewayPathOf(lib.name, e.fullpath)} is locked by another writer of the gateway`);
      return;
    }
    if (e.locked && holder === '') throw new VfsError('ELOCKED', `${gatewayPathOf(lib.name, e.fullpath)} is locked on the service`);
  }

  // ---- lifecycle ------------------------------------------------------------------------------------------

  async flushAll(opts: { timeoutMs?: number } = {}): Promise<void> {
    await this.writeBack.flushAll(opts);
  }

  /** What the gateway is doing (for the control socket). */
  status(): GatewayStatus {
    const wb = this.writeBack.status();
    return {
      libraries: [...this.libs.values()].map((l) => ({ ...this.connectivity.of(l.name), pendingUploads: wb.uploads.filter((u) => u.library === l.name).length })),
      uploads: wb.uploads,
      stranded: wb.stranded,
      feeds: [...this.libs.values()].flatMap((l) => (l.feed ? [l.feed.snapshot()] : [])),
      localFiles: wb.localFiles,
      metadata: this.cache.stats(),
      blocks: this.blocks.stats(),
      disk: this.disk?.stats(),
      pins: this.pins?.status(),
    };
  }

  // ---- kept on this machine (pins) and freeing up space ------------------------------------------------

  /**
   * Pins (keeps on this machine) or unpins a file or folder. A pin is refused with ENOSPC when its content
   * would not fit in the cache beside what is pinned; its files are then fetched in the background.
   */
  async setPinned(path: string, pinned: boolean, _ctx?: CallContext): Promise<{ files: number; bytes: number } | undefined> {
    const t = this.target(path);
    const lib = this.needLibrary(t, pinned ? 'pin' : 'unpin');
    if (!this.pins) throw new VfsError('ENOTSUP', `${t.path}: nothing can be kept on this machine without the disk cache (cache.disk_cache_mb is 0)`);
    if (!pinned) return void (await this.pins.unpin(lib.name, t.fullpath));
    return this.pins.pin(lib.name, t.fullpath);
  }

  /** True when the path is pinned (itself or by a folder above it). */
  async pinned(path: string, ctx?: CallContext): Promise<boolean> {
    const t = this.target(path);
    if (!t.lib) return false;
    if (!(await this.lookup(t.lib, t.fullpath, ctx))) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    return this.pins?.pinned(t.lib.name, t.fullpath) ?? false;
  }

  /** Resolves once every pinned file queued is fetched (or failed: see status). */
  async pinsFetched(): Promise<void> {
    await this.pins?.idle();
  }

  /**
   * Free up space: drops the cached content of the files under a path that are neither pinned, nor open,
   * nor waiting to upload (those are the write-back's, never the cache's).
   */
  async evict(path: string, ctx?: CallContext): Promise<{ files: number; bytes: number }> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'evict');
    if (!this.disk) return { files: 0, bytes: 0 };
    return freeUpSpace({
      disk: this.disk, root: t.fullpath,
      stat: (fp) => this.lookup(lib, fp, ctx),
      list: (fp) => this.listDir(lib, fp, ctx),
      kept: (fp) => !!this.pins?.pinned(lib.name, fp) || this.writeBack.dirty(lib.name, fp) || !!this.writeBack.entry(lib.name, fp),
    });
  }

  /** Library folder names, in order. */
  libraryNames(): string[] {
    return [...this.libs.keys()];
  }

  /** The Remote of a library folder, as given (tests: fault injection). */
  remoteOf(name: string): Remote | undefined {
    return this.libs.get(name)?.given;
  }

  /** Polls every library's feed now (tests, `cloudlib ctl refresh`). */
  async refresh(): Promise<void> {
    await Promise.all([...this.libs.values()].map((l) => l.feed?.pollNow()));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.libs.values()].map((l) => l.feed?.stop()));
    // Open versions reach the journal; uploads under way stop (their journal entries stay).
    await this.writeBack.close();
    await this.hasher.close();
    await this.sha1Streams.close();
    await this.pins?.close();
    await this.disk?.close();
    await this.times.close();
    await this.opts.onClose?.();
  }

  /** Recreates missing parent folders of a pending upload (they vanished on the service). */
  private async ensureParents(library: string, fullpath: string): Promise<void> {
    const lib = this.libs.get(library);
    if (!lib) return;
    const parts = parentOf(fullpath).split('/').filter(Boolean);
    let at = '';
    for (const p of parts) {
      at = joinPath(at, p);
      const e = await lib.remote.stat(at);
      if (!e) this.ownUpsert(lib.name, await lib.remote.mkdir(at));
    }
  }

  /** Copies a file or folder between places, through a local spool; returns when the service has it. */
  private async copyAcross(from: Library, fromPath: string, to: Library, toPath: string, ctx?: CallContext): Promise<void> {
    const src = await this.entryOf(from, fromPath, ctx);
    if (!src) throw new VfsError('ENOENT', `no such file or folder: ${gatewayPathOf(from.name, fromPath)}`);
    if (src.isDir) {
      this.ownUpsert(to.name, await to.remote.mkdir(toPath, this.call(ctx)));
      for (const child of await this.listDir(from, fromPath, ctx)) {
        await this.copyAcross(from, joinPath(fromPath, child.name), to, joinPath(toPath, child.name), ctx);
      }
      return;
    }
    const { id, path: spool } = this.writeBack.scratchSpool();
    try {
      if (!(await this.writeBack.copyCurrent(from.name, fromPath, spool))) {
        const tmp = new LocalVersion(id, spool, to.name, toPath, src, {
          baseSize: src.size, openBase: (start, end) => from.remote.openRange(fromPath, start, end, { ...this.call(ctx), contentHash: src.contentHash }),
        });
        await tmp.fillAll();
        await tmp.sync();
        await tmp.closeSpool();
      }
      const { sha1, size } = await this.hasher.hash(spool);
      // Bytes as the service takes them (all at once when it has the content already).
      let reported = 0;
      const progress = (sent: number): void => {
        if (sent > reported) ctx?.onCopied?.(sent - reported);
        reported = Math.max(reported, sent);
      };
      const entry = await to.remote.commit(toPath, { path: spool, size, sha1 }, { ...this.call(ctx), onProgress: progress });
      this.ownUpsert(to.name, entry);
      progress(size);
    } finally {
      await this.writeBack.discardScratch(id);
    }
  }

  /** Removes a file or a whole folder (after a cross-library move). */
  private async removeTree(lib: Library, fullpath: string, isDir: boolean, ctx?: CallContext): Promise<void> {
    await this.writeBack.removed(lib.name, fullpath);
    if (await lib.remote.stat(fullpath, this.call(ctx))) await lib.remote.remove(fullpath, this.call(ctx));
    this.ownRemove(lib.name, fullpath, isDir);
  }

  // ---- internals: the gateway's own changes ----------------------------------------------------------------

  /** The gateway created or changed an entry: the cache shows it at once, the feed will not undo it. */
  private ownUpsert(library: string, entry: RemoteEntry): void {
    this.cache.upsert(library, entry);
    this.libs.get(library)?.feed?.noteLocalChange(entry.fullpath);
  }

  /** The gateway removed (or moved away) a path; `isDir`, what it was when known (a file's removal looks for nothing below it). */
  private ownRemove(library: string, fullpath: string, isDir?: boolean): void {
    this.cache.remove(library, fullpath, isDir);
    this.libs.get(library)?.feed?.noteLocalChange(fullpath);
  }

  /** The gateway changed a path in a way the cache cannot patch (tags, lock, a copy): asked again next time. */
  private ownForget(library: string, fullpath: string): void {
    this.cache.forget(library, fullpath);
    this.libs.get(library)?.feed?.noteLocalChange(fullpath);
  }

  // ---- internals: lookups ---------------------------------------------------------------------------------

  private target(path: string): Target {
    const p = parseGatewayPath(path);
    if (!p.library) return { path: p.path, fullpath: '' };
    const lib = this.libs.get(p.library);
    if (!lib) throw new VfsError('ENOENT', `no such library: /${p.library}`);
    return { path: p.path, lib, fullpath: p.fullpath };
  }

  private needLibrary(t: Target, what: string): Library {
    if (!t.lib) throw new VfsError('EISDIR', `${what}: the root is a folder`);
    return t.lib;
  }

  private writable(path: string): void {
    if (this.opts.readOnly) throw new VfsError('EROFS', `read-only gateway: ${path}`);
    if (this.closed) throw new VfsError('EIO', 'gateway closed');
  }

  /**
   * A folder being read file after file (`cat *`, `cp -r`, a backup): once two files of the same folder
   * are opened in a row, the next WALK_AHEAD files of its listing are got ready: a small one (one block
   * of the block cache at most) fetched whole into the block cache, at most WALK_FETCHES at once, so its
   * read needs no request; a larger one's download link fetched (the remote's prepareReads), so its
   * first read is one round trip instead of two.
   */
  private walkAhead(lib: Library, e: RemoteEntry, ctx?: CallContext): void {
    if (!lib.remote.prepareReads) return;
    const folder = parentOf(e.fullpath);
    const previous = this.lastReadFolder.get(lib.name);
    this.lastReadFolder.set(lib.name, folder);
    if (previous !== folder) return;
    const listing = this.cache.getListing(lib.name, folder);
    if (!listing) return;
    const at = listing.findIndex((x) => x.fullpath === e.fullpath);
    if (at < 0) return;
    const links: { fullpath: string; contentHash?: string }[] = [];
    for (let i = at + 1, n = 0; i < listing.length && n < WALK_AHEAD; i++) {
      const x = listing[i]!;
      if (x.isDir || x.size === 0 || this.writeBack.entry(lib.name, x.fullpath)) continue;
      n++;
      if (x.size <= this.blocks.blockSize) this.fetchWhole(lib, x, ctx);
      else links.push({ fullpath: x.fullpath, contentHash: x.contentHash });
    }
    // Not tied to this call's signal: the links serve the reads after it.
    if (links.length > 0) lib.remote.prepareReads(links, { operator: ctx?.operator });
  }

  /** A small file fetched whole into the block cache (block 0), in the background; failures are forgotten. */
  private fetchWhole(lib: Library, e: RemoteEntry, ctx?: CallContext): void {
    const key = this.contentKey(lib, e);
    if (this.walkFetches.size >= WALK_FETCHES || this.walkFetches.has(key) || this.blocks.peek(key, 0)) return;
    const fetching = (async () => {
      const stream = await lib.remote.openRange(e.fullpath, 0, e.size - 1, { operator: ctx?.operator, contentHash: e.contentHash });
      const chunks: Buffer[] = [];
      for await (const c of stream as AsyncIterable<Buffer>) chunks.push(c);
      const data = Buffer.concat(chunks);
      if (data.length === e.size) this.blocks.set(key, 0, data);
    })().catch((err: unknown) => {
      this.logger.debug({ path: e.fullpath, err: (err as Error).message }, 'fetching ahead failed; the read will ask again');
    }).finally(() => { this.walkFetches.delete(key); });
    this.walkFetches.set(key, fetching);
  }

  private contentKey(lib: Library, e: RemoteEntry): string {
    return e.contentHash ?? `${lib.name}\0${e.id}\0${e.size}\0${e.mtimeMs}`;
  }

  private call(ctx?: CallContext): RemoteCallOptions {
    return { operator: ctx?.operator, signal: ctx?.signal };
  }

  /** An entry as the gateway sees it: a local file first, then the cache, then the service. */
  private async lookup(lib: Library, fullpath: string, ctx?: CallContext): Promise<RemoteEntry | null> {
    if (fullpath === '') return { id: lib.id, fullpath: '', name: lib.name, isDir: true, size: 0, mtimeMs: LIB_ROOT_ATTR_TIME, ctimeMs: LIB_ROOT_ATTR_TIME };
    const local = this.writeBack.entry(lib.name, fullpath);
    if (local) return local;
    if (this.hidden.has(`${lib.name}\0${fullpath}`)) return null;
    // A path below a pending new file cannot exist; a parent known missing answers for its children.
    const cached = this.cache.getEntry(lib.name, fullpath);
    if (cached !== undefined) return cached;
    const parent = parentOf(fullpath);
    if (parent !== '' && this.cache.getEntry(lib.name, parent) === null) return null;
    const away = this.pinnedWhileOffline(lib, this.pins?.entry(lib.name, fullpath));
    if (away !== undefined) return away;
    let e: RemoteEntry | null;
    try {
      e = await lib.remote.stat(fullpath, this.call(ctx));
    } catch (err) {
      return this.pinnedWhenAway(err, this.pins?.entry(lib.name, fullpath)); // not cached: the service's word only
    }
    this.cache.setEntry(lib.name, fullpath, e);
    return e;
  }

  /** While the library is offline, what the pins know answers at once (the service is not asked first). */
  private pinnedWhileOffline<T>(lib: Library, pinned: T | undefined): T | undefined {
    return pinned !== undefined && !this.connectivity.online(lib.name) ? pinned : undefined;
  }

  /** With the service away, what the pins know answers (pinned-content.ts); otherwise the error stands. */
  private pinnedWhenAway<T>(err: unknown, pinned: T | undefined): T {
    if (pinned === undefined || !(err instanceof VfsError && err.unreachable)) throw err;
    return pinned;
  }

  /** As lookup, without the cache for the final answer (before a change). */
  private async entryOf(lib: Library, fullpath: string, ctx?: CallContext): Promise<RemoteEntry | null> {
    const local = this.writeBack.entry(lib.name, fullpath);
    if (local) return local;
    if (this.hidden.has(`${lib.name}\0${fullpath}`)) return null;
    const e = await lib.remote.stat(fullpath, this.call(ctx));
    this.cache.setEntry(lib.name, fullpath, e);
    return e;
  }

  private async needFolder(lib: Library, fullpath: string, ctx?: CallContext): Promise<void> {
    if (fullpath === '') return;
    const e = await this.lookup(lib, fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such folder: ${gatewayPathOf(lib.name, fullpath)}`);
    if (!e.isDir) throw new VfsError('ENOTDIR', `${gatewayPathOf(lib.name, fullpath)} is a file`);
  }

  sideJournal(): SideJournal | undefined {
    return this.opts.readOnly || this.closed ? undefined : this.writeBack.sideJournal();
  }

  async createClosed(files: readonly ClosedCreate[], ctx?: CallContext): Promise<boolean[]> {
    const made: boolean[] = files.map(() => false);
    const takes: { at: number; library: string; fullpath: string; id: string; closed: EngineClose }[] = [];
    // Folders looked up once for all the files in them.
    const folders = new Map<string, Promise<boolean>>();
    for (let at = 0; at < files.length; at++) {
      const f = files[at]!;
      const t = this.target(f.path);
      if (!t.lib || t.fullpath === '' || this.opts.readOnly || t.lib.remote.checkWrite || this.hidden.has(`${t.lib.name}\0${t.fullpath}`)) continue;
      const lib = t.lib;
      const folder = parentOf(t.fullpath);
      const key = `${lib.name}\0${folder}`;
      let there = folders.get(key);
      if (!there) folders.set(key, (there = this.needFolder(lib, folder, ctx).then(() => true, () => false)));
      try {
        this.writable(t.path);
        if (!(await there) || (await this.lookup(lib, t.fullpath, ctx))) continue;
      } catch {
        continue; // the three steps answer it
      }
      takes.push({ at, library: lib.name, fullpath: t.fullpath, id: f.journalId, closed: f.closed });
    }
    if (takes.length === 0) return made;
    const took = await this.writeBack.createClosed(takes);
    takes.forEach((t, i) => (made[t.at] = took[i]!));
    return made;
  }

  answeredClosesIn(path: string): { library: string; fullpath: string } | undefined {
    const t = this.target(path);
    // A library whose service checks each new file against the member's rights: its closes wait for that.
    if (!t.lib || this.opts.readOnly || t.lib.remote.checkWrite) return undefined;
    return { library: t.lib.name, fullpath: t.fullpath };
  }

  cachedNames(path: string, max: number): string[] | undefined {
    const t = this.target(path);
    if (!t.lib) return undefined;
    const list = this.cache.getListing(t.lib.name, t.fullpath);
    if (!list || list.length > max) return undefined;
    return [...this.overlaid(t.lib, t.fullpath, list).keys()];
  }

  /** A folder's entries: the cached or fetched listing, with local files laid over it. */
  private async listDir(lib: Library, fullpath: string, ctx?: CallContext): Promise<RemoteEntry[]> {
    let list = this.cache.getListing(lib.name, fullpath);
    if (!list) {
      if (fullpath !== '') {
        const self = await this.lookup(lib, fullpath, ctx);
        if (!self) throw new VfsError('ENOENT', `no such folder: ${gatewayPathOf(lib.name, fullpath)}`);
        if (!self.isDir) throw new VfsError('ENOTDIR', `${gatewayPathOf(lib.name, fullpath)} is a file`);
      }
      const away = this.pinnedWhileOffline(lib, this.pins?.listing(lib.name, fullpath));
      if (away !== undefined) return this.sorted(lib, fullpath, away);
      try {
        list = await lib.remote.list(fullpath, this.call(ctx));
      } catch (err) {
        return this.sorted(lib, fullpath, this.pinnedWhenAway(err, this.pins?.listing(lib.name, fullpath)));
      }
      this.cache.setListing(lib.name, fullpath, list);
    }
    return this.sorted(lib, fullpath, list);
  }

  private sorted(lib: Library, fullpath: string, list: RemoteEntry[]): RemoteEntry[] {
    return [...this.overlaid(lib, fullpath, list).values()].sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  }

  /** A folder's listing by name, without the names being removed and with local files laid over it. */
  private overlaid(lib: Library, fullpath: string, list: RemoteEntry[]): Map<string, RemoteEntry> {
    const byName = new Map(list.map((e) => [e.name, e]));
    for (const key of this.hidden) {
      const [name, path] = key.split('\0') as [string, string];
      if (name === lib.name && parentOf(path) === fullpath) byName.delete(baseName(path));
    }
    for (const e of this.writeBack.entriesIn(lib.name, fullpath)) byName.set(e.name, e);
    return byName;
  }

  private toAttr(lib: Library, e: RemoteEntry): Attr {
    const local = !e.isDir && this.writeBack.dirty(lib.name, e.fullpath);
    const mtimeMs = e.id.startsWith('local:') ? e.mtimeMs : this.times.get(lib.name, e.id, versionOf(e)) ?? e.mtimeMs;
    return {
      path: gatewayPathOf(lib.name, e.fullpath), name: e.fullpath === '' ? lib.name : e.name, isDir: e.isDir, size: e.isDir ? 0 : e.size,
      mtimeMs, ctimeMs: e.ctimeMs, id: e.id.startsWith('local:') ? undefined : e.id, contentHash: e.contentHash,
      dirty: local || undefined,
      locked: e.locked, tags: e.tags, lastModifiedBy: e.lastModifiedBy,
      stale: this.connectivity.online(lib.name) ? undefined : true,
    };
  }

  private rootAttr(): Attr {
    return { path: '/', name: '', isDir: true, size: 0, mtimeMs: LIB_ROOT_ATTR_TIME, ctimeMs: LIB_ROOT_ATTR_TIME };
  }

  private libraryAttr(l: Library): Attr {
    return { path: `/${l.name}`, name: l.name, isDir: true, size: 0, mtimeMs: LIB_ROOT_ATTR_TIME, ctimeMs: LIB_ROOT_ATTR_TIME, id: l.id };
  }

  private reader(lib: Library, e: RemoteEntry, ctx?: CallContext, extra: { startAt?: number; disk?: false } = {}): RangeReader {
    const ra = this.opts.readAhead;
    return new RangeReader({
      remote: lib.remote, fullpath: e.fullpath, size: e.size, contentHash: e.contentHash,
      contentKey: this.contentKey(lib, e), blocks: this.blocks, disk: extra.disk === false ? undefined : this.disk,
      initialWindow: ra?.initial, maxWindow: ra?.max, streams: ra?.streams, aheadBytes: ra?.bytes, startAt: extra.startAt, budget: this.readAheadBudget,
      call: this.call(ctx), logger: this.logger,
    });
  }

  /**
   * Bytes [start, end) read in order through `reader` (the first ones already read: `first`), 1 MiB at a
   * time; the reader is closed at the end (or when the stream is destroyed).
   */
  private async *streakChunks(reader: RangeReader, first: Buffer[], start: number, end: number, ctx?: CallContext): AsyncGenerator<Buffer> {
    try {
      let at = start;
      for (const p of first) {
        at += p.length;
        yield p;
      }
      while (at < end) {
        const parts = await reader.readParts(at, Math.min(1024 * 1024, end - at), ctx);
        if (parts.length === 0) throw new VfsError('EIO', `range ended early at ${at}`);
        for (const p of parts) {
          at += p.length;
          yield p;
        }
      }
    } finally {
      reader.close();
    }
  }

  private async *diskChunks(hash: string, start: number, end: number): AsyncGenerator<Buffer> {
    for (let at = start; at < end; at += 1024 * 1024) yield await this.disk!.read(hash, at, Math.min(end, at + 1024 * 1024));
  }

}

/**
 * A read handle on a service file (no local copy when opened); it follows the file (FollowedFile), so
 * once the file is changed through the gateway it reads the local version.
 */
class RemoteReadHandle implements FileHandle {
  private releasedOnce = false;
  constructor(readonly path: string, private readonly rr: RangeReader, private readonly file: FollowedFile, private readonly attr: () => Attr, private readonly onRelease: () => void) {}
  read(position: number, length: number, ctx?: CallContext): Promise<Buffer> {
    return this.file.read((v) => v.read(position, length), () => this.rr.read(position, length, ctx));
  }
  readParts(position: number, length: number, ctx?: CallContext): Promise<Buffer[]> {
    return this.file.read(async (v) => [await v.read(position, length)], () => this.rr.readParts(position, length, ctx));
  }
  localRange(position: number, length: number): LocalRange | undefined {
    if (this.releasedOnce) return undefined;
    const v = this.file.version();
    return v ? v.localRange(position, length) : this.rr.localRange(position, length);
  }
  async write(): Promise<number> { throw new VfsError('EACCES', `${this.path} was opened read-only`); }
  async truncate(): Promise<void> { throw new VfsError('EACCES', `${this.path} was opened read-only`); }
  async stat(): Promise<Attr> { return this.file.attr() ?? this.attr(); }
  async flush(): Promise<void> {}
  async fsync(): Promise<void> {}
  async release(): Promise<void> {
    if (this.releasedOnce) return;
    this.releasedOnce = true;
    this.rr.close();
    try {
      await this.file.release();
    } finally {
      this.onRelease();
    }
  }
}

/** What identifies a version of an entry for a time override. */
function versionOf(e: RemoteEntry): string {
  return e.contentHash ?? `t${e.mtimeMs}`;
}

/** A stream's chunks as Buffers. */
async function* asBuffers(source: AsyncIterable<Buffer | string>): AsyncGenerator<Buffer> {
  for await (const chunk of source) yield typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
}

function safeFileName(id: string): string {
  return id.replace(/[^A-Za-z0-9_.-]/g, '_') || 'library';
}

export type { PendingFile };

/** A local file the service does not have yet (made here, its first upload still to come). */
function isUnsent(e: RemoteEntry): boolean {
  return e.id.startsWith('local:');
}
