/**
 * A library authorization whose secret changed (docs/service.md, "What a write costs on PostgreSQL": the
 * authorization cache): the next call signed with the old secret is refused and changes nothing, the
 * next signed with the new one passes, though the process held the old row in its cache (PostgreSQL).
 * Runs on both engines: the answers are the same.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../../support/service.js';
import { codeOf } from './helpers.js';

let t: TestService;

beforeAll(async () => {
  t = await startTestService();
});

afterAll(async () => {
  await t?.close();
});

describe('a library authorization whose secret changed', () => {
  it('refuses the old secret at the next call, a change too, and takes the new one', async () => {
    const auth = t.client.credentials.library!;
    await t.client.file.createFolder({ fullpath: 'rotated' });
    expect((await t.client.file.ls({ fullpath: '' })).list.map((e) => e.filename)).toContain('rotated');
    await t.service.parts.tree.db.run('UPDATE library_auths SET org_client_secret = ? WHERE org_client_id = ?', ['the-new-secret', auth.org_client_id]);
    expect(await codeOf(t.client.file.createFolder({ fullpath: 'rotated/old' }))).toBe(401041);
    expect(await codeOf(t.client.file.ls({ fullpath: 'rotated' }))).toBe(401041);
    const renewed = t.client.withCredentials({ library: { org_client_id: auth.org_client_id, org_client_secret: 'the-new-secret' } });
    expect((await renewed.file.ls({ fullpath: 'rotated' })).list).toEqual([]);
    await renewed.file.createFolder({ fullpath: 'rotated/new' });
    expect((await renewed.file.ls({ fullpath: 'rotated' })).list.map((e) => e.filename)).toEqual(['new']);
    await t.service.parts.tree.db.run('UPDATE library_auths SET org_client_secret = ? WHERE org_client_id = ?', [auth.org_client_secret, auth.org_client_id]);
    expect(await codeOf(renewed.file.ls({ fullpath: 'rotated' }))).toBe(401041);
    expect((await t.client.file.ls({ fullpath: 'rotated' })).list.map((e) => e.filename)).toEqual(['new']);
  });
});
