/**
 * upload_finish through the service's own host when the commit is refused: the create_file step is gone
 * when the content arrives. The refusal is answered (once), and nothing stays: no file, no blob, no
 * staged bytes, no blob lock, no session.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UploadServerClient } from '../../../src/api/upload-server-client.js';
import { normalizeServer } from '../../../src/api/normalize.js';
import { crc32 } from '../../../src/shared/crc32.js';
import { startTestService, type TestService } from '../../support/service.js';
import { codeOf, sha1 } from './helpers.js';

let t: TestService;

beforeAll(async () => {
  t = await startTestService();
});

afterAll(async () => {
  await t?.close();
});

describe('upload_finish refused at its commit', () => {
  it('answers the refusal when the step is gone, and leaves no file, blob, staged bytes, lock or session', async () => {
    const data = randomBytes(4000);
    const filehash = sha1(data);
    const created = await t.client.file.createFile({ fullpath: 'fin/gone.bin', filehash, filesize: data.length, overwrite: 1 });
    const wire = new UploadServerClient(t.client, normalizeServer(created.server), { orgClientId: t.service.credentials.library.org_client_id });
    const init = await wire.init({ filename: 'gone.bin', pathhash: created.hash, filehash, filesize: data.length });
    if (init.kind !== 'session') throw new Error(`upload_init: expected a session, got ${JSON.stringify(init)}`);
    expect(await wire.part(init.session, 0, data, crc32(data))).toEqual({ kind: 'complete' });
    const db = t.service.parts.tree.db;
    await db.run('DELETE FROM pending_uploads WHERE pathhash = ?', [created.hash]);

    await expect(wire.finish(init.session)).rejects.toMatchObject({ status: 404, code: 40402 });
    await t.service.parts.content.settled();
    // the refusal was answered once: the session is gone
    await expect(wire.finish(init.session)).rejects.toMatchObject({ status: 401 });
    expect(await codeOf(t.client.file.info({ fullpath: 'fin/gone.bin' }))).not.toBe(0);
    expect(await db.get('SELECT sha1 FROM blobs WHERE sha1 = ?', [filehash])).toBeUndefined();
    expect(await t.service.parts.content.blobs.sizeOf(filehash)).toBeUndefined();
    expect(await db.all('SELECT sha1 FROM blob_locks')).toEqual([]);
    expect(await db.get('SELECT id FROM upload_sessions WHERE id = ?', [init.session])).toBeUndefined();
  });
});
