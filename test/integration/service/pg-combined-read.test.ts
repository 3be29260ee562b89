/**
 * A request's statement ahead (the replay guard's record) and its first plain read go to PostgreSQL as
 * one prepared statement (store/pg-combined-read.ts): one round trip, the read's rows as they come alone
 * (order, columns, types), the ahead's row even when the read finds nothing, and a failed read answers
 * its own error while the statement ahead is still made.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type Postgres } from '../../support/postgres.js';
import { openPostgres } from '../../../src/service/store/pg-database.js';
import { PgMetadataStore } from '../../../src/service/store/pg-metadata-store.js';

let server: Postgres;
let store: PgMetadataStore;
beforeAll(async () => {
  server = await startPostgres();
  store = new PgMetadataStore(await openPostgres(await server.createDatabase('combined'), { max: 2 }));
  for (let i = 1; i <= 5; i++) {
    await store.run('INSERT INTO signature_uses (sign, path, peer, until_ms) VALUES (?, ?, ?, ?)', [`seed${i}`, `/p/${6 - i}`, 'x', i * 1000]);
  }
}, 120_000);
afterAll(async () => {
  await store?.close();
  await server?.stop();
}, 60_000);

const record = 'INSERT INTO signature_uses (sign, path, peer, until_ms) VALUES (?, ?, ?, ?) ON CONFLICT (sign) DO UPDATE SET path = signature_uses.path RETURNING path, peer';

/** Runs `read` as a request's first read with `sign` recorded ahead; the round trips it took. */
async function withAhead<T>(sign: string, read: () => Promise<T>): Promise<{ ahead: unknown; result: T; roundTrips: number } | { ahead: unknown; failure: unknown; roundTrips: number }> {
  const before = store.stats.roundTrips;
  return store.request(async () => {
    const ahead = store.ahead(record, [sign, '/m-open/1/file/ls', '10.0.0.1', 99_000]);
    try {
      const result = await read();
      return { ahead: await ahead, result, roundTrips: store.stats.roundTrips - before };
    } catch (failure) {
      return { ahead: await ahead, failure, roundTrips: store.stats.roundTrips - before };
    }
  });
}

describe('the statement ahead and a read in one statement', () => {
  it('answers both in one round trip, the read as it answers alone', async () => {
    const read = () => store.all<Record<string, unknown>>('SELECT sign, path, until_ms FROM signature_uses WHERE sign LIKE ? ORDER BY path DESC LIMIT ?', ['seed%', 4]);
    const alone = await read();
    const got = await withAhead('c1', read);
    expect(got).toEqual({ ahead: { path: '/m-open/1/file/ls', peer: '10.0.0.1' }, result: alone, roundTrips: 1 });
    expect(alone.map((r) => r.path)).toEqual(['/p/5', '/p/4', '/p/3', '/p/2']);
    // recorded once: a second use finds the first
    const again = await withAhead('c1', () => store.get('SELECT 1 AS one'));
    expect(again).toMatchObject({ ahead: { path: '/m-open/1/file/ls' }, result: { one: 1 }, roundTrips: 1 });
  });

  it('gives the ahead its row when the read finds nothing', async () => {
    const got = await withAhead('c2', () => store.all('SELECT * FROM signature_uses WHERE sign = ?', ['none']));
    expect(got).toEqual({ ahead: { path: '/m-open/1/file/ls', peer: '10.0.0.1' }, result: [], roundTrips: 1 });
  });

  it('answers a failed read with its own error, the statement ahead made by itself', async () => {
    const got = await withAhead('c3', () => store.get('SELECT 1 / CAST(? AS INTEGER) AS n', ['0']));
    expect(got).toMatchObject({ ahead: { path: '/m-open/1/file/ls' }, failure: { code: '22012' } });
    expect(await store.get('SELECT path FROM signature_uses WHERE sign = ?', ['c3'])).toEqual({ path: '/m-open/1/file/ls' });
  });
});
