/**
 * MetadataCache: what the gateway knows about the service's tree, per library. Two LRU caches bounded by
 * count and by (estimated) memory: entries by path (with negative entries: "known not to exist") and
 * complete folder listings. Changes arrive from the gateway's own operations (read-your-writes) and from
 * the UpdatesFeed. For a file change the parent listing is patched; for a folder change the folder's
 * listing and its parent's are invalidated rather than patched (when in doubt, invalidate). A path the
 * feed finds in doubt leaves its parent's listing answering for the other names: only that
 * name is unknown there, and the listing as a whole is fetched again before it is shown (so a folder
 * being filled while the feed runs does not cost a request per new name: `doubt`).
 */
import { LRUCache } from 'lru-cache';
import { baseName, isWithin, parentOf, type RemoteEntry } from './remote.js';
import type { Clock } from './clock.js';

export interface MetadataCacheOptions {
  /** Entries (paths, positive or negative) kept. Default 100 000. */
  maxEntries?: number;
  /** Folder listings kept. Default 10 000. */
  maxListings?: number;
  /** Memory bound of entries and listings together, bytes (estimated). Default 64 MiB. */
  maxBytes?: number;
  /** Age after which a cached entry or listing is not trusted, ms; 0 = trusted until changed. Default 0. */
  ttlMs?: number;
  /** The time the age is measured in. Default the real one (the cache's own monotonic clock). */
  clock?: Clock;
}

/** Marks a path known not to exist. */
const MISSING = Symbol('missing');
type Slot = RemoteEntry | typeof MISSING;

const ENTRY_OVERHEAD = 200;

function entryBytes(e: RemoteEntry): number {
  return ENTRY_OVERHEAD + 2 * (e.fullpath.length + e.name.length + (e.lastModifiedBy?.length ?? 0));
}

/**
 * A folder's listing: its entries by name, and their estimated bytes, kept as single names change (an
 * upload, a rename, a delete in a folder of many files costs one change, not a copy of the listing).
 */
class FolderListing {
  private readonly byName = new Map<string, RemoteEntry>();
  bytes = 0;

  constructor(list: readonly RemoteEntry[]) {
    for (const e of list) this.put(e);
  }

  get(name: string): RemoteEntry | undefined {
    return this.byName.get(name);
  }

  /** Adds or replaces the entry of its name (it moves to the end, as a new entry would). */
  put(e: RemoteEntry): void {
    this.remove(e.name);
    this.byName.set(e.name, e);
    this.bytes += entryBytes(e);
  }

  remove(name: string): void {
    const before = this.byName.get(name);
    if (!before) return;
    this.byName.delete(name);
    this.bytes -= entryBytes(before);
  }

  /** The entries, in order (a copy). */
  list(): RemoteEntry[] {
    return [...this.byName.values()];
  }
}

export class MetadataCache {
  private readonly entries: LRUCache<string, Slot>;
  private readonly listings: LRUCache<string, FolderListing>;
  /** Listing key → names in doubt in that listing (left out of it; looked up on their own). */
  private readonly unsure = new Map<string, Set<string>>();
  /** id → key of its path, to see a move as delete + create. */
  private readonly paths: LRUCache<string, string>;
  /**
   * File entries whose lock state is unknown: brought by the updates feed, whose items say nothing of
   * locks (while a lock or unlock made elsewhere does bring an item). Neither locked nor unlocked: whoever
   * needs the lock asks the service, and the answer replaces the entry until the feed brings the next one.
   */
  private readonly lockUnknown = new WeakSet<RemoteEntry>();
  /** Listings created per library, for `stats()`. */
  readonly counters = { hits: 0, misses: 0, invalidations: 0 };

  constructor(opts: MetadataCacheOptions = {}) {
    const maxEntries = opts.maxEntries ?? 100_000;
    const maxBytes = opts.maxBytes ?? 64 * 1024 * 1024;
    const ttl = opts.ttlMs && opts.ttlMs > 0 ? opts.ttlMs : undefined;
    // A clock given is read at every check (no time cached between two of its readings).
    const time = opts.clock ? { perf: opts.clock, ttlResolution: 0 } : {};
    this.entries = new LRUCache<string, Slot>({
      max: maxEntries, maxSize: Math.max(1, Math.floor(maxBytes / 2)), ttl, ...time,
      sizeCalculation: (v, k) => (v === MISSING ? 64 + 2 * k.length : entryBytes(v)),
    });
    this.listings = new LRUCache<string, FolderListing>({
      max: opts.maxListings ?? 10_000, maxSize: Math.max(1, Math.floor(maxBytes / 2)), ttl, ...time,
      sizeCalculation: (v, k) => 64 + 2 * k.length + v.bytes,
    });
    this.paths = new LRUCache<string, string>({ max: maxEntries });
  }

  /**
   * Whether the cache shows `entry` at its path already: the same object (id) and kind, and for a file the
   * same content, size and time. Counts no hit or miss.
   */
  holds(lib: string, entry: RemoteEntry): boolean {
    const parentKey = key(lib, parentOf(entry.fullpath));
    const v = this.entries.peek(key(lib, entry.fullpath)) ?? (entry.fullpath === '' ? undefined : this.listings.peek(parentKey)?.get(baseName(entry.fullpath)));
    if (v === undefined || v === MISSING || v.id !== entry.id || v.isDir !== entry.isDir) return false;
    return entry.isDir || (v.contentHash === entry.contentHash && v.size === entry.size && v.mtimeMs === entry.mtimeMs);
  }

  /**
   * What the cache knows of `entry`'s path and object before a change of it is applied: the entry there
   * (null known missing, undefined unknown) and the path its id had when elsewhere. Counts no hit or miss.
   */
  before(lib: string, entry: RemoteEntry): { previous: RemoteEntry | null | undefined; movedFrom?: string } {
    const k = key(lib, entry.fullpath);
    const parentKey = key(lib, parentOf(entry.fullpath));
    const v = this.entries.peek(k);
    const listing = v === undefined && entry.fullpath !== '' && !this.unsure.get(parentKey)?.has(entry.name) ? this.listings.peek(parentKey) : undefined;
    const previous = v === MISSING ? null : v ?? (listing ? listing.get(baseName(entry.fullpath)) ?? null : undefined);
    const oldKey = entry.id ? this.paths.peek(`${lib}\0${entry.id}`) : undefined;
    return oldKey !== undefined && oldKey !== k ? { previous, movedFrom: oldKey.slice(lib.length + 1) } : { previous };
  }

  /** Whether `entry` (as this cache answered it) is a file whose lock state is unknown (see `upsert`). */
  lockIsUnknown(entry: RemoteEntry): boolean {
    return this.lockUnknown.has(entry);
  }

  /** The entry, null when known missing, undefined when unknown. */
  getEntry(lib: string, fullpath: string): RemoteEntry | null | undefined {
    const v = this.entries.get(key(lib, fullpath));
    if (v === undefined) {
      // A cached listing of the parent answers too.
      const parentKey = key(lib, parentOf(fullpath));
      const listing = fullpath === '' ? undefined : this.listings.get(parentKey);
      if (listing && !this.unsure.get(parentKey)?.has(baseName(fullpath))) {
        this.counters.hits++;
        return listing.get(baseName(fullpath)) ?? null;
      }
      this.counters.misses++;
      return undefined;
    }
    this.counters.hits++;
    return v === MISSING ? null : v;
  }

  setEntry(lib: string, fullpath: string, entry: RemoteEntry | null): void {
    const k = key(lib, fullpath);
    if (fullpath !== '') {
      this.settle(key(lib, parentOf(fullpath)), baseName(fullpath), entry);
      this.lockLearned(key(lib, parentOf(fullpath)), entry);
    }
    if (entry === null) {
      this.entries.set(k, MISSING);
      return;
    }
    this.entries.set(k, entry);
    this.paths.set(`${lib}\0${entry.id}`, k);
  }

  getListing(lib: string, fullpath: string): RemoteEntry[] | undefined {
    const k = key(lib, fullpath);
    const v = this.unsure.has(k) ? undefined : this.listings.get(k);
    if (v) this.counters.hits++;
    else this.counters.misses++;
    return v?.list();
  }

  /**
   * A folder's listing as it answers for single names (getEntry): its entries and the names in doubt in
   * it, each of which may be there or not. Unlike getListing, a name in doubt does not make it unknown.
   */
  getNames(lib: string, fullpath: string): { entries: RemoteEntry[]; inDoubt: string[] } | undefined {
    const k = key(lib, fullpath);
    const v = this.listings.get(k);
    if (v) this.counters.hits++;
    else this.counters.misses++;
    return v && { entries: v.list(), inDoubt: [...(this.unsure.get(k) ?? [])] };
  }

  setListing(lib: string, fullpath: string, list: RemoteEntry[]): void {
    this.unsure.delete(key(lib, fullpath));
    this.listings.set(key(lib, fullpath), new FolderListing(list));
    for (const e of list) {
      this.paths.set(`${lib}\0${e.id}`, key(lib, e.fullpath));
      // The listing knows the lock the entry of the same path did not.
      const held = this.entries.peek(key(lib, e.fullpath));
      if (held !== undefined && held !== MISSING && this.lockUnknown.has(held)) this.entries.set(key(lib, e.fullpath), e);
    }
  }

  /**
   * A file or folder was created or changed at `entry.fullpath` (a move: same id, new path). `fromFeed`:
   * the updates feed brought it, and a file's entry without lock state leaves its lock unknown.
   */
  upsert(lib: string, entry: RemoteEntry, opts: { fromFeed?: boolean } = {}): void {
    const k = key(lib, entry.fullpath);
    if (opts.fromFeed && !entry.isDir && entry.locked === undefined) this.lockUnknown.add(entry);
    const oldKey = this.paths.get(`${lib}\0${entry.id}`);
    if (oldKey !== undefined && oldKey !== k) {
      // Moved: the old path is gone, with everything below it.
      this.removeTree(lib, oldKey.slice(lib.length + 1), true);
    }
    this.setEntry(lib, entry.fullpath, entry);
    const parentKey = key(lib, parentOf(entry.fullpath));
    if (entry.isDir) {
      this.invalidate(parentKey);
      if (oldKey !== undefined && oldKey !== k) this.invalidate(k);
      return;
    }
    const listing = this.listings.get(parentKey);
    if (listing) {
      listing.put(entry);
      this.resized(parentKey, listing);
    }
    this.clearUnsure(parentKey, entry.name);
  }

  /**
   * `fullpath` (and anything below it) no longer exists. `isDir` false: the caller knows it was a file, so
   * nothing below it is looked for (a scan of the cache), unless the cache knows it as a folder.
   */
  remove(lib: string, fullpath: string, isDir?: boolean): void {
    this.removeTree(lib, fullpath, true, isDir);
  }

  /** Forgets what is known about `fullpath` (entry and listing), without claiming it is missing. */
  forget(lib: string, fullpath: string): void {
    this.entries.delete(key(lib, fullpath));
    this.invalidate(key(lib, fullpath));
    this.invalidate(key(lib, parentOf(fullpath)));
  }

  /**
   * `fullpath` is in doubt (the gateway changed it while the feed was reading changes that may be older):
   * its entry is forgotten, and in its parent's listing only its name, which is left out of the listing
   * and looked up on its own; the listing keeps answering for the other names, and is fetched again
   * before it is shown whole. A folder in doubt drops its parent's listing.
   */
  doubt(lib: string, fullpath: string): void {
    this.entries.delete(key(lib, fullpath));
    this.invalidate(key(lib, fullpath));
    if (fullpath === '') return;
    const parentKey = key(lib, parentOf(fullpath));
    const listing = this.listings.get(parentKey);
    if (!listing) return;
    const name = baseName(fullpath);
    const known = listing.get(name);
    if (known?.isDir || this.unsure.size >= 10_000) {
      this.invalidate(parentKey); // a folder in doubt: what is below it too (when in doubt, invalidate)
      return;
    }
    listing.remove(name);
    this.resized(parentKey, listing);
    let names = this.unsure.get(parentKey);
    if (!names) this.unsure.set(parentKey, (names = new Set()));
    names.add(name);
    this.counters.invalidations++;
  }

  /** Forgets a folder's listing. */
  invalidateListing(lib: string, fullpath: string): void {
    this.invalidate(key(lib, fullpath));
  }

  /** Drops everything known about a library (feed failure, cursor too old). */
  dropLibrary(lib: string): void {
    const prefix = `${lib}\0`;
    for (const k of [...this.entries.keys()]) if (k.startsWith(prefix)) this.entries.delete(k);
    for (const k of [...this.listings.keys()]) if (k.startsWith(prefix)) this.listings.delete(k);
    for (const k of [...this.paths.keys()]) if (k.startsWith(prefix)) this.paths.delete(k);
    for (const k of [...this.unsure.keys()]) if (k.startsWith(prefix)) this.unsure.delete(k);
    this.counters.invalidations++;
  }

  stats(): { entries: number; listings: number; bytes: number; hits: number; misses: number; invalidations: number } {
    return { entries: this.entries.size, listings: this.listings.size, bytes: this.entries.calculatedSize + this.listings.calculatedSize, ...this.counters };
  }

  private removeTree(lib: string, fullpath: string, markMissing: boolean, isDir?: boolean): void {
    const base = key(lib, fullpath);
    const prefix = `${lib}\0`;
    const known = this.entries.peek(base);
    // What the cache holds decides; what the caller says only when the cache holds neither entry nor listing.
    const held = known === undefined || known === MISSING ? undefined : known.isDir;
    const isFile = held === false || (held === undefined && isDir === false && !this.listings.has(base));
    if (!isFile) this.removeBelow(prefix, base, fullpath);
    if (markMissing) this.entries.set(base, MISSING);
    else this.entries.delete(base);
    const parentKey = key(lib, parentOf(fullpath));
    const listing = this.listings.get(parentKey);
    if (listing) {
      listing.remove(baseName(fullpath));
      this.resized(parentKey, listing);
    }
    this.clearUnsure(parentKey, baseName(fullpath));
    this.counters.invalidations++;
  }

  /** A name in doubt in a listing was looked up: the listing holds its answer again. */
  private settle(parentKey: string, name: string, entry: RemoteEntry | null): void {
    if (!this.unsure.get(parentKey)?.has(name)) return;
    const listing = this.listings.get(parentKey);
    if (listing && entry) {
      listing.put(entry);
      this.resized(parentKey, listing);
    }
    this.clearUnsure(parentKey, name);
  }

  /** An entry asked of the service replaces, in its parent's listing, the one of the same object whose lock was unknown. */
  private lockLearned(parentKey: string, entry: RemoteEntry | null): void {
    const listing = entry && !entry.isDir ? this.listings.peek(parentKey) : undefined;
    const known = listing?.get(entry!.name);
    if (!listing || !known || known.id !== entry!.id || !this.lockUnknown.has(known)) return;
    listing.put(entry!);
    this.resized(parentKey, listing);
  }

  private clearUnsure(parentKey: string, name: string): void {
    const names = this.unsure.get(parentKey);
    if (!names) return;
    names.delete(name);
    if (names.size === 0) this.unsure.delete(parentKey);
  }

  /** Forgets every entry and listing below a folder (a scan of the cache: folder changes only). */
  private removeBelow(prefix: string, base: string, fullpath: string): void {
    for (const k of [...this.entries.keys()]) {
      if (k.startsWith(prefix) && k !== base && isWithin(k.slice(prefix.length), fullpath)) this.entries.delete(k);
    }
    for (const k of [...this.listings.keys()]) {
      if (k.startsWith(prefix) && isWithin(k.slice(prefix.length), fullpath)) this.listings.delete(k);
    }
  }

  /** A listing changed in place: stored again, so the cache counts its new size (and it is fresh, as a new one). */
  private resized(k: string, listing: FolderListing): void {
    this.listings.delete(k);
    this.listings.set(k, listing);
  }

  private invalidate(k: string): void {
    this.unsure.delete(k);
    if (this.listings.delete(k)) this.counters.invalidations++;
  }
}

function key(lib: string, fullpath: string): string {
  return `${lib}\0${fullpath}`;
}
