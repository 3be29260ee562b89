/**
 * The replay guard's record of a change, which on PostgreSQL goes in the round trip of the change's
 * first transaction (docs/service.md, "What a write costs on PostgreSQL"): a refused change commits
 * nothing, and a change that fails for its own reason answers its own error while its signature stays
 * recorded. Runs on both engines: the answers are the same.
 */
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENDPOINTS } from '../../../src/shared/endpoints.js';
import { startTestService, type TestService } from '../../support/service.js';

let t: TestService;
let elsewhere: Agent;

beforeAll(async () => {
  t = await startTestService();
  elsewhere = new Agent({ localAddress: '127.0.0.2' });
});

afterAll(async () => {
  await elsewhere?.close();
  await t?.close();
});

/** Sends `wire` (signed parameters) to `path`, from 127.0.0.2 when `dispatcher` says so. */
async function call(path: string, wire: string, dispatcher?: Agent): Promise<{ status: number; code: number | undefined }> {
  const res = await request(`${t.service.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: wire, dispatcher });
  const body = (await res.body.json()) as { error_code?: number };
  return { status: res.statusCode, code: body.error_code };
}

describe('a change whose signature was used for another endpoint from another address', () => {
  it('is refused (401043) and changes nothing', async () => {
    const wire = new URLSearchParams(t.client.signedParams(ENDPOINTS.file.create_folder, { fullpath: 'ahead/kept' })).toString();
    expect(await call(ENDPOINTS.file.create_folder.path, wire)).toEqual({ status: 200, code: undefined });
    // del takes the same parameters: its work runs, and is rolled back when the guard refuses
    expect(await call(ENDPOINTS.file.del.path, wire, elsewhere)).toEqual({ status: 401, code: 401043 });
    expect((await t.client.file.info({ fullpath: 'ahead/kept' })).fullpath).toBe('ahead/kept');
    const feed = await t.client.file.updates({ mode: 'compare', fetch_dateline: 0 });
    expect(feed.list.filter((e) => e.fullpath === 'ahead/kept').map((e) => e.cmd)).not.toContain(0);
  });

  it('that failed for its own reason answers that reason, and its signature stays recorded', async () => {
    const wire = new URLSearchParams(t.client.signedParams(ENDPOINTS.file.move, { fullpath: 'ahead/missing', dest_fullpath: 'ahead/moved' })).toString();
    expect(await call(ENDPOINTS.file.move.path, wire)).toEqual({ status: 404, code: 40402 });
    // the same values on another endpoint from elsewhere (whose own work would fail too): the move's use
    // was recorded, and the refusal is the answer
    expect(await call(ENDPOINTS.file.del.path, wire, elsewhere)).toEqual({ status: 401, code: 401043 });
  });
});
