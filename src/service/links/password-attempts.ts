/**
 * PasswordAttempts: how many wrong passwords a share link takes before it stops listening for a while.
 * Failures are counted per link and client address (a few per window, then refused until the window
 * has passed) and per link over all clients (a higher bound: guessing spread over many addresses). A
 * refused attempt is not checked at all, so it tells the guesser nothing. The right password clears the
 * client's count. Memory is bounded: expired records are dropped, and the oldest when there are too many.
 */

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

export class PasswordAttempts {
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
