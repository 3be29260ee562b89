/**
 * The PostgreSQL schema against a real cluster (Debian's server, started by the test in a temporary
 * folder): the migrations apply once, concurrently started processes apply them exactly once, a newer
 * schema is refused, the tables and columns are those of the SQLite schema, and the counter triggers give
 * the same blob reference counts and library usage as SQLite's for the same changes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type Postgres } from '../../support/postgres.js';
import { migratePostgres, openPostgres, redactedUrl } from '../../../src/service/store/pg-database.js';
import { PG_MIGRATIONS } from '../../../src/service/store/pg-schema.js';
import { MIGRATIONS } from '../../../src/service/store/schema.js';
import Database from 'better-sqlite3';
import pg from 'pg';
import { migrate, openDatabase } from '../../../src/service/store/database.js';

let server: Postgres;
beforeAll(async () => { server = await startPostgres(); }, 120_000);
afterAll(async () => { await server?.stop(); }, 60_000);

describe('PostgreSQL schema', () => {
  it('has one migration for each SQLite migration and applies them once', async () => {
    expect(PG_MIGRATIONS.length).toBe(MIGRATIONS.length);
    const url = await server.createDatabase('once');
    const pool = await openPostgres(url);
    try {
      expect(await migratePostgres(pool)).toBe(MIGRATIONS.length);
      const { rows } = await pool.query('SELECT version FROM schema_version');
      expect(rows).toEqual([{ version: MIGRATIONS.length }]);
      // The replay guard's records write no WAL (docs/service.md); every other table is logged.
      const unlogged = await pool.query("SELECT relname FROM pg_class WHERE relkind = 'r' AND relpersistence = 'u'");
      expect(unlogged.rows).toEqual([{ relname: 'signature_uses' }]);
    } finally {
      await pool.end();
    }
  });

  it('lets processes that start together on an empty database apply the migrations exactly once', async () => {
    const url = await server.createDatabase('together');
    const pools = await Promise.all([1, 2, 3, 4].map(() => openPostgres(url, { max: 2 })));
    try {
      const { rows } = await pools[0]!.query('SELECT count(*)::int AS n, max(version) AS v FROM schema_version');
      expect(rows[0]).toEqual({ n: 1, v: MIGRATIONS.length });
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('refuses a database whose schema is newer than this build, without the password in the error', async () => {
    const url = await server.createDatabase('newer');
    const pool = await openPostgres(url);
    await pool.query('UPDATE schema_version SET version = 999');
    await pool.end();
    const withPassword = url.replace('cloudlib@', 'cloudlib:s3cret@');
    const err = await openPostgres(withPassword).then(() => undefined, (e: Error) => e);
    expect(err?.message).toMatch(/schema version 999 is newer than this build knows/);
    expect(err?.message).not.toContain('s3cret');
    expect(redactedUrl(withPassword)).toBe(url.replace('cloudlib@', 'cloudlib:***@'));
  });

  it('carries what a free upload session knows of its bytes from the old marker to its own column, on both engines', async () => {
    const sessions = [['known', -1, 4096], ['held', 9_999_999_999_999, -1], ['free', 0, 512]] as const;
    const insert = 'INSERT INTO upload_sessions (id, pathhash, library_id, fullpath, filename, filehash, filesize, created_ms, touched_ms, busy_until_ms, writing_from) VALUES ';
    const expected = [
      { id: 'free', busy_until_ms: 0, received_known: 0, writing_from: 512 },
      { id: 'held', busy_until_ms: 9_999_999_999_999, received_known: 0, writing_from: -1 },
      { id: 'known', busy_until_ms: 0, received_known: 1, writing_from: 4096 },
    ];
    const sqlite = new Database(':memory:');
    try {
      for (const [v, m] of MIGRATIONS.slice(0, -1).entries()) {
        sqlite.exec(m);
        sqlite.pragma(`user_version = ${v + 1}`);
      }
      for (const [id, until, from] of sessions) sqlite.prepare(`${insert}(?, 'h', 1, 'f', 'f', 'x', 8192, 0, 0, ?, ?)`).run(id, until, from);
      expect(migrate(sqlite)).toBe(MIGRATIONS.length);
      expect(sqlite.prepare('SELECT id, busy_until_ms, received_known, writing_from FROM upload_sessions ORDER BY id').all()).toEqual(expected);
    } finally {
      sqlite.close();
    }
    const pool = new pg.Pool({ connectionString: await server.createDatabase('received') });
    try {
      await migratePostgres(pool, PG_MIGRATIONS.slice(0, -1));
      for (const [id, until, from] of sessions) await pool.query(`${insert}($1, 'h', 1, 'f', 'f', 'x', 8192, 0, 0, $2, $3)`, [id, until, from]);
      expect(await migratePostgres(pool)).toBe(MIGRATIONS.length);
      const { rows } = await pool.query('SELECT id, busy_until_ms::float8 AS busy_until_ms, received_known, writing_from::float8 AS writing_from FROM upload_sessions ORDER BY id');
      expect(rows).toEqual(expected);
    } finally {
      await pool.end();
    }
  });

  it('has the tables and columns of the SQLite schema', async () => {
    const sqlite = openDatabase(':memory:');
    const pool = await openPostgres(await server.createDatabase('columns'));
    try {
      const lite = new Map<string, string[]>();
      for (const { name } of sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]) {
        lite.set(name, (sqlite.pragma(`table_info(${name})`) as { name: string }[]).map((c) => c.name).sort());
      }
      const { rows } = await pool.query<{ table_name: string; column_name: string }>(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name <> 'schema_version'");
      const pgTables = new Map<string, string[]>();
      for (const r of rows) pgTables.set(r.table_name, [...(pgTables.get(r.table_name) ?? []), r.column_name]);
      for (const cols of pgTables.values()) cols.sort();
      expect(Object.fromEntries(pgTables)).toEqual(Object.fromEntries(lite));
    } finally {
      sqlite.close();
      await pool.end();
    }
  });

  it('keeps blob references and library usage exactly as SQLite does for the same changes', async () => {
    const changes: [string, unknown[]][] = [
      ["INSERT INTO enterprises (id, name, client_id, client_secret, created_ms) VALUES (1, 'e', 'c', 's', 1)", []],
      ["INSERT INTO libraries (id, mount_id, ent_id, name, created_ms) VALUES (1, 11, 1, 'lib', 1)", []],
      ["INSERT INTO blobs (sha1, size, created_ms) VALUES ('aa', 100, 1), ('bb', 50, 1)", []],
      ['INSERT INTO entries (id, library_id, hash, fullpath, name, dir, create_ms, last_ms, op_ms) VALUES (1, 1, ?, ?, ?, 1, 1, 1, 1)', ['h1', 'docs', 'docs']],
      ['INSERT INTO entries (id, library_id, hash, parent_id, fullpath, name, dir, filehash, filesize, create_ms, last_ms, op_ms) VALUES (2, 1, ?, 1, ?, ?, 0, ?, ?, 1, 1, 2)', ['h2', 'docs/a', 'a', 'aa', 100]],
      ['INSERT INTO entries (id, library_id, hash, parent_id, fullpath, name, dir, filehash, filesize, create_ms, last_ms, op_ms) VALUES (3, 1, ?, 1, ?, ?, 0, ?, ?, 1, 1, 3)', ['h3', 'docs/b', 'b', 'aa', 100]],
      ["INSERT INTO file_events (library_id, entry_id, act, fullpath, filehash, filesize, ms, keeps_blob) VALUES (1, 2, 3, 'docs/a', 'aa', 100, 4, 1)", []],
      ["UPDATE entries SET filehash = 'bb', filesize = 50 WHERE id = 2", []],
      ['UPDATE entries SET state = 1 WHERE id = 3', []],
      ['UPDATE entries SET state = 2 WHERE id = 3', []],
      ['UPDATE file_events SET keeps_blob = 0', []],
      ['DELETE FROM file_events', []],
      ['DELETE FROM entries WHERE id = 2', []],
    ];
    const sqlite = openDatabase(':memory:');
    const pool = await openPostgres(await server.createDatabase('triggers'));
    try {
      const observe = async (query: (sql: string) => Promise<unknown[]>) => ({
        libraries: await query('SELECT size_used, size_recycle, file_count, dir_count FROM libraries'),
        blobs: await query('SELECT sha1, refs FROM blobs ORDER BY sha1'),
      });
      const seen: { lite: unknown[]; pg: unknown[] } = { lite: [], pg: [] };
      for (const [sql, args] of changes) {
        sqlite.prepare(sql).run(...args);
        let n = 0;
        await pool.query(sql.replace(/\?/g, () => `$${++n}`), args);
        seen.lite.push(await observe(async (q) => sqlite.prepare(q).all()));
        seen.pg.push(await observe(async (q) => (await pool.query(q)).rows));
      }
      expect(seen.pg).toEqual(seen.lite);
      // and the counters did move: refs and usage at a few steps
      expect(seen.lite[5]).toEqual({ libraries: [{ size_used: 200, size_recycle: 0, file_count: 2, dir_count: 1 }], blobs: [{ sha1: 'aa', refs: 2 }, { sha1: 'bb', refs: 0 }] });
      expect(seen.lite[12]).toEqual({ libraries: [{ size_used: 0, size_recycle: 0, file_count: 0, dir_count: 1 }], blobs: [{ sha1: 'aa', refs: 0 }, { sha1: 'bb', refs: 0 }] });
    } finally {
      sqlite.close();
      await pool.end();
    }
  });
});
