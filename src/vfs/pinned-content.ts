/**
 * PinnedContent: keeps the files marked "keep on this machine" (PinMarks) in the content cache, fetched in
 * the background, kept up to date as the updates feed brings changes, and answerable without the service.
 *
 * For each library it holds the entries of everything pinned (files and folders, and the folders on the
 * way to a pinned path), persisted in the data folder beside the marks: with the service away, also after
 * a restart, those entries answer stats and listings, and the content cache (which persists its contents)
 * answers reads. The contents of pinned files are what the CacheBudget keeps: never evicted, and a pin
 * that would not fit beside what is already pinned is refused (ENOSPC) before anything is marked.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../shared/atomic-file.js';
import type { Logger } from '../shared/log.js';
import type { CacheBudget } from './cache-budget.js';
import { systemClock, type Clock, type ClockTimer } from './clock.js';
import type { ContentCache } from './content-cache.js';
import { gatewayPathOf } from './gateway-path.js';
import type { PinMarks } from './pin-marks.js';
import { isWithin, parentOf, type Remote, type RemoteChange, type RemoteEntry } from './remote.js';
import { VfsError } from './types.js';

export interface PinnedContentOptions {
  marks: PinMarks;
  disk: ContentCache;
  budget: CacheBudget;
  /** Folder of the per-library entry lists. */
  dir: string;
  remoteFor: (library: string) => Remote | undefined;
  /** Files fetched at once. Default 8. */
  concurrency?: number;
  /** The time of the manifests' save delay (SAVE_DELAY_MS). Default the real one. */
  clock?: Clock;
  logger: Logger;
}

export interface PinStatus {
  /** Pinned paths (gateway paths), as marked. */
  pins: string[];
  files: number;
  bytes: number;
  /** Files and bytes of pinned files not on this machine yet. */
  pendingFiles: number;
  pendingBytes: number;
  /** Files being fetched now, with their bytes so far. */
  fetching: { path: string; done: number; size: number }[];
  errors: { path: string; error: string }[];
}

/** A manifest is saved at most this long after a change, ms. */
const SAVE_DELAY_MS = 200;
/** Page and sidecar rounding of the content cache (what a content takes on disk at most). */
const PAGE = 4096;

interface LibraryPins {
  entries: Map<string, RemoteEntry>;
  saveTimer?: ClockTimer;
  saving: Promise<void>;
}

export class PinnedContent {
  private readonly libs = new Map<string, LibraryPins>();
  /** Content hash → pinned files with it. */
  private readonly hashes = new Map<string, number>();
  /** Files waiting to be fetched, by `library\0fullpath`. */
  private readonly queue = new Map<string, { library: string; entry: RemoteEntry }>();
  private readonly fetching = new Map<string, { path: string; done: number; size: number }>();
  private readonly errors = new Map<string, { path: string; error: string }>();
  private readonly concurrency: number;
  private workers = 0;
  private idleWaiters: (() => void)[] = [];
  private closed = false;

  constructor(private readonly opts: PinnedContentOptions) {
    this.concurrency = opts.concurrency ?? 8;
    opts.budget.setPinned((h) => this.hashes.has(h));
  }

  /** Loads the marks and each library's pinned entries; what is not on disk yet is queued. */
  async init(): Promise<void> {
    await this.opts.marks.load();
    await mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
    for (const library of this.opts.marks.libraries()) {
      const pins = this.lib(library);
      try {
        const list = JSON.parse(await readFile(this.manifestFile(library), 'utf8')) as RemoteEntry[];
        for (const e of list) this.put(library, pins, e);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.opts.logger.warn({ library, err: (err as Error).message }, 'pinned entries unreadable: rebuilt when the service answers');
      }
    }
  }

  /** Fetches what is missing and walks every pin again (at start, and when the service is back). */
  resync(library: string): void {
    const remote = this.opts.remoteFor(library);
    if (!remote || this.closed) return;
    void (async () => {
      for (const root of this.opts.marks.roots(library)) {
        const found = await this.walk(remote, library, root);
        this.replaceUnder(library, root, found);
      }
    })().catch((err: unknown) => this.opts.logger.debug({ library, err: (err as Error).message }, 'pins: walk failed; kept as they were'));
    for (const e of this.lib(library).entries.values()) if (!e.isDir) this.want(library, e);
  }

  /** True when the path is pinned (itself or by a folder above it). */
  pinned(library: string, fullpath: string): boolean {
    return this.opts.marks.pinned(library, fullpath);
  }

  /**
   * Pins a file or folder: walks it on the service, refuses (ENOSPC) when its contents would not fit in
   * the cache beside what is pinned already, else marks it and queues its files. Returns what it holds.
   */
  async pin(library: string, fullpath: string): Promise<{ files: number; bytes: number }> {
    const remote = this.opts.remoteFor(library);
    if (!remote) throw new VfsError('ENOENT', `no library folder named '${library}' is served`);
    const path = gatewayPathOf(library, fullpath);
    const found = await this.walk(remote, library, fullpath);
    if (!found.some((e) => e.fullpath === fullpath)) throw new VfsError('ENOENT', `no such file or folder: ${path}`);
    const files = found.filter((e) => !e.isDir);
    const kept = new Set(this.hashes.keys());
    let needed = 0;
    for (const e of files) {
      if (!e.contentHash || kept.has(e.contentHash)) continue;
      kept.add(e.contentHash);
      needed += onDisk(e.size);
    }
    const pinnedNow = this.pinnedDiskBytes();
    const limit = await this.opts.budget.limit(this.opts.disk.stats().heldBytes);
    if (pinnedNow + needed > limit) {
      throw new VfsError('ENOSPC', `${path}: pinning needs ${needed} bytes of cache, ${pinnedNow} are pinned already and the cache may hold ${limit} (cache.disk_cache_mb, and ${pct(this.opts.budget)} of the disk kept free); nothing was pinned`);
    }
    await this.opts.marks.set(library, fullpath, true);
    this.replaceUnder(library, fullpath, found);
    for (const a of ancestorsOf(fullpath)) {
      const e = await remote.stat(a).catch(() => null);
      if (e) this.put(library, this.lib(library), e);
    }
    this.scheduleSave(library);
    return { files: files.length, bytes: files.reduce((n, e) => n + e.size, 0) };
  }

  /** Unpins a path (an explicit unpin inside a pinned folder wins there); its content becomes evictable. */
  async unpin(library: string, fullpath: string): Promise<void> {
    await this.opts.marks.set(library, fullpath, false);
    // What is neither pinned nor on the way to a pin any more goes (the folders above the path too).
    const pins = this.lib(library);
    const roots = this.opts.marks.roots(library);
    for (const [p, e] of [...pins.entries]) {
      if (!this.opts.marks.pinned(library, p) && !roots.some((r) => r !== p && isWithin(r, p))) this.drop(library, pins, e);
    }
    this.scheduleSave(library);
  }

  /** A change the updates feed brought: a pinned file changed or new is fetched, one gone is dropped. */
  changed(library: string, change: RemoteChange): void {
    const e = change.entry;
    const pins = this.libs.get(library);
    if (change.kind === 'delete') {
      if (!pins) return;
      for (const [p, x] of [...pins.entries]) if (isWithin(p, e.fullpath)) this.drop(library, pins, x);
      this.scheduleSave(library);
      return;
    }
    if (!this.opts.marks.pinned(library, e.fullpath)) return;
    const lib = this.lib(library);
    const known = lib.entries.has(e.fullpath);
    this.put(library, lib, e);
    this.scheduleSave(library);
    if (!e.isDir) return this.want(library, e);
    // A folder new or moved in: what is inside it comes with it (a known one's changes come one by one).
    const remote = this.opts.remoteFor(library);
    if (remote && !known) {
      void this.walk(remote, library, e.fullpath).then((found) => this.replaceUnder(library, e.fullpath, found))
        .catch((err: unknown) => this.opts.logger.debug({ library, err: (err as Error).message }, 'pins: walk failed'));
    }
  }

  /**
   * The entry of a path as pinned, for when the service cannot be asked: the entry, null when the path is
   * inside a pinned folder and not in it, undefined when not known.
   */
  entry(library: string, fullpath: string): RemoteEntry | null | undefined {
    const pins = this.libs.get(library);
    if (!pins) return undefined;
    const e = pins.entries.get(fullpath);
    if (e) return e;
    const parent = pins.entries.get(parentOf(fullpath));
    return parent?.isDir && this.opts.marks.pinned(library, parent.fullpath) ? null : undefined;
  }

  /** A folder's entries as pinned (a folder on the way to a pin: the pinned ones only), else undefined. */
  listing(library: string, fullpath: string): RemoteEntry[] | undefined {
    const pins = this.libs.get(library);
    if (!pins || (fullpath !== '' && !pins.entries.get(fullpath)?.isDir)) return undefined;
    const out = [...pins.entries.values()].filter((e) => e.fullpath !== '' && parentOf(e.fullpath) === fullpath);
    return fullpath === '' && out.length === 0 ? undefined : out;
  }

  /** The content hashes of pinned files (these are never evicted). */
  keeps(hash: string): boolean {
    return this.hashes.has(hash);
  }

  status(): PinStatus {
    let files = 0;
    let bytes = 0;
    let pendingFiles = 0;
    let pendingBytes = 0;
    for (const [library, pins] of this.libs) {
      for (const e of pins.entries.values()) {
        if (e.isDir || !this.opts.marks.pinned(library, e.fullpath)) continue;
        files++;
        bytes += e.size;
        if (!this.opts.disk.complete(e.contentHash, e.size)) {
          pendingFiles++;
          pendingBytes += e.size;
        }
      }
    }
    const pins: string[] = [];
    for (const library of this.opts.marks.libraries()) for (const r of this.opts.marks.roots(library)) pins.push(gatewayPathOf(library, r));
    return { pins, files, bytes, pendingFiles, pendingBytes, fetching: [...this.fetching.values()].map((f) => ({ ...f })), errors: [...this.errors.values()] };
  }

  /** Resolves once nothing is queued or being fetched. */
  idle(): Promise<void> {
    if (this.queue.size === 0 && this.workers === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.queue.clear();
    await this.idle();
    for (const [library, pins] of this.libs) {
      if (pins.saveTimer) {
        pins.saveTimer.cancel();
        pins.saveTimer = undefined;
        pins.saving = pins.saving.then(() => this.save(library));
      }
      await pins.saving;
    }
  }

  // ---- inside ---------------------------------------------------------------------------------------------

  private lib(library: string): LibraryPins {
    let pins = this.libs.get(library);
    if (!pins) this.libs.set(library, (pins = { entries: new Map(), saving: Promise.resolve() }));
    return pins;
  }

  /** Bytes pinned contents take (or will take) in the cache, each content once. */
  private pinnedDiskBytes(): number {
    const sizes = new Map<string, number>();
    for (const pins of this.libs.values()) for (const e of pins.entries.values()) if (!e.isDir && e.contentHash) sizes.set(e.contentHash, e.size);
    let n = 0;
    for (const [h, size] of sizes) if (this.hashes.has(h)) n += Math.max(onDisk(size), this.opts.disk.heldOf(h));
    return n;
  }

  /** Everything under `root` found on the service (itself first); a pin's explicit unpins inside are left out. */
  private async walk(remote: Remote, library: string, root: string): Promise<RemoteEntry[]> {
    const self = root === '' ? ({ id: '', fullpath: '', name: '', isDir: true, size: 0, mtimeMs: 0, ctimeMs: 0 } satisfies RemoteEntry) : await remote.stat(root);
    if (!self) return [];
    const out: RemoteEntry[] = [self];
    const folders = self.isDir ? [root] : [];
    while (folders.length > 0) {
      const f = folders.shift()!;
      for (const e of await remote.list(f)) {
        if (this.opts.marks.markOf(library, e.fullpath) === false) continue;
        out.push(e);
        if (e.isDir) folders.push(e.fullpath);
      }
    }
    return out;
  }

  /** The pinned entries under `root` become `found` (those gone are dropped); files are queued. */
  private replaceUnder(library: string, root: string, found: RemoteEntry[]): void {
    const pins = this.lib(library);
    const now = new Set(found.map((e) => e.fullpath));
    for (const [p, e] of [...pins.entries]) if (isWithin(p, root) && !now.has(p) && p !== '') this.drop(library, pins, e);
    for (const e of found) {
      if (!this.opts.marks.pinned(library, e.fullpath)) continue;
      if (e.fullpath !== '') this.put(library, pins, e);
      if (!e.isDir) this.want(library, e);
    }
    this.scheduleSave(library);
  }

  private put(library: string, pins: LibraryPins, e: RemoteEntry): void {
    const before = pins.entries.get(e.fullpath);
    if (before) this.drop(library, pins, before);
    pins.entries.set(e.fullpath, e);
    if (!e.isDir && e.contentHash && this.opts.marks.pinned(library, e.fullpath)) this.hashes.set(e.contentHash, (this.hashes.get(e.contentHash) ?? 0) + 1);
  }

  private drop(library: string, pins: LibraryPins, e: RemoteEntry): void {
    if (pins.entries.get(e.fullpath) !== e) return;
    pins.entries.delete(e.fullpath);
    const k = `${library}\0${e.fullpath}`;
    this.queue.delete(k);
    this.errors.delete(k);
    if (!e.isDir && e.contentHash && this.hashes.has(e.contentHash)) {
      const left = this.hashes.get(e.contentHash)! - 1;
      if (left > 0) this.hashes.set(e.contentHash, left);
      else this.hashes.delete(e.contentHash);
    }
  }

  /** Queues a pinned file whose content is not on disk. */
  private want(library: string, e: RemoteEntry): void {
    if (this.closed || this.opts.disk.complete(e.contentHash, e.size)) return;
    const k = `${library}\0${e.fullpath}`;
    if (!e.contentHash) {
      this.errors.set(k, { path: gatewayPathOf(library, e.fullpath), error: 'the service gave no content hash for this file: it cannot be kept on this machine' });
      return;
    }
    this.queue.set(k, { library, entry: e });
    while (this.workers < this.concurrency && this.queue.size > 0) {
      this.workers++;
      void this.work();
    }
  }

  private async work(): Promise<void> {
    try {
      for (;;) {
        const next = this.queue.entries().next();
        if (next.done || this.closed) break;
        const [k, { library, entry }] = next.value;
        this.queue.delete(k);
        try {
          await this.fetch(library, entry, k);
          this.errors.delete(k);
        } catch (err) {
          this.errors.set(k, { path: gatewayPathOf(library, entry.fullpath), error: (err as Error).message });
          this.opts.logger.warn({ library, fullpath: entry.fullpath, err: (err as Error).message }, 'pins: fetch failed');
        } finally {
          this.fetching.delete(k);
        }
      }
    } finally {
      this.workers--;
      if (this.workers === 0 && this.queue.size === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /** One pinned file's content into the cache, whole; fails when it did not all get there. */
  private async fetch(library: string, e: RemoteEntry, k: string): Promise<void> {
    const { disk } = this.opts;
    const current = this.libs.get(library)?.entries.get(e.fullpath);
    if (current !== e || disk.complete(e.contentHash, e.size)) return; // changed meanwhile, or there
    const remote = this.opts.remoteFor(library);
    if (!remote) throw new VfsError('ENOENT', `library '${library}' is not served`);
    const progress = { path: gatewayPathOf(library, e.fullpath), done: 0, size: e.size };
    this.fetching.set(k, progress);
    const body = await remote.openRange(e.fullpath, 0, e.size - 1, { contentHash: e.contentHash });
    for await (const chunk of body as AsyncIterable<Buffer>) {
      await disk.write(e.contentHash, progress.done, chunk, { keep: true });
      progress.done += chunk.length;
    }
    if (!disk.complete(e.contentHash, e.size)) {
      throw new VfsError('ENOSPC', `${progress.path}: not all of it reached the cache (limit ${disk.limitNow()} bytes, full of content that must stay, or its disk fell behind); fetched again when the service is back or the file changes`);
    }
    await disk.persist(e.contentHash!);
  }

  private scheduleSave(library: string): void {
    const pins = this.lib(library);
    if (pins.saveTimer || this.closed) return;
    pins.saveTimer = (this.opts.clock ?? systemClock).after(SAVE_DELAY_MS, () => {
      pins.saveTimer = undefined;
      pins.saving = pins.saving.then(() => this.save(library)).catch((err: unknown) => {
        this.opts.logger.warn({ library, err: (err as Error).message }, 'pins: saving the pinned entries failed');
      });
    });
  }

  private async save(library: string): Promise<void> {
    const pins = this.libs.get(library);
    if (!pins) return;
    await writeFileAtomic(this.manifestFile(library), JSON.stringify([...pins.entries.values()]), { durability: 'fsync-file', mode: 0o600 });
  }

  private manifestFile(library: string): string {
    return join(this.opts.dir, `${encodeURIComponent(library)}.json`);
  }
}

/** Bytes a content of `size` takes in the cache at most (as the content cache counts: its pages, two for its sidecar). */
function onDisk(size: number): number {
  return Math.ceil(size / PAGE) * PAGE + 2 * PAGE;
}

function ancestorsOf(fullpath: string): string[] {
  const out: string[] = [];
  for (let p = parentOf(fullpath); p !== ''; p = parentOf(p)) out.push(p);
  return out;
}

function pct(budget: CacheBudget): string {
  return `${Math.round(budget.minFreeFraction * 100)} %`;
}
