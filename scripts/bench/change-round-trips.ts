/**
 * What the round trips of a change cost under its library's lock, on PostgreSQL alone (no service, no
 * HTTP): BENCH_CHANGE_WORKERS workers (default 1 and 4, one after the other) each renaming a file of
 * its own folder back and forth in ONE library, BENCH_CHANGE_OPS changes each (default 500), in
 * BENCH_CHANGE_ROUNDS rounds (default 3) of the two ways in turn:
 * - `two round trips`, as the service sends a file's `move` (store/pg-metadata-store.ts): BEGIN, the
 *   library row's lock (`FOR UPDATE`, with its clock) and the lookup, pipelined; then the entry's
 *   update, the event, the clock's write and COMMIT, pipelined. The lock is held from the first round
 *   trip's answer to COMMIT's: one round trip and the client's work between them.
 * - `one function`: the same statements in one PL/pgSQL function, one round trip, the lock held only
 *   while PostgreSQL runs it.
 * Tables of the same shape as the service's, without its triggers. Each row gives changes per second and
 * p50/p99 latency. Standalone: `node --import tsx scripts/bench/change-round-trips.ts`.
 */
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPostgres } from '../../test/support/postgres.js';

const workerCounts = (process.env.BENCH_CHANGE_WORKERS ?? '1,4').split(',').map(Number);
const opsPerWorker = Number(process.env.BENCH_CHANGE_OPS ?? 500);
const rounds = Number(process.env.BENCH_CHANGE_ROUNDS ?? 3);

const SCHEMA = `
CREATE TABLE libraries (id INTEGER PRIMARY KEY, last_op_ms BIGINT NOT NULL);
CREATE TABLE entries (id SERIAL PRIMARY KEY, library_id INTEGER NOT NULL REFERENCES libraries, fullpath TEXT COLLATE "C" NOT NULL,
  op_ms BIGINT NOT NULL, state INTEGER NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX entries_path ON entries(library_id, fullpath) WHERE state = 0;
CREATE TABLE file_events (id SERIAL PRIMARY KEY, library_id INTEGER NOT NULL REFERENCES libraries, entry_id INTEGER NOT NULL REFERENCES entries,
  fullpath TEXT NOT NULL, ms BIGINT NOT NULL);
INSERT INTO libraries VALUES (1, 0);
CREATE FUNCTION move_entry(lib INTEGER, src TEXT, dst TEXT, now_ms BIGINT) RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE clock BIGINT; e RECORD;
BEGIN
  SELECT last_op_ms INTO clock FROM libraries WHERE id = lib FOR UPDATE;
  SELECT * INTO e FROM entries WHERE library_id = lib AND fullpath = src AND state = 0;
  IF e IS NULL THEN RAISE EXCEPTION 'no entry at %', src; END IF;
  IF EXISTS (SELECT 1 FROM entries WHERE library_id = lib AND fullpath = dst AND state = 0) THEN RAISE EXCEPTION '% exists', dst; END IF;
  clock := GREATEST(now_ms, clock + 1);
  UPDATE entries SET fullpath = dst, op_ms = clock WHERE id = e.id;
  INSERT INTO file_events (library_id, entry_id, fullpath, ms) VALUES (lib, e.id, dst, now_ms);
  UPDATE libraries SET last_op_ms = clock WHERE id = lib;
  RETURN clock;
END $$;`;

type Change = (client: pg.PoolClient, from: string, to: string) => Promise<void>;

/** A statement with values, named (prepared once per connection), as the service sends them. */
function prepared(client: pg.PoolClient, text: string, values: unknown[]): Promise<pg.QueryResult> {
  return client.query({ name: `s${[...text].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7).toString(36)}`, text, values });
}

const twoRoundTrips: Change = async (client, from, to) => {
  const [, lock, found] = await Promise.all([
    client.query('BEGIN ISOLATION LEVEL READ COMMITTED'),
    prepared(client, 'SELECT last_op_ms FROM libraries WHERE id = $1 FOR UPDATE', [1]),
    prepared(client, 'SELECT * FROM entries WHERE library_id = $1 AND state = 0 AND fullpath IN ($2, $3)', [1, from, to]),
  ]);
  const src = (found.rows as { id: number; fullpath: string }[]).find((r) => r.fullpath === from);
  if (!src || found.rows.length !== 1) throw new Error(`move ${from} → ${to}: not as expected`);
  const clock = Math.max(Date.now(), Number((lock.rows[0] as { last_op_ms: string }).last_op_ms) + 1);
  await Promise.all([
    prepared(client, 'UPDATE entries SET fullpath = $1, op_ms = $2 WHERE id = $3', [to, clock, src.id]),
    prepared(client, 'INSERT INTO file_events (library_id, entry_id, fullpath, ms) VALUES ($1, $2, $3, $4)', [1, src.id, to, Date.now()]),
    prepared(client, 'UPDATE libraries SET last_op_ms = $1 WHERE id = $2', [clock, 1]),
    client.query('COMMIT'),
  ]);
};

const oneFunction: Change = async (client, from, to) => {
  await prepared(client, 'SELECT move_entry($1, $2, $3, $4)', [1, from, to, Date.now()]);
};

async function run(pool: pg.Pool, kind: string, change: Change, workers: number): Promise<Record<string, unknown>> {
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(Array.from({ length: workers }, async (_, w) => {
    for (let i = 0; i < opsPerWorker; i++) {
      const [from, to] = i % 2 === 0 ? [`w${w}/a`, `w${w}/b`] : [`w${w}/b`, `w${w}/a`];
      const start = performance.now();
      const client = await pool.connect();
      try {
        await change(client, from, to);
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
      latencies.push(performance.now() - start);
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]! * 100) / 100;
  return { kind, workers, changes_per_s: Math.round(latencies.length / seconds), p50_ms: at(0.5), p99_ms: at(0.99) };
}

export async function benchChangeRoundTrips(): Promise<Record<string, unknown>[]> {
  const server = await startPostgres();
  const out: Record<string, unknown>[] = [];
  try {
    const pool = new pg.Pool({ connectionString: await server.createDatabase('bench_change'), max: 10, pipeline: true } as pg.PoolConfig);
    try {
      await pool.query(SCHEMA);
      for (let w = 0; w < Math.max(...workerCounts); w++) await pool.query('INSERT INTO entries (library_id, fullpath, op_ms) VALUES (1, $1, 0)', [`w${w}/a`]);
      for (const workers of workerCounts) {
        const rows = new Map<string, Record<string, unknown>[]>();
        for (let round = 0; round < rounds; round++) {
          for (const [kind, change] of [['two round trips', twoRoundTrips], ['one function', oneFunction]] as const) {
            rows.set(kind, [...rows.get(kind) ?? [], await run(pool, kind, change, workers)]);
          }
        }
        for (const [kind, measured] of rows) {
          const median = (key: string) => measured.map((m) => m[key] as number).sort((a, b) => a - b)[measured.length >> 1];
          const row = { bench: 'change.round_trips', kind, workers, rounds, cores: availableParallelism(), load_average: Math.round(loadavg()[0]! * 10) / 10, changes_per_s: median('changes_per_s'), p50_ms: median('p50_ms'), p99_ms: median('p99_ms'), rounds_changes_per_s: measured.map((m) => m.changes_per_s) };
          out.push(row);
          process.stdout.write(JSON.stringify(row) + '\n');
        }
      }
    } finally {
      await pool.end();
    }
  } finally {
    await server.stop();
  }
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await benchChangeRoundTrips();
