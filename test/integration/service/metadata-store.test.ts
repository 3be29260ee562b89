/**
 * MetadataStore on both engines — SQLite (one store: one per process) and PostgreSQL (two pools on one database of a cluster the test starts, as two service processes):
 * statements, rollback, read-then-write transactions that stay exact under concurrency across the two,
 * and operation times that a polling reader sees without a gap or a repeat.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPostgres, type Postgres } from '../../support/postgres.js';
import { openDatabase } from '../../../src/service/store/database.js';
import { openPostgres } from '../../../src/service/store/pg-database.js';
import { PgMetadataStore, inlined, numbered } from '../../../src/service/store/pg-metadata-store.js';
import { SqliteMetadataStore } from '../../../src/service/store/sqlite-metadata-store.js';
import { StoredBlobLocks } from '../../../src/service/store/blob-locks.js';
import { reserveOperationTimes, type MetadataSession, type MetadataStore } from '../../../src/service/store/metadata-store.js';

let server: Postgres;
let scratch: string;
let dbCount = 0;
beforeAll(async () => {
  server = await startPostgres();
  scratch = await mkdtemp(join(tmpdir(), 'cloudlib-meta-'));
}, 120_000);
afterAll(async () => {
  await server?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
}, 60_000);

/** Two stores on one fresh database, with one enterprise and library 1. */
const engines: Record<string, () => Promise<[MetadataStore, MetadataStore]>> = {
  sqlite: async () => {
    // One store per process: better-sqlite3 waits for a lock synchronously, so a second connection in
    // the same process would block the event loop that the first one's transaction needs to finish.
    const store = new SqliteMetadataStore(openDatabase(join(scratch, `m${++dbCount}.db`)));
    return [store, store];
  },
  postgresql: async () => {
    const url = await server.createDatabase(`m${++dbCount}`);
    return [new PgMetadataStore(await openPostgres(url, { max: 8 })), new PgMetadataStore(await openPostgres(url, { max: 8 }))];
  },
};

async function seeded(engine: string): Promise<[MetadataStore, MetadataStore]> {
  const [a, b] = await engines[engine]!();
  await a.run("INSERT INTO enterprises (id, name, client_id, client_secret, created_ms) VALUES (1, 'e', 'c', 's', 1)");
  await a.run("INSERT INTO libraries (id, mount_id, ent_id, name, created_ms) VALUES (1, 11, 1, 'lib', 1)");
  return [a, b];
}

// A random delay that interleaves the concurrent transactions below, not a wait for anything.
// eslint-disable-next-line no-restricted-syntax -- a delay to interleave transactions, not a wait
const tick = () => new Promise((r) => setTimeout(r, Math.random() * 3));

describe.each(['sqlite', 'postgresql'])('MetadataStore on %s', (engine) => {
  it('runs statements, returns new ids, and rolls a failed transaction back whole', async () => {
    const [a, b] = await seeded(engine);
    try {
      await expect(a.insert('INSERT INTO no_such_table (x) VALUES (1)')).rejects.toThrow(/no_such_table/);
      const first = await a.insert('INSERT INTO departments (ent_id, name, created_ms) VALUES (?, ?, ?)', [1, 'what? not a placeholder', 5]);
      const second = await b.insert('INSERT INTO departments (ent_id, name, created_ms) VALUES (?, ?, ?)', [1, 'two', 6]);
      expect(second).toBeGreaterThan(first);
      expect(await b.get('SELECT name FROM departments WHERE id = ?', [first])).toEqual({ name: 'what? not a placeholder' });
      expect((await a.run('UPDATE departments SET orderby = 7 WHERE ent_id = ?', [1])).changes).toBe(2);
      await expect(a.tx(async (s) => {
        await s.run("UPDATE departments SET name = 'changed' WHERE id = ?", [first]);
        await s.run("INSERT INTO departments (ent_id, name, created_ms) VALUES (1, 'two', 0)"); // duplicate name: refused
      })).rejects.toThrow();
      expect(await b.all('SELECT name FROM departments ORDER BY id')).toEqual([{ name: 'what? not a placeholder' }, { name: 'two' }]);
      expect(await a.tx(async (s) => (await s.get<{ n: number }>('SELECT count(*) AS n FROM departments'))!.n)).toBe(2);
    } finally {
      await a.close();
      if (b !== a) await b.close();
    }
  });

  it('keeps read-then-write transactions exact when two processes run them at once', async () => {
    const [a, b] = await seeded(engine);
    try {
      await a.run("INSERT INTO departments (id, ent_id, name, orderby, created_ms) VALUES (1, 1, 'from', 100, 0), (2, 1, 'to', 0, 0)");
      const move = (store: MetadataStore) => store.tx(async (s) => {
        const from = (await s.get<{ orderby: number }>('SELECT orderby FROM departments WHERE id = 1'))!.orderby;
        await tick();
        const to = (await s.get<{ orderby: number }>('SELECT orderby FROM departments WHERE id = 2'))!.orderby;
        await s.run('UPDATE departments SET orderby = ? WHERE id = 1', [from - 1]);
        await tick();
        await s.run('UPDATE departments SET orderby = ? WHERE id = 2', [to + 1]);
      });
      await Promise.all(Array.from({ length: 40 }, (_, i) => move(i % 2 ? a : b)));
      expect(await a.all('SELECT orderby FROM departments ORDER BY id')).toEqual([{ orderby: 60 }, { orderby: 40 }]);
    } finally {
      await a.close();
      if (b !== a) await b.close();
    }
  });

  it('hands out strictly increasing operation times that a polling reader sees without gap or repeat', async () => {
    const [a, b] = await seeded(engine);
    try {
      const now = 1_000;
      const writers = Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b).tx(async (s) => {
        const n = 1 + (i % 3);
        const first = await reserveOperationTimes(s, 1, now, n);
        await tick();
        for (let k = 0; k < n; k++) {
          await s.run("INSERT INTO file_events (library_id, act, fullpath, ms) VALUES (1, 1, ?, ?)", [`w${i}-${k}`, first + k]);
        }
        return first;
      }));
      const seen: number[] = [];
      let done = false;
      const reader = (async () => {
        let cursor = 0;
        while (!done) {
          const rows = await a.all<{ ms: number }>('SELECT ms FROM file_events WHERE library_id = 1 AND ms > ? ORDER BY ms', [cursor]);
          for (const r of rows) seen.push(r.ms);
          if (rows.length) cursor = rows[rows.length - 1]!.ms;
          await tick();
        }
        const rest = await a.all<{ ms: number }>('SELECT ms FROM file_events WHERE library_id = 1 AND ms > ? ORDER BY ms', [cursor]);
        for (const r of rest) seen.push(r.ms);
      })();
      await Promise.all(writers);
      done = true;
      await reader;
      const total = Array.from({ length: 60 }, (_, i) => 1 + (i % 3)).reduce((x, y) => x + y, 0);
      expect(seen.length).toBe(total);
      expect(seen).toEqual(Array.from({ length: total }, (_, i) => now + i)); // 1000, 1001, … in order, once each
      expect(await b.get('SELECT last_op_ms FROM libraries WHERE id = 1')).toEqual({ last_op_ms: now + total - 1 });
    } finally {
      await a.close();
      if (b !== a) await b.close();
    }
  });

  it('runs statements sent later before the next one, in order, and rolls them back with the transaction', async () => {
    const [a, b] = await seeded(engine);
    try {
      const odd = "it's a \\ back'slash? $1 ?";
      const seen = await a.tx(async (s) => {
        await s.runLater('INSERT INTO departments (id, ent_id, name, out_id, created_ms) VALUES (?, ?, ?, ?, ?)', [7, 1, odd, null, 1.5e12]);
        await s.runLater('UPDATE departments SET orderby = orderby + 2 WHERE id = ?', [7]);
        return s.get('SELECT name, out_id, orderby, created_ms FROM departments WHERE id = ?', [7]);
      }, { library: 1 });
      expect(seen).toEqual({ name: odd, out_id: null, orderby: 2, created_ms: 1.5e12 });
      // values take their type from where they stand, as the driver's parameters do (PostgreSQL: a
      // number against a text column); a negative value after a minus sign stays a value
      const byName = await a.tx(async (s) => {
        await s.runLater('INSERT INTO departments (id, ent_id, name, created_ms) VALUES (?, ?, ?, ?)', [8, 1, '42', 1]);
        await s.runLater('UPDATE departments SET orderby = orderby-? WHERE id = ?', [-5, 8]);
        return s.get('SELECT id, orderby FROM departments WHERE name = ?', [engine === 'postgresql' ? 42 : '42']);
      }, { library: 1 });
      expect(byName).toEqual({ id: 8, orderby: 5 });
      await expect(a.tx(async (s) => {
        await s.runLater('UPDATE departments SET orderby = 100 WHERE id = ?', [7]);
        await s.runLater('INSERT INTO departments (id, ent_id, name, created_ms) VALUES (?, ?, ?, ?)', [7, 1, 'same id', 1]);
      }, { library: 1 })).rejects.toThrow(/duplicate|UNIQUE/i);
      expect(await b.get('SELECT orderby FROM departments WHERE id = 7')).toEqual({ orderby: 2 });
    } finally {
      await a.close();
      if (b !== a) await b.close();
    }
  });

  it('answers statements awaited together in one transaction each with its own result, in one round trip on PostgreSQL', async () => {
    const [a, b] = await seeded(engine);
    try {
      await a.run('INSERT INTO departments (id, ent_id, name, created_ms) VALUES (?, ?, ?, ?)', [9, 1, "nine's", 1]);
      const trips = a.stats.roundTrips;
      const [lib, dept, none, changed] = await a.tx(async (s) => Promise.all([
        s.get('SELECT name FROM libraries WHERE id = ?', [1]),
        s.all('SELECT name FROM departments WHERE id = ?', [9]),
        s.get('SELECT 1 AS one FROM departments WHERE id = ?', [-1]),
        s.run('UPDATE departments SET orderby = 3 WHERE id = ?', [9]),
      ]), { library: 1 });
      expect({ lib, dept, none, changed }).toEqual({ lib: { name: 'lib' }, dept: [{ name: "nine's" }], none: undefined, changed: { changes: 1 } });
      // BEGIN, the library's lock and the four; COMMIT
      if (engine === 'postgresql') expect(a.stats.roundTrips - trips).toBe(2);
      // any value the driver binds (a boolean, which SQLite does not bind) goes in the same round trip
      const boolTrips = a.stats.roundTrips;
      const [flag, name] = await a.tx(async (s) => Promise.all([s.get<{ t: boolean }>('SELECT ? AS t', [engine === 'postgresql' ? true : 1]), s.get('SELECT name FROM departments WHERE id = ?', [9])]), { library: 1 });
      expect({ t: Boolean(flag?.t), name }).toEqual({ t: true, name: { name: "nine's" } });
      if (engine === 'postgresql') expect(a.stats.roundTrips - boolTrips).toBe(2);
      // a statement sent later runs after one issued before it and not yet sent; a statement left
      // unawaited runs before COMMIT
      const before = await a.tx(async (s) => {
        const read = s.get('SELECT orderby FROM departments WHERE id = ?', [9]);
        await s.runLater('UPDATE departments SET orderby = 4 WHERE id = ?', [9]);
        const seen = await read;
        void s.run('UPDATE departments SET orderby = orderby + 1 WHERE id = ?', [9]);
        return seen;
      }, { library: 1 });
      expect({ before, after: await b.get('SELECT orderby FROM departments WHERE id = 9') }).toEqual({ before: { orderby: 3 }, after: { orderby: 5 } });
      await a.run('UPDATE departments SET orderby = 3 WHERE id = 9');
      // one failing statement fails the transaction whole, the others' work with it
      await expect(a.tx(async (s) => Promise.all([
        s.run('UPDATE departments SET orderby = 50 WHERE id = ?', [9]),
        s.run('INSERT INTO departments (id, ent_id, name, created_ms) VALUES (?, ?, ?, ?)', [9, 1, 'same id', 1]),
      ]), { library: 1 })).rejects.toThrow(/duplicate|UNIQUE/i);
      expect(await b.get('SELECT orderby FROM departments WHERE id = 9')).toEqual({ orderby: 3 });
      // the first failure is the answer, not the refusals of the statements sent behind it
      await expect(a.tx(async (s) => Promise.all([
        s.run('INSERT INTO departments (id, ent_id, name, created_ms) VALUES (?, ?, ?, ?)', [9, 1, 'same id', 1]),
        s.run('UPDATE departments SET orderby = 60 WHERE id = ?', [9]),
      ]), { library: 1 })).rejects.toThrow(/duplicate|UNIQUE/i);
      expect(await b.get('SELECT orderby FROM departments WHERE id = 9')).toEqual({ orderby: 3 });
    } finally {
      await a.close();
      if (b !== a) await b.close();
    }
  });

  it("runs a library's transactions one at a time, each seeing the one before, without starting over", async () => {
    const [a, b] = await seeded(engine);
    try {
      await a.run("INSERT INTO departments (id, ent_id, name, orderby, created_ms) VALUES (1, 1, 'from', 100, 0), (2, 1, 'to', 0, 0)");
      const move = (store: MetadataStore) => store.tx(async (s) => {
        const from = (await s.get<{ orderby: number }>('SELECT orderby FROM departments WHERE id = 1'))!.orderby;
        await tick();
        const to = (await s.get<{ orderby: number }>('SELECT orderby FROM departments WHERE id = 2'))!.orderby;
        await s.run('UPDATE departments SET orderby = ? WHERE id = 1', [from - 1]);
        await tick();
        await s.run('UPDATE departments SET orderby = ? WHERE id = 2', [to + 1]);
      }, { library: 1 });
      const retries = a.stats.retries + (b === a ? 0 : b.stats.retries);
      await Promise.all(Array.from({ length: 40 }, (_, i) => move(i % 2 ? a : b)));
      expect(await a.all('SELECT orderby FROM departments ORDER BY id')).toEqual([{ orderby: 60 }, { orderby: 40 }]);
      expect(a.stats.retries + (b === a ? 0 : b.stats.retries)).toBe(retries);
    } finally {
      await a.close();
      if (b !== a) await b.close();
    }
  });

  it('hands over the rows of a statement sent later once sent: with the next statement, at COMMIT, at a nested body\'s end', async () => {
    const [a] = await seeded(engine);
    try {
      const insert = (s: MetadataSession, name: string) => s.runLater<{ id: number; name: string }>('INSERT INTO departments (ent_id, name, created_ms) VALUES (1, ?, 0) RETURNING id, name', [name]);
      const before = a.stats.roundTrips;
      const { first, second } = await a.tx(async (s) => {
        const first = (await insert(s, 'first')).rows;
        // A read after it sees it, and the rows come with that read's round trip.
        expect(await s.get('SELECT name FROM departments WHERE name = ?', ['first'])).toEqual({ name: 'first' });
        expect((await first)[0]!.name).toBe('first');
        return { first, second: (await insert(s, 'second')).rows };
      }, { library: 1 });
      expect((await second)[0]!.name).toBe('second');
      expect((await first)[0]!.id).toBeLessThan((await second)[0]!.id);
      // PostgreSQL: BEGIN with the lock and the read; the second insert with COMMIT.
      if (engine === 'postgresql') expect(a.stats.roundTrips - before).toBe(2);
      // A body around a nested one may wait for the nested one's rows before it sends anything else.
      const nested = await a.tx(async () => {
        const { rows } = await a.tx(async (s) => insert(s, 'nested'), { library: 1 });
        return (await rows)[0]!.name;
      }, { library: 1 });
      expect(nested).toBe('nested');
      // A failed statement sent later fails its rows and the transaction, which rolls back whole.
      // (SQLite runs it at once: the call itself fails.)
      let rows: Promise<unknown[]> | undefined;
      await expect(a.tx(async (s) => {
        await s.runLater('UPDATE departments SET name = ? WHERE name = ?', ['renamed', 'first']);
        const later = s.runLater('INSERT INTO no_such_table (x) VALUES (1) RETURNING x');
        rows = later.then((l) => l.rows);
        rows.catch(() => undefined);
        await later;
      }, { library: 1 })).rejects.toThrow(/no_such_table/);
      await expect(rows).rejects.toThrow(/no_such_table/);
      expect(await a.get('SELECT COUNT(*) AS n FROM departments WHERE name = ?', ['renamed'])).toEqual({ n: 0 });
    } finally {
      await a.close();
    }
  });

  it("keeps operation times gapless and in commit order when library transactions and others reserve them", async () => {
    const [a, b] = await seeded(engine);
    try {
      const now = 1_000;
      // Library transactions reserve twice (the second counted without a statement on PostgreSQL);
      // every third writer is a plain transaction that reserves by statement.
      const writers = Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b).tx(async (s) => {
        const first = await reserveOperationTimes(s, 1, now, 1);
        await tick();
        const second = await reserveOperationTimes(s, 1, now, 2);
        for (const [k, ms] of [first, second, second + 1].entries()) {
          await s.run('INSERT INTO file_events (library_id, act, fullpath, ms) VALUES (1, 1, ?, ?)', [`w${i}-${k}`, ms]);
        }
      }, i % 3 === 0 ? undefined : { library: 1 }));
      const seen: number[] = [];
      let done = false;
      const reader = (async () => {
        let cursor = 0;
        for (let last = false; !last;) {
          last = done;
          const rows = await a.all<{ ms: number }>('SELECT ms FROM file_events WHERE library_id = 1 AND ms > ? ORDER BY ms', [cursor]);
          for (const r of rows) seen.push(r.ms);
          if (rows.length) cursor = rows[rows.length - 1]!.ms;
          await tick();
        }
      })();
      await Promise.all(writers);
      done = true;
      await reader;
      expect(seen).toEqual(Array.from({ length: 180 }, (_, i) => now + i));
      expect(await b.get('SELECT last_op_ms FROM libraries WHERE id = 1')).toEqual({ last_op_ms: now + 179 });
    } finally {
      await a.close();
      if (b !== a) await b.close();
    }
  });
});

describe('placeholders for PostgreSQL', () => {
  it('writes values into statements sent later as literals, and refuses other values', () => {
    const escapeLiteral = (v: string) => `'${v.replace(/'/g, "''")}'`;
    expect(inlined("SELECT $1, '$2', $2, x-$10 FROM t WHERE x = $3", [1.5, "o'k", null, 4, 5, 6, 7, 8, 9, -10], { escapeLiteral })).toBe("SELECT '1.5', '$2', 'o''k', x-'-10' FROM t WHERE x = NULL");
    expect(() => inlined('SELECT $1', [{}], { escapeLiteral })).toThrow(TypeError);
    expect(() => inlined('SELECT $1', [Number.NaN], { escapeLiteral })).toThrow(TypeError);
    expect(() => inlined('SELECT $2', [1], { escapeLiteral })).toThrow(RangeError);
  });

  it('numbers ? outside quoted text only', () => {
    expect(numbered(`SELECT '?', "a?" FROM t WHERE x = ? AND y = ? AND z = 'it''s ?'`)).toBe(`SELECT '?', "a?" FROM t WHERE x = $1 AND y = $2 AND z = 'it''s ?'`);
  });
});

describe('StoredBlobLocks (the per-blob lock between processes)', () => {
  it('never lets two processes into sections of one blob at once; other blobs run alongside; an expired lock is taken over', async () => {
    const [a, b] = await seeded('postgresql');
    try {
      let now = Date.now();
      const local = { lock: <T>(_sha1: string, fn: () => Promise<T> | T) => Promise.resolve(fn()) };
      const la = new StoredBlobLocks(a, local, { maxWaitMs: 5, clock: () => now });
      const lb = new StoredBlobLocks(b, local, { maxWaitMs: 5, clock: () => now });
      const inside = new Map<string, number>();
      let overlaps = 0;
      let concurrentKeys = 0;
      const section = async (key: string) => {
        inside.set(key, (inside.get(key) ?? 0) + 1);
        if (inside.get(key)! > 1) overlaps++;
        if ([...inside.values()].filter((n) => n > 0).length > 1) concurrentKeys++;
        await tick();
        await tick();
        inside.set(key, inside.get(key)! - 1);
      };
      await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? la : lb).lock(i % 4 < 2 ? 'k1' : 'k2', () => section(i % 4 < 2 ? 'k1' : 'k2'))));
      expect(overlaps).toBe(0);
      expect(concurrentKeys).toBeGreaterThan(0);
      expect(await a.all('SELECT * FROM blob_locks')).toEqual([]);
      // a holder that died: its row stays until the lease passes, then the other process takes it
      await a.run('INSERT INTO blob_locks (sha1, holder, until_ms) VALUES (?, ?, ?)', ['k3', 'gone', now + 1_000]);
      let ran = false;
      const waiting = lb.lock('k3', () => { ran = true; });
      await tick();
      expect(ran).toBe(false);
      now += 1_000;
      await waiting;
      expect(ran).toBe(true);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('a blob reused while it is being collected (PostgreSQL, two processes)', () => {
  it('the collection waits for the transaction that pinned the blob, then keeps it for the new reference', async () => {
    const [a, b] = await seeded('postgresql');
    try {
      await a.run("INSERT INTO blobs (sha1, size, refs, created_ms) VALUES ('b1', 1, 0, 0)");
      let release!: () => void;
      let pinned!: () => void;
      const gate = new Promise<void>((r) => { release = r; });
      const pin = new Promise<void>((r) => { pinned = r; });
      const reuse = a.tx(async (s) => {
        expect((await s.run('UPDATE blobs SET refs = refs WHERE sha1 = ?', ['b1'])).changes).toBe(1);
        pinned();
        await gate;
        await s.run("INSERT INTO entries (library_id, hash, fullpath, name, dir, filehash, filesize, create_ms, last_ms, op_ms) VALUES (1, 'h1', 'f', 'f', 0, 'b1', 1, 0, 0, 1)");
      }, { library: 1 });
      await pin;
      const retries = b.stats.retries;
      const collect = b.tx(async (s) => (await s.run('DELETE FROM blobs WHERE sha1 = ? AND refs <= 0', ['b1'])).changes);
      // the collection's DELETE waits on the pinned row
      for (let i = 0; (await a.get<{ n: number }>('SELECT COUNT(*)::int AS n FROM pg_locks WHERE NOT granted'))!.n === 0; i++) {
        if (i > 2_000) throw new Error('the collection never waited for the pinned blob row');
        await tick();
      }
      release();
      await reuse;
      expect(await collect).toBe(0);
      expect(b.stats.retries).toBeGreaterThan(retries);
      expect(await a.get('SELECT refs FROM blobs WHERE sha1 = ?', ['b1'])).toEqual({ refs: 1 });
    } finally {
      await a.close();
      await b.close();
    }
  });
});
