/**
 * How the gateway finds what a path is: a local file (the WriteBack's) first, then the metadata cache,
 * then the service; folder listings with local files laid over them; and entries as the Attrs the front
 * ends see (the times programs set, `dirty`, `stale` while the library is offline).
 */
import { gatewayPathOf } from './gateway-path.js';
import type { MetadataCache } from './metadata-cache.js';
import { parentOf, type RemoteEntry } from './remote.js';
import type { Connectivity } from './connectivity.js';
import type { TimeOverrides } from './time-overrides.js';
import type { WriteBack } from './write-back/index.js';
import { remoteCall, type Library } from './library-folders.js';
import type { UnlinkedWhileRead } from './unlinked-while-read.js';
import { VfsError, type Attr, type CallContext } from './types.js';

export interface NamespaceLookupsOptions {
  cache: MetadataCache;
  writeBack: WriteBack;
  unlinked: UnlinkedWhileRead;
  times: TimeOverrides;
  connectivity: Connectivity;
  /** When the gateway opened, ms since the epoch: the time of the root and the library folders. */
  openedMs: number;
  /** Who holds a file's lock taken through this gateway (CallContext.lockHolder), shown with its attributes. */
  lockHolderOf?: (library: string, fullpath: string) => string | undefined;
  /** A file's state in one word (file-state.ts), shown with its attributes. */
  stateOf?: (library: string, e: RemoteEntry) => Attr['state'];
  /** What the pins know of a path (pinned-content.ts): answered while the service is away. */
  pinned?: { entry(library: string, fullpath: string): RemoteEntry | null | undefined; listing(library: string, fullpath: string): RemoteEntry[] | undefined };
}

export class NamespaceLookups {
  /** Service lookups under way of files whose lock state the cache does not know, by `library\0fullpath`. */
  private readonly lockQueries = new Map<string, Promise<RemoteEntry | null>>();

  constructor(private readonly opts: NamespaceLookupsOptions) {}

  /** An entry as the gateway sees it: a local file first, then the cache, then the service. */
  async lookup(lib: Library, fullpath: string, ctx?: CallContext): Promise<RemoteEntry | null> {
    const { cache } = this.opts;
    if (fullpath === '') return { id: lib.id, fullpath: '', name: lib.name, isDir: true, size: 0, mtimeMs: this.opts.openedMs, ctimeMs: this.opts.openedMs };
    const known = this.knownHere(lib, fullpath);
    if (known) return known.cached && known.entry && this.lockUnknown(lib, known.entry) ? this.withLockState(lib, known.entry) : known.entry;
    const away = this.pinnedWhileOffline(lib, this.opts.pinned?.entry(lib.name, fullpath));
    if (away !== undefined) return away;
    let e: RemoteEntry | null;
    try {
      e = await lib.remote.stat(fullpath, remoteCall(ctx));
    } catch (err) {
      return this.pinnedWhenAway(err, this.opts.pinned?.entry(lib.name, fullpath)); // not cached: the service's word only
    }
    cache.setEntry(lib.name, fullpath, e);
    return e;
  }

  /** Whether a lookup of `fullpath` (in a library, not its root) finds nothing, known without asking the service. */
  knownMissing(lib: Library, fullpath: string): boolean {
    return this.knownHere(lib, fullpath)?.entry === null;
  }

  /**
   * What a lookup of `fullpath` (not the root) finds without asking the service: a local file, nothing
   * for a name being removed, or the cache's word (`cached`; a child of a folder known missing is known
   * missing too); undefined when only the service can tell.
   */
  private knownHere(lib: Library, fullpath: string): { entry: RemoteEntry | null; cached: boolean } | undefined {
    const { cache, writeBack, unlinked } = this.opts;
    const local = writeBack.entry(lib.name, fullpath);
    if (local) return { entry: local, cached: false };
    if (unlinked.isHidden(lib.name, fullpath)) return { entry: null, cached: false };
    // A path below a pending new file cannot exist; a parent known missing answers for its children.
    const cached = cache.getEntry(lib.name, fullpath);
    if (cached !== undefined) return { entry: cached, cached: true };
    const parent = parentOf(fullpath);
    if (parent !== '' && cache.getEntry(lib.name, parent) === null) return { entry: null, cached: true };
    return undefined;
  }

  /**
   * A cached file whose lock state is unknown (the feed brought it), with its lock: one lookup on the
   * service, shared by the callers that need it meanwhile, cached until the feed brings the file again. A
   * lock held through this gateway is known from its holds (toAttr); with the service away, the entry
   * stands as it is.
   */
  private async withLockState(lib: Library, cached: RemoteEntry): Promise<RemoteEntry | null> {
    if (!this.lockUnknown(lib, cached) || !this.opts.connectivity.online(lib.name)) return cached;
    const k = `${lib.name}\0${cached.fullpath}`;
    let query = this.lockQueries.get(k);
    if (!query) {
      // No caller's signal: the lookup is shared, one caller giving up does not end it for the others.
      query = lib.remote.stat(cached.fullpath).then((e) => {
        if (this.opts.cache.getEntry(lib.name, cached.fullpath) === cached) this.opts.cache.setEntry(lib.name, cached.fullpath, e);
        return e;
      }).finally(() => this.lockQueries.delete(k));
      this.lockQueries.set(k, query);
    }
    try {
      return await query;
    } catch (err) {
      if (err instanceof VfsError && err.unreachable) return cached;
      throw err;
    }
  }

  /** Whether the cache does not know `e`'s lock and no lock held through this gateway answers for it. */
  private lockUnknown(lib: Library, e: RemoteEntry): boolean {
    return this.opts.cache.lockIsUnknown(e) && this.opts.lockHolderOf?.(lib.name, e.fullpath) === undefined;
  }

  /** While the library is offline, what the pins know answers at once (the service is not asked first). */
  private pinnedWhileOffline<T>(lib: Library, pinned: T | undefined): T | undefined {
    return pinned !== undefined && !this.opts.connectivity.online(lib.name) ? pinned : undefined;
  }

  /** With the service away, what the pins know answers (pinned-content.ts); otherwise the error stands. */
  private pinnedWhenAway<T>(err: unknown, pinned: T | undefined): T {
    if (pinned === undefined || !(err instanceof VfsError && err.unreachable)) throw err;
    return pinned;
  }

  /** As lookup, without the cache for the final answer (before a change). */
  async entryOf(lib: Library, fullpath: string, ctx?: CallContext): Promise<RemoteEntry | null> {
    const local = this.opts.writeBack.entry(lib.name, fullpath);
    if (local) return local;
    if (this.opts.unlinked.isHidden(lib.name, fullpath)) return null;
    const e = await lib.remote.stat(fullpath, remoteCall(ctx));
    this.opts.cache.setEntry(lib.name, fullpath, e);
    return e;
  }

  /** ENOENT unless `fullpath` is a folder (ENOTDIR when a file). */
  async needFolder(lib: Library, fullpath: string, ctx?: CallContext): Promise<void> {
    if (fullpath === '') return;
    const e = await this.lookup(lib, fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such folder: ${gatewayPathOf(lib.name, fullpath)}`);
    if (!e.isDir) throw new VfsError('ENOTDIR', `${gatewayPathOf(lib.name, fullpath)} is a file`);
  }

  /** A folder's entries: the cached or fetched listing, with local files laid over it. */
  async listDir(lib: Library, fullpath: string, ctx?: CallContext): Promise<RemoteEntry[]> {
    let list = this.opts.cache.getListing(lib.name, fullpath);
    // Files whose lock the feed left unknown: the listing is asked again (one `ls` carries every lock).
    if (list && this.opts.connectivity.online(lib.name) && list.some((e) => this.lockUnknown(lib, e))) list = undefined;
    if (!list) {
      if (fullpath !== '') {
        const self = await this.lookup(lib, fullpath, ctx);
        if (!self) throw new VfsError('ENOENT', `no such folder: ${gatewayPathOf(lib.name, fullpath)}`);
        if (!self.isDir) throw new VfsError('ENOTDIR', `${gatewayPathOf(lib.name, fullpath)} is a file`);
      }
      const away = this.pinnedWhileOffline(lib, this.opts.pinned?.listing(lib.name, fullpath));
      if (away !== undefined) return this.sorted(lib, fullpath, away);
      try {
        list = await lib.remote.list(fullpath, remoteCall(ctx));
      } catch (err) {
        return this.sorted(lib, fullpath, this.pinnedWhenAway(err, this.opts.pinned?.listing(lib.name, fullpath)));
      }
      this.opts.cache.setListing(lib.name, fullpath, list);
    }
    return this.sorted(lib, fullpath, list);
  }

  private sorted(lib: Library, fullpath: string, list: RemoteEntry[]): RemoteEntry[] {
    return [...this.overlaid(lib, fullpath, list).values()].sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  }

  /** A folder's listing by name, without the names being removed and with local files laid over it. */
  overlaid(lib: Library, fullpath: string, list: RemoteEntry[]): Map<string, RemoteEntry> {
    const byName = new Map(list.map((e) => [e.name, e]));
    for (const name of this.opts.unlinked.hiddenIn(lib.name, fullpath)) byName.delete(name);
    for (const e of this.opts.writeBack.entriesIn(lib.name, fullpath)) byName.set(e.name, e);
    return byName;
  }

  toAttr(lib: Library, e: RemoteEntry): Attr {
    const local = !e.isDir && this.opts.writeBack.dirty(lib.name, e.fullpath);
    // A lock taken through this gateway holds whatever an entry says (the updates feed says nothing of locks).
    const holder = e.isDir ? undefined : this.opts.lockHolderOf?.(lib.name, e.fullpath);
    if (holder !== undefined && !e.locked) e = { ...e, locked: true };
    const mtimeMs = isUnsent(e) ? e.mtimeMs : this.opts.times.get(lib.name, e.id, versionOf(e)) ?? e.mtimeMs;
    return {
      path: gatewayPathOf(lib.name, e.fullpath), name: e.fullpath === '' ? lib.name : e.name, isDir: e.isDir, size: e.isDir ? 0 : e.size,
      mtimeMs, ctimeMs: e.ctimeMs, id: isUnsent(e) ? undefined : e.id, contentHash: e.contentHash,
      dirty: local || undefined,
      locked: e.locked, lockHolder: e.locked ? holder : undefined, tags: e.tags, lastModifiedBy: e.lastModifiedBy,
      stale: this.opts.connectivity.online(lib.name) ? undefined : true,
      state: this.opts.stateOf?.(lib.name, e),
    };
  }

  rootAttr(): Attr {
    return { path: '/', name: '', isDir: true, size: 0, mtimeMs: this.opts.openedMs, ctimeMs: this.opts.openedMs };
  }

  libraryAttr(l: Library): Attr {
    return { path: `/${l.name}`, name: l.name, isDir: true, size: 0, mtimeMs: this.opts.openedMs, ctimeMs: this.opts.openedMs, id: l.id };
  }
}

/** What identifies a version of an entry for a time override. */
export function versionOf(e: RemoteEntry): string {
  return e.contentHash ?? `t${e.mtimeMs}`;
}

/** A local file the service does not have yet (made here, its first upload still to come). */
export function isUnsent(e: RemoteEntry): boolean {
  return e.id.startsWith('local:');
}
