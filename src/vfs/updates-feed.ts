/**
 * UpdatesFeed: keeps one library's part of the MetadataCache coherent with changes made by others. Every
 * interval it reads the service's change feed from its millisecond cursor, every page until an empty one,
 * applies each change to the cache, and persists the cursor when it moved (a quiet library costs no
 * write, no fsync). When the feed fails, or the backlog is so
 * long that the cursor is clearly too old, the library's cache is dropped (and rebuilt on demand from
 * listings): stale data is never served for longer than one interval after a failure. An outage (the
 * service not reachable at all) is the exception: the cache is kept and served, marked stale, and the
 * feed resumes from its cursor when the service is back, so nothing of what changed meanwhile is missed.
 */
import { VfsError } from './types.js';
import { mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { writeFileAtomic } from '../shared/atomic-file.js';
import type { Logger } from '../shared/log.js';
import type { MetadataCache } from './metadata-cache.js';
import type { Remote, RemoteChange } from './remote.js';
import { systemClock, type Clock, type ClockTimer } from './clock.js';
import { deleteOfAnother, type ChangeBefore } from './change-events.js';

export interface UpdatesFeedOptions {
  /** Library key in the cache. */
  library: string;
  remote: Remote;
  cache: MetadataCache;
  /** Poll interval, ms. Default 2000; 0 = no timer (poll only when `pollNow()` is called). */
  intervalMs?: number;
  /** File that keeps the cursor across restarts; none = not persisted. */
  cursorFile?: string;
  /** Pages read in one poll before the cursor is judged too old and the cache rebuilt. Default 50. */
  maxPagesPerPoll?: number;
  /** Called for each change after the cache has applied it, with what the cache knew of it before. */
  onChange?: (change: RemoteChange, before: ChangeBefore) => void;
  /** The time of the polls. Default the real one. */
  clock?: Clock;
  logger: Logger;
}

export interface UpdatesFeedStatus {
  library: string;
  cursor: number;
  healthy: boolean;
  lastPollMs?: number;
  lastError?: string;
  changesApplied: number;
  rebuilds: number;
}

export class UpdatesFeed {
  private cursor = -1;
  /** The cursor the file holds (loaded or last written). */
  private savedCursor: number | undefined;
  private timer: ClockTimer | undefined;
  private readonly clock: Clock;
  private running: Promise<void> | undefined;
  /** Aborts the poll under way when the feed stops (a stop never waits for a hung service). */
  private readonly aborter = new AbortController();
  private stopped = false;
  private readonly intervalMs: number;
  private readonly maxPages: number;
  private readonly status: UpdatesFeedStatus;
  /**
   * Paths the gateway changed itself since the current poll began. A change the poll brings for one of
   * them (or below one) may predate the gateway's own: the path is forgotten (asked again) instead.
   */
  private touched = new Set<string>();
  /**
   * Paths the gateway is changing on the service now (asked, not yet answered), counted: a change the
   * feed brings of one of them may be the gateway's own, landed before the gateway heard it did.
   */
  private readonly changing = new Map<string, number>();

  constructor(private readonly opts: UpdatesFeedOptions) {
    this.intervalMs = opts.intervalMs ?? 2000;
    this.maxPages = opts.maxPagesPerPoll ?? 50;
    this.clock = opts.clock ?? systemClock;
    if (!Number.isFinite(this.intervalMs) || this.intervalMs < 0) throw new TypeError(`intervalMs: expected a number of ms >= 0, got ${opts.intervalMs}`);
    this.status = { library: opts.library, cursor: -1, healthy: false, changesApplied: 0, rebuilds: 0 };
  }

  /** Loads the cursor (or takes the service's head) and starts polling. */
  async start(): Promise<void> {
    this.cursor = await this.loadCursor();
    if (this.cursor < 0) {
      try {
        this.cursor = await this.opts.remote.headCursor();
        await this.saveCursor();
        this.status.healthy = true;
      } catch (err) {
        this.fail(err);
      }
    } else {
      // Unknown what changed while we were away: start from an empty cache, catch up from the cursor.
      this.status.healthy = true;
    }
    this.status.cursor = this.cursor;
    this.schedule();
  }

  /** Polls now (waits for a poll under way first). */
  async pollNow(): Promise<void> {
    if (this.running) await this.running;
    this.running = this.poll().finally(() => { this.running = undefined; });
    await this.running;
  }

  /** The gateway changed `fullpath` itself (its cache already shows the result). */
  noteLocalChange(fullpath: string): void {
    if (this.running) this.touched.add(fullpath);
  }

  /**
   * The gateway starts changing `paths` on the service (a move: both ends); the call it answers ends
   * that, once its cache shows the result. Until then a change of them the feed brings is in doubt.
   */
  localChangeBegins(paths: readonly string[]): () => void {
    for (const p of paths) this.changing.set(p, (this.changing.get(p) ?? 0) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      for (const p of paths) {
        const n = (this.changing.get(p) ?? 1) - 1;
        if (n > 0) this.changing.set(p, n);
        else this.changing.delete(p);
        this.noteLocalChange(p);
      }
    };
  }

  get healthy(): boolean {
    return this.status.healthy;
  }

  snapshot(): UpdatesFeedStatus {
    return { ...this.status };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
    this.aborter.abort(new Error('updates feed stopped'));
    if (this.running) await this.running.catch(() => undefined);
  }

  private schedule(): void {
    if (this.stopped || this.intervalMs === 0) return;
    this.timer = this.clock.after(this.intervalMs, () => {
      this.pollNow().catch(() => undefined).finally(() => this.schedule());
    });
  }

  private async poll(): Promise<void> {
    if (this.stopped) return;
    const { remote, cache, library, logger } = this.opts;
    const call = { signal: this.aborter.signal };
    this.touched = new Set();
    try {
      if (this.cursor < 0) {
        // No cursor yet (the head could not be read): rebuild from scratch.
        cache.dropLibrary(library);
        this.cursor = await remote.headCursor(call);
      }
      for (let page = 0; ; page++) {
        if (page >= this.maxPages) {
          logger.warn({ library, cursor: this.cursor }, 'updates feed: backlog too long, rebuilding the cache');
          cache.dropLibrary(library);
          this.status.rebuilds++;
          this.cursor = await remote.headCursor(call);
          break;
        }
        const res = await remote.changes(this.cursor, call);
        if (res.changes.length === 0) break;
        for (const change of res.changes) this.apply(change);
        if (res.cursor <= this.cursor) {
          // The service did not advance: treat like a too-old cursor rather than loop forever.
          cache.dropLibrary(library);
          this.status.rebuilds++;
          this.cursor = await remote.headCursor(call);
          break;
        }
        this.cursor = res.cursor;
      }
      await this.saveCursor();
      if (!this.status.healthy) logger.info({ library }, 'updates feed: healthy again');
      this.status.healthy = true;
      this.status.lastError = undefined;
    } catch (err) {
      if (this.stopped) return;
      this.fail(err);
    } finally {
      this.status.cursor = this.cursor;
      this.status.lastPollMs = this.clock.now();
    }
  }

  private apply(change: RemoteChange): void {
    const { cache, library } = this.opts;
    // A change of a path the gateway changed meanwhile may be older than the gateway's: in doubt, unless
    // the cache shows exactly what it brings (the gateway's own change coming back), which is applied as
    // any other. A doubt drops a folder's listing, and with it the names of a folder being filled.
    const before = this.opts.onChange || change.kind === 'delete' ? cache.before(library, change.entry) : undefined;
    const echo = change.kind === 'upsert' && cache.holds(library, change.entry);
    // A move is in doubt by either end: the gateway may be moving the object itself.
    const doubted = !echo && (this.isTouched(change.entry.fullpath) || (before?.movedFrom !== undefined && this.isTouched(before.movedFrom)));
    if (doubted) cache.doubt(library, change.entry.fullpath);
    else if (change.kind === 'delete') {
      // The delete of an object that left the path since (a rename over it, a new file there): the path
      // keeps what the cache knows it holds.
      if (!deleteOfAnother(change.entry, before!.previous)) cache.remove(library, change.entry.fullpath);
    } else cache.upsert(library, change.entry, { fromFeed: true });
    this.status.changesApplied++;
    if (before) this.opts.onChange?.(change, doubted ? { ...before, doubted: true } : before);
  }

  private isTouched(fullpath: string): boolean {
    if (this.touched.size === 0 && this.changing.size === 0) return false;
    for (let p = fullpath; ; p = p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '') {
      if (this.touched.has(p) || this.changing.has(p)) return true;
      if (p === '') return false;
    }
  }

  private fail(err: unknown): void {
    const { cache, library, logger } = this.opts;
    const message = (err as Error).message ?? String(err);
    if (err instanceof VfsError && err.unreachable && this.cursor >= 0) {
      // Offline: what is cached stays (marked stale by the gateway); the cursor says where to resume.
      if (this.status.healthy || this.status.lastError === undefined) logger.warn({ library, err: message }, 'updates feed: service unreachable, serving what is cached until it is back');
      this.status.healthy = false;
      this.status.lastError = message;
      return;
    }
    if (this.status.healthy || this.status.lastError === undefined) logger.warn({ library, err: message }, 'updates feed failed: cache dropped until it recovers');
    // What is cached may be stale now, and stays unknown until the feed works again.
    cache.dropLibrary(library);
    this.status.rebuilds++;
    this.status.healthy = false;
    this.status.lastError = message;
  }

  private async loadCursor(): Promise<number> {
    if (!this.opts.cursorFile) return -1;
    try {
      const data = JSON.parse(await readFile(this.opts.cursorFile, 'utf8')) as { cursor?: unknown };
      if (typeof data.cursor !== 'number' || data.cursor < 0) return -1;
      this.savedCursor = data.cursor;
      return data.cursor;
    } catch {
      return -1;
    }
  }

  private async saveCursor(): Promise<void> {
    const file = this.opts.cursorFile;
    // Unchanged: nothing to write (an fsync every poll of a quiet library would also make the file
    // system commit its journal, and with it the data of files being written, every interval).
    if (!file || this.cursor < 0 || this.cursor === this.savedCursor) return;
    const cursor = this.cursor;
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    // Whole after a power loss (an older cursor only replays changes the cache takes again).
    await writeFileAtomic(file, JSON.stringify({ cursor }), { durability: 'fsync-file', mode: 0o600 });
    this.savedCursor = cursor;
  }
}
