/**
 * SqliteMetadataStore: the MetadataStore over one better-sqlite3 connection (store/database.ts: WAL,
 * foreign keys, migrations). better-sqlite3 is synchronous, so a transaction whose body awaits must keep
 * the connection to itself: statements and transactions run one at a time, in arrival order (a
 * statement inside a transaction's body runs in it at once). Statements are prepared once per text.
 */
import type { Db } from './database.js';
import type Database from 'better-sqlite3';
import { TransactionScope, reserveOperationTimesByStatement, type LaterStatement, type MetadataSession, type MetadataStore, type RunResult, type StoreStats, type TransactionOptions } from './metadata-store.js';

/** Prepared statements kept per connection: the domain's statements are a fixed set of texts. */
const STATEMENT_CACHE = 500;

export class SqliteMetadataStore implements MetadataStore {
  readonly engine = 'sqlite';
  readonly stats: StoreStats = { roundTrips: 0, transactions: 0, retries: 0, lockWaitMs: 0 };
  private tail: Promise<unknown> = Promise.resolve();
  private readonly direct: MetadataSession;
  private readonly scope = new TransactionScope();
  private readonly statements = new Map<string, Database.Statement>();

  constructor(readonly db: Db) {
    this.direct = {
      get: async <T>(sql: string, params: readonly unknown[] = []) => this.statement(sql).get(...params) as T | undefined,
      all: async <T>(sql: string, params: readonly unknown[] = []) => this.statement(sql).all(...params) as T[],
      run: async (sql: string, params: readonly unknown[] = []): Promise<RunResult> => ({ changes: this.statement(sql).run(...params).changes }),
      insert: async (sql: string, params: readonly unknown[] = []) => Number(this.statement(sql).run(...params).lastInsertRowid),
      reserveOperationTimes: (libraryId: number, now: number, n: number) => reserveOperationTimesByStatement(this.direct, libraryId, now, n),
      runLater: async <T>(sql: string, params: readonly unknown[] = []) => {
        const st = this.statement(sql);
        // At once: a statement that returns rows (RETURNING) hands them over, others run.
        return { rows: Promise.resolve(st.reader ? st.all(...params) as T[] : (st.run(...params), [])) };
      },
    };
  }

  get open(): boolean {
    return this.db.open;
  }

  private statement(sql: string): Database.Statement {
    this.stats.roundTrips++;
    let st = this.statements.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      if (this.statements.size >= STATEMENT_CACHE) this.statements.delete(this.statements.keys().next().value!);
      this.statements.set(sql, st);
    }
    return st;
  }

  /** Runs `fn` after the statements and transactions before it; inside a transaction, at once in it. */
  private serial<T>(fn: (session: MetadataSession) => Promise<T>): Promise<T> {
    const inTx = this.scope.session();
    if (inTx) return fn(inTx);
    const next = this.tail.then(() => fn(this.direct), () => fn(this.direct));
    this.tail = next.catch(() => undefined);
    return next;
  }

  get<T>(sql: string, params?: readonly unknown[]): Promise<T | undefined> {
    return this.serial((s) => s.get<T>(sql, params));
  }

  all<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    return this.serial((s) => s.all<T>(sql, params));
  }

  run(sql: string, params?: readonly unknown[]): Promise<RunResult> {
    return this.serial((s) => s.run(sql, params));
  }

  insert(sql: string, params?: readonly unknown[]): Promise<number> {
    return this.serial((s) => s.insert(sql, params));
  }

  runLater<T = unknown>(sql: string, params?: readonly unknown[]): Promise<LaterStatement<T>> {
    return this.serial((s) => s.runLater<T>(sql, params));
  }

  reserveOperationTimes(libraryId: number, now: number, n: number): Promise<number> {
    return this.serial((s) => s.reserveOperationTimes(libraryId, now, n));
  }

  /** One writer at a time already: a library's transaction is any transaction. */
  tx<T>(fn: (session: MetadataSession) => Promise<T>, _opts?: TransactionOptions): Promise<T> {
    const inTx = this.scope.session();
    if (inTx) return fn(inTx);
    const waitFrom = performance.now();
    return this.serial(async () => {
      this.stats.lockWaitMs += performance.now() - waitFrom;
      this.stats.transactions++;
      this.db.exec('BEGIN IMMEDIATE');
      try {
        const result = await this.scope.run(this.direct, fn);
        this.db.exec('COMMIT');
        return result;
      } catch (err) {
        if (this.db.inTransaction) this.db.exec('ROLLBACK');
        throw err;
      }
    });
  }

  async close(): Promise<void> {
    await this.serial(async () => {
      this.statements.clear();
      this.db.close();
    });
  }
}
