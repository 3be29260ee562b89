/**
 * GatewayVfs: the Vfs over a set of libraries, the namespace. The root lists one folder per library;
 * inside, gateway paths map one to one to the library's `fullpath`. This file holds the operations (the
 * checks each makes, then the part that answers) and how the parts are wired: the libraries served and
 * their feeds (library-folders.ts), lookups and listings (namespace-lookups.ts), reads of service files
 * (service-reads.ts), quotas (library-quotas.ts), renames and copies (library-moves.ts), tags and service
 * locks (file-marks.ts), files unlinked while read (unlinked-while-read.ts), pins and freed space
 * (kept-on-machine.ts), the namespaces the gateway keeps itself, the versions view and Office lock files
 * (gateway-namespaces.ts: asked first, each answers its own paths), what the FUSE engine answers itself
 * (namespace-lease.ts) and the status (gateway-status.ts). Metadata comes from the MetadataCache (kept
 * coherent by one UpdatesFeed per library and updated at once by the gateway's own changes). Everything
 * written is handed to the WriteBack, the one owner of local versions, their journal and their uploads.
 * What is and is not POSIX here is written down in docs/semantics.md.
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
import { parentOf, type Remote, type RemoteEntry } from './remote.js';
import { Connectivity } from './connectivity.js';
import { SizeLimits } from './size-limits.js';
import { PendingMarks } from './pending-marks.js';
import { TimeOverrides } from './time-overrides.js';
import { FileHasher, Sha1Streams, WriteBack, type PendingFile } from './write-back/index.js';
import { ForegroundActivity } from './foreground-activity.js';
import { FileStates } from './file-state.js';
import { VfsError, type Attr, type CallContext, type StatFs, type Vfs } from './types.js';
import type { ClosedCreate, EngineLease, LeasedHandle, LeaseOpenFlags, SideJournal } from './engine-lease.js';
import { GatewayNamespaces } from './gateway-namespaces.js';
import { VersionsNamespace } from './versions-namespace.js';
import { LockFileNamespace } from './lock-file-namespace.js';
import { ChangeEvents } from './change-events.js';
import { CacheBudget } from './cache-budget.js';
import { PinMarks } from './pin-marks.js';
import { PinnedContent } from './pinned-content.js';
import { KeptOnMachine } from './kept-on-machine.js';
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
import { LibraryMoves } from './library-moves.js';
import { FileMarks } from './file-marks.js';
import { NamespaceLease } from './namespace-lease.js';
import { systemClock } from './clock.js';
import { gatewayStatus, type GatewayStatus } from './gateway-status.js';

export type { GatewayStatus };

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
  readonly changes: ChangeEvents;
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
  /** Tags and service locks of files (file-marks.ts). */
  private readonly fileMarks: FileMarks;
  /** Renames and copies, inside and between libraries (library-moves.ts). */
  private readonly moves: LibraryMoves;
  /** What the FUSE engine is lent to answer by itself (namespace-lease.ts; the write-back lends the rest). */
  readonly engineLease: EngineLease;
  private readonly logger: Logger;
  /** The gateway's own namespaces in the libraries' folders: the versions view, Office lock files (gateway-namespaces.ts). */
  private readonly namespaces: GatewayNamespaces;
  /** Each file's state in one word (file-state.ts); `conflictOf` is set by whoever knows conflicts. */
  readonly states: FileStates;
  /** The cache's limit, and what it never evicts (pinned, open). */
  private readonly budget: CacheBudget | undefined;
  /** Files and folders kept on this machine (pinned-content.ts); only with a disk cache. */
  private readonly pins: PinnedContent | undefined;
  /** Pins and freeing up space, for paths of the namespace (kept-on-machine.ts). */
  private readonly kept: KeptOnMachine;
  /** Office and LibreOffice lock files: kept here, turned into service locks of their documents (one of the namespaces). */
  private readonly lockFiles: LockFileNamespace;
  /** close() is closing the gateway-side namespaces: the unlocks they make pass though the gateway is closed. */
  private unlockingAtClose = false;
  private closed = false;

  private constructor(private readonly opts: GatewayVfsOptions) {
    this.logger = opts.logger;
    const clock = opts.clock ?? systemClock;
    this.changes = new ChangeEvents((err) => this.logger.warn({ err: String(err) }, 'a listener of changes failed'), clock);
    this.sha1Streams = new Sha1Streams(clock);
    const feedOn = (opts.feedIntervalMs ?? 2000) > 0;
    this.cache = new MetadataCache({
      maxEntries: opts.cache?.metadataEntries, maxBytes: opts.cache?.metadataBytes, ttlMs: opts.cache?.ttlMs ?? (feedOn ? 0 : 1000), clock: opts.clock,
    });
    this.blocks = new BlockCache({ maxBytes: opts.cache?.blockBytes, blockSize: opts.cache?.blockSize });
    const diskBytes = opts.cache?.diskBytes ?? 0;
    const contentDir = join(opts.dataDir, 'content');
    this.budget = diskBytes > 0 ? new CacheBudget({ dir: contentDir, maxBytes: diskBytes, minFreeFraction: (opts.cache?.minFreePercent ?? 5) / 100, clock }) : undefined;
    this.disk = this.budget ? new ContentCache({ dir: contentDir, maxBytes: diskBytes, budget: this.budget, clock, logger: opts.logger }) : undefined;
    this.pins = this.disk && this.budget ? new PinnedContent({
      marks: new PinMarks(join(opts.dataDir, 'pins', 'marks.json')), disk: this.disk, budget: this.budget, dir: join(opts.dataDir, 'pins'),
      remoteFor: (name) => this.libs.get(name)?.remote, logger: opts.logger, clock,
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
    this.libs = new LibraryFolders({ cache: this.cache, connectivity: this.connectivity, dataDir: opts.dataDir, feedIntervalMs: opts.feedIntervalMs ?? 2000, clock, logger: opts.logger, onChange: (name, change, before) => {
      // A file with local content not yet all on the service shows that content, whatever the feed brings.
      const local = change.kind === 'upsert' && !change.entry.isDir && this.writeBack.dirty(name, change.entry.fullpath);
      this.changes.publish(name, change, local ? { ...before, local: true } : before);
      this.pins?.changed(name, change);
    } });
    this.quotas = new LibraryQuotas(this.libs, clock, opts.logger);
    const backpressure = opts.maxPendingBytes ? new UploadBackpressure({ maxBytes: opts.maxPendingBytes, clock, pendingBytes: () => this.writeBack.uploads.status().reduce((n, u) => n + (u.size ?? 0), 0) }) : undefined;
    this.limits = new SizeLimits({
      maxFileBytes: opts.maxFileBytes, freeBytes: (name, ctx) => this.quotas.freeBytes(name, ctx),
      ...(backpressure ? { room: (path: string, size: number, ctx: CallContext | undefined, wait: boolean) => backpressure.admit(path, size, ctx, { wait }) } : {}),
    });
    this.writeBack = new WriteBack({
      journalDir: join(opts.dataDir, 'journal'), hasher: this.hasher, sha1Streams: this.sha1Streams, clock,
      // Bytes written where no handle's write saw them (the FUSE engine's, the kernel's) are checked at the seal.
      sizeCheck: (name, fullpath, size, oldSize) => this.limits.check(gatewayPathOf(name, fullpath), name, size, oldSize, undefined, this.quotas.knownFreeBytes(name)),
      upload: opts.upload, foreground: this.foreground, partialFetch: opts.partialFetch, unwrittenSpoolBytes: opts.unwrittenSpoolBytes, logger: opts.logger, diskFaults: opts.diskFaults, durability: opts.durability,
      host: {
        remoteFor: (name) => this.libs.get(name)?.remote,
        baseReader: (name, base, ctx) => this.reads.reader(this.libs.get(name)!, base, ctx),
        uploaded: (name, entry, mtimeMs) => {
          this.libs.ownUpsert(name, entry);
          if (entry.contentHash) this.times.set(name, entry.id, versionOf(entry), mtimeMs);
          void this.fileMarks.uploaded(name, entry.fullpath);
        },
        ensureParents: (name, fullpath) => this.libs.ensureParents(name, fullpath),
        deleted: (name, fullpath) => {
          this.unlinked.removed(name, fullpath);
          this.libs.ownRemove(name, fullpath, false);
        },
        gatewayOnly: (name, fullpath) => this.namespaces.keptHere(gatewayPathOf(name, fullpath)),
        attrOf: (name, entry) => {
          const lib = this.libs.get(name);
          return lib ? this.lookups.toAttr(lib, entry) : { path: gatewayPathOf(name, entry.fullpath), name: entry.name, isDir: false, size: entry.size, mtimeMs: entry.mtimeMs, ctimeMs: entry.ctimeMs, dirty: true };
        },
      },
    });
    this.unlinked = new UnlinkedWhileRead(this.writeBack);
    this.lookups = new NamespaceLookups({ cache: this.cache, writeBack: this.writeBack, unlinked: this.unlinked, times: this.times, connectivity: this.connectivity, openedMs: clock.now(), stateOf: (name, e) => this.states.of(name, e), lockHolderOf: (name, fullpath) => this.locks.holderOf(name, fullpath), pinned: this.pins });
    this.reads = new ServiceReads({
      blocks: this.blocks, disk: this.disk, budget: new ReadAheadBudget(opts.readAhead?.totalBytes ?? 256 * 1024 * 1024), readAhead: opts.readAhead,
      cache: this.cache, writeBack: this.writeBack, unlinked: this.unlinked, logger: opts.logger, hold: (hash) => this.budget?.hold(hash),
      pinned: (name, fullpath) => this.pins?.pinned(name, fullpath) ?? false,
    });
    this.kept = new KeptOnMachine({ pins: this.pins, disk: this.disk, lookups: this.lookups, writeBack: this.writeBack });
    this.fileMarks = new FileMarks({
      libs: this.libs, lookups: this.lookups, writeBack: this.writeBack, marks: this.marks, locks: this.locks, states: this.states, changes: this.changes,
      keepsLock: (document, holder) => this.namespaces.keepsLock(document, holder),
    });
    this.moves = new LibraryMoves({
      libs: this.libs, cache: this.cache, lookups: this.lookups, unlinked: this.unlinked, writeBack: this.writeBack, locks: this.locks, gateway: this,
      transfer: new TreeTransfer({ libs: this.libs, lookups: this.lookups, writeBack: this.writeBack, hasher: this.hasher }), writable: (path) => this.writable(path),
    });
    this.namespaces = new GatewayNamespaces([
      new VersionsNamespace({ libs: this.libs, lookups: this.lookups, reads: this.reads, gateway: this, clock }),
      (this.lockFiles = new LockFileNamespace({
        dataDir: opts.dataDir, logger: opts.logger, libs: this.libs, lookups: this.lookups, readOnly: !!opts.readOnly,
        documents: { setLocked: (p, locked, ctx) => this.setLocked(p, locked, ctx), names: async (folder, ctx) => (await this.readdir(folder, ctx)).map((a) => a.name) },
        writable: (path) => this.writable(path), sideJournal: () => this.writeBack.sideJournal(),
        releaseGraceMs: opts.officeLockReleaseGraceMs ?? 2000, clock,
      })),
    ]);
    this.engineLease = new NamespaceLease({
      libs: this.libs, cache: this.cache, lookups: this.lookups, unlinked: this.unlinked, writeBack: this.writeBack, namespaces: this.namespaces,
      readOnly: !!opts.readOnly, writable: (path) => this.writable(path), closed: () => this.closed, open: (path, flags, ctx) => this.open(path, flags, ctx),
    });
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
    await this.namespaces.start();
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
    const own = await this.namespaces.answer('stat', path, ctx);
    if (own) return own(path, ctx);
    const t = this.target(path);
    if (!t.lib) return this.lookups.rootAttr();
    const e = opts.fresh && t.fullpath !== '' ? await this.lookups.entryOf(t.lib, t.fullpath, ctx) : await this.lookups.lookup(t.lib, t.fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    return this.lookups.toAttr(t.lib, e);
  }

  async readdir(path: string, ctx?: CallContext): Promise<Attr[]> {
    const own = await this.namespaces.answer('readdir', path, ctx);
    if (own) return own(path, ctx);
    const t = this.target(path);
    if (!t.lib) return this.libs.all().map((l) => this.lookups.libraryAttr(l));
    const entries = await this.lookups.listDir(t.lib, t.fullpath, ctx);
    // A name a gateway-side namespace keeps in this folder is its own: any of the service's is not shown.
    return [...entries.filter((e) => !this.namespaces.hidden(e.name)).map((e) => this.lookups.toAttr(t.lib!, e)), ...(await this.namespaces.list(t.path))];
  }

  async readOnlyAt(path: string, ctx?: CallContext): Promise<boolean> {
    return this.namespaces.readOnlyAt(path, ctx);
  }

  async statfs(path: string, ctx?: CallContext): Promise<StatFs> {
    const t = this.target(path);
    return this.quotas.statfs(t.lib ? [t.lib] : this.libs.all(), ctx);
  }

  // ---- reads and writes -----------------------------------------------------------------------------------

  async open(path: string, flags: LeaseOpenFlags, ctx?: CallContext): Promise<LeasedHandle> {
    const own = await this.namespaces.answer('open', path, ctx);
    if (own) return own(path, flags, ctx);
    const t = this.target(path);
    const lib = this.needLibrary(t, 'open');
    const writing = !!(flags.write || flags.create || flags.truncate || flags.append);
    if (writing) this.writable(t.path);
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
    await lib.remote.checkWrite?.(t.fullpath, !!existing && !isUnsent(existing), remoteCall(ctx));
    // The service's version is the base when nothing is local (else the local version is).
    const base = existing && !this.writeBack.current(lib.name, t.fullpath) ? existing : undefined;
    const handle = await this.writeBack.openWrite(lib.name, t.fullpath, existing ? base ?? existing : undefined, flags, ctx);
    return this.limits.limit(handle, lib.name, (await handle.stat()).size, ctx);
  }

  async createReadStream(path: string, range: { start?: number; end?: number } = {}, ctx?: CallContext): Promise<Readable> {
    const own = await this.namespaces.answer('createReadStream', path, ctx);
    if (own) return own(path, range, ctx);
    const t = this.target(path);
    const lib = this.needLibrary(t, 'read');
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
    const own = await this.namespaces.answer('writeFile', path, ctx);
    if (own) return own(path, source, ctx);
    const t = this.target(path);
    const lib = this.needLibrary(t, 'write');
    this.writable(t.path);
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
    const own = await this.namespaces.answer('mkdir', path, ctx);
    if (own) return own(path, ctx);
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
    const own = await this.namespaces.answer('unlink', path, ctx);
    if (own) return own(path, ctx);
    const entry = await this.lookups.lookup(lib, t.fullpath, ctx);
    if (!entry) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (entry.isDir) throw new VfsError('EISDIR', `${t.path} is a folder (use rmdir)`);
    this.locks.assertHeld(lib.name, entry, ctx);
    if (this.unlinked.isRead(lib.name, t.fullpath) && !this.writeBack.entry(lib.name, t.fullpath) && !isUnsent(entry)) {
      // Handles still read it: gone from the namespace now, removed on the service after the last one
      // (as a local disk keeps an unlinked file readable until it is closed). Journaled: a crash still deletes it.
      await this.writeBack.deferDelete(lib.name, t.fullpath, entry.id, entry.contentHash);
      this.writeBack.removedOnService(lib.name, t.fullpath);
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
    this.writeBack.removedOnService(lib.name, t.fullpath);
    this.libs.ownRemove(lib.name, t.fullpath, remoteEntry?.isDir ?? entry.isDir);
  }

  async rmdir(path: string, ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'rmdir');
    if (t.fullpath === '') throw new VfsError('EPERM', `cannot remove a library: ${t.path}`);
    this.writable(t.path);
    const own = await this.namespaces.answer('rmdir', path, ctx);
    if (own) return own(path, ctx);
    const entry = await this.lookups.lookup(lib, t.fullpath, ctx);
    if (!entry) throw new VfsError('ENOENT', `no such folder: ${t.path}`);
    if (!entry.isDir) throw new VfsError('ENOTDIR', `${t.path} is a file`);
    // Emptiness is checked on the service itself (not the cache) and against pending local files and the gateway-side namespaces' names.
    const children = await lib.remote.list(t.fullpath, remoteCall(ctx));
    const pending = this.writeBack.hasWithin(lib.name, t.fullpath) || this.namespaces.namesIn(t.path).length > 0;
    if (children.length > 0 || pending) throw new VfsError('ENOTEMPTY', `${t.path} is not empty`);
    await lib.remote.remove(t.fullpath, remoteCall(ctx));
    this.libs.ownRemove(lib.name, t.fullpath, true);
  }

  async rename(from: string, to: string, opts: { noReplace?: boolean } = {}, ctx?: CallContext): Promise<void> {
    const own = await this.namespaces.answerEither('rename', from, to, ctx);
    if (own) return own(from, to, opts, ctx);
    if (this.target(from).path === this.target(to).path) {
      this.writable(from);
      return;
    }
    await this.moves.rename(from, to, opts, ctx);
    await this.namespaces.moved(from, to, ctx);
  }

  async copy(from: string, to: string, opts: { noReplace?: boolean } = {}, ctx?: CallContext): Promise<void> {
    const own = await this.namespaces.answerEither('copy', from, to, ctx);
    if (own) return own(from, to, opts, ctx);
    await this.moves.copy(from, to, opts, ctx);
  }

  async setTimes(path: string, mtimeMs: number, ctx?: CallContext): Promise<void> {
    if (!Number.isFinite(mtimeMs)) throw new VfsError('EINVAL', `expected a time in ms, got ${mtimeMs}`);
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setTimes');
    this.writable(t.path);
    const own = await this.namespaces.answer('setTimes', path, ctx);
    if (own) return own(path, mtimeMs, ctx);
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
    const own = await this.namespaces.answer('getTags', path, ctx);
    if (own) return own(path, ctx);
    return this.fileMarks.tags(lib, t, ctx);
  }

  async setTags(path: string, tags: string[], ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setTags');
    if (t.fullpath === '') throw new VfsError('ENOTSUP', `libraries have no tags: ${t.path}`);
    this.writable(t.path);
    const own = await this.namespaces.answer('setTags', path, ctx);
    if (own) return own(path, tags, ctx);
    await this.fileMarks.setTags(lib, t, tags, ctx);
  }

  async setLocked(path: string, locked: boolean, ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setLocked');
    if (t.fullpath === '') throw new VfsError('ENOTSUP', `libraries cannot be locked: ${t.path}`);
    const own = await this.namespaces.answer('setLocked', path, ctx);
    if (own) return own(path, locked, ctx);
    if (!(this.unlockingAtClose && !locked)) this.writable(t.path);
    await this.fileMarks.setLocked(lib, t, locked, ctx);
  }

  // ---- kept on this machine (pins) and freeing up space ------------------------------------------------

  /** Pins (keeps on this machine) or unpins a file or folder (kept-on-machine.ts). */
  async setPinned(path: string, pinned: boolean, _ctx?: CallContext): Promise<{ files: number; bytes: number } | undefined> {
    const t = this.target(path);
    this.needLibrary(t, pinned ? 'pin' : 'unpin');
    return this.kept.setPinned(t as LibraryTarget, pinned);
  }

  /** True when the path is pinned (itself or by a folder above it). */
  async pinned(path: string, ctx?: CallContext): Promise<boolean> {
    return this.kept.pinned(this.target(path), ctx);
  }

  /** Resolves once every pinned file queued is fetched (or failed: see status). */
  async pinsFetched(): Promise<void> {
    await this.kept.fetched();
  }

  /** Free up space: drops the cached content of the files under a path that are not kept (kept-on-machine.ts). */
  async evict(path: string, ctx?: CallContext): Promise<{ files: number; bytes: number }> {
    const t = this.target(path);
    this.needLibrary(t, 'evict');
    return this.kept.evict(t as LibraryTarget, ctx);
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
    return gatewayStatus({ writeBack: this.writeBack, cache: this.cache, libs: this.libs, connectivity: this.connectivity, blocks: this.blocks, disk: this.disk, pins: this.pins });
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
    await this.namespaces.close();
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

  // ---- the FUSE engine's own answers (namespace-lease.ts) -------------------------------------------------

  sideJournal(): SideJournal | undefined {
    return this.engineLease.sideJournal();
  }

  createClosed(files: readonly ClosedCreate[], ctx?: CallContext): Promise<boolean[]> {
    return this.engineLease.createClosed(files, ctx);
  }

  answeredClosesIn(path: string): { library: string; fullpath: string } | undefined {
    return this.engineLease.answeredClosesIn(path);
  }

  cachedNames(path: string, max: number): string[] | undefined {
    return this.engineLease.cachedNames(path, max);
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
