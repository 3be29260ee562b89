/**
 * Where the service keeps its metadata (`--metadata`):
 * - absent: SQLite in `<data>/service.db` (embedded, one process);
 * - `postgresql://USER@HOST:PORT/DB` (or `postgres://`): a PostgreSQL database, shared by every process of
 *   the service. The password never goes in the URL: it comes from the environment (`PGPASSWORD`) or the
 *   password file (`PGPASSFILE`, default `~/.pgpass`), which the `pg` driver reads.
 * Both run the migrations this build has not applied yet when opened.
 */
import { join } from 'node:path';
import type { MetadataStore } from './metadata-store.js';

export async function metadataStoreAt(location: string | undefined, dataDir: string): Promise<MetadataStore> {
  if (location === undefined || location === '') {
    const { openDatabase } = await import('./database.js');
    const { SqliteMetadataStore } = await import('./sqlite-metadata-store.js');
    return new SqliteMetadataStore(openDatabase(join(dataDir, 'service.db')));
  }
  const url = parseMetadataUrl(location);
  const { openPostgres } = await import('./pg-database.js');
  const { PgMetadataStore } = await import('./pg-metadata-store.js');
  return new PgMetadataStore(await openPostgres(url));
}

/** A `postgresql://` URL without a password; anything else is refused with the reason. */
export function parseMetadataUrl(location: string): string {
  let u: URL;
  try {
    u = new URL(location);
  } catch {
    throw new TypeError('metadata: expected postgresql://USER@HOST:PORT/DATABASE');
  }
  if (u.protocol !== 'postgresql:' && u.protocol !== 'postgres:') throw new TypeError(`metadata: expected postgresql://USER@HOST:PORT/DATABASE, got a ${u.protocol} URL`);
  if (u.password !== '') throw new TypeError('metadata: the password does not go in the URL; set PGPASSWORD or use a password file (PGPASSFILE)');
  if (u.hostname === '' || u.pathname.replace(/^\//, '') === '') throw new TypeError('metadata: expected postgresql://USER@HOST:PORT/DATABASE (host and database name required)');
  return location;
}
