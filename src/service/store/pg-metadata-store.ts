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
 *   next one, the clocks' write for COMMIT, and each goes in that statement's round trip, in order, as
 *   one simple query (which takes no parameters: values are written into the SQL as literals, strings
 *   escaped by the driver). Statements the body issues in one turn of the event loop (awaited together)
 *   share a round trip the same way.
 */
import pg from 'pg';
import { PreparedStatements, isStalePlan } from './pg-prepared.js';
import { RequestAhead, type AheadStatement } from './pg-request-ahead.js';
import { clockBelow, clockRead, clockWhenChanged, fingerprinted, isReadChanged, stillReads, takeFingerprint } from './pg-read-checks.js';
import { TransactionScope, reserveOperationTimesByStatement, type MetadataSession, type MetadataStore, type RunResult, type StoreStats, type TransactionOptions } from './metadata-store.js';

const RETRYABLE = new Set(['40001', '40P01']);
/** Attempts of one transaction: enough for the pool's connections all colliding on one row. */
const MAX_ATTEMPTS = 100;
/** Attempts with the lock taken at commit whose reads changed, after which the lock is taken first. */
const READ_CHANGES = 3;

export class PgMetadataStore implements MetadataStore {
  readonly engine = 'postgresql';
  readonly stats: StoreStats = { roundTrips: 0, transactions: 0, retries: 0, readChanges: 0, lockWaitMs: 0 };
  open = true;
  private readonly scope = new TransactionScope();
  private readonly requestAhead = new RequestAhead();
  private readonly prepared = new PreparedStatements();
  /**
   * Library id → the last operation time a transaction of this process reserved before its lock: the
   * next one reserves above it, so two changes reserving in one millisecond do not take the same time.
   */
  private readonly reservedBeforeLock = new Map<number, number>();

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
    try {
      return await this.pool.query(this.prepared.query(sql, params));
    } catch (err) {
      if (!isStalePlan(err)) throw err;
      this.prepared.renew();
      return this.pool.query(this.prepared.query(sql, params));
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

  runLater(sql: string, params?: readonly unknown[]): Promise<void> {
    return this.session().runLater(sql, params);
  }

  reserveOperationTimes(libraryId: number, now: number, n: number): Promise<number> {
    return this.session().reserveOperationTimes(libraryId, now, n);
  }

  async tx<T>(fn: (session: MetadataSession) => Promise<T>, opts: TransactionOptions = {}): Promise<T> {
    const library = opts.library;
    if (library !== undefined && !Number.isSafeInteger(library)) throw new TypeError(`library: expected an integer id, got ${String(library)}`);
    const inTx = this.scope.session();
    if (inTx) {
      if (library !== undefined) (inTx as PgTransaction).lockLibrary(library);
      return fn(inTx);
    }
    let lockAtCommit = library !== undefined && opts.lockAtCommit === true;
    let readChanges = 0;
    let replay: ReadsBeforeLock | undefined;
    for (let attempt = 1; ; attempt++) {
      const waitFrom = performance.now();
      const client = await this.pool.connect();
      let readChanged = false;
      let t: PgTransaction | undefined;
      try {
        t = new PgTransaction(client, this.stats, this.prepared, this.requestAhead.gates(), (a) => this.sendAlone(a), this.reservedBeforeLock);
        t.begin(library, this.requestAhead.take(), lockAtCommit, replay);
        const result = await this.scope.run(t, fn);
        await t.commit();
        this.stats.lockWaitMs += (t.begunAt ?? performance.now()) - waitFrom;
        this.stats.transactions++;
        return result;
      } catch (err) {
        // A transaction whose lock waited for commit and never took it has nothing to roll back.
        if (t?.begun() !== false) {
          this.stats.roundTrips++;
          await client.query('ROLLBACK').catch(() => undefined);
        }
        // A statement prepared under an older schema: named anew, the transaction starts over.
        if (isStalePlan(err)) this.prepared.renew();
        readChanged = isReadChanged(err);
        if (attempt >= MAX_ATTEMPTS || !(RETRYABLE.has((err as { code?: string }).code ?? '') || isStalePlan(err) || readChanged)) {
          this.stats.transactions++;
          throw err;
        }
        if (readChanged) {
          this.stats.readChanges++;
          // Only the clock moved (its check comes after every read's): the reads, checked again, serve
          // the next attempt, which then takes one round trip.
          const clock = clockWhenChanged(err);
          replay = clock !== undefined && t ? { reads: t.readsBeforeLock(), clock } : undefined;
          // Reads that keep changing before the lock: the lock first, as any library's transaction.
          if (++readChanges >= READ_CHANGES) lockAtCommit = false;
        } else {
          this.stats.retries++;
        }
      } finally {
        client.release();
      }
      // Jittered backoff: of the transactions that collided, one commits per round. A read that changed
      // before the lock collided with a change that has committed: at once.
      if (!readChanged) await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 * attempt)));
    }
  }

  async close(): Promise<void> {
    this.open = false;
    await this.pool.end();
  }
}

/**
 * A statement queued to go with a later one: SQL with its values inlined, what to do with its result or
 * its failure, whether it writes (a body's statement) and the statement ahead it sends, if it is one.
 */
interface Queued {
  sql: string;
  then?: (result: pg.QueryResult) => void;
  fail?: (err: unknown) => void;
  write?: boolean;
  ahead?: AheadStatement;
}

/**
 * The reads an attempt made before its lock (values inlined, rows, fingerprint), in order, and the clock
 * its check found: what the next attempt reads again, without a round trip, when only the clock moved.
 */
interface ReadsBeforeLock {
  reads: { sql: string; rows: unknown[]; fingerprint: string }[];
  clock: number;
}

/** A library's transaction whose lock waits for commit (TransactionOptions.lockAtCommit), until it takes it. */
interface BeforeLock {
  library: number;
  /** The request's statements ahead, for the first round trip of reads. */
  ahead: readonly AheadStatement[];
  /** Reads issued and not sent yet; `check` is their place among the queued statements. */
  reads: { sql: string; check: Queued; resolve: (r: pg.QueryResult) => void; reject: (e: unknown) => void }[];
  /** Round trips of reads not answered yet. */
  inFlight: Set<Promise<void>>;
  /** The library's clock read before the lock (undefined: no such library); unset until sent. */
  clock: Promise<number | undefined> | undefined;
  /** The first operation time reserved from that clock. */
  first: number | undefined;
  /** The reads of the attempt before, answered again in order while they are the same. */
  replay: ReadsBeforeLock['reads'];
  /** The reads answered so far. */
  seen: ReadsBeforeLock['reads'];
}

const isRead = (sql: string) => /^\s*SELECT\b/i.test(sql) && !/\bFOR\s+UPDATE\b/i.test(sql);

/** The next operation time: max(now, last + 1). */
const nextTime = (now: number, last: number) => Math.max(now, last + 1);

/** One transaction on its connection: its statements and the clocks of the libraries it has locked. */
class PgTransaction implements MetadataSession {
  /** Library id → its last operation time, and whether this transaction advanced it. */
  private readonly clocks = new Map<number, { last: number; advanced: boolean }>();
  /**
   * Statements not sent yet (BEGIN, a library's lock, `runLater` ones; before the lock, the body's writes
   * and the checks of its reads), as SQL with their values inlined, and what to do with a result.
   */
  private later: Queued[] = [];
  /** Set while a transaction with its lock at commit has not taken it. */
  private beforeLock: BeforeLock | undefined;
  /** The round trip that takes the lock before commit, once started. */
  private locking: Promise<void> | undefined;
  /** Set when COMMIT is on its way: no round trip of its own takes the lock. */
  private committing = false;
  /** The library and first time reserved before the lock, checked at commit (clockBelow). */
  private clockCheck: { library: number; first: number } | undefined;
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
    /** The store's last times reserved before a lock, by library. */
    private readonly reservedBeforeLock = new Map<number, number>(),
  ) {
    // Round trips are counted as they are sent (several statements may share one).
    this.session = sessionOf({ query: (sql: string, params: unknown[]) => this.query(sql, params) }, stats, false);
  }

  /**
   * A statement, with the queued ones before it and the others the body issues in the same turn of the
   * event loop (independent statements awaited together, `Promise.all`) in its round trip. A statement
   * alone, with nothing queued, goes with its parameters as they are.
   */
  private query(sql: string, params: unknown[]): Promise<pg.QueryResult> {
    if (this.beforeLock) return this.queryBeforeLock(this.beforeLock, sql, params);
    return new Promise<pg.QueryResult>((resolve, reject) => {
      this.issued.push({ sql, params, resolve, reject });
      if (this.issued.length === 1) queueMicrotask(() => void this.sendIssued());
    });
  }

  /** Statements issued and not sent yet, in the order issued. */
  private issued: { sql: string; params: unknown[]; resolve: (r: pg.QueryResult) => void; reject: (e: unknown) => void }[] = [];

  /**
   * Sends what the body issued in this turn: one statement with nothing queued as itself; else all of
   * them, after the queued ones, as one simple query (values inlined). A failure fails each of them (the
   * transaction is aborted either way).
   */
  private async sendIssued(): Promise<void> {
    const issued = this.issued;
    if (issued.length === 0) return; // sent already (by COMMIT)
    this.issued = [];
    try {
      let sqls: string[] | undefined;
      if (this.later.length > 0 || issued.length > 1) {
        try {
          sqls = issued.map((q) => inlined(q.sql, q.params, this.client));
        } catch {
          sqls = undefined; // a value that has no literal here: each goes by itself, with its parameters
        }
      }
      if (!sqls) {
        for (const q of issued) {
          if (this.later.length > 0) {
            this.stats.roundTrips++;
            await this.flush([]);
          }
          this.stats.roundTrips++;
          q.resolve(await this.client.query(this.prepared.query(q.sql, q.params)));
        }
        return;
      }
      this.stats.roundTrips++;
      const results = await this.flush(sqls.map((sql) => ({ sql })));
      issued.forEach((q, i) => q.resolve(results[results.length - issued.length + i]!));
    } catch (err) {
      this.failure ??= err;
      for (const q of issued) q.reject(err);
    }
  }

  /** The first failure of statements sent together: the transaction is aborted, COMMIT must not pass for one. */
  private failure: unknown;

  /** Sends the queued statements and `last` as one simple query; their results in order. */
  private async flush(last: { sql: string }[]): Promise<pg.QueryResult[]> {
    const batch: Queued[] = [...this.later, ...last];
    this.later = [];
    let sent: pg.QueryResult | pg.QueryResult[];
    try {
      sent = await this.client.query(batch.map((b) => b.sql).join(';\n')) as unknown as pg.QueryResult | pg.QueryResult[];
    } catch (err) {
      // Whether a statement ahead ran is not known: each goes again by itself (they are idempotent).
      for (const b of batch) if (b.ahead) await this.sendAlone(b.ahead);
      for (const b of batch) b.fail?.(err);
      throw err;
    }
    this.begunAt ??= performance.now();
    const results = Array.isArray(sent) ? sent : [sent];
    batch.forEach((b, i) => b.then?.(results[i]!));
    return results;
  }

  // ---- before the lock (lockAtCommit) --------------------------------------------------------------

  /**
   * A statement of a body whose lock waits for commit. A read goes now, outside the transaction, with
   * its fingerprint, and leaves its check in its place among the queued statements; a write is queued,
   * and when the body waits for its result (nothing else to run before the next turn of the event loop)
   * the lock is taken with it.
   */
  private queryBeforeLock(b: BeforeLock, sql: string, params: unknown[]): Promise<pg.QueryResult> {
    let text: string;
    try {
      text = inlined(sql, params, this.client);
    } catch {
      // A value that has no literal here: the lock now, and the statement as itself.
      return this.lockNow().then(() => this.query(sql, params));
    }
    if (isRead(sql)) {
      const check: Queued = { sql: '' };
      this.later.push(check);
      const again = b.replay.shift();
      if (again?.sql === text) {
        check.sql = stillReads(text, again.fingerprint);
        b.seen.push(again);
        return Promise.resolve({ rows: structuredClone(again.rows), rowCount: again.rows.length } as pg.QueryResult);
      }
      b.replay = [];
      return new Promise((resolve, reject) => {
        b.reads.push({ sql: text, check, resolve, reject });
        if (b.reads.length === 1) queueMicrotask(() => this.sendReads(b));
      });
    }
    return new Promise((resolve, reject) => {
      this.later.push({ sql: text, then: resolve, fail: reject, write: true });
      setImmediate(() => {
        if (this.beforeLock === b && !this.committing) this.lockNow().catch(() => undefined);
      });
    });
  }

  /**
   * Sends the reads issued (the first time with the request's statements ahead and the library's clock)
   * in one round trip outside the transaction; `clock`: even with no read.
   */
  private sendReads(b: BeforeLock, clock = false): void {
    if (b.reads.length === 0 && !(clock && b.clock === undefined)) return;
    const reads = b.reads;
    b.reads = [];
    const sqls: string[] = [];
    const ahead: AheadStatement[] = [];
    for (const a of b.ahead) {
      try {
        sqls.push(inlined(a.sql, a.params, this.client));
        ahead.push(a);
      } catch {
        void this.sendAlone(a); // a value that has no literal here: by itself
      }
    }
    b.ahead = [];
    let clockAnswer: { resolve: (v: number | undefined) => void; reject: (e: unknown) => void } | undefined;
    if (b.clock === undefined) {
      b.clock = new Promise((resolve, reject) => { clockAnswer = { resolve, reject }; });
      b.clock.catch(() => undefined); // awaited by a reservation, if any
      sqls.push(clockRead(b.library));
    }
    for (const r of reads) sqls.push(fingerprinted(r.sql));
    this.stats.roundTrips++;
    const answered = (async () => {
      let results: pg.QueryResult[];
      try {
        const sent = await this.client.query(sqls.join(';\n')) as unknown as pg.QueryResult | pg.QueryResult[];
        results = Array.isArray(sent) ? sent : [sent];
      } catch (err) {
        // Which statement failed is not known: each statement ahead goes again by itself.
        for (const a of ahead) await this.sendAlone(a);
        clockAnswer?.reject(err);
        for (const r of reads) r.reject(err);
        return;
      }
      ahead.forEach((a, i) => a.resolve(results[i]!.rows));
      let i = ahead.length;
      if (clockAnswer) clockAnswer.resolve((results[i++]!.rows[0] as { last_op_ms: number } | undefined)?.last_op_ms);
      for (const r of reads) {
        const result = results[i++]!;
        const fingerprint = takeFingerprint(result.rows as Record<string, unknown>[]);
        r.check.sql = stillReads(r.sql, fingerprint);
        b.seen.push({ sql: r.sql, rows: structuredClone(result.rows), fingerprint });
        r.resolve(result);
      }
    })();
    b.inFlight.add(answered);
    void answered.finally(() => b.inFlight.delete(answered));
  }

  /** Once every read issued before the lock has its answer (and its check in place). */
  private async readsAnswered(b: BeforeLock): Promise<void> {
    for (;;) {
      this.sendReads(b);
      if (b.inFlight.size === 0) return;
      await Promise.all([...b.inFlight]);
    }
  }

  /**
   * Queues, ahead of what the body queued, BEGIN, the lock and the check that the times reserved from
   * the clock read before are still the next ones; from here on the transaction is as any other.
   */
  private takeLockFirst(b: BeforeLock): void {
    this.beforeLock = undefined;
    this.seen = b.seen;
    // Times reserved before: checked last, before COMMIT, so that a failed check says the reads held.
    if (b.first !== undefined) this.clockCheck = { library: b.library, first: b.first };
    const lock: Queued = b.first === undefined
      ? { sql: lockSql(b.library), then: (r) => this.track(b.library, r.rows[0] as { last_op_ms: number } | undefined) }
      : { sql: lockSql(b.library) };
    this.later = [{ sql: 'BEGIN ISOLATION LEVEL READ COMMITTED' }, lock, ...this.later.filter((q) => q.sql !== '')];
  }

  /** The reads made before the lock so far (for the next attempt, see ReadsBeforeLock). */
  readsBeforeLock(): ReadsBeforeLock['reads'] {
    return this.beforeLock?.seen ?? this.seen;
  }

  /** The reads made before the lock, once it is taken. */
  private seen: ReadsBeforeLock['reads'] = [];

  /** Takes the lock before commit (the body waits for a write's result), with what the body queued. */
  private lockNow(): Promise<void> {
    this.locking ??= (async () => {
      const b = this.beforeLock;
      if (!b) return;
      await this.readsAnswered(b);
      this.takeLockFirst(b);
      this.stats.roundTrips++;
      try {
        await this.flush([]);
      } catch (err) {
        this.failure ??= err;
        throw err;
      }
    })();
    return this.locking;
  }

  /** False while a transaction with its lock at commit has sent nothing of its own (no BEGIN). */
  begun(): boolean {
    return this.beforeLock === undefined || this.locking !== undefined;
  }

  get<T>(sql: string, params?: readonly unknown[]): Promise<T | undefined> { return this.session.get<T>(sql, params); }
  all<T>(sql: string, params?: readonly unknown[]): Promise<T[]> { return this.session.all<T>(sql, params); }
  run(sql: string, params?: readonly unknown[]): Promise<RunResult> { return this.session.run(sql, params); }
  insert(sql: string, params?: readonly unknown[]): Promise<number> { return this.session.insert(sql, params); }

  async runLater(sql: string, params: readonly unknown[] = []): Promise<void> {
    const statement = inlined(numbered(sql), params, this.client);
    // After the statements issued in this turn and not sent yet, as it was issued after them.
    if (this.issued.length > 0) this.issued.push({ sql: statement, params: [], resolve: () => undefined, reject: () => undefined });
    else this.later.push({ sql: statement, write: true });
  }

  /**
   * Queues BEGIN, and for a library's transaction the lock of its row: they go in the round trip of the
   * body's first statement (or of COMMIT), which runs once the lock is held.
   */
  begin(library: number | undefined, ahead: readonly AheadStatement[] = [], lockAtCommit = false, replay?: ReadsBeforeLock): void {
    if (lockAtCommit && library !== undefined) {
      this.locked.add(library);
      this.beforeLock = { library, ahead, reads: [], inFlight: new Set(), clock: replay && Promise.resolve(replay.clock), first: undefined, replay: [...replay?.reads ?? []], seen: [] };
      return;
    }
    for (const a of ahead) {
      let sql: string;
      try {
        sql = inlined(a.sql, a.params, this.client);
      } catch {
        void this.sendAlone(a); // a value that has no literal here: by itself
        continue;
      }
      // Before BEGIN, committed by itself: the transaction's fate is not the statement's.
      this.later.push({ sql, then: (r) => a.resolve(r.rows), ahead: a }, { sql: 'COMMIT' });
    }
    this.later.push({ sql: `BEGIN ISOLATION LEVEL ${library === undefined ? 'SERIALIZABLE' : 'READ COMMITTED'}` });
    if (library !== undefined) this.lockLibrary(library);
  }

  /** Queues the lock of a library's row (once per transaction), read with its clock. */
  lockLibrary(library: number): void {
    if (this.locked.has(library)) return;
    this.locked.add(library);
    // Statements sent together go as a simple query, which takes no parameters: the id is a checked integer.
    this.later.push({ sql: lockSql(library), then: (r) => this.track(library, r.rows[0] as { last_op_ms: number } | undefined) });
  }

  async reserveOperationTimes(libraryId: number, now: number, n: number): Promise<number> {
    const b = this.beforeLock;
    if (b && libraryId === b.library && !this.clocks.has(libraryId)) {
      // From the clock read before the lock; the commit checks under the lock that it still holds.
      this.sendReads(b, true);
      const last = await b.clock;
      if (last === undefined) throw new Error(`library ${libraryId} does not exist`);
      if (this.beforeLock === b) {
        const first = nextTime(now, Math.max(last, this.reservedBeforeLock.get(libraryId) ?? 0));
        this.reservedBeforeLock.set(libraryId, first + n - 1);
        b.first = first;
        this.clocks.set(libraryId, { last: first + n - 1, advanced: true });
        return first;
      }
    }
    // Another library's clock, or the lock taken meanwhile: under the lock, as any transaction.
    if (this.locking) await this.locking;
    else if (this.beforeLock && libraryId !== this.beforeLock.library) await this.lockNow();
    let clock = this.clocks.get(libraryId);
    if (!clock) {
      // The statement takes the row's lock: later reservations of this transaction are counted here.
      const first = await reserveOperationTimesByStatement(this.session, libraryId, now, n);
      this.locked.add(libraryId);
      this.clocks.set(libraryId, { last: first + n - 1, advanced: false });
      return first;
    }
    const first = nextTime(now, clock.last);
    clock = { last: first + n - 1, advanced: true };
    this.clocks.set(libraryId, clock);
    return first;
  }

  /** Writes the clocks this transaction advanced and commits, in one round trip. */
  async commit(): Promise<void> {
    this.committing = true;
    const b = this.beforeLock;
    if (b) {
      await this.readsAnswered(b);
      if (this.failure !== undefined) throw this.failure;
      if (this.beforeLock === b) {
        for (const a of b.ahead) await this.sendAlone(a);
        b.ahead = [];
        // Reads alone: nothing to lock nor commit.
        if (b.first === undefined && !this.later.some((q) => q.write)) return;
        if (this.gates.length > 0) await Promise.all(this.gates);
        this.takeLockFirst(b);
      }
    }
    if (this.locking) await this.locking.catch(() => undefined);
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
    if (this.clockCheck) this.later.push({ sql: clockBelow(this.clockCheck.library, this.clockCheck.first) });
    for (const [id, c] of this.clocks) if (c.advanced) this.later.push({ sql: `UPDATE libraries SET last_op_ms = ${c.last} WHERE id = ${id}` });
    this.stats.roundTrips++;
    await this.flush([{ sql: 'COMMIT' }]);
  }

  private track(library: number, row: { last_op_ms: number } | undefined): void {
    // A missing library is no one's to lock: reservations for it fail as they would alone.
    if (row) this.clocks.set(library, { last: row.last_op_ms, advanced: false });
  }
}

const lockSql = (library: number) => `SELECT last_op_ms FROM libraries WHERE id = ${library} FOR UPDATE`;

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
    runLater: async (sql: string, params?: readonly unknown[]) => { await query(sql, params); },
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
  let quote: string | undefined;
  let out = '';
  for (let i = 0; i < sql.length; i++) {
    const ch = sql[i]!;
    if (quote) {
      if (ch === quote) quote = undefined;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
    } else if (ch === '$' && /[0-9]/.test(sql[i + 1] ?? '')) {
      let j = i + 1;
      while (/[0-9]/.test(sql[j] ?? '')) j++;
      const n = Number(sql.slice(i + 1, j));
      if (n < 1 || n > params.length) throw new RangeError(`statement has $${n} but ${params.length} values`);
      out += literal(params[n - 1]);
      i = j - 1;
      continue;
    }
    out += ch;
  }
  return out;
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
