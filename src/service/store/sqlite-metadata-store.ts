/**
 * SqliteMetadataStore: the MetadataStore over one better-sqlite3 connection (store/database.ts: WAL,
 * foreign keys, migrations). better-sqlite3 is synchronous, so a transaction whose body awaits must keep
 * the connection to itself: statements and transactions run one at a time, in arrival order.
 */
import type { Db } from './database.js';
import type { MetadataSession, MetadataStore, RunResult } from './metadata-store.js';

export class SqliteMetadataStore implements MetadataStore {
  readonly engine = 'sqlite';
  private tail: Promise<unknown> = Promise.resolve();
  private readonly direct: MetadataSession;

  constructor(readonly db: Db) {
    this.direct = {
      get: async <T>(sql: string, params: readonly unknown[] = []) => db.prepare(sql).get(...params) as T | undefined,
      all: async <T>(sql: string, params: readonly unknown[] = []) => db.prepare(sql).all(...params) as T[],
      run: async (sql: string, params: readonly unknown[] = []): Promise<RunResult> => ({ changes: db.prepare(sql).run(...params).changes }),
      insert: async (sql: string, params: readonly unknown[] = []) => Number(db.prepare(sql).run(...params).lastInsertRowid),
    };
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }

  get<T>(sql: string, params?: readonly unknown[]): Promise<T | undefined> {
    return this.serial(() => this.direct.get<T>(sql, params));
  }

  all<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    return this.serial(() => this.direct.all<T>(sql, params));
  }

  run(sql: string, params?: readonly unknown[]): Promise<RunResult> {
    return this.serial(() => this.direct.run(sql, params));
  }

  insert(sql: string, params?: readonly unknown[]): Promise<number> {
    return this.serial(() => this.direct.insert(sql, params));
  }

  tx<T>(fn: (session: MetadataSession) => Promise<T>): Promise<T> {
    return this.serial(async () => {
      this.db.exec('BEGIN IMMEDIATE');
      try {
        const result = await fn(this.direct);
        this.db.exec('COMMIT');
        return result;
      } catch (err) {
        if (this.db.inTransaction) this.db.exec('ROLLBACK');
        throw err;
      }
    });
  }

  async close(): Promise<void> {
    await this.serial(async () => this.db.close());
  }
}
