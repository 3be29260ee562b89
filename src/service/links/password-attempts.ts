/**
 * PasswordAttempts: how many wrong passwords a share link takes before it stops listening for a while.
 * Failures are counted per link and client address (a few per window, then refused until the window
 * has passed) and per link over all clients (a higher bound: guessing spread over many addresses). A
 * refused attempt is not checked at all, so it tells the guesser nothing. The right password clears the
 * client's count. Memory is bounded: expired records are dropped, and the oldest when there are too many.
 *
 * Two implementations of `PasswordGuard`: PasswordAttempts, in the process's memory (the service on
 * SQLite, one process), and StoredPasswordAttempts, in the metadata store's table
 * `link_password_failures` (the service on PostgreSQL: the limits hold for all its processes together).
 */
import type { MetadataStore } from '../store/metadata-store.js';

/** The failure counts as the link pages use them. */
export interface PasswordGuard {
  /** Milliseconds to wait before `client` may try a password on link `code` again; 0 = may try now. */
  retryAfterMs(code: string, client: string): number | Promise<number>;
  /** Counts a wrong password. */
  failed(code: string, client: string): void | Promise<void>;
  /** The right password: the client's count starts over (the link's stays). */
  succeeded(code: string, client: string): void | Promise<void>;
}

export interface PasswordAttemptLimits {
  /** Wrong passwords one client may give one link per window. Default 5. */
  perClient: number;
  /** Wrong passwords one link takes per window from all clients together. Default 50. */
  perLink: number;
  /** The window, ms. Default 60 000. */
  windowMs: number;
  /** Records kept at most. Default 10 000. */
  maxRecords: number;
}

export const DEFAULT_PASSWORD_ATTEMPT_LIMITS: PasswordAttemptLimits = { perClient: 5, perLink: 50, windowMs: 60_000, maxRecords: 10_000 };

interface Failures { count: number; sinceMs: number }

export class PasswordAttempts implements PasswordGuard {
  private readonly limits: PasswordAttemptLimits;
  private readonly records = new Map<string, Failures>();

  constructor(private readonly clock: () => number, limits: Partial<PasswordAttemptLimits> = {}) {
    this.limits = { ...DEFAULT_PASSWORD_ATTEMPT_LIMITS, ...limits };
  }

  /** Milliseconds to wait before `client` may try a password on link `code` again; 0 = may try now. */
  retryAfterMs(code: string, client: string): number {
    const now = this.clock();
    const wait = (key: string, max: number): number => {
      const r = this.records.get(key);
      if (!r) return 0;
      const left = r.sinceMs + this.limits.windowMs - now;
      if (left <= 0) {
        this.records.delete(key);
        return 0;
      }
      return r.count >= max ? left : 0;
    };
    return Math.max(wait(clientKey(code, client), this.limits.perClient), wait(linkKey(code), this.limits.perLink));
  }

  /** Counts a wrong password. */
  failed(code: string, client: string): void {
    const now = this.clock();
    for (const key of [clientKey(code, client), linkKey(code)]) {
      const r = this.records.get(key);
      if (r && r.sinceMs + this.limits.windowMs > now) r.count++;
      else {
        this.records.delete(key);
        this.records.set(key, { count: 1, sinceMs: now });
      }
    }
    this.prune(now);
  }

  /** The right password: the client's count starts over (the link's stays). */
  succeeded(code: string, client: string): void {
    this.records.delete(clientKey(code, client));
  }

  private prune(now: number): void {
    if (this.records.size <= this.limits.maxRecords) return;
    for (const [key, r] of this.records) {
      if (this.records.size <= this.limits.maxRecords && r.sinceMs + this.limits.windowMs > now) break;
      this.records.delete(key);
    }
  }
}

const clientKey = (code: string, client: string): string => `c\0${code}\0${client}`;
const linkKey = (code: string): string => `l\0${code}`;

/**
 * The failure counts in the metadata store, shared by every process of a service. Each count changes by
 * one statement (an `INSERT … ON CONFLICT` that adds one within the window and starts over after it), so
 * failures through different processes add up. Expired rows are deleted as failures are counted (at most
 * 1 000 at a time).
 */
export class StoredPasswordAttempts implements PasswordGuard {
  private readonly limits: PasswordAttemptLimits;

  constructor(private readonly db: MetadataStore, private readonly clock: () => number, limits: Partial<PasswordAttemptLimits> = {}) {
    this.limits = { ...DEFAULT_PASSWORD_ATTEMPT_LIMITS, ...limits };
  }

  async retryAfterMs(code: string, client: string): Promise<number> {
    const now = this.clock();
    const rows = await this.db.all<{ key: string; count: number; since_ms: number }>(
      'SELECT key, count, since_ms FROM link_password_failures WHERE key IN (?, ?) AND since_ms > ?',
      [storedClientKey(code, client), storedLinkKey(code), now - this.limits.windowMs],
    );
    let wait = 0;
    for (const r of rows) {
      const max = r.key === storedLinkKey(code) ? this.limits.perLink : this.limits.perClient;
      if (Number(r.count) >= max) wait = Math.max(wait, Number(r.since_ms) + this.limits.windowMs - now);
    }
    return wait;
  }

  async failed(code: string, client: string): Promise<void> {
    const now = this.clock();
    const start = now - this.limits.windowMs;
    await this.db.tx(async (s) => {
      for (const key of [storedClientKey(code, client), storedLinkKey(code)]) {
        await s.run(
          'INSERT INTO link_password_failures (key, count, since_ms) VALUES (?, 1, ?) ON CONFLICT (key) DO UPDATE SET ' +
          'count = CASE WHEN link_password_failures.since_ms > ? THEN link_password_failures.count + 1 ELSE 1 END, ' +
          'since_ms = CASE WHEN link_password_failures.since_ms > ? THEN link_password_failures.since_ms ELSE excluded.since_ms END',
          [key, now, start, start],
        );
      }
      await s.run('DELETE FROM link_password_failures WHERE key IN (SELECT key FROM link_password_failures WHERE since_ms <= ? LIMIT 1000)', [start]);
    });
  }

  async succeeded(code: string, client: string): Promise<void> {
    await this.db.run('DELETE FROM link_password_failures WHERE key = ?', [storedClientKey(code, client)]);
  }
}

/** Keys of the stored counts (PostgreSQL text holds no NUL; a link code has no `/`). */
const storedClientKey = (code: string, client: string): string => `c/${code}/${client}`;
const storedLinkKey = (code: string): string => `l/${code}`;
