/**
 * GatewayVfs: the Vfs over a set of libraries, the namespace. The root lists one folder per library;
 * inside, gateway paths map one to one to the library's `fullpath`. This file holds the operations and
 * how the parts are wired: the libraries served and their feeds (library-folders.ts), lookups and
 * listings (namespace-lookups.ts), reads of service files (service-reads.ts), quotas (library-quotas.ts),
 * locks (lock-holds.ts), files unlinked while read (unlinked-while-read.ts), copies between libraries
 * (tree-transfer.ts) and what the FUSE engine answers itself (engine-hand-over.ts). Metadata comes from
 * the MetadataCache (kept coherent by one UpdatesFeed per library and updated at once by the gateway's
 * own changes). Everything written is handed to the WriteBack, the one owner of local versions, their
 * journal and their uploads. What is and is not POSIX here is written down in docs/semantics.md.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { Logger } from '../shared/log.js';
import { BlockCache } from './block-cache.js';
import { ContentCache } from './content-cache.js';
import { gatewayPathOf, parseGatewayPath } from './gateway-path.js';
import { MetadataCache } from './metadata-cache.js';
import { ReadAheadBudget } from './range-reader.js';
import { baseName, isWithin, joinPath, parentOf, type Remote, type RemoteEntry } from './remote.js';
import type { UpdatesFeedStatus } from './updates-feed.js';
import { Connectivity, type LibraryConnectivity } from './connectivity.js';
import { SizeLimits } from './size-limits.js';
import { PendingMarks } from './pending-marks.js';
import { TimeOverrides } from './time-overrides.js';
import { FileHasher, Sha1Streams, WriteBack, type Conflict, type PendingFile, type UploadStatus } from './write-back/index.js';
import { ForegroundActivity } from './foreground-activity.js';
import { VERSIONS_FOLDER, VersionsView } from './versions-view.js';
import { FileStates } from './file-state.js';
import { isOfficeLockName, isOfficeLockPath, OfficeLockFiles } from './office-lock-files.js';
import { VfsError, type Attr, type CallContext, type StatFs, type Vfs } from './types.js';
import type { ClosedCreate, EngineLease, LeasedHandle, LeaseOpenFlags, SideJournal } from './engine-lease.js';
import { ChangeEvents } from './change-events.js';
import { CacheBudget } from './cache-budget.js';
import { PinMarks } from './pin-marks.js';
import { PinnedContent, type PinStatus } from './pinned-content.js';
import { freeUpSpace } from './free-up-space.js';
import { UploadBackpressure } from './upload-backpressure.js';
import type { ResolvedLibrary } from './library-set.js';
import type { GatewayVfsOptions } from './gateway-vfs-options.js';
import { remoteCall, LibraryFolders, type Library, type LibraryTarget, type Target } from './library-folders.js';
import { isUnsent, NamespaceLookups, versionOf } from './namespace-lookups.js';
import { ServiceReads } from './service-reads.js';
import { LibraryQuotas } from './library-quotas.js';
import { LockHolds } from './lock-holds.js';
import { UnlinkedWhileRead } from './unlinked-while-read.js';
import { TreeTransfer } from './tree-transfer.js';
import { EngineHandOver } from './engine-hand-over.js';
import { systemClock } from './clock.js';

export interface GatewayStatus {
  /** Per library: online, or offline since when (serving what it has), and its uploads waiting. */
  libraries: (LibraryConnectivity & { pendingUploads: number })[];
  uploads: UploadStatus[];
  /** Journal entries whose library is not configured (kept, not uploaded). */
  stranded: { id: string; library: string; fullpath: string }[];
  /** Open conflicts found in this run: the other side kept as a copy (until it is removed or renamed), or a file deleted elsewhere brought back (conflicts.ts). */
  conflicts: Conflict[];
  feeds: UpdatesFeedStatus[];
  localFiles: number;
  metadata: ReturnType<MetadataCache['stats']>;
  blocks: ReturnType<BlockCache['stats']>;
  disk?: ReturnType<ContentCache['stats']>;
  /** Files kept on this machine (pins): bytes, what is still being fetched, errors. */
  pins?: PinStatus;
}

export class GatewayVfs implements Vfs {
  /** The library folders served, their feeds, and the gateway's own changes noted to them. */
  private readonly libs: LibraryFolders;
  readonly cache: MetadataCache;
  private readonly blocks: BlockCache;
  private readonly disk: ContentCache | undefined;
  private readonly hasher = new FileHasher();
  /** Front ends say here when they serve applications; the uploads give way meanwhile. */
  readonly foreground = new ForegroundActivity();
  /** Every change the feeds bring, as events (change-events.ts). */
  readonly changes = new ChangeEvents((err) => this.logger.warn({ err: String(err) }, 'a listener of changes failed'));
  private readonly sha1Streams: Sha1Streams;
  /** The owner of every local version: spools, journal, uploads. */
  readonly writeBack: WriteBack;
  /** Times programs saw, shown instead of the service's for as long as that version is current. */
  private readonly times: TimeOverrides;
  /** Service locks taken through this gateway and their holders (lock-holds.ts). */
  private readonly locks = new LockHolds();
  /** Read handles on service files, and files unlinked while read (unlinked-while-read.ts). */
  private readonly unlinked: UnlinkedWhileRead;
  /** Which libraries' service answers; offline ones are served from what the gateway has. */
  readonly connectivity: Connectivity;
  /** Writes beyond the largest file or the library's free space are refused (size-limits.ts). */
  private readonly limits: SizeLimits;
  /** Locks and tags of files not on the service yet, given to them once uploaded (pending-marks.ts). */
  private readonly marks: PendingMarks;
  /** The libraries' quotas (statfs, the free space writes are checked against). */
  private readonly quotas: LibraryQuotas;
  /** Local files first, then the cache, then the service; Attrs. */
  private readonly lookups: NamespaceLookups;
  /** Reads of files the gateway has no local version of. */
  private readonly reads: ServiceReads;
  /** Copies between libraries (and of files with local versions), through a local spool. */
  private readonly transfer: TreeTransfer;
  /** What the FUSE engine answers by itself. */
  private readonly engine: EngineHandOver;
  private readonly logger: Logger;
  /** Every version of every file, read-only, under `/<library>/.versions` (versions-view.ts). */
  private readonly versions: VersionsView;
  /** Each file's state in one word (file-state.ts); `conflictOf` is set by whoever knows conflicts. */
  readonly states: FileStates;
  /** The cache's limit, and what it never evicts (pinned, open). */
  private readonly budget: CacheBudget | undefined;
  /** Files and folders kept on this machine (pinned-content.ts); only with a disk cache. */
  private readonly pins: PinnedContent | undefined;
  /** Office and LibreOffice lock files: kept here, turned into service locks of their documents. */
  private readonly lockFiles: OfficeLockFiles;
  /** close() is releasing the locks of lock files: unlocks pass though the gateway is closed. */
  private unlockingAtClose = false;
  private closed = false;

  private constructor(private readonly opts: GatewayVfsOptions) {
    this.logger = opts.logger;
    const clock = opts.clock ?? systemClock;
    this.sha1Streams = new Sha1Streams(clock);
    const feedOn = (opts.feedIntervalMs ?? 2000) > 0;
    this.cache = new MetadataCache({
      maxEntries: opts.cache?.metadataEntries, maxBytes: opts.cache?.metadataBytes, ttlMs: opts.cache?.ttlMs ?? (feedOn ? 0 : 1000), clock: opts.clock,
    });
    this.blocks = new BlockCache({ maxBytes: opts.cache?.blockBytes, blockSize: opts.cache?.blockSize });
    const diskBytes = opts.cache?.diskBytes ?? 0;
    const contentDir = join(opts.dataDir, 'content');
    this.budget = diskBytes > 0 ? new CacheBudget({ dir: contentDir, maxBytes: diskBytes, minFreeFraction: (opts.cache?.minFreePercent ?? 5) / 100 }) : undefined;
    this.disk = this.budget ? new ContentCache({ dir: contentDir, maxBytes: diskBytes, budget: this.budget, clock, logger: opts.logger }) : undefined;
    this.pins = this.disk && this.budget ? new PinnedContent({
      marks: new PinMarks(join(opts.dataDir, 'pins', 'marks.json')), disk: this.disk, budget: this.budget, dir: join(opts.dataDir, 'pins'),
      remoteFor: (name) => this.libs.get(name)?.remote, logger: opts.logger,
    }) : undefined;
    this.times = new TimeOverrides(join(opts.dataDir, 'times.jsonl'), opts.logger);
    this.marks = new PendingMarks(opts.logger);
    this.connectivity = new Connectivity({
      onOffline: (name, err) => this.logger.warn({ library: name, err: err.message }, 'library offline: the service cannot be reached; serving what is cached, writes go to the journal'),
      onOnline: (name, offlineMs) => {
        this.logger.info({ library: name, offlineMs }, 'library online again: uploads and folders made meanwhile go to the service');
        this.writeBack.online(name);
        this.pins?.resync(name);
        void this.libs.get(name)?.feed?.pollNow().catch(() => undefined);
      },
      clock,
    });
    this.states = new FileStates({
      syncState: (name, fullpath) => this.writeBack.syncState(name, fullpath),
      online: (name) => this.connectivity.online(name),
    });
    // The file and the copy of an open conflict show `conflict` until the copy is known gone (as `status`).
    this.states.conflictOf = (name, fullpath) => this.writeBack.inConflict(name, fullpath, (n, p) => this.cache.getEntry(n, p) === null);
    this.versions = new VersionsView({
      remoteOf: (name) => this.libs.get(name)?.remote,
      lookup: (name, fullpath, ctx) => this.lookups.lookup(this.libs.get(name)!, fullpath, ctx),
      list: (name, fullpath, ctx) => this.lookups.listDir(this.libs.get(name)!, fullpath, ctx),
      reader: (name, entry, ctx) => this.reads.reader(this.libs.get(name)!, entry, ctx, { exactVersion: true }),
    });
    this.libs = new LibraryFolders({ cache: this.cache, connectivity: this.connectivity, dataDir: opts.dataDir, feedIntervalMs: opts.feedIntervalMs ?? 2000, clock, logger: opts.logger, onChange: (name, change, before) => {
      this.changes.publish(name, change, before);
      this.pins?.changed(name, change);
    } });
    this.quotas = new LibraryQuotas(this.libs, clock, opts.logger);
    const backpressure = opts.maxPendingBytes ? new UploadBackpressure({ maxBytes: opts.maxPendingBytes, pendingBytes: () => this.writeBack.uploads.status().reduce((n, u) => n + (u.size ?? 0), 0) }) : undefined;
    this.limits = new SizeLimits({
      maxFileBytes: opts.maxFileBytes, freeBytes: (name, ctx) => this.quotas.freeBytes(name, ctx),
      ...(backpressure ? { room: (path: string, size: number, ctx: CallContext | undefined, wait: boolean) => backpressure.admit(path, size, ctx, { wait }) } : {}),
    });
    this.writeBack = new WriteBack({
      journalDir: join(opts.dataDir, 'journal'), hasher: this.hasher, sha1Streams: this.sha1Streams,
      // Bytes written where no handle's write saw them (the FUSE engine's, the kernel's) are checked at the seal.
      sizeCheck: (name, fullpath, size, oldSize) => this.limits.check(gatewayPathOf(name, fullpath), name, size, oldSize, undefined, this.quotas.knownFreeBytes(name)),
      upload: opts.upload, foreground: this.foreground, partialFetch: opts.partialFetch, unwrittenSpoolBytes: opts.unwrittenSpoolBytes, logger: opts.logger, diskFaults: opts.diskFaults, durability: opts.durability,
      host: {
        remoteFor: (name) => this.libs.get(name)?.remote,
        baseReader: (name, base, ctx) => this.reads.reader(this.libs.get(name)!, base, ctx),
        uploaded: (name, entry, mtimeMs) => {
          this.libs.ownUpsert(name, entry);
          if (entry.contentHash) this.times.set(name, entry.id, versionOf(entry), mtimeMs);
          void this.applyMarks(name, entry.fullpath);
        },
        ensureParents: (name, fullpath) => this.ensureParents(name, fullpath),
        deleted: (name, fullpath) => {
          this.unlinked.removed(name, fullpath);
          this.libs.ownRemove(name, fullpath, false);
        },
        gatewayOnly: (name, fullpath) => isOfficeLockPath(gatewayPathOf(name, fullpath)),
        attrOf: (name, entry) => {
          const lib = this.libs.get(name);
          return lib ? this.lookups.toAttr(lib, entry) : { path: gatewayPathOf(name, entry.fullpath), name: entry.name, isDir: false, size: entry.size, mtimeMs: entry.mtimeMs, ctimeMs: entry.ctimeMs, dirty: true };
        },
      },
    });
    this.unlinked = new UnlinkedWhileRead(this.writeBack);
    this.lockFiles = new OfficeLockFiles({
      dataDir: opts.dataDir, logger: opts.logger, spoolFolder: () => this.writeBack.sideJournal()?.spoolFolderPath(),
      releaseGraceMs: opts.officeLockReleaseGraceMs ?? 2000, clock,
      documents: { setLocked: (p, locked, ctx) => this.setLocked(p, locked, ctx), names: async (folder, ctx) => (await this.readdir(folder, ctx)).map((a) => a.name) },
    });
    this.lookups = new NamespaceLookups({ cache: this.cache, writeBack: this.writeBack, unlinked: this.unlinked, times: this.times, connectivity: this.connectivity, openedMs: clock.now(), stateOf: (name, e) => this.states.of(name, e), lockHolderOf: (name, fullpath) => this.locks.holderOf(name, fullpath), pinned: this.pins });
    this.reads = new ServiceReads({
      blocks: this.blocks, disk: this.disk, budget: new ReadAheadBudget(opts.readAhead?.totalBytes ?? 256 * 1024 * 1024), readAhead: opts.readAhead,
      cache: this.cache, writeBack: this.writeBack, unlinked: this.unlinked, logger: opts.logger, hold: (hash) => this.budget?.hold(hash),
    });
    this.transfer = new TreeTransfer({ libs: this.libs, lookups: this.lookups, writeBack: this.writeBack, hasher: this.hasher });
    this.engine = new EngineHandOver({
      libs: this.libs, cache: this.cache, lookups: this.lookups, unlinked: this.unlinked, writeBack: this.writeBack, readOnly: !!opts.readOnly,
      writable: (path) => this.writable(path), closed: () => this.closed,
    });
  }

  /** What was set on a file before its upload goes to the service with it. */
  private async applyMarks(name: string, fullpath: string): Promise<void> {
    const lib = this.libs.get(name);
    if (!lib) return;
    const done = await this.marks.apply(name, fullpath, lib.remote);
    if (done.locked === undefined && done.tags === undefined) return;
    this.libs.ownForget(name, fullpath);
    this.writeBack.patchBase(name, fullpath, { ...(done.locked ? { locked: true } : {}), ...(done.tags ? { tags: done.tags } : {}) });
  }

  /** The upload queue (status, tests). */
  get uploads(): WriteBack['uploads'] {
    return this.writeBack.uploads;
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
    for (const l of this.opts.libraries) {
      if (this.libs.has(l.name)) throw new TypeError(`libraries: expected unique folder names, got '${l.name}' twice`);
      this.libs.add(l);
      // Named from what was known, the service not answering: offline from the start (journal, pending folders).
      if (l.unreachable) this.connectivity.failed(l.name, l.unreachable);
    }
    await Promise.all(this.libs.all().map((l) => this.libs.startFeed(l)));
    await this.writeBack.replay((name) => this.libs.has(name));
    await this.lockFiles.start();
    await this.pins?.init();
    for (const l of this.libs.all()) if (this.connectivity.online(l.name)) this.pins?.resync(l.name);
  }

  /**
   * Serves one more library folder at run time. Journal entries kept for a library of that name (from a
   * previous run) are uploaded now.
   */
  async addLibrary(l: ResolvedLibrary): Promise<void> {
    if (this.closed) throw new VfsError('EIO', 'the gateway is closing');
    if (this.libs.has(l.name)) throw new VfsError('EEXIST', `a library folder named '${l.name}' is already served`);
    const lib = this.libs.add(l);
    try {
      await this.libs.startFeed(lib);
    } catch (err) {
      this.libs.drop(l.name);
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
    await this.libs.remove(lib);
    this.logger.info({ library: name }, 'library removed');
  }

  /** Drops cached metadata and blocks (not local files or pending uploads). */
  dropCaches(): void {
    for (const name of this.libs.names()) this.cache.dropLibrary(name);
    this.blocks.clear();
  }

  // ---- metadata -------------------------------------------------------------------------------------------

  async stat(path: string, ctx?: CallContext, opts: { fresh?: boolean } = {}): Promise<Attr> {
    const view = await this.versions.at(path, ctx);
    if (view) return this.versions.stat(view, ctx);
    const t = this.target(path);
    if (isOfficeLockPath(t.path)) return this.lockFiles.stat(t.path);
    if (!t.lib) return this.lookups.rootAttr();
    const e = opts.fresh && t.fullpath !== '' ? await this.lookups.entryOf(t.lib, t.fullpath, ctx) : await this.lookups.lookup(t.lib, t.fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    return this.lookups.toAttr(t.lib, e);
  }

  async readdir(path: string, ctx?: CallContext): Promise<Attr[]> {
    const view = await this.versions.at(path, ctx);
    if (view) return this.versions.readdir(view, ctx);
    const t = this.target(path);
    if (!t.lib) return this.libs.all().map((l) => this.lookups.libraryAttr(l));
    const entries = await this.lookups.listDir(t.lib, t.fullpath, ctx);
    // Lock files are the gateway's own: any of the service's under such a name is not shown.
    return [...entries.filter((e) => !isOfficeLockName(e.name)).map((e) => this.lookups.toAttr(t.lib!, e)), ...(await this.lockFiles.list(t.path))];
  }

  async readOnlyAt(path: string, ctx?: CallContext): Promise<boolean> {
    return (await this.versions.at(path, ctx)) !== undefined;
  }

  async statfs(path: string, ctx?: CallContext): Promise<StatFs> {
    const t = this.target(path);
    return this.quotas.statfs(t.lib ? [t.lib] : this.libs.all(), ctx);
  }

  // ---- reads and writes -----------------------------------------------------------------------------------

  async open(path: string, flags: LeaseOpenFlags, ctx?: CallContext): Promise<LeasedHandle> {
    const view = await this.versions.at(path, ctx);
    if (view) return this.versions.open(view, flags, ctx);
    const t = this.target(path);
    const lib = this.needLibrary(t, 'open');
    const writing = !!(flags.write || flags.create || flags.truncate || flags.append);
    if (writing) this.writable(t.path);
    if (isOfficeLockPath(t.path)) return this.lookups.needFolder(lib, parentOf(t.fullpath), ctx).then(() => this.lockFiles.open(t.path, flags, ctx));
    const existing = await this.lookups.lookup(lib, t.fullpath, ctx);
    if (existing?.isDir) throw new VfsError('EISDIR', `${t.path} is a folder`);
    if (existing && flags.create && flags.exclusive) throw new VfsError('EEXIST', `${t.path} exists`);
    if (!existing && !flags.create) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (!writing) {
      const local = this.writeBack.openRead(lib.name, t.fullpath);
      if (local) return local;
      return this.reads.open(lib, t, existing!, () => this.lookups.toAttr(lib, existing!), ctx);
    }
    if (existing) this.locks.assertHeld(lib.name, existing, ctx);
    else {
      await this.lookups.needFolder(lib, parentOf(t.fullpath), ctx);
      await this.unlinked.reuse(lib.name, t.fullpath);
    }
    // A file made here and not sent yet is not on the service: what its upload needs is a new file's right.
    await lib.remote.checkWrite?.(t.fullpath, !!existing && !isUnsent(existing), remoteCall(ctx));
    // The service's version is the base when nothing is local (else the local version is).
    const base = existing && !this.writeBack.current(lib.name, t.fullpath) ? existing : undefined;
    const handle = await this.writeBack.openWrite(lib.name, t.fullpath, existing ? base ?? existing : undefined, flags, ctx);
    return this.limits.limit(handle, lib.name, (await handle.stat()).size, ctx);
  }

  async createReadStream(path: string, range: { start?: number; end?: number } = {}, ctx?: CallContext): Promise<Readable> {
    const view = await this.versions.at(path, ctx);
    if (view) return this.versions.createReadStream(view, range, ctx);
    const t = this.target(path);
    const lib = this.needLibrary(t, 'read');
    if (isOfficeLockPath(t.path)) return this.lockFiles.createReadStream(t.path, range);
    const entry = await this.lookups.lookup(lib, t.fullpath, ctx);
    if (!entry) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (entry.isDir) throw new VfsError('EISDIR', `${t.path} is a folder`);
    const start = range.start ?? 0;
    const end = Math.min(range.end ?? entry.size - 1, entry.size - 1);
    if (!Number.isInteger(start) || start < 0) throw new VfsError('EINVAL', `expected a range start >= 0, got ${range.start}`);
    if (end < start) return Readable.from([]);
    const local = await this.writeBack.readStream(lib.name, t.fullpath, start, end);
    if (local) return local;
    return this.reads.stream(lib, entry, start, end, ctx);
  }

  /**
   * Replaces (or creates) a file with the source's bytes, atomically: nothing changes unless the source
   * ends normally and the new version is journaled (see WriteBack.replace).
   */
  async writeFile(path: string, source: Readable | Buffer | AsyncIterable<Buffer>, ctx?: CallContext, opts: { holdUploadMs?: number; size?: number } = {}): Promise<Attr> {
    await this.refuseInVersions(path, ctx);
    const t = this.target(path);
    const lib = this.needLibrary(t, 'write');
    this.writable(t.path);
    if (isOfficeLockPath(t.path)) return this.lookups.needFolder(lib, parentOf(t.fullpath), ctx).then(() => this.lockFiles.writeFile(t.path, source, ctx));
    const existing = await this.lookups.lookup(lib, t.fullpath, ctx);
    if (existing?.isDir) throw new VfsError('EISDIR', `${t.path} is a folder`);
    if (existing) this.locks.assertHeld(lib.name, existing, ctx);
    else {
      await this.lookups.needFolder(lib, parentOf(t.fullpath), ctx);
      await this.unlinked.reuse(lib.name, t.fullpath);
    }
    await lib.remote.checkWrite?.(t.fullpath, !!existing && !isUnsent(existing), remoteCall(ctx));
    const oldSize = existing?.size ?? 0;
    if (Buffer.isBuffer(source)) await this.limits.check(t.path, lib.name, Math.max(source.length, opts.size ?? 0), oldSize, ctx);
    const chunks = Buffer.isBuffer(source) ? source : this.limits.limitSource(asBuffers(source), t.path, lib.name, oldSize, ctx, opts.size);
    const entry = await this.writeBack.replace(lib.name, t.fullpath, existing ?? undefined, chunks, ctx, opts);
    return this.lookups.toAttr(lib, entry);
  }

  // ---- namespace changes ----------------------------------------------------------------------------------

  async mkdir(path: string, ctx?: CallContext): Promise<Attr> {
    const p = parseGatewayPath(path);
    if (!p.library) throw new VfsError('EEXIST', 'the root exists');
    if (p.fullpath === '') throw new VfsError(this.libs.has(p.library) ? 'EEXIST' : 'EPERM', `libraries are not created through the gateway: ${p.path}`);
    const t = this.target(path);
    this.writable(t.path);
    await this.refuseInVersions(path, ctx);
    const lib = t.lib!;
    await this.unlinked.settle(lib.name, t.fullpath);
    if (await this.lookups.lookup(lib, t.fullpath, ctx)) throw new VfsError('EEXIST', `${t.path} exists`);
    await this.lookups.needFolder(lib, parentOf(t.fullpath), ctx);
    let entry: RemoteEntry;
    try {
      entry = await lib.remote.mkdir(t.fullpath, remoteCall(ctx));
    } catch (err) {
      if (!(err instanceof VfsError && err.unreachable)) throw err;
      // Offline: the folder is journaled, shown at once, and made on the service when it is back.
      const pending = await this.writeBack.pendingFolder(lib.name, t.fullpath);
      this.cache.setListing(lib.name, t.fullpath, []);
      return this.lookups.toAttr(lib, pending);
    }
    this.libs.ownUpsert(lib.name, entry);
    // The service makes a folder only where there was none (an existing name is refused): it is empty, so
    // looking up names in it (every file about to be created there) needs no request.
    this.cache.setListing(lib.name, entry.fullpath, []);
    return this.lookups.toAttr(lib, entry);
  }

  async unlink(path: string, ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'unlink');
    if (t.fullpath === '') throw new VfsError('EPERM', `cannot remove a library: ${t.path}`);
    this.writable(t.path);
    await this.refuseInVersions(path, ctx);
    if (isOfficeLockPath(t.path)) return this.lockFiles.unlink(t.path);
    const entry = await this.lookups.lookup(lib, t.fullpath, ctx);
    if (!entry) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (entry.isDir) throw new VfsError('EISDIR', `${t.path} is a folder (use rmdir)`);
    this.locks.assertHeld(lib.name, entry, ctx);
    if (this.unlinked.isRead(lib.name, t.fullpath) && !this.writeBack.entry(lib.name, t.fullpath) && !isUnsent(entry)) {
      // Handles still read it: gone from the namespace now, removed on the service after the last one
      // (as a local disk keeps an unlinked file readable until it is closed). Journaled: a crash still deletes it.
      await this.writeBack.deferDelete(lib.name, t.fullpath, entry.id, entry.contentHash);
      this.unlinked.hide(lib.name, t.fullpath);
      this.libs.ownRemove(lib.name, t.fullpath, false);
      return;
    }
    const base = this.writeBack.deleteBase(lib.name, t.fullpath, entry);
    await this.writeBack.removed(lib.name, t.fullpath);
    this.marks.forget(lib.name, t.fullpath);
    const remoteEntry = await lib.remote.stat(t.fullpath, remoteCall(ctx));
    // Changed elsewhere since the version deleted: that version stays (conflicts.ts).
    if (remoteEntry && this.writeBack.deleteKeeps(lib.name, t.fullpath, base, remoteEntry)) {
      this.libs.ownUpsert(lib.name, remoteEntry);
      return;
    }
    if (remoteEntry) await lib.remote.remove(t.fullpath, remoteCall(ctx));
    this.libs.ownRemove(lib.name, t.fullpath, remoteEntry?.isDir ?? entry.isDir);
  }

  async rmdir(path: string, ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'rmdir');
    if (t.fullpath === '') throw new VfsError('EPERM', `cannot remove a library: ${t.path}`);
    this.writable(t.path);
    await this.refuseInVersions(path, ctx);
    const entry = await this.lookups.lookup(lib, t.fullpath, ctx);
    if (!entry) throw new VfsError('ENOENT', `no such folder: ${t.path}`);
    if (!entry.isDir) throw new VfsError('ENOTDIR', `${t.path} is a file`);
    // Emptiness is checked on the service itself (not the cache) and against pending local files and lock files.
    const children = await lib.remote.list(t.fullpath, remoteCall(ctx));
    const pending = this.writeBack.hasWithin(lib.name, t.fullpath) || this.lockFiles.namesIn(t.path).length > 0;
    if (children.length > 0 || pending) throw new VfsError('ENOTEMPTY', `${t.path} is not empty`);
    await lib.remote.remove(t.fullpath, remoteCall(ctx));
    this.libs.ownRemove(lib.name, t.fullpath, true);
  }

  async rename(from: string, to: string, opts: { noReplace?: boolean } = {}, ctx?: CallContext): Promise<void> {
    await this.refuseInVersions(from, ctx);
    await this.refuseInVersions(to, ctx);
    if (this.target(from).path === this.target(to).path) {
      this.writable(from);
      return;
    }
    if (isOfficeLockPath(this.target(from).path) || isOfficeLockPath(this.target(to).path)) return this.lockFileTransfer('rename', from, to, opts, ctx);
    await this.renameOnService(from, to, opts, ctx);
    await this.lockFiles.moved(this.target(from).path, this.target(to).path, ctx);
  }

  /** Lock files move and copy among lock file names only (they are not the service's): else EXDEV. */
  private async lockFileTransfer(verb: 'rename' | 'copy', from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext): Promise<void> {
    const a = this.target(from);
    const b = this.target(to);
    this.writable(b.path);
    if (!isOfficeLockPath(a.path) || !isOfficeLockPath(b.path)) throw new VfsError('EXDEV', `lock files stay on the gateway: ${a.path} → ${b.path} is not a move between lock files`);
    await this.lookups.needFolder(this.needLibrary(b, verb), parentOf(b.fullpath), ctx);
    await this.lockFiles[verb](a.path, b.path, opts, ctx);
  }

  private async renameOnService(from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext): Promise<void> {
    const { a, b, src, dst, localMove } = await this.transferEnds('renamed', from, to, opts, ctx);
    if (dst) {
      if (src.isDir && !dst.isDir) throw new VfsError('ENOTDIR', `${b.path} is a file`);
      if (!src.isDir && dst.isDir) throw new VfsError('EISDIR', `${b.path} is a folder`);
      if (dst.isDir) await this.rmdir(b.path, ctx);
      else await this.unlink(b.path, ctx);
    }
    if (a.lib !== b.lib) {
      await this.transfer.copyAcross(a.lib, a.fullpath, b.lib, b.fullpath, ctx);
      await this.transfer.removeTree(a.lib, a.fullpath, src.isDir, ctx);
      return;
    }
    const lib = a.lib;
    if (!src.isDir) this.locks.assertHeld(lib.name, src, ctx);
    // Uploads under the source stop first; the local versions move with it and their uploads restart there.
    await this.writeBack.stopUploads(lib.name, a.fullpath);
    let onService: RemoteEntry | null = null;
    // A file made here of which nothing was ever sent has nothing to move on the service (a file someone
    // else made there meanwhile is theirs): no round trip (an rsync renames every file it writes).
    if (!localMove) {
      try {
        onService = await lib.remote.stat(a.fullpath, remoteCall(ctx));
        if (onService) await lib.remote.move(a.fullpath, b.fullpath, remoteCall(ctx));
      } catch (err) {
        this.writeBack.resumeUploads(lib.name, a.fullpath);
        throw err;
      }
    }
    await this.writeBack.moved(lib.name, a.fullpath, b.fullpath);
    this.libs.ownRemove(lib.name, a.fullpath, src.isDir);
    if (onService) this.libs.ownUpsert(lib.name, { ...onService, fullpath: b.fullpath, name: baseName(b.fullpath) });
    if (src.isDir) this.cache.invalidateListing(lib.name, b.fullpath);
  }

  async copy(from: string, to: string, opts: { noReplace?: boolean } = {}, ctx?: CallContext): Promise<void> {
    await this.refuseInVersions(to, ctx);
    const view = await this.versions.at(from, ctx);
    if (view) return this.copyVersion(view.path, to, opts, ctx);
    if (isOfficeLockPath(this.target(from).path) || isOfficeLockPath(this.target(to).path)) return this.lockFileTransfer('copy', from, to, opts, ctx);
    const { a, b, dst } = await this.transferEnds('copied', from, to, opts, ctx);
    if (dst) {
      if (dst.isDir) await this.transfer.removeTree(b.lib, b.fullpath, true, ctx);
      else await this.unlink(b.path, ctx);
    }
    const hasLocal = !!this.writeBack.current(a.lib.name, a.fullpath) || this.writeBack.hasWithin(a.lib.name, a.fullpath);
    if (a.lib === b.lib && !hasLocal) {
      await a.lib.remote.copy(a.fullpath, b.fullpath, remoteCall(ctx));
      this.libs.ownForget(b.lib.name, b.fullpath);
      return;
    }
    await this.transfer.copyAcross(a.lib, a.fullpath, b.lib, b.fullpath, ctx);
  }

  /** A version copied out of the view (restored): its bytes streamed into a file at `to`. */
  private async copyVersion(from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext): Promise<void> {
    const attr = await this.stat(from, ctx);
    if (attr.isDir) throw new VfsError('ENOTSUP', `${from}: folders of the versions view are not copied; copy its versions one by one`);
    if (opts.noReplace && (await this.stat(to, ctx).catch(() => undefined))) throw new VfsError('EEXIST', `${to} exists`);
    await this.writeFile(to, await this.createReadStream(from, {}, ctx), ctx, { size: attr.size });
  }

  /** Refuses (EROFS) a change of anything in the versions view. */
  private async refuseInVersions(path: string, ctx?: CallContext): Promise<void> {
    if (await this.versions.at(path, ctx)) throw this.versions.refusal(path);
  }

  /** Both ends of a rename or copy, checked: source exists, not into itself, target's folder exists, noReplace; `localMove`: a rename of a file the service has nothing of (moved here only). */
  private async transferEnds(verb: string, from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext):
    Promise<{ a: LibraryTarget; b: LibraryTarget; src: RemoteEntry; dst: RemoteEntry | null; localMove: boolean }> {
    const a = this.target(from);
    const b = this.target(to);
    if (!a.lib || a.fullpath === '' || !b.lib || b.fullpath === '') throw new VfsError('EPERM', `libraries cannot be ${verb} or replaced: ${a.path} → ${b.path}`);
    this.writable(b.path);
    const src = await this.lookups.entryOf(a.lib, a.fullpath, ctx);
    if (!src) throw new VfsError('ENOENT', `no such file or folder: ${a.path}`);
    if (src.isDir && a.lib === b.lib && isWithin(b.fullpath, a.fullpath)) throw new VfsError('EINVAL', `cannot put ${a.path} into itself`);
    await this.lookups.needFolder(b.lib, parentOf(b.fullpath), ctx);
    await this.unlinked.settle(b.lib.name, b.fullpath);
    // A file of which the service has nothing from here moves here only: its target is found as a create
    // finds its name (the cache, following the updates feed; a name made elsewhere meanwhile meets the
    // upload as it would meet a new file's). Otherwise the service is asked.
    const localMove = verb === 'renamed' && !src.isDir && a.lib === b.lib && this.writeBack.unsent(a.lib.name, a.fullpath);
    const dst = localMove ? await this.lookups.lookup(b.lib, b.fullpath, ctx) : await this.lookups.entryOf(b.lib, b.fullpath, ctx);
    if (dst && opts.noReplace) throw new VfsError('EEXIST', `${b.path} exists`);
    // Its upload will be a file made (or changed) at the target: a service that checks that per member is
    // asked now, as at a create, before anything changes.
    if (localMove) await b.lib.remote.checkWrite?.(b.fullpath, !!dst && !isUnsent(dst), remoteCall(ctx));
    return { a: a as LibraryTarget, b: b as LibraryTarget, src, dst, localMove };
  }

  async setTimes(path: string, mtimeMs: number, ctx?: CallContext): Promise<void> {
    if (!Number.isFinite(mtimeMs)) throw new VfsError('EINVAL', `expected a time in ms, got ${mtimeMs}`);
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setTimes');
    this.writable(t.path);
    await this.refuseInVersions(path, ctx);
    if (isOfficeLockPath(t.path)) return this.lockFiles.setTimes(t.path, mtimeMs);
    if (await this.writeBack.setTimes(lib.name, t.fullpath, mtimeMs)) return;
    const e = await this.lookups.lookup(lib, t.fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    this.times.set(lib.name, e.id, versionOf(e), mtimeMs);
  }

  // ---- extended operations ---------------------------------------------------------------------------------

  async getTags(path: string, ctx?: CallContext): Promise<string[]> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'getTags');
    if (t.fullpath === '') throw new VfsError('ENOTSUP', `libraries have no tags: ${t.path}`);
    // Versions have no tags of their own.
    if (await this.versions.at(path, ctx)) return [];
    const local = this.writeBack.entry(lib.name, t.fullpath);
    if (local && isUnsent(local)) return this.marks.tags(lib.name, t.fullpath) ?? local.tags ?? [];
    if (lib.remote.tags) {
      const tags = await lib.remote.tags(t.fullpath, remoteCall(ctx));
      if (tags === null) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
      return tags;
    }
    const e = await lib.remote.stat(t.fullpath, remoteCall(ctx));
    if (!e) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    return e.tags ?? [];
  }

  async setTags(path: string, tags: string[], ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setTags');
    if (t.fullpath === '') throw new VfsError('ENOTSUP', `libraries have no tags: ${t.path}`);
    this.writable(t.path);
    await this.refuseInVersions(path, ctx);
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
    await lib.remote.removeTags(t.fullpath, current.filter((x) => !wanted.includes(x)), remoteCall(ctx));
    await lib.remote.addTags(t.fullpath, wanted.filter((x) => !current.includes(x)), remoteCall(ctx));
    this.libs.ownForget(lib.name, t.fullpath);
    this.writeBack.patchBase(lib.name, t.fullpath, { tags: wanted });
  }

  async setLocked(path: string, locked: boolean, ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setLocked');
    if (t.fullpath === '') throw new VfsError('ENOTSUP', `libraries cannot be locked: ${t.path}`);
    if (isOfficeLockPath(t.path)) throw new VfsError('ENOTSUP', `lock files stay on the gateway and have no service lock: ${t.path}`);
    if (!(this.unlockingAtClose && !locked)) this.writable(t.path);
    await this.refuseInVersions(path, ctx);
    const e = await this.lookups.lookup(lib, t.fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (e.isDir) throw new VfsError('ENOTSUP', `folders cannot be locked: ${t.path}`);
    this.locks.assertMayLock(lib.name, t.fullpath, t.path, ctx);
    // An unlock (a WebDAV UNLOCK, say) while the holder's Office lock file stands: the lock file keeps it.
    if (!locked && this.lockFiles.holds(t.path, ctx?.lockHolder ?? '')) return;
    if (isUnsent(e)) {
      // Not on the service yet: the gateway holds the lock from now on, the service takes it with the file.
      this.marks.setLock(lib.name, t.fullpath, locked, ctx?.operator);
      this.locks.set(lib.name, t.fullpath, locked, ctx);
      this.noteLock(lib.name, t.fullpath, locked, ctx);
      this.changes.lockChanged(t.path, locked, ctx?.operator?.opName);
      return;
    }
    await lib.remote.lock(t.fullpath, locked, remoteCall(ctx));
    this.locks.set(lib.name, t.fullpath, locked, ctx);
    this.noteLock(lib.name, t.fullpath, locked, ctx);
    this.changes.lockChanged(t.path, locked, ctx?.operator?.opName);
    this.libs.ownForget(lib.name, t.fullpath);
    this.writeBack.patchBase(lib.name, t.fullpath, { locked });
  }

  /** Who locked a file through this gateway, for its state (`locked-by <name>`). */
  private noteLock(library: string, fullpath: string, locked: boolean, ctx?: CallContext): void {
    if (locked) this.states.lockTaken(library, fullpath, ctx?.operator?.opName);
    else this.states.lockReleased(library, fullpath);
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
    if (!(await this.lookups.lookup(t.lib, t.fullpath, ctx))) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
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
      stat: (fp) => this.lookups.lookup(lib, fp, ctx),
      list: (fp) => this.lookups.listDir(lib, fp, ctx),
      kept: (fp) => !!this.pins?.pinned(lib.name, fp) || this.writeBack.dirty(lib.name, fp) || !!this.writeBack.entry(lib.name, fp),
    });
  }

  /** Office lock files kept here (a member's session holding any is not closed for idleness). */
  lockFilesHeld(): number {
    return this.lockFiles.count();
  }

  // ---- lifecycle ------------------------------------------------------------------------------------------

  async flushAll(opts: { timeoutMs?: number } = {}): Promise<void> {
    await this.writeBack.flushAll(opts);
  }

  /** What the gateway is doing (for the control socket). */
  status(): GatewayStatus {
    // A conflict copy known gone (removed or renamed) closes its conflict.
    const wb = this.writeBack.status((name, fullpath) => this.cache.getEntry(name, fullpath) === null);
    return {
      libraries: this.libs.all().map((l) => ({ ...this.connectivity.of(l.name), pendingUploads: wb.uploads.filter((u) => u.library === l.name).length })),
      uploads: wb.uploads,
      stranded: wb.stranded,
      pins: this.pins?.status(),
      conflicts: wb.conflicts,
      feeds: this.libs.feedStatus(),
      localFiles: wb.localFiles,
      metadata: this.cache.stats(),
      blocks: this.blocks.stats(),
      disk: this.disk?.stats(),
    };
  }

  /** Library folder names, in order. */
  libraryNames(): string[] {
    return this.libs.names();
  }

  /** The Remote of a library folder, as given (tests: fault injection). */
  remoteOf(name: string): Remote | undefined {
    return this.libs.get(name)?.given;
  }

  /** Polls every library's feed now (tests, `cloudlib ctl refresh`). */
  async refresh(): Promise<void> {
    await this.libs.pollFeeds();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // The locks lock files took go first, while the service is served (else the next start releases them).
    this.unlockingAtClose = true;
    await this.lockFiles.close();
    this.unlockingAtClose = false;
    await this.pins?.close();
    await this.libs.stopFeeds();
    // Open versions reach the journal; uploads under way stop (their journal entries stay).
    await this.writeBack.close();
    await this.hasher.close();
    await this.sha1Streams.close();
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
      if (!e) this.libs.ownUpsert(lib.name, await lib.remote.mkdir(at));
    }
  }

  // ---- the FUSE engine's own answers (engine-hand-over.ts) -------------------------------------------------

  sideJournal(): SideJournal | undefined {
    return this.engine.sideJournal();
  }

  // ---- the engine lease (engine-lease.ts): what the write-back lends the FUSE engine ------------------------

  readonly engineLease: EngineLease = {
    open: (path, flags, ctx, opts) => this.open(path, opts?.journalId === undefined ? flags : { ...flags, journalId: opts.journalId }, ctx),
    cachedNames: (path, max) => this.cachedNames(path, max),
    unlistedNames: (path, listed) => this.unlistedNames(path, listed),
    sideJournal: () => this.sideJournal(),
    answeredClosesIn: (path) => this.answeredClosesIn(path),
    createClosed: (files, ctx) => this.createClosed(files, ctx),
  };

  async createClosed(files: readonly ClosedCreate[], ctx?: CallContext): Promise<boolean[]> {
    // Lock files the engine closed stay on the gateway: taken from their records, never journaled.
    const lockFile = (f: ClosedCreate): boolean => !this.opts.readOnly && !!this.target(f.path).lib && isOfficeLockPath(this.target(f.path).path);
    const others = files.filter((f) => !lockFile(f));
    const made = others.length > 0 ? await this.engine.createClosed(others, ctx) : [];
    let at = 0;
    const out: boolean[] = [];
    for (const f of files) out.push(lockFile(f) ? await this.lockFiles.createClosed(this.target(f.path).path, f, this.writeBack.sideJournal(), ctx).catch(() => false) : made[at++]!);
    return out;
  }

  answeredClosesIn(path: string): { library: string; fullpath: string } | undefined {
    if (VersionsView.names(path)) return undefined;
    return this.engine.answeredClosesIn(path);
  }

  cachedNames(path: string, max: number): string[] | undefined {
    if (VersionsView.names(path)) return undefined;
    const listed = this.engine.cachedNames(path, max);
    if (!listed) return undefined;
    const names = [...listed.filter((n) => !isOfficeLockName(n)), ...this.lockFiles.namesIn(this.target(path).path)];
    return names.length > max ? undefined : [...names, ...this.unlistedNames(path, names)!];
  }

  unlistedNames(path: string, listed: readonly string[]): string[] | undefined {
    if (VersionsView.names(path)) return undefined;
    const t = this.target(path);
    // The versions view is found by its name at a library's root, though no listing shows it.
    return t.lib && t.fullpath === '' && this.versions.shownIn(t.lib.name, listed) ? [VERSIONS_FOLDER] : [];
  }

  // ---- internals ------------------------------------------------------------------------------------------

  private target(path: string): Target {
    return this.libs.target(path);
  }

  private needLibrary(t: Target, what: string): Library {
    if (!t.lib) throw new VfsError('EISDIR', `${what}: the root is a folder`);
    return t.lib;
  }

  private writable(path: string): void {
    if (this.opts.readOnly) throw new VfsError('EROFS', `read-only gateway: ${path}`);
    if (this.closed) throw new VfsError('EIO', 'gateway closed');
  }
}

/** A stream's chunks as Buffers. */
async function* asBuffers(source: AsyncIterable<Buffer | string>): AsyncGenerator<Buffer> {
  for await (const chunk of source) yield typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
}

export type { PendingFile, GatewayVfsOptions };
