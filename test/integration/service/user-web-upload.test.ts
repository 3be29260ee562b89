/** A member's web upload (user form) needs `ul` to add a file and `w` to replace one, like create_file. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Readable } from 'node:stream';
import { webUpload } from '../../../src/api/upload.js';
import { startTestService, type TestService } from '../../support/service.js';
import { codeOf, put } from './helpers.js';
import { addMember, type TestMember } from './user-fixtures.js';

let t: TestService;
let mount: number;
let member: TestMember;
beforeAll(async () => {
  t = await startTestService();
  mount = t.service.credentials.library.mount_id;
  member = await addMember(t, 'uploader', { libraryRole: 0 });
});
afterAll(async () => { await t?.close(); });

const source = (text: string) => ({ size: Buffer.byteLength(text), open: () => Readable.from([Buffer.from(text)]) });
const set = (folder: string, permission: Record<string, number>) =>
  t.client.file2.setPermission({ fullpath: folder, permissions: JSON.stringify({ member_ids: [member.id], permission: { role_id: 0, ...permission } }) });

describe('user web upload and permissions', { timeout: 30_000 }, () => {
  it('refused without ul (nothing stored), accepted with it', async () => {
    await t.client.file.createFolder({ fullpath: 'drop' });
    await set('drop', { ls: 1, cd: 1, ul: -1 });
    expect(await codeOf(webUpload(member.client, { path: 'drop', name: 'a.txt', source: source('aaa'), mountId: mount }))).toBe(40310);
    expect((await t.client.file.ls({ fullpath: 'drop' })).count).toBe(0);
    await set('drop', { ls: 1, cd: 1, ul: 1 });
    await webUpload(member.client, { path: 'drop', name: 'a.txt', source: source('aaa'), mountId: mount });
    expect((await t.client.file.ls({ fullpath: 'drop' })).list.map((e) => e.filename)).toEqual(['a.txt']);
  });

  it('replacing a file needs w', async () => {
    await t.client.file.createFolder({ fullpath: 'keep' });
    await put(t.client, 'keep/f.txt', 'original');
    await set('keep', { ls: 1, cd: 1, ul: 1, w: -1 });
    expect(await codeOf(webUpload(member.client, { path: 'keep', name: 'f.txt', source: source('changed'), mountId: mount }))).toBe(40310);
    expect(Number((await t.client.file.info({ fullpath: 'keep/f.txt' })).filesize)).toBe(8);
  });
});
