/**
 * PgMetadataStore: the MetadataStore over a pool of PostgreSQL connections (store/pg-database.ts). `?`
 * placeholders become `$1…`. A transaction is SERIALIZABLE — the same guarantee as SQLite's one writer at
 * a time, so read-then-write code stays correct across processes — holds one connection from BEGIN to
 * COMMIT, and starts over (after a short random pause; at most 100 attempts) when PostgreSQL reports a
 * serialization failure or a deadlock: a transaction's body must do nothing but database work.
 */
import type pg from 'pg';
import { TransactionScope, type MetadataSession, type MetadataStore, type RunResult, type StoreStats } from './metadata-store.js';

const RETRYABLE = new Set(['40001', '40P01']);
/** Attempts of one transaction: enough for the pool's connections all colliding on one row. */
const MAX_ATTEMPTS = 100;

export class PgMetadataStore implements MetadataStore {
  readonly engine = 'postgresql';
  readonly stats: StoreStats = { roundTrips: 0, transactions: 0, retries: 0 };
  open = true;
  private readonly scope = new TransactionScope();

  constructor(readonly pool: pg.Pool) {}

  /** The transaction in progress here, else the pool. */
  private session(): MetadataSession {
    return this.scope.session() ?? sessionOf(this.pool, this.stats);
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

  async tx<T>(fn: (session: MetadataSession) => Promise<T>): Promise<T> {
    const inTx = this.scope.session();
    if (inTx) return fn(inTx);
    for (let attempt = 1; ; attempt++) {
      const client = await this.pool.connect();
      try {
        this.stats.roundTrips++;
        await client.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
        const result = await this.scope.run(sessionOf(client, this.stats), fn);
        this.stats.roundTrips++;
        await client.query('COMMIT');
        this.stats.transactions++;
        return result;
      } catch (err) {
        this.stats.roundTrips++;
        await client.query('ROLLBACK').catch(() => undefined);
        if (attempt >= MAX_ATTEMPTS || !RETRYABLE.has((err as { code?: string }).code ?? '')) {
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

type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

function sessionOf(q: Queryable, stats: StoreStats): MetadataSession {
  const query = (sql: string, params: readonly unknown[] = []) => {
    stats.roundTrips++;
    return (q as pg.Pool).query(numbered(sql), params as unknown[]);
  };
  return {
    get: async <T>(sql: string, params?: readonly unknown[]) => (await query(sql, params)).rows[0] as T | undefined,
    all: async <T>(sql: string, params?: readonly unknown[]) => (await query(sql, params)).rows as T[],
    run: async (sql: string, params?: readonly unknown[]) => ({ changes: (await query(sql, params)).rowCount ?? 0 }),
    insert: async (sql: string, params?: readonly unknown[]) => Number((await query(`${sql} RETURNING id`, params)).rows[0].id),
  };
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
