/**
 * What each step of a chunked upload costs the metadata store (on PostgreSQL, round trips to the server,
 * BEGIN and COMMIT included; on SQLite, statements): upload_init of a new session, one upload_part, and
 * the upload_finish that commits the file, each alone, measured on the store's own counters. The bounds
 * are the figures of docs/service.md ("What a write costs on PostgreSQL"): a change that adds statements
 * to a step shows here. Runs on both engines.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UploadServerClient, type FinishAnswer } from '../../../src/api/upload-server-client.js';
import { normalizeServer } from '../../../src/api/normalize.js';
import { crc32 } from '../../../src/shared/crc32.js';
import type { StoreStats } from '../../../src/service/store/metadata-store.js';
import { startTestService, type TestService } from '../../support/service.js';
import { sha1, storeCost } from './helpers.js';

let t: TestService;

beforeAll(async () => {
  t = await startTestService();
  await t.client.file.createFolder({ fullpath: 'up' });
});

afterAll(async () => {
  await t?.close();
});

/** The store's counters spent by `fn` (nothing else runs meanwhile). */
const cost = (fn: () => Promise<unknown>): Promise<StoreStats> => storeCost(t.service.parts.tree.db.stats, fn);

/**
 * Statements a step takes, per engine. upload_finish: the call that commits, until the commit is done
 * and the blob collector that the commit starts has looked for unreferenced blobs (one statement, after
 * the answer).
 */
const BOUNDS = {
  postgresql: { upload_init: 3, upload_part: 2, upload_finish: 8 },
  sqlite: { upload_init: 3, upload_part: 2, upload_finish: 14 },
};
/** What one more upload_finish call costs while the commit runs (it answers 202): the session's read. */
const POLL_BOUND = 2;

describe('statements per upload step', () => {
  it('stay within the documented bounds, no retry', async () => {
    const engine = t.service.parts.tree.db.engine;
    const bounds = BOUNDS[engine];
    const block = 64 * 1024;
    const data = randomBytes(2 * block);
    const filehash = sha1(data);
    const created = await t.client.file.createFile({ fullpath: 'up/new.bin', filehash, filesize: data.length, overwrite: 1 });
    expect(created.state).toBe(0);
    const wire = new UploadServerClient(t.client, normalizeServer(created.server), { orgClientId: t.service.credentials.library.org_client_id });
    let session = '';
    const seen: Record<string, StoreStats> = {};
    seen.upload_init = await cost(async () => {
      const init = await wire.init({ filename: 'new.bin', pathhash: created.hash, filehash, filesize: data.length });
      if (init.kind !== 'session') throw new Error(`upload_init: expected a session, got ${JSON.stringify(init)}`);
      session = init.session;
    });
    const part = (at: number) => wire.part(session, at, data.subarray(at, at + block), crc32(data.subarray(at, at + block)));
    seen.upload_part = await cost(async () => expect(await part(0)).toEqual({ kind: 'stored' }));
    seen.upload_last_part = await cost(async () => expect(await part(block)).toEqual({ kind: 'complete' }));
    let polls = 0;
    let answer: FinishAnswer | undefined;
    seen.upload_finish = await cost(async () => {
      // A commit slower than the server's wait answers 202: the client asks again (each poll counted).
      for (answer = await wire.finish(session); answer.kind === 'processing'; answer = await wire.finish(session)) polls++;
      await t.service.parts.content.settled();
    });
    expect(answer).toMatchObject({ kind: 'done', body: { fullpath: 'up/new.bin', filehash, filesize: data.length } });
    process.stdout.write(`upload round trips on ${engine}: ${JSON.stringify(seen)}${polls ? ` (${polls} polls)` : ''}\n`);
    const limits: Record<string, number> = { ...bounds, upload_last_part: bounds.upload_part, upload_finish: bounds.upload_finish + polls * POLL_BOUND };
    for (const [step, s] of Object.entries(seen)) {
      // +1: a timer's statement (the copy queue's look for orphaned items) may fall in any step
      expect({ step, roundTrips: s.roundTrips }).toEqual({ step, roundTrips: Math.min(s.roundTrips, limits[step]! + 1) });
      expect({ step, retries: s.retries }).toEqual({ step, retries: 0 });
    }
    // A repeated finish answers the result the first one recorded.
    expect(await wire.finish(session)).toEqual(answer);
    const info = await t.client.file.info({ fullpath: 'up/new.bin' });
    expect(info).toMatchObject({ filehash, filesize: data.length });
  });
});
