/**
 * SignatureLedger: the signatures the service accepted recently, with the endpoint each was used for.
 * The signature covers parameter values only (spec/signature.md), not the path, so a captured signed
 * `file/info` would verify on `file/del` with the same values. The ledger refuses a signature already
 * used for a different endpoint while its dateline is within the window; the same signature for the same
 * endpoint (a client's retry) passes. Memory is bounded: entries leave once their window has passed, and
 * at most `maxEntries` are kept (the oldest go first). The ledger is per process: several service
 * processes behind one address each keep their own.
 */
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

export class SignatureLedger {
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
  use(sign: string, path: string, datelineMs: number | undefined, peer = ''): SignatureUse | undefined {
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
