/**
 * SignatureLedger: the signatures the service accepted recently, with the endpoint each was used for.
 * The signature covers parameter values only (spec/signature.md), not the path, so a captured signed
 * `file/info` would verify on `file/del` with the same values. The ledger refuses a signature already
 * used for a different endpoint while its dateline is within the window; the same signature for the same
 * endpoint (a client's retry) passes. Memory is bounded: entries leave once their window has passed, and
 * at most `maxEntries` are kept (the oldest go first).
 *
 * Two implementations of `SignatureUses`: SignatureLedger, in the process's memory (the service on SQLite,
 * which is one process), and StoredSignatureLedger, in the metadata store's table `signature_uses` (the
 * service on PostgreSQL, where several processes share one ledger: a signature used on one process is
 * refused for another endpoint on every other).
 */
import type { MetadataStore } from '../store/metadata-store.js';

/** The ledger as the authenticator uses it. */
export interface SignatureUses {
  /**
   * Records `sign` as used for `path` by `peer` (its dateline in ms, or now when the call carries none).
   * Resolves to the first use when the signature was already used for another endpoint and is still
   * within the window (the first use stays the one remembered). `ahead`: the record may go with the
   * request's first transaction (a ledger in the metadata store).
   */
  use(sign: string, path: string, datelineMs: number | undefined, peer?: string, opts?: { ahead?: boolean; onEpoch?: (epoch: number) => void }): Promise<SignatureUse | undefined>;
}

export interface SignatureLedgerOptions {
  /** How long a signature is remembered after its dateline (ms). */
  windowMs: number;
  /** Most signatures kept. Default 200 000 (about 20 MB). */
  maxEntries?: number;
  clock: () => number;
}

/** The first use of a signature: the endpoint and the client address it came from. */
export interface SignatureUse { path: string; peer: string }

interface Use extends SignatureUse { untilMs: number }

export class SignatureLedger implements SignatureUses {
  /** Insertion order = order of first use; the sweep walks from the oldest. */
  private readonly uses = new Map<string, Use>();
  private readonly maxEntries: number;
  private nextSweepMs = 0;

  constructor(private readonly opts: SignatureLedgerOptions) {
    this.maxEntries = opts.maxEntries ?? 200_000;
  }

  get size(): number {
    return this.uses.size;
  }

  /**
   * Records `sign` as used for `path` by `peer` (its dateline in ms, or now when the call carries none).
   * Returns the first use when the signature was already used for another endpoint and is still within
   * the window (the first use stays the one remembered).
   */
  use(sign: string, path: string, datelineMs: number | undefined, peer = ''): Promise<SignatureUse | undefined> {
    return Promise.resolve(this.useNow(sign, path, datelineMs, peer));
  }

  /** `use`, answered synchronously. */
  useNow(sign: string, path: string, datelineMs: number | undefined, peer = ''): SignatureUse | undefined {
    const now = this.opts.clock();
    this.sweep(now);
    const prior = this.uses.get(sign);
    if (prior && prior.untilMs > now) {
      if (prior.path !== path) return { path: prior.path, peer: prior.peer };
      return undefined;
    }
    if (prior) this.uses.delete(sign);
    const untilMs = Math.max(datelineMs ?? now, now) + this.opts.windowMs;
    this.uses.set(sign, { path, peer, untilMs });
    while (this.uses.size > this.maxEntries) this.uses.delete(this.uses.keys().next().value as string);
    return undefined;
  }

  /**
   * Drops entries whose window has passed (at most once a second), oldest first, up to the first one still
   * in its window: entries are nearly in expiry order (a dateline ahead of the clock may stay a little
   * longer), so a sweep costs what it removes (at most 20 000 a time).
   */
  private sweep(now: number): void {
    if (now < this.nextSweepMs) return;
    this.nextSweepMs = now + 1_000;
    let budget = 20_000; // a bounded pause of the event loop; the rest goes at the next sweep
    for (const [sign, u] of this.uses) {
      if (u.untilMs > now || budget-- === 0) break;
      this.uses.delete(sign);
    }
  }
}

/**
 * The ledger in the metadata store (table `signature_uses`), shared by every process of a service. One
 * statement records a signature or finds its first use: an `INSERT … ON CONFLICT` that takes over only an
 * expired row and otherwise rewrites the live row as it was, returning it, so the caller waits for one
 * round trip either way, and two processes recording the same signature at once agree on which use was
 * first (the conflict waits for the other's row and updates its latest version). Expired rows are deleted
 * at most once a second per process, at most 20 000 at a time, beside the record.
 */
export class StoredSignatureLedger implements SignatureUses {
  private nextSweepMs = 0;

  constructor(private readonly db: MetadataStore, private readonly opts: { windowMs: number; clock: () => number }) {}

  /**
   * `ahead`: the record goes ahead of the request's work (MetadataStore.ahead), in the round trip of its
   * first transaction; the statement is idempotent (sent again, it finds its own row).
   */
  /**
   * `onEpoch`: also reads the authorization epoch (AuthorizationCache) in the record's statement, its
   * snapshot taken after the call arrived, and hands it over before resolving.
   */
  async use(sign: string, path: string, datelineMs: number | undefined, peer = '', opts: { ahead?: boolean; onEpoch?: (epoch: number) => void } = {}): Promise<SignatureUse | undefined> {
    const now = this.opts.clock();
    let swept: Promise<unknown> | undefined;
    if (now >= this.nextSweepMs) {
      this.nextSweepMs = now + 1_000;
      swept = this.db.run('DELETE FROM signature_uses WHERE sign IN (SELECT sign FROM signature_uses WHERE until_ms <= ? LIMIT 20000)', [now]);
      swept.catch(() => undefined); // awaited below; a failure meanwhile is not unhandled
    }
    const untilMs = Math.max(datelineMs ?? now, now) + this.opts.windowMs;
    const expired = 'signature_uses.until_ms <= ?';
    // The row after the statement: ours when recorded (new, or an expired one taken over), else the first use's.
    const send = opts.ahead && this.db.ahead ? this.db.ahead.bind(this.db) : this.db.get.bind(this.db);
    const record = 'INSERT INTO signature_uses (sign, path, peer, until_ms) VALUES (?, ?, ?, ?) ON CONFLICT (sign) DO UPDATE SET ' +
      `path = CASE WHEN ${expired} THEN excluded.path ELSE signature_uses.path END, ` +
      `peer = CASE WHEN ${expired} THEN excluded.peer ELSE signature_uses.peer END, ` +
      `until_ms = CASE WHEN ${expired} THEN excluded.until_ms ELSE signature_uses.until_ms END ` +
      `RETURNING path, peer${opts.onEpoch ? ', (SELECT n FROM authorization_epoch WHERE id = 1) AS epoch' : ''}`;
    const row = await send<{ path: string; peer: string; epoch?: number | string }>(record, [sign, path, peer, untilMs, now, now, now]);
    await swept;
    if (opts.onEpoch && row) opts.onEpoch(Number(row.epoch));
    // Ours, or a first use for the same endpoint: either way no other endpoint used it.
    return row && row.path !== path ? { path: row.path, peer: row.peer } : undefined;
  }
}
