/**
 * The library folders a gateway serves, by name: each library's Remote as the gateway calls it (every
 * outcome reported to the Connectivity), its updates feed, and the gateway's own changes, shown in the
 * metadata cache at once and noted to the library's feed so that the feed does not undo them.
 */
import type { ChangeBefore } from './change-events.js';
import { join } from 'node:path';
import type { Logger } from '../shared/log.js';
import { parseGatewayPath } from './gateway-path.js';
import type { MetadataCache } from './metadata-cache.js';
import { joinPath, parentOf, type Remote, type RemoteCallOptions, type RemoteEntry, type RemoteQuota, type RemoteChange } from './remote.js';
import { UpdatesFeed, type UpdatesFeedStatus } from './updates-feed.js';
import { ReportingRemote, type Connectivity } from './connectivity.js';
import type { Clock } from './clock.js';
import type { ResolvedLibrary } from './library-set.js';
import { VfsError, type CallContext } from './types.js';

export interface Library {
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
export interface Target {
  path: string;
  lib?: Library;
  fullpath: string;
}

/** A target inside a library. */
export type LibraryTarget = Target & { lib: Library };

export interface LibraryFoldersOptions {
  cache: MetadataCache;
  connectivity: Connectivity;
  /** Folder of the feed cursors (`feeds/`). */
  dataDir: string;
  /** Updates feed poll interval, ms; 0 = no feed. */
  feedIntervalMs: number;
  clock: Clock;
  logger: Logger;
  /** Each change a library's feed brings, after the cache applied it, with what the cache knew before. */
  onChange?: (library: string, change: RemoteChange, before: ChangeBefore) => void;
}

export class LibraryFolders {
  private readonly libs = new Map<string, Library>();

  constructor(private readonly opts: LibraryFoldersOptions) {}

  get(name: string): Library | undefined {
    return this.libs.get(name);
  }

  has(name: string): boolean {
    return this.libs.has(name);
  }

  /** Library folder names, in order. */
  names(): string[] {
    return [...this.libs.keys()];
  }

  all(): Library[] {
    return [...this.libs.values()];
  }

  /** Serves a library under its folder name (its feed not started yet). */
  add(l: ResolvedLibrary): Library {
    const lib: Library = { name: l.name, id: l.id, remote: new ReportingRemote(l.remote, l.name, this.opts.connectivity), given: l.remote };
    this.libs.set(l.name, lib);
    return lib;
  }

  /** Stops serving a library folder: its feed stops, its cached metadata and connectivity are forgotten. */
  async remove(lib: Library): Promise<void> {
    this.libs.delete(lib.name);
    await lib.feed?.stop();
    this.opts.cache.dropLibrary(lib.name);
    this.opts.connectivity.forget(lib.name);
  }

  /** Forgets a library whose start failed. */
  drop(name: string): void {
    this.libs.delete(name);
  }

  async startFeed(lib: Library): Promise<void> {
    const interval = this.opts.feedIntervalMs;
    if (interval <= 0) return;
    lib.feed = new UpdatesFeed({
      library: lib.name, remote: lib.remote, cache: this.opts.cache, intervalMs: interval, clock: this.opts.clock, logger: this.opts.logger,
      cursorFile: join(this.opts.dataDir, 'feeds', `${safeFileName(lib.id)}.json`),
      onChange: (change, before) => this.opts.onChange?.(lib.name, change, before),
    });
    await lib.feed.start();
  }

  async stopFeeds(): Promise<void> {
    await Promise.all(this.all().map((l) => l.feed?.stop()));
  }

  /** Polls every library's feed now. */
  async pollFeeds(): Promise<void> {
    await Promise.all(this.all().map((l) => l.feed?.pollNow()));
  }

  feedStatus(): UpdatesFeedStatus[] {
    return this.all().flatMap((l) => (l.feed ? [l.feed.snapshot()] : []));
  }

  /** Where a gateway path points (ENOENT for a library not served). */
  target(path: string): Target {
    const p = parseGatewayPath(path);
    if (!p.library) return { path: p.path, fullpath: '' };
    const lib = this.libs.get(p.library);
    if (!lib) throw new VfsError('ENOENT', `no such library: /${p.library}`);
    return { path: p.path, lib, fullpath: p.fullpath };
  }

  /** Recreates missing parent folders of a pending upload (they vanished on the service). */
  async ensureParents(library: string, fullpath: string): Promise<void> {
    const lib = this.get(library);
    if (!lib) return;
    const parts = parentOf(fullpath).split('/').filter(Boolean);
    let at = '';
    for (const p of parts) {
      at = joinPath(at, p);
      const e = await lib.remote.stat(at);
      if (!e) this.ownUpsert(lib.name, await lib.remote.mkdir(at));
    }
  }

  /** The gateway starts changing `fullpaths` on the service; the answer ends that, once the cache shows the result. */
  ownChanging(library: string, fullpaths: readonly string[]): () => void {
    return this.libs.get(library)?.feed?.localChangeBegins(fullpaths) ?? (() => undefined);
  }

  /** The gateway created or changed an entry: the cache shows it at once, the feed will not undo it. */
  ownUpsert(library: string, entry: RemoteEntry): void {
    this.opts.cache.upsert(library, entry);
    this.libs.get(library)?.feed?.noteLocalChange(entry.fullpath);
  }

  /** The gateway removed (or moved away) a path; `isDir`, what it was when known (a file's removal looks for nothing below it). */
  ownRemove(library: string, fullpath: string, isDir?: boolean): void {
    this.opts.cache.remove(library, fullpath, isDir);
    this.libs.get(library)?.feed?.noteLocalChange(fullpath);
  }

  /** The gateway changed a path in a way the cache cannot patch (tags, lock, a copy): asked again next time. */
  ownForget(library: string, fullpath: string): void {
    this.opts.cache.forget(library, fullpath);
    this.libs.get(library)?.feed?.noteLocalChange(fullpath);
  }
}

/** The options of a Remote call made for a caller. */
export function remoteCall(ctx?: CallContext): RemoteCallOptions {
  return { operator: ctx?.operator, signal: ctx?.signal };
}

function safeFileName(id: string): string {
  return id.replace(/[^A-Za-z0-9_.-]/g, '_') || 'library';
}
