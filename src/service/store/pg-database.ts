/**
 * Opens the service's PostgreSQL database (`--metadata postgresql://USER@HOST:PORT/DB`): a connection
 * pool whose BIGINT columns read as numbers (times in ms and ids stay far below 2^53), then the
 * migrations of pg-schema.ts that have not run yet. Every process sharing the database may start at the
 * same moment: the migrations run in one transaction under an advisory lock, so exactly one applies
 * them and the others find them applied. `schema_version` records the last one.
 */
import pg from 'pg';
import { PG_MIGRATIONS } from './pg-schema.js';

/** Arbitrary, fixed: the advisory lock key of cloudlib's migrations. */
const MIGRATION_LOCK = 0x636c6f75;

export interface PostgresOptions {
  /** Connections of the pool. Default 10. */
  max?: number;
}

export async function openPostgres(url: string, opts: PostgresOptions = {}): Promise<pg.Pool> {
  const where = redactedUrl(url);
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    // Queries queued on a connection are written without waiting for the answers before them, so a
    // transaction's statements, each prepared, share one round trip (pg-metadata-store.ts).
    pipeline: true,
    types: { getTypeParser: (oid: number, format?: string) => (oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) } as pg.CustomTypesConfig,
  });
  pool.on('error', () => { /* an idle connection dropped: the pool replaces it on next use */ });
  try {
    await migratePostgres(pool);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw new Error(`metadata database ${where}: ${(err as Error).message}`);
  }
  return pool;
}

/** Applies the migrations after `schema_version`; returns the version reached. */
export async function migratePostgres(pool: pg.Pool, migrations: readonly string[] = PG_MIGRATIONS): Promise<number> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)');
    const row = (await client.query<{ version: number }>('SELECT version FROM schema_version')).rows[0];
    const current = row?.version ?? 0;
    if (!row) await client.query('INSERT INTO schema_version (version) VALUES (0)');
    if (current > migrations.length) {
      throw new Error(`database schema version ${current} is newer than this build knows (${migrations.length}); upgrade cloudlib`);
    }
    for (let v = current; v < migrations.length; v++) await client.query(migrations[v]!);
    await client.query('UPDATE schema_version SET version = $1', [migrations.length]);
    await client.query('COMMIT');
    return migrations.length;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** The URL without its password, for logs and errors. */
export function redactedUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return 'postgresql://(unparsable URL)';
  }
}
