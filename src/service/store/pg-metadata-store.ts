/**
 * PgMetadataStore: the MetadataStore over a pool of PostgreSQL connections (store/pg-database.ts). `?`
 * placeholders become `$1…`. A transaction holds one connection from BEGIN to COMMIT and starts over
 * (after a short random pause; at most 100 attempts) when PostgreSQL reports a serialization failure or
 * a deadlock: a transaction's body must do nothing but database work.
 *
 * - A transaction without a library is SERIALIZABLE: the same guarantee as SQLite's one writer at a time,
 *   so read-then-write code stays correct across processes.
 * - A library's transaction is READ COMMITTED behind the library row's lock (`SELECT … FOR UPDATE`): the
 *   changes of one library queue on that lock instead of colliding and starting over, and each
 *   statement sees every change committed before. Its operation times are counted here from the row's
 *   `last_op_ms` and written back with COMMIT. A library locked by a nested transaction, or by a
 *   reservation inside any transaction, gets the same.
 * - Round trips: BEGIN and the lock wait for the body's first statement, `runLater` statements for the
 *   next one, the clocks' write for COMMIT, and each goes in that statement's round trip, in order,
 *   pipelined (the pool's connections are in the driver's pipeline mode): each statement with values
 *   is named (store/pg-prepared.ts, planned once per connection) and its Parse/Bind/Execute written
 *   behind the others' without waiting for their answers. Statements the body issues in one turn of
 *   the event loop (awaited together) share a round trip the same way.
 */
import pg from 'pg';
import { PreparedStatements, isStalePlan } from './pg-prepared.js';
import { RequestAhead, type AheadStatement } from './pg-request-ahead.js';
import { replacePlaceholders } from './pg-placeholders.js';
import { combinableAhead, combinableRead, combinedRead, splitCombined } from './pg-combined-read.js';
import { TransactionScope, reserveOperationTimesByStatement, type MetadataSession, type LaterStatement, type MetadataStore, type RunResult, type StoreStats, type TransactionOptions } from './metadata-store.js';

const RETRYABLE = new Set(['40001', '40P01']);
/** Attempts of one transaction: enough for the pool's connections all colliding on one row. */
const MAX_ATTEMPTS = 100;

export class PgMetadataStore implements MetadataStore {
  readonly engine = 'postgresql';
  readonly stats: StoreStats = { roundTrips: 0, transactions: 0, retries: 0, lockWaitMs: 0 };
  open = true;
  private readonly scope = new TransactionScope();
  private readonly requestAhead = new RequestAhead();
  private readonly prepared = new PreparedStatements();

  constructor(readonly pool: pg.Pool) {}

  /** The transaction in progress here, else the pool. */
  private session(): MetadataSession {
    return this.scope.session() ?? sessionOf({ query: (sql, params) => this.poolQuery(sql, params) }, this.stats);
  }

  /**
   * A statement outside a transaction. The request's statements ahead go first: in the same round trip
   * before a plain read, by themselves before anything else (a write must not run before their answer).
   */
  private async poolQuery(sql: string, params: unknown[]): Promise<pg.QueryResult> {
    const ahead = this.requestAhead.take();
    const read = /^\s*SELECT\b/i.test(sql) && !/\bFOR\s+UPDATE\b/i.test(sql);
    if (ahead.length === 1 && read && combinableAhead(ahead[0]!.sql) && combinableRead(sql)) {
      // One statement, prepared: the statement ahead and the read in one round trip.
      const a = ahead[0]!;
      try {
        const { aheadRows, read: result } = splitCombined(await this.preparedQuery(combinedRead(a, { sql, params })));
        a.resolve(aheadRows);
        return result;
      } catch {
        // Which part failed is not known: each goes again by itself, and answers for itself.
        await this.sendAlone(a);
        return this.preparedQuery({ sql, params });
      }
    }
    if (ahead.length > 0 && read) {
      let batch: string[] | undefined;
      try {
        batch = [...ahead.map((a) => inlined(a.sql, a.params, pg)), inlined(sql, params, pg)];
      } catch {
        batch = undefined; // a value that has no literal here: each goes by itself
      }
      if (batch) {
        try {
          const results = await this.pool.query(batch.join(';\n')) as unknown as pg.QueryResult[];
          ahead.forEach((a, i) => a.resolve(results[i]!.rows));
          return results[results.length - 1]!;
        } catch {
          // Which statement failed is not known: each goes again by itself, and answers for itself.
        }
      }
    }
    for (const a of ahead) await this.sendAlone(a);
    // A write outside a transaction waits for the request's gates: it may not run for a refused call.
    if (!read) await Promise.all(this.requestAhead.gates());
    return this.preparedQuery({ sql, params });
  }

  /** A statement with values, named (planned once per connection); named anew once after a stale plan. */
  private async preparedQuery(q: { sql: string; params: unknown[] }): Promise<pg.QueryResult> {
    try {
      return await this.pool.query(this.prepared.query(q.sql, q.params));
    } catch (err) {
      if (!isStalePlan(err)) throw err;
      this.prepared.renew();
      return this.pool.query(this.prepared.query(q.sql, q.params));
    }
  }

  /** A statement ahead in a round trip of its own (its failure is its caller's). */
  private async sendAlone(a: AheadStatement): Promise<void> {
    this.stats.roundTrips++;
    try {
      a.resolve((await this.pool.query(a.sql, a.params as unknown[])).rows);
    } catch (err) {
      a.reject(err);
    }
  }

  request<T>(fn: () => Promise<T>): Promise<T> {
    return this.requestAhead.run(fn);
  }

  async ahead<T>(sql: string, params: readonly unknown[]): Promise<T | undefined> {
    if (!this.requestAhead.active()) return this.get<T>(sql, params);
    return (await this.requestAhead.queue(numbered(sql), params))[0] as T | undefined;
  }

  gate(p: Promise<unknown>): void {
    if (this.requestAhead.active()) this.requestAhead.gate(p);
  }

  async sendAhead(): Promise<void> {
    for (const a of this.requestAhead.take()) await this.sendAlone(a);
  }

  get<T>(sql: string, params?: readonly unknown[]): Promise<T | undefined> {
    return this.session().get<T>(sql, params);
  }

  all<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    return this.session().all<T>(sql, params);
  }

  run(sql: string, params?: readonly unknown[]): Promise<RunResult> {
    return this.session().run(sql, params);
  }

  insert(sql: string, params?: readonly unknown[]): Promise<number> {
    return this.session().insert(sql, params);
  }

  runLater<T = unknown>(sql: string, params?: readonly unknown[]): Promise<LaterStatement<T>> {
    return this.session().runLater<T>(sql, params);
  }

  reserveOperationTimes(libraryId: number, now: number, n: number): Promise<number> {
    return this.session().reserveOperationTimes(libraryId, now, n);
  }

  async tx<T>(fn: (session: MetadataSession) => Promise<T>, opts: TransactionOptions = {}): Promise<T> {
    const library = opts.library;
    if (library !== undefined && !Number.isSafeInteger(library)) throw new TypeError(`library: expected an integer id, got ${String(library)}`);
    const inTx = this.scope.session();
    if (inTx) {
      const t = inTx as PgTransaction;
      if (library !== undefined) t.lockLibrary(library);
      const result = await fn(inTx);
      // A nested body's queued statements whose rows someone may wait for go at its end: the body
      // around it may wait for them before it sends anything else.
      await t.sendQueuedRows();
      return result;
    }
    for (let attempt = 1; ; attempt++) {
      const waitFrom = performance.now();
      const client = await this.pool.connect();
      let t: PgTransaction | undefined;
      try {
        t = new PgTransaction(client, this.stats, this.prepared, this.requestAhead.gates(), (a) => this.sendAlone(a));
        t.begin(library, this.requestAhead.take());
        const result = await this.scope.run(t, fn);
        await t.commit();
        this.stats.lockWaitMs += (t.begunAt ?? performance.now()) - waitFrom;
        this.stats.transactions++;
        return result;
      } catch (err) {
        t?.abandon(err);
        this.stats.roundTrips++;
        await client.query('ROLLBACK').catch(() => undefined);
        // A statement prepared under an older schema: named anew, the transaction starts over.
        if (isStalePlan(err)) this.prepared.renew();
        if (attempt >= MAX_ATTEMPTS || !(RETRYABLE.has((err as { code?: string }).code ?? '') || isStalePlan(err))) {
          this.stats.transactions++;
          throw err;
        }
        this.stats.retries++;
      } finally {
        client.release();
      }
      // Jittered backoff: of the transactions that collided, one commits per round.
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 * attempt)));
    }
  }

  async close(): Promise<void> {
    this.open = false;
    await this.pool.end();
  }
}

/** One transaction on its connection: its statements and the clocks of the libraries it has locked. */
class PgTransaction implements MetadataSession {
  /** Library id → its last operation time, and whether this transaction advanced it. */
  private readonly clocks = new Map<number, { last: number; advanced: boolean }>();
  /** Statements not sent yet (BEGIN, a library's lock, `runLater` ones), and what to do with a result. */
  private later: Pending[] = [];
  /** Libraries whose lock this transaction took or has queued. */
  private readonly locked = new Set<number>();
  /** When the round trip that sent BEGIN came back (performance.now()). */
  begunAt: number | undefined;
  private readonly session: MetadataSession;

  constructor(
    private readonly client: pg.PoolClient,
    private readonly stats: StoreStats,
    private readonly prepared: PreparedStatements,
    /** The request's gates: COMMIT waits for them. */
    private readonly gates: readonly Promise<unknown>[] = [],
    /** Sends a statement ahead by itself, outside this transaction. */
    private readonly sendAlone: (a: AheadStatement) => Promise<void> = async () => undefined,
  ) {
    // Round trips are counted as they are sent (several statements may share one).
    this.session = sessionOf({ query: (sql: string, params: unknown[]) => this.query(sql, params) }, stats, false);
  }

  /**
   * A statement, with the queued ones before it and the others the body issues in the same turn of the
   * event loop (independent statements awaited together, `Promise.all`) in its round trip.
   */
  private query(sql: string, params: unknown[]): Promise<pg.QueryResult> {
    return new Promise<pg.QueryResult>((resolve, reject) => {
      this.issued.push({ sql, params, resolve, reject });
      if (this.issued.length === 1) queueMicrotask(() => void this.sendIssued());
    });
  }

  /** Statements issued and not sent yet, in the order issued. */
  private issued: { sql: string; params: unknown[]; resolve: (r: pg.QueryResult) => void; reject: (e: unknown) => void }[] = [];

  /**
   * Sends what the body issued in this turn, after the queued statements, in one round trip. A failure
   * fails each of them (the transaction is aborted either way).
   */
  private async sendIssued(): Promise<void> {
    const issued = this.issued;
    if (issued.length === 0) return; // sent already (by COMMIT)
    this.issued = [];
    try {
      this.stats.roundTrips++;
      const results = await this.flush(issued.map((q) => ({ sql: q.sql, params: q.params })));
      issued.forEach((q, i) => q.resolve(results[results.length - issued.length + i]!));
    } catch (err) {
      this.failure ??= err;
      for (const q of issued) q.reject(err);
    }
  }

  /** The first failure of statements sent together: the transaction is aborted, COMMIT must not pass for one. */
  private failure: unknown;

  /**
   * Sends the queued statements and `last` pipelined, in one round trip; their results in order. Each
   * statement is answered by itself: a statement ahead (before BEGIN, committed by itself) answers its
   * caller with its own result; a failure of the transaction's statements is the first of them (those
   * after it fail as the transaction is aborted).
   */
  private async flush(last: Pending[]): Promise<pg.QueryResult[]> {
    const batch = [...this.later, ...last];
    this.later = [];
    const settled = await Promise.allSettled(batch.map((b) => this.client.query(this.prepared.query(b.sql, b.params ?? []))));
    this.begunAt ??= performance.now();
    let failure: { reason: unknown } | undefined;
    settled.forEach((s, i) => {
      const b = batch[i]!;
      if (b.ahead) {
        if (s.status === 'fulfilled') b.ahead.resolve(s.value.rows);
        else b.ahead.reject(s.reason);
      } else if (s.status === 'rejected') {
        failure ??= { reason: s.reason };
        b.fail?.(s.reason);
      } else {
        b.then?.(s.value);
      }
    });
    if (failure) throw failure.reason;
    return settled.map((s) => (s.status === 'fulfilled' ? s.value : undefined) as pg.QueryResult);
  }

  get<T>(sql: string, params?: readonly unknown[]): Promise<T | undefined> { return this.session.get<T>(sql, params); }
  all<T>(sql: string, params?: readonly unknown[]): Promise<T[]> { return this.session.all<T>(sql, params); }
  run(sql: string, params?: readonly unknown[]): Promise<RunResult> { return this.session.run(sql, params); }
  insert(sql: string, params?: readonly unknown[]): Promise<number> { return this.session.insert(sql, params); }

  async runLater<T = unknown>(sql: string, params: readonly unknown[] = []): Promise<LaterStatement<T>> {
    let answer!: { resolve: (r: pg.QueryResult) => void; reject: (e: unknown) => void };
    const rows = new Promise<pg.QueryResult>((resolve, reject) => { answer = { resolve, reject }; }).then((r) => r.rows as T[]);
    rows.catch(() => undefined); // the transaction fails with it; whoever waits for the rows sees it too
    const statement = { sql: numbered(sql), params: [...params] };
    // After the statements issued in this turn and not sent yet, as it was issued after them.
    if (this.issued.length > 0) {
      this.issued.push({ ...statement, ...answer });
      return { rows };
    }
    // A statement that returns rows (RETURNING) is sent at a nested transaction's end (sendQueuedRows).
    this.later.push({ ...statement, then: answer.resolve, fail: answer.reject, wanted: RETURNS_ROWS.test(sql) });
    return { rows };
  }

  /**
   * Queues BEGIN, and for a library's transaction the lock of its row: they go in the round trip of the
   * body's first statement (or of COMMIT), which runs once the lock is held.
   */
  begin(library: number | undefined, ahead: readonly AheadStatement[] = []): void {
    // Before BEGIN, committed by itself (outside a transaction block each pipelined statement is its
    // own transaction): the transaction's fate is not the statement's.
    for (const a of ahead) this.later.push({ sql: a.sql, params: [...a.params], ahead: a });
    this.later.push({ sql: `BEGIN ISOLATION LEVEL ${library === undefined ? 'SERIALIZABLE' : 'READ COMMITTED'}` });
    if (library !== undefined) this.lockLibrary(library);
  }

  /** Queues the lock of a library's row (once per transaction), read with its clock. */
  lockLibrary(library: number): void {
    if (this.locked.has(library)) return;
    this.locked.add(library);
    this.later.push({ sql: LOCK_SQL, params: [library], then: (r) => this.track(library, r.rows[0] as { last_op_ms: number } | undefined) });
  }

  async reserveOperationTimes(libraryId: number, now: number, n: number): Promise<number> {
    let clock = this.clocks.get(libraryId);
    if (!clock) {
      // The statement takes the row's lock: later reservations of this transaction are counted here.
      const first = await reserveOperationTimesByStatement(this.session, libraryId, now, n);
      this.locked.add(libraryId);
      this.clocks.set(libraryId, { last: first + n - 1, advanced: false });
      return first;
    }
    const first = Math.max(now, clock.last + 1);
    clock = { last: first + n - 1, advanced: true };
    this.clocks.set(libraryId, clock);
    return first;
  }

  /** Sends the queued statements now if one of them returns rows someone may wait for (runLater's `rows`). */
  async sendQueuedRows(): Promise<void> {
    if (this.issued.length > 0) await this.sendIssued();
    if (!this.later.some((q) => q.wanted)) return;
    this.stats.roundTrips++;
    try {
      await this.flush([]);
    } catch (err) {
      this.failure ??= err;
      throw err;
    }
  }

  /** The statements still queued when the transaction fails: they never run. */
  abandon(err: unknown): void {
    for (const q of this.later.splice(0)) q.fail?.(err);
    for (const q of this.issued.splice(0)) q.reject(err);
  }

  /** Writes the clocks this transaction advanced and commits, in one round trip. */
  async commit(): Promise<void> {
    // A statement the body left unawaited goes before COMMIT, inside the transaction.
    if (this.issued.length > 0) await this.sendIssued();
    if (this.failure !== undefined) throw this.failure;
    if (this.gates.length > 0) {
      // The gates may wait for a statement ahead still queued here: it goes first (BEGIN with it).
      if (this.later.some((b) => b.ahead)) {
        this.stats.roundTrips++;
        await this.flush([]);
      }
      await Promise.all(this.gates);
    }
    for (const [id, c] of this.clocks) if (c.advanced) this.later.push({ sql: CLOCK_SQL, params: [c.last, id] });
    this.stats.roundTrips++;
    await this.flush([{ sql: 'COMMIT' }]);
  }

  private track(library: number, row: { last_op_ms: number } | undefined): void {
    // A missing library is no one's to lock: reservations for it fail as they would alone.
    if (row) this.clocks.set(library, { last: row.last_op_ms, advanced: false });
  }
}

/** A statement that returns rows. */
const RETURNS_ROWS = /\bRETURNING\b/i;
const LOCK_SQL = 'SELECT last_op_ms FROM libraries WHERE id = $1 FOR UPDATE';
const CLOCK_SQL = 'UPDATE libraries SET last_op_ms = $1 WHERE id = $2';

/** A statement of a transaction not sent yet: `$n` placeholders and their values; what reads its result. */
interface Pending {
  sql: string;
  params?: unknown[];
  then?: (result: pg.QueryResult) => void;
  /** Told the statement's failure (or that the transaction failed before it ran). */
  fail?: (err: unknown) => void;
  /** It returns rows someone may wait for (runLater): a nested transaction's end sends it. */
  wanted?: boolean;
  /** A request's statement ahead: answers its caller with its own result. */
  ahead?: AheadStatement;
}

/** Where a session's statements go: the pool (each by itself) or a transaction's connection. */
interface Queryable { query(sql: string, params: unknown[]): Promise<pg.QueryResult> }

function sessionOf(q: Queryable, stats: StoreStats, counted = true): MetadataSession {
  const query = (sql: string, params: readonly unknown[] = []) => {
    if (counted) stats.roundTrips++;
    return q.query(numbered(sql), params as unknown[]);
  };
  const get = async <T>(sql: string, params?: readonly unknown[]) => (await query(sql, params)).rows[0] as T | undefined;
  return {
    get,
    all: async <T>(sql: string, params?: readonly unknown[]) => (await query(sql, params)).rows as T[],
    run: async (sql: string, params?: readonly unknown[]) => ({ changes: (await query(sql, params)).rowCount ?? 0 }),
    insert: async (sql: string, params?: readonly unknown[]) => Number((await query(`${sql} RETURNING id`, params)).rows[0].id),
    runLater: async <T>(sql: string, params?: readonly unknown[]) => ({ rows: Promise.resolve((await query(sql, params)).rows as T[]) }),
    reserveOperationTimes: (libraryId: number, now: number, n: number) => reserveOperationTimesByStatement({ get }, libraryId, now, n),
  };
}

/**
 * `$1`, `$2`, … of `sql` (as `numbered` writes them) replaced by their values as SQL literals: strings
 * escaped by the driver, numbers quoted the same way (an untyped literal takes its type from where it
 * stands, as the driver's untyped parameters do, and a negative number never meets a minus sign
 * before it), null as NULL; any other value is refused.
 */
export function inlined(sql: string, params: readonly unknown[], client: Pick<pg.ClientBase, 'escapeLiteral'>): string {
  const literal = (v: unknown): string => {
    if (v === null || v === undefined) return 'NULL';
    if (typeof v === 'number' && Number.isFinite(v)) return `'${String(v)}'`;
    if (typeof v === 'string') return client.escapeLiteral(v);
    throw new TypeError(`a statement sent later takes numbers, strings and null, got ${typeof v}`);
  };
  return replacePlaceholders(sql, (n) => {
    if (n < 1 || n > params.length) throw new RangeError(`statement has $${n} but ${params.length} values`);
    return literal(params[n - 1]);
  });
}

/** `?` → `$1`, `$2`, … outside quoted strings and identifiers. */
export function numbered(sql: string): string {
  let n = 0;
  let quote: string | undefined;
  let out = '';
  for (const ch of sql) {
    if (quote) {
      if (ch === quote) quote = undefined;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
    } else if (ch === '?') {
      out += `$${++n}`;
      continue;
    }
    out += ch;
  }
  return out;
}
