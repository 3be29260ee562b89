/**
 * The PostgreSQL cluster of the service suite's second run (vitest project `service-on-postgresql`): its
 * global setup starts one cluster (test/support/postgres.ts) for the whole run and hands its URL to the
 * test files; `serviceDatabase()` gives each service of a test its own database on it.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startPostgres } from './postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string;
  }
}

/** The engine the service tests run on: `postgresql` when CLOUDLIB_TEST_METADATA says so, else SQLite. */
export const testMetadataEngine = (): 'sqlite' | 'postgresql' => (process.env.CLOUDLIB_TEST_METADATA === 'postgresql' ? 'postgresql' : 'sqlite');

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startPostgres();
  project.provide('postgresUrl', server.url);
  return () => server.stop();
}

/**
 * The URL of the database of the service whose data folder is `dataDir` on the cluster at `clusterUrl`
 * (created on first use: a service restarted on the same folder finds its metadata again).
 */
export async function serviceDatabase(clusterUrl: string, dataDir: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `svc_${createHash('sha1').update(dataDir).digest('hex').slice(0, 20)}`;
  const admin = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
    const c = new pg.Client({ connectionString: clusterUrl });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  };
  await admin(async (c) => {
    const exists = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount === 0) await c.query(`CREATE DATABASE ${name}`);
  });
  const u = new URL(clusterUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    drop: () => admin(async (c) => { await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`); }),
  };
}
