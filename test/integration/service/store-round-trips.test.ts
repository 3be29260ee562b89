/**
 * What one request costs the metadata store: statements (on PostgreSQL, round trips to the server,
 * BEGIN and COMMIT included), transactions and retries of `create_folder`, `create_file` (instant, and of new content),
 * `move`, `del`, `add_tag`, `lock`, `ls`, `info`, `download_url` and `updates`, each request alone, measured on the store's own counters. The
 * bounds are the figures of docs/service.md: a change that adds statements to a write shows here.
 * Runs on both engines (SQLite counts statements, which cost no round trip).
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoredSignatureLedger } from '../../../src/service/http/signature-ledger.js';
import type { StoreStats } from '../../../src/service/store/metadata-store.js';
import { startTestService, type TestService } from '../../support/service.js';
import { put, storeCost } from './helpers.js';

const sha1 = (s: string) => createHash('sha1').update(s).digest('hex');

let t: TestService;

beforeAll(async () => {
  t = await startTestService();
  await put(t.client, 'rt/seed.txt', 'seed');
  await t.client.file.createFolder({ fullpath: 'rt/d' });
});

afterAll(async () => {
  await t?.close();
});

/** The store's counters spent by `fn` (nothing else runs meanwhile). */
const cost = (fn: () => Promise<unknown>): Promise<StoreStats> => storeCost(t.service.parts.tree.db.stats, fn);

/**
 * Statements a request takes, per engine (docs/service.md, "What a write costs on PostgreSQL"); on SQLite
 * one is the authentication's (the library's authorization with its library and its enterprise's term,
 * which a change's admission check reads); on PostgreSQL the authorization comes from the process's cache,
 * checked by the epoch the replay guard's record reads, and one round trip is a read's replay guard record
 * (beside its work; a change's goes in the round trip of its first transaction).
 */
const BOUNDS = {
  postgresql: {
    create_folder: 2, create_folder_nested: 2, create_file: 2, create_file_nested: 2, create_file_new: 2, move: 2, move_folder: 2, del: 3, del_folder: 3,
    add_tag: 2, lock: 2, ls: 1, info: 1, download_url: 1, updates: 1,
  },
  sqlite: {
    create_folder: 5, create_folder_nested: 11, create_file: 8, create_file_nested: 14, create_file_new: 6, move: 5, move_folder: 7, del: 6, del_folder: 8,
    add_tag: 4, lock: 5, ls: 2, info: 2, download_url: 2, updates: 2,
  },
};

describe('statements per request', () => {
  it('stay within the documented bounds, one transaction a change, no retry alone', async () => {
    const engine = t.service.parts.tree.db.engine;
    const bounds = BOUNDS[engine];
    const seen: Record<string, StoreStats> = {};
    seen.create_folder = await cost(() => t.client.file.createFolder({ fullpath: 'rt/d/new' }));
    // Folders above it missing: they are created in the same round trips, whatever their number.
    seen.create_folder_nested = await cost(() => t.client.file.createFolder({ fullpath: 'rt/n1/n2/n3' }));
    seen.create_file_nested = await cost(() => t.client.file.createFile({ fullpath: 'rt/m1/m2/copy.txt', filehash: sha1('seed'), filesize: 4 }));
    // A folder with what is below it: read with its entry.
    seen.move_folder = await cost(() => t.client.file.move({ fullpath: 'rt/n1', dest_fullpath: 'rt/n1moved' }));
    seen.del_folder = await cost(() => t.client.file.del({ fullpath: 'rt/m1' }));
    seen.create_file = await cost(() => t.client.file.createFile({ fullpath: 'rt/d/copy.txt', filehash: sha1('seed'), filesize: 4 }));
    seen.create_file_new = await cost(() => t.client.file.createFile({ fullpath: 'rt/d/new.txt', filehash: sha1('not stored'), filesize: 10 }));
    seen.move = await cost(() => t.client.file.move({ fullpath: 'rt/d/copy.txt', dest_fullpath: 'rt/d/moved.txt' }));
    seen.add_tag = await cost(() => t.client.file.addTag({ fullpath: 'rt/d/moved.txt', tag: 'red' }));
    seen.lock = await cost(() => t.client.file.lock({ fullpath: 'rt/d/moved.txt', lock: 'lock' }));
    seen.del = await cost(() => t.client.file.del({ fullpath: 'rt/d/moved.txt' }));
    seen.ls = await cost(() => t.client.file.ls({ fullpath: 'rt/d' }));
    seen.info = await cost(() => t.client.file.info({ fullpath: 'rt/seed.txt' }));
    seen.download_url = await cost(() => t.client.file.downloadUrl({ fullpath: 'rt/seed.txt' }));
    seen.updates = await cost(() => t.client.file.updates({ mode: 'compare', fetch_dateline: 0 }));
    process.stdout.write(`store round trips on ${engine}: ${JSON.stringify(seen)}\n`);
    for (const [op, s] of Object.entries(seen)) {
      // +1: the replay guard's once-a-second sweep of expired signatures may fall in any request
      expect({ op, roundTrips: s.roundTrips }).toEqual({ op, roundTrips: Math.min(s.roundTrips, bounds[op as keyof typeof bounds] + 1) });
      expect({ op, retries: s.retries }).toEqual({ op, retries: 0 });
    }
    for (const op of ['create_folder', 'create_folder_nested', 'create_file', 'create_file_nested', 'create_file_new', 'move', 'move_folder', 'add_tag', 'lock', 'del', 'del_folder']) expect({ op, transactions: seen[op]!.transactions }).toEqual({ op, transactions: 1 });
    expect(seen.ls!.transactions).toBe(0);
    expect(seen.info!.transactions).toBe(0);
    expect(seen.download_url!.transactions).toBe(0);
    expect(seen.updates!.transactions).toBe(0);
  });
});

describe('the replay guard in the store', () => {
  it('records a signature, or finds its first use, in one statement', async () => {
    const now = Date.now();
    const ledger = new StoredSignatureLedger(t.service.parts.tree.db, { windowMs: 60_000, clock: () => now });
    await ledger.use('rt-warm', '/a', now); // the once-a-second sweep goes with this one
    let other: unknown = 'unset';
    const first = await cost(() => ledger.use('rt-sign', '/m-open/1/file/ls', now, '10.0.0.1'));
    const again = await cost(async () => { other = await ledger.use('rt-sign', '/m-open/1/file/info', now, '10.0.0.2'); });
    expect(other).toEqual({ path: '/m-open/1/file/ls', peer: '10.0.0.1' });
    expect({ first: first.roundTrips, again: again.roundTrips }).toEqual({ first: 1, again: 1 });
  });
});
