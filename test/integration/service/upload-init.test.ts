/**
 * What upload_init answers through the service's own host (the authorization, the pending step, whether
 * its content is stored and the library's capacity, read together): an unknown org_client_id, an
 * unknown step, a library over its capacity, a session resumed, and content stored meanwhile.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UploadServerClient } from '../../../src/api/upload-server-client.js';
import { normalizeServer } from '../../../src/api/normalize.js';
import { startTestService, type TestService } from '../../support/service.js';
import { put, sha1 } from './helpers.js';

let t: TestService;

beforeAll(async () => {
  t = await startTestService();
});

afterAll(async () => {
  await t?.close();
});

describe('upload_init through the service', () => {
  it('refuses an unknown org_client_id, an unknown step and a library over its capacity; resumes; answers 202 for content stored meanwhile', async () => {
    const data = randomBytes(5000);
    const filehash = sha1(data);
    const created = await t.client.file.createFile({ fullpath: 'init/a.bin', filehash, filesize: data.length, overwrite: 1 });
    expect(created.state).toBe(0);
    const server = normalizeServer(created.server);
    const wire = new UploadServerClient(t.client, server, { orgClientId: t.service.credentials.library.org_client_id });
    const headers = { filename: 'a.bin', pathhash: created.hash, filehash, filesize: data.length };

    await expect(new UploadServerClient(t.client, server, { orgClientId: 'oc_nobody' }).init(headers)).rejects.toMatchObject({ status: 401, code: 40103 });
    await expect(wire.init({ ...headers, pathhash: 'f'.repeat(40) })).rejects.toMatchObject({ status: 404, code: 40403 });

    const library = t.service.credentials.library;
    const libraryId = (await t.service.parts.directory.libraryAuth(library.org_client_id))!.library_id;
    const { capacity } = await t.service.parts.directory.requireLibrary(libraryId);
    await t.service.parts.tree.db.run('UPDATE libraries SET capacity = size_used + 10 WHERE id = ?', [libraryId]);
    try {
      await expect(wire.init(headers)).rejects.toMatchObject({ status: 403, code: 40321 });
    } finally {
      await t.service.parts.tree.db.run('UPDATE libraries SET capacity = ? WHERE id = ?', [capacity, libraryId]);
    }

    const first = await wire.init(headers);
    expect(first.kind).toBe('session');
    expect(await wire.init(headers)).toEqual(first);

    // The same content stored through another path meanwhile: the next step's init places it at once.
    const other = randomBytes(3000);
    const again = await t.client.file.createFile({ fullpath: 'init/b.bin', filehash: sha1(other), filesize: other.length, overwrite: 1 });
    await put(t.client, 'init/elsewhere.bin', other);
    const instant = await wire.init({ filename: 'b.bin', pathhash: again.hash, filehash: sha1(other), filesize: other.length });
    expect(instant).toMatchObject({ kind: 'done', body: { fullpath: 'init/b.bin', filehash: sha1(other), filesize: other.length } });
  });
});
