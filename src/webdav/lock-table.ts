/**
 * LockTable: the WebDAV locks of the gateway (RFC 4918 §6-7): exclusive and shared write locks of depth 0
 * or infinity, with timeouts. Kept in memory and persisted (atomic JSON file under the data folder) so a
 * restart keeps them. Expired locks are dropped on every look-up and by a sweep timer; `onExpire` lets the
 * server release what a lock holds (the service lock of a file).
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../shared/atomic-file.js';
import type { Logger } from '../shared/log.js';

export interface DavLock {
  /** `opaquelocktoken:<uuid>`. */
  token: string;
  /** Gateway path of the locked resource (no trailing slash). */
  root: string;
  depth: 0 | 'infinity';
  scope: 'exclusive' | 'shared';
  /** The client's `<D:owner>` content, as XML. */
  ownerXml: string;
  /** Requested lifetime, s; null = infinite. */
  timeoutS: number | null;
  /** When it ends, ms since the epoch; null = never. */
  expiresMs: number | null;
  /** User that took it (null for anonymous). */
  user: string | null;
  /** The lock also holds the service lock of the file. */
  serviceLock: boolean;
}

export interface LockTableOptions {
  dataDir: string;
  logger: Logger;
  /** Called for each lock that timed out (after it left the table). */
  onExpire?: (lock: DavLock) => void;
  /** Sweep interval, ms. Default 30 000. */
  sweepMs?: number;
  /** Clock, ms. Default Date.now. */
  clock?: () => number;
}

/** True when `path` is `root` or below it. */
export function isWithin(path: string, root: string): boolean {
  return path === root || root === '/' || path.startsWith(root + '/');
}

export class LockTable {
  /** Every live lock by token. Guarded by the event loop (all changes are synchronous, then persisted). */
  private readonly locks = new Map<string, DavLock>();
  private readonly file: string;
  private readonly clock: () => number;
  private sweeper?: NodeJS.Timeout;
  private saving: Promise<void> = Promise.resolve();
  private dirty = false;

  constructor(private readonly opts: LockTableOptions) {
    this.file = join(opts.dataDir, 'locks.json');
    this.clock = opts.clock ?? Date.now;
  }

  /** Loads persisted locks and starts the sweep. */
  async open(): Promise<void> {
    try {
      const saved = JSON.parse(await readFile(this.file, 'utf8')) as DavLock[];
      for (const l of saved) if (typeof l.token === 'string' && typeof l.root === 'string') this.locks.set(l.token, l);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.opts.logger.warn({ err }, 'webdav: lock table unreadable, starting empty');
    }
    this.sweep();
    this.sweeper = setInterval(() => this.sweep(), this.opts.sweepMs ?? 30_000);
    this.sweeper.unref();
  }

  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    await this.persist();
  }

  private sweep(): void {
    const now = this.clock();
    for (const l of [...this.locks.values()]) {
      if (l.expiresMs !== null && l.expiresMs <= now) {
        this.locks.delete(l.token);
        this.dirty = true;
        this.opts.onExpire?.(l);
      }
    }
    if (this.dirty) void this.persist();
  }

  /** Writes the table (serialised; the last state wins). */
  persist(): Promise<void> {
    this.dirty = true;
    this.saving = this.saving.then(async () => {
      if (!this.dirty) return;
      this.dirty = false;
      try {
        await mkdir(this.opts.dataDir, { recursive: true, mode: 0o700 });
        // Locks outlive a restart of the gateway; after a power loss an older table only holds locks
        // that expire by themselves.
        await writeFileAtomic(this.file, JSON.stringify([...this.locks.values()]), { durability: 'rename', mode: 0o600 });
      } catch (err) {
        this.opts.logger.warn({ err }, 'webdav: could not persist the lock table');
      }
    });
    return this.saving;
  }

  get(token: string): DavLock | undefined {
    this.sweep();
    return this.locks.get(token);
  }

  /** Locks that apply to `path`: on it, or depth infinity on an ancestor. */
  covering(path: string): DavLock[] {
    this.sweep();
    return [...this.locks.values()].filter((l) => l.root === path || (l.depth === 'infinity' && isWithin(path, l.root)));
  }

  /** Locks on `path` or anything below it. */
  within(path: string): DavLock[] {
    this.sweep();
    return [...this.locks.values()].filter((l) => isWithin(l.root, path));
  }

  /** The lock that a new one would conflict with, if any. */
  conflict(path: string, depth: 0 | 'infinity', scope: 'exclusive' | 'shared'): DavLock | undefined {
    const candidates = [...this.covering(path), ...(depth === 'infinity' ? this.within(path) : [])];
    return candidates.find((l) => scope === 'exclusive' || l.scope === 'exclusive');
  }

  create(l: Omit<DavLock, 'token' | 'expiresMs'>): DavLock {
    const lock: DavLock = { ...l, token: `opaquelocktoken:${randomUUID()}`, expiresMs: l.timeoutS === null ? null : this.clock() + l.timeoutS * 1000 };
    this.locks.set(lock.token, lock);
    void this.persist();
    return lock;
  }

  refresh(lock: DavLock, timeoutS: number | null): DavLock {
    lock.timeoutS = timeoutS;
    lock.expiresMs = timeoutS === null ? null : this.clock() + timeoutS * 1000;
    void this.persist();
    return lock;
  }

  remove(token: string): DavLock | undefined {
    const l = this.locks.get(token);
    if (l) {
      this.locks.delete(token);
      void this.persist();
    }
    return l;
  }

  /** Remaining lifetime in seconds, or null for infinite. */
  remainingS(lock: DavLock): number | null {
    return lock.expiresMs === null ? null : Math.max(0, Math.ceil((lock.expiresMs - this.clock()) / 1000));
  }
}
