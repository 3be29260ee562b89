/**
 * Statements with values go to PostgreSQL as named (prepared) statements, planned once per connection
 * (store/pg-prepared.ts): one prepared before another process changed the table under it is named anew
 * and sent again, alone and inside a transaction, instead of failing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { startPostgres, type Postgres } from '../../support/postgres.js';
import { openPostgres } from '../../../src/service/store/pg-database.js';
import { PgMetadataStore } from '../../../src/service/store/pg-metadata-store.js';

let server: Postgres;
beforeAll(async () => {
  server = await startPostgres();
}, 120_000);
afterAll(async () => {
  await server?.stop();
}, 60_000);

describe('prepared statements', () => {
  it('survive a change of the table they read, alone and in a transaction', async () => {
    const url = await server.createDatabase('prepared');
    // One connection: the statement prepared first is the one used again.
    const store = new PgMetadataStore(await openPostgres(url, { max: 1 }));
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    try {
      await store.run("INSERT INTO enterprises (id, name, client_id, client_secret, created_ms) VALUES (1, 'e', 'c', 's', 1)");
      const read = () => store.get<Record<string, unknown>>('SELECT * FROM enterprises WHERE id = ?', [1]);
      expect((await read())?.name).toBe('e');
      await other.query('ALTER TABLE enterprises ADD COLUMN later_a INTEGER');
      expect(await read()).toMatchObject({ name: 'e', later_a: null });
      await other.query('ALTER TABLE enterprises ADD COLUMN later_b INTEGER');
      // (the transaction's first statement goes with BEGIN, unnamed; the second alone, named)
      const inTx = await store.tx(async (s) => {
        await s.get('SELECT id FROM enterprises WHERE id = ?', [1]);
        return s.get<Record<string, unknown>>('SELECT * FROM enterprises WHERE id = ?', [1]);
      });
      expect(inTx).toMatchObject({ name: 'e', later_b: null });
      expect(store.stats.retries).toBe(1);
    } finally {
      await other.end();
      await store.close();
    }
  });
});
