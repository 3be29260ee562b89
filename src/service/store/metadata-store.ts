/**
 * MetadataStore: the service's metadata behind one asynchronous interface, with two engines — SQLite
 * (better-sqlite3, embedded under `--data`) and PostgreSQL (the `pg` driver, shared by every process of
 * a service). SQL is written once with `?` placeholders in the dialect both engines share; a
 * transaction is `tx(async (s) => …)` and everything done through `s` commits or rolls back together.
 *
 * Guarantees, the same on both engines:
 * - transactions are serializable (SQLite: one writer at a time per database, `BEGIN IMMEDIATE`, other
 *   statements of the process wait; PostgreSQL: SERIALIZABLE, retried from the start on a conflict), so
 *   read-then-write code is correct across processes; a transaction's body does database work only;
 * - a library's transaction (`tx(fn, { library })`, what every change of a library's tree runs in) holds
 *   that library's write lock from its first statement to its end: the changes of one library run one
 *   at a time across processes, each seeing every change committed before it, and never start over for
 *   a conflict with one another (PostgreSQL: READ COMMITTED behind `SELECT … FOR UPDATE` of the library
 *   row; the changes of a library all write that row, so they also serialize with SERIALIZABLE ones);
 * - inside a transaction's body, the store's own `get`/`all`/`run`/`insert` and a nested `tx` join that
 *   transaction (the body's asynchronous context carries it), so domain code written against the store
 *   composes: a building block called from a transaction runs in it, called alone it runs by itself; a
 *   nested library transaction takes that library's lock too;
 * - `reserveOperationTimes` advances the library's clock (`libraries.last_op_ms`) under the library's
 *   lock, so times are strictly increasing in commit order, across processes, and a reader of the
 *   updates feed never skips nor repeats a change.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface RunResult {
  /** Rows changed. */
  changes: number;
}

export interface MetadataSession {
  get<T>(sql: string, params?: readonly unknown[]): Promise<T | undefined>;
  all<T>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  run(sql: string, params?: readonly unknown[]): Promise<RunResult>;
  /** Runs an INSERT into a table with an `id` column; returns the new row's id. */
  insert(sql: string, params?: readonly unknown[]): Promise<number>;
  /**
   * Runs a statement whose result the transaction's body does not wait for, at the latest with the
   * transaction's next statement or its COMMIT, in order (PostgreSQL: in that statement's round trip;
   * SQLite and outside a transaction: at once). Its failure fails that statement or the commit, and the
   * transaction rolls back whole. Resolves once queued, with `rows`: the statement's rows once it ran
   * (inside a transaction on PostgreSQL, at the earliest when the body issues its next statement or
   * ends, a nested body's end included for a statement with RETURNING; a body that waits for them
   * before then never ends).
   */
  runLater<T = unknown>(sql: string, params?: readonly unknown[]): Promise<LaterStatement<T>>;
  /**
   * Reserves `n` consecutive operation times of a library (ms): the first is max(now, last + 1).
   * Call it inside the transaction that writes the change.
   */
  reserveOperationTimes(libraryId: number, now: number, n: number): Promise<number>;
}

/** A statement queued by `runLater`. */
export interface LaterStatement<T> {
  /** Its rows once it ran; rejected with its failure. */
  rows: Promise<T[]>;
}

export interface TransactionOptions {
  /** The library whose tree the transaction changes: it runs under that library's write lock. */
  library?: number;
}

/** What a store sent to its engine since it opened (tests count them per request; docs/service.md). */
export interface StoreStats {
  /** Statements executed; on PostgreSQL each is one round trip to the server (BEGIN and COMMIT too). */
  roundTrips: number;
  /** Transactions committed or rolled back (not counting the attempts retried). */
  transactions: number;
  /** Transaction attempts started over after a serialization failure or a deadlock. */
  retries: number;
  /**
   * Time (ms, summed over transactions) from asking for a transaction to holding it: SQLite, the wait
   * for the writer before; PostgreSQL, a pool connection and the round trip that sends BEGIN and takes
   * the library's lock (with the body's first statement).
   */
  lockWaitMs: number;
}

export interface MetadataStore extends MetadataSession {
  readonly engine: 'sqlite' | 'postgresql';
  readonly stats: StoreStats;
  /** False once `close()` was called. */
  readonly open: boolean;
  /** Runs `fn` in one transaction; its result once committed. A thrown error rolls everything back. */
  tx<T>(fn: (session: MetadataSession) => Promise<T>, opts?: TransactionOptions): Promise<T>;
  close(): Promise<void>;
  /**
   * PostgreSQL only: runs `fn` as one request of the service, in which `ahead` statements go in the
   * round trip of the request's first transaction (or plain read) and its transactions commit only once
   * the promises given to `gate` have settled without failing (store/pg-request-ahead.ts).
   */
  request?<T>(fn: () => Promise<T>): Promise<T>;
  /** The first row of an idempotent statement sent ahead of the request's work; outside a request, at once. */
  ahead?<T>(sql: string, params: readonly unknown[]): Promise<T | undefined>;
  /** The request's transactions commit once `p` has settled, and roll back when it fails. */
  gate?(p: Promise<unknown>): void;
  /** Sends the request's statements ahead not sent yet, each by itself. */
  sendAhead?(): Promise<void>;
}

/**
 * The transaction a piece of code runs in, carried by its asynchronous context. `open` turns false at
 * commit or rollback: work the body left running afterwards runs by itself.
 */
export class TransactionScope {
  private readonly current = new AsyncLocalStorage<{ session: MetadataSession; open: boolean }>();

  /** The session of the transaction in progress here, if any. */
  session(): MetadataSession | undefined {
    const t = this.current.getStore();
    return t?.open ? t.session : undefined;
  }

  /** Runs `fn` as the body of the transaction of `session`. */
  async run<T>(session: MetadataSession, fn: (session: MetadataSession) => Promise<T>): Promise<T> {
    const t = { session, open: true };
    try {
      return await this.current.run(t, () => fn(session));
    } finally {
      t.open = false;
    }
  }
}

/**
 * Reserves `n` consecutive operation times of a library (ms): the first is max(now, last + 1). Call it
 * inside the transaction that writes the change.
 */
export function reserveOperationTimes(session: MetadataSession, libraryId: number, now: number, n = 1): Promise<number> {
  return session.reserveOperationTimes(libraryId, Math.floor(now), n);
}

/** The reservation as one statement (the engines' default: it also takes the library row's lock). */
export async function reserveOperationTimesByStatement(session: Pick<MetadataSession, 'get'>, libraryId: number, now: number, n: number): Promise<number> {
  const row = await session.get<{ last_op_ms: number }>(
    'UPDATE libraries SET last_op_ms = (CASE WHEN ? > last_op_ms THEN ? ELSE last_op_ms + 1 END) + ? WHERE id = ? RETURNING last_op_ms',
    [now, now, n - 1, libraryId],
  );
  if (!row) throw new Error(`library ${libraryId} does not exist`);
  return row.last_op_ms - (n - 1);
}
