/**
 * The user file API through ServiceClient, acting as a member: libraries, listing, info, folders, files
 * (instant upload), copy (within and across libraries), move, rename, delete, favorites, search; and the
 * simple permission endpoints of the library API as the user API sees them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientFor, startTestService, type TestService } from '../../support/service.js';
import { codeOf, put, sha1, uncheckedCode } from './helpers.js';
import { addMember, memberClient, type TestMember } from './user-fixtures.js';

let t: TestService;
let mount: number;
let editor: TestMember;
beforeAll(async () => {
  t = await startTestService();
  mount = t.service.credentials.library.mount_id;
  editor = await addMember(t, 'editor', { libraryRole: 2 });
  await put(t.client, 'docs/b.txt', 'bbbb');
  await put(t.client, 'docs/a.pdf', 'a');
  await put(t.client, 'docs/clip.mp4', 'video!');
});
afterAll(async () => { await t?.close(); });

describe('user file API', () => {
  it('mount lists the member\'s libraries; a stranger\'s library answers 40311', async () => {
    const { list } = await editor.client.user.mount({});
    expect(list.find((l) => l.mount_id === mount)).toMatchObject({ org_id: t.service.credentials.library.org_id, storage_point: 'local' });
    const stranger = await addMember(t, 'stranger');
    expect((await stranger.client.user.mount({})).list).toEqual([]);
    expect(await codeOf(stranger.client.user.ls({ mount_id: mount, fullpath: '' }))).toBe(40311);
  });

  it('ls: records with mount_id, order, dir filter, kind filter (sort), paging', async () => {
    const all = await editor.client.user.ls({ mount_id: mount, fullpath: 'docs', order: 'filename' });
    expect(all.list.map((r) => r.filename)).toEqual(['a.pdf', 'b.txt', 'clip.mp4']);
    expect(all.list[0]).toMatchObject({ mount_id: mount, dir: 0, filehash: sha1('a'), lock: 0 });
    const bySize = await editor.client.user.ls({ mount_id: mount, fullpath: 'docs', order: 'filesize' });
    expect(bySize.list.map((r) => r.filename)).toEqual(['clip.mp4', 'b.txt', 'a.pdf']);
    expect((await editor.client.user.ls({ mount_id: mount, fullpath: '', dir: 1 })).list.map((r) => r.fullpath)).toEqual(['docs']);
    expect((await editor.client.user.ls({ mount_id: mount, sort: 1 })).list.map((r) => r.fullpath)).toEqual(['docs/clip.mp4']);
    const paged = await editor.client.user.ls({ mount_id: mount, fullpath: 'docs', order: 'filename', start: 1, size: 1 });
    expect(paged).toMatchObject({ count: 3, list: [{ filename: 'b.txt' }] });
    expect(await codeOf(editor.client.user.ls({ mount_id: mount, fullpath: 'docs', order: 'colour' }))).toBe(40003);
    expect(await codeOf(editor.client.user.ls({ mount_id: 999_999, fullpath: '' }))).toBe(40401);
  });

  it('info, attribute, open', async () => {
    const info = await editor.client.user.info({ mount_id: mount, fullpath: 'docs/b.txt' });
    expect(info).toMatchObject({ filename: 'b.txt', filesize: 4, lock: 0, create_member_id: '0' });
    expect(await editor.client.user.attribute({ mount_id: mount, fullpath: 'docs' })).toEqual({ file_count: 3, folder_count: 0 });
    const open = await editor.client.user.open({ mount_id: mount, hash: info.hash });
    expect(open).toMatchObject({ hash: info.hash, filehash: sha1('bbbb'), filesize: 4 });
    const res = await fetch(open.uris[0]!);
    expect(await res.text()).toBe('bbbb');
  });

  it('info and ls carry preview and thumbnail links for a member who may preview, none otherwise', async () => {
    await put(t.client, 'pics/p.png', 'not really a png');
    const info = await editor.client.user.info({ mount_id: mount, fullpath: 'docs/b.txt' }) as unknown as { preview: string; thumbnail: string };
    expect(info.preview).toMatch(/^\/preview\/v\//);
    expect((await fetch(`${t.service.baseUrl}${info.preview}`)).status).toBe(200);
    expect(info.thumbnail).toBe('');
    const folder = await editor.client.user.info({ mount_id: mount, fullpath: 'docs' }) as unknown as Record<string, unknown>;
    expect(folder.preview).toBeUndefined();
    const listed = (await editor.client.user.ls({ mount_id: mount, fullpath: 'pics' })).list;
    expect(listed[0]!.thumbnail).toMatch(/\/preview\/t\//);
    const uploader = await addMember(t, 'uploader', { libraryRole: 6 });
    expect(await uploader.client.user.info({ mount_id: mount, fullpath: 'pics/p.png' })).toMatchObject({ preview: '', thumbnail: '' });
    expect((await uploader.client.user.ls({ mount_id: mount, fullpath: 'pics' })).list[0]!.thumbnail).toBe('');
  });

  it('create_folder (overwrite 1 returns the existing folder, 0 numbers the name) and create_file (instant when content is stored)', async () => {
    const f = await editor.client.user.createFolder({ mount_id: mount, fullpath: 'made/deep' });
    expect(f.fullpath).toBe('made/deep');
    expect((await editor.client.user.createFolder({ mount_id: mount, fullpath: 'made/deep' })).hash).toBe(f.hash);
    expect((await editor.client.user.createFolder({ mount_id: mount, fullpath: 'made/deep', overwrite: 0 })).fullpath).toBe('made/deep (1)');
    const file = await editor.client.user.createFile({ mount_id: mount, fullpath: 'made/copy-of-b.txt', filehash: sha1('bbbb'), filesize: 4 });
    expect(file).toMatchObject({ state: 1, fullpath: 'made/copy-of-b.txt' });
    const tree = await t.client.file.ls({ fullpath: 'made' });
    expect(tree.list.find((r) => r.filename === 'copy-of-b.txt')).toMatchObject({ last_member_name: 'editor' });
    expect((await editor.client.user.uploadServer({ mount_id: mount, fullpath: 'made' })).server).toBe(t.service.uploadServer);
  });

  it('copy within and across libraries (delete_from moves), move, rename, del to the recycle bin', async () => {
    const lib2 = await editor.client.user.libraryCreate({ name: 'Second', capacity: -1 });
    await editor.client.user.copy({ mount_id: mount, fullpath: 'docs/b.txt', target_fullpath: 'made' });
    expect((await t.client.file.info({ fullpath: 'made/b.txt' })).filesize).toBe(4);
    await editor.client.user.createFolder({ mount_id: lib2.mount_id, fullpath: 'imported' });
    await editor.client.user.createFolder({ mount_id: lib2.mount_id, fullpath: 'moved' });
    await editor.client.user.copy({ mount_id: mount, fullpaths: 'docs|made/b.txt', target_mount_id: lib2.mount_id, target_fullpath: 'imported' });
    expect(await codeOf(editor.client.user.copy({ mount_id: mount, fullpath: 'docs', target_mount_id: lib2.mount_id, target_fullpath: 'nowhere' }))).toBe(40402);
    const there = await editor.client.user.ls({ mount_id: lib2.mount_id, fullpath: 'imported/docs', order: 'filename' });
    expect(there.list.map((r) => r.filename)).toEqual(['a.pdf', 'b.txt', 'clip.mp4']);
    await editor.client.user.copy({ mount_id: mount, fullpath: 'made/b.txt', target_mount_id: lib2.mount_id, target_fullpath: 'moved', delete_from: 1 });
    expect(await codeOf(t.client.file.info({ fullpath: 'made/b.txt' }))).toBe(40402);
    await editor.client.user.move({ mount_id: mount, fullpath: 'made/copy-of-b.txt', target_fullpath: 'docs' });
    await editor.client.user.rename({ mount_id: mount, fullpath: 'docs/copy-of-b.txt', newname: 'c.txt' });
    expect(await codeOf(editor.client.user.rename({ mount_id: mount, fullpath: 'docs/c.txt', newname: 'a/b' }))).toBe(40003);
    await editor.client.user.del({ mount_id: mount, fullpath: 'docs/c.txt' });
    const bin = await t.client.file.recycle({});
    expect(bin.list.map((r) => r.fullpath)).toContain('docs/c.txt');
  });

  it('a lock the library authorization took naming a member\'s account is that member\'s: their token changes the file, another member\'s is refused', async () => {
    await put(t.client, 'own-lock/doc.odt', 'v1');
    await put(t.client, 'own-lock/v2', 'v2');
    await t.client.file.lock({ fullpath: 'own-lock/doc.odt', lock: 'lock', op_name: editor.account });
    const other = await addMember(t, 'other', { libraryRole: 2 });
    expect(await codeOf(other.client.user.createFile({ mount_id: mount, fullpath: 'own-lock/doc.odt', filehash: sha1('v2'), filesize: 2, overwrite: 1 }))).toBe(42301);
    expect(await codeOf(other.client.user.del({ mount_id: mount, fullpath: 'own-lock/doc.odt' }))).toBe(42301);
    // A save through a temporary file: the new content, then the document replaced by it.
    expect(await editor.client.user.createFile({ mount_id: mount, fullpath: 'own-lock/doc.odt', filehash: sha1('v2'), filesize: 2, overwrite: 1 })).toMatchObject({ fullpath: 'own-lock/doc.odt' });
    await editor.client.user.del({ mount_id: mount, fullpath: 'own-lock/doc.odt' });
    await editor.client.user.rename({ mount_id: mount, fullpath: 'own-lock/v2', newname: 'doc.odt' });
    expect((await t.client.file.info({ fullpath: 'own-lock/doc.odt' })).filehash).toBe(sha1('v2'));
  });

  it('library/create: any member by default; with __setting_member_create_org=0 only the enterprise\'s administrators', async () => {
    const partner = clientFor(t, 'partner');
    await partner.call('partner', 'create_ent', { out_id: 'strict', ent_name: 'Strict', account: 'admin@strict.example', __setting_member_create_org: '0' });
    const ent = t.client.withCredentials({ enterprise: await partner.partner.getClientId({ out_id: 'strict', title: 'test' }) });
    const { member_id: plainId } = await ent.ent.addMember({ account: 'plain@strict.example' });
    const { member_id: adminId } = await ent.ent.getMember({ account: 'admin@strict.example' });
    const libraries = async () => (await ent.org.ls({})).list.length;
    const before = await libraries();
    const err = await (await memberClient(t, plainId)).client.user.libraryCreate({ name: 'Mine', capacity: -1 }).catch((e: unknown) => e) as { code: number; message: string };
    expect(err.code).toBe(40310);
    expect(err.message).toContain('administrators');
    expect(await libraries()).toBe(before);
    const made = await (await memberClient(t, adminId)).client.user.libraryCreate({ name: 'Team', capacity: -1 });
    expect((await ent.org.info({ org_id: String(made.org_id) })).info.owner_id).toBe(adminId);
    expect(await codeOf(partner.call('partner', 'create_ent', { out_id: 'bad', ent_name: 'Bad', __setting_member_create_org: 'no' }))).toBe(40003);
  });

  it('favorites follow the file through a rename and drop out when it is deleted', async () => {
    await put(t.client, 'fav/one.txt', 'one');
    await editor.client.user.favoritesAddFile({ mount_id: mount, fullpath: 'fav/one.txt' });
    await editor.client.user.favoritesAddFile({ mount_id: mount, fullpath: 'fav/one.txt' });
    await t.client.file.move({ fullpath: 'fav/one.txt', dest_fullpath: 'fav/uno.txt' });
    expect((await editor.client.user.favoritesGetFiles({})).list.map((r) => r.fullpath)).toEqual(['fav/uno.txt']);
    expect((await editor.client.user.favoritesGetFiles({ fav_id: 5 })).list).toEqual([]);
    await editor.client.user.favoritesDelFile({ mount_id: mount, fullpath: 'fav/uno.txt' });
    expect((await editor.client.user.favoritesGetFiles({})).list).toEqual([]);
    expect(await codeOf(editor.client.user.favoritesDelFile({ mount_id: mount, fullpath: 'fav/uno.txt' }))).toBe(40402);
  });

  it('search: by name below a folder, ext filter, all libraries with mount_id 0; content scope is not enabled', async () => {
    const r = await editor.client.user.search({ keyword: '.txt', mount_id: mount, fullpath: 'docs' });
    expect(r.list.map((x) => x.fullpath)).toEqual(['docs/b.txt']);
    const pdf = await editor.client.user.search({ keyword: 'a', mount_id: mount, ext: JSON.stringify(['pdf']) });
    expect(pdf.list.map((x) => x.fullpath)).toEqual(['docs/a.pdf']);
    const everywhere = await editor.client.user.search({ keyword: 'clip', mount_id: 0 });
    expect(everywhere.list.map((x) => x.mount_id).sort()).toHaveLength(2);
    expect(await codeOf(editor.client.user.search({ keyword: 'x', scope: JSON.stringify(['content']) }))).toBe(40306);
  });
});

describe('simple permissions (library API) seen through the user API', () => {
  it('file_permission, get_permission, get_all_permission, reset_permission, set_permission_inherit', async () => {
    const viewer = await addMember(t, 'viewer', { libraryRole: 0 });
    await put(t.client, 'shared/in.txt', 'in');
    await put(t.client, 'shared/sub/deep.txt', 'deep');
    await t.client.file.filePermission({ fullpath: 'shared', permissions: JSON.stringify({ [viewer.id]: ['file_read'] }) });
    expect(await t.client.file.getPermission({ fullpath: 'shared/in.txt', member_id: String(viewer.id) })).toEqual(['file_preview', 'file_read']);
    expect(await t.client.file.getAllPermission({ fullpath: 'shared' })).toEqual({ members: { [viewer.id]: ['file_preview', 'file_read'] }, groups: {} });
    expect((await t.client.file.getAllPermission({ fullpath: 'shared/sub' })).members).toEqual({});
    // Inherited below; reading allowed, uploading not.
    expect((await viewer.client.user.open({ mount_id: mount, fullpath: 'shared/sub/deep.txt' })).filesize).toBe(4);
    expect(await codeOf(viewer.client.user.createFile({ mount_id: mount, fullpath: 'shared/x.txt', filehash: sha1('in'), filesize: 2 }))).toBe(40310);
    const all = await t.client.file.getPermission({ fullpath: 'shared' }) as { members: Record<string, string[]> };
    expect(all.members[String(viewer.id)]).toEqual(['file_preview', 'file_read']);
    expect(all.members[String(t.service.credentials.member.member_id)]).toHaveLength(6);
    // Inheritance off (keeping what was inherited), then the member's own entry below replaces it.
    await t.client.file.setPermissionInherit({ fullpath: 'shared/sub', inherit: 0 });
    expect((await t.client.file.getAllPermission({ fullpath: 'shared/sub' })).members[String(viewer.id)]).toEqual(['file_preview', 'file_read']);
    await t.client.file.filePermission({ fullpath: 'shared/sub', permissions: JSON.stringify({ [viewer.id]: ['file_upload'] }) });
    expect(await codeOf(viewer.client.user.open({ mount_id: mount, fullpath: 'shared/sub/deep.txt' }))).toBe(40310);
    expect((await viewer.client.user.createFile({ mount_id: mount, fullpath: 'shared/sub/up.txt', filehash: sha1('in'), filesize: 2 })).state).toBe(1);
    // reset on a folder that does not inherit removes the member: nothing left there.
    await t.client.file.resetPermission({ fullpath: 'shared/sub', members: String(viewer.id) });
    expect(await t.client.file.getPermission({ fullpath: 'shared/sub', member_id: String(viewer.id) })).toEqual([]);
    await t.client.file.setPermissionInherit({ fullpath: 'shared/sub', inherit: 1 });
    expect(await t.client.file.getPermission({ fullpath: 'shared/sub', member_id: String(viewer.id) })).toEqual(['file_preview', 'file_read']);
    // Bad input changes nothing.
    expect(await codeOf(t.client.file.filePermission({ fullpath: 'shared', permissions: JSON.stringify({ [viewer.id]: ['file_fly'] }) }))).toBe(40003);
    expect(await codeOf(t.client.file.filePermission({ fullpath: 'shared/in.txt', permissions: JSON.stringify({ [viewer.id]: ['file_read'] }) }))).toBe(40902);
    expect(await codeOf(t.client.file.filePermission({ fullpath: 'shared', permissions: JSON.stringify({ 999999: ['file_read'] }) }))).toBe(40406);
    expect(await t.client.file.getPermission({ fullpath: 'shared', member_id: String(viewer.id) })).toEqual(['file_preview', 'file_read']);
  });

  it('advanced model: roles, nearest entry wins, deny beats a role, batch set, del_permission; changes show in the updates feed', async () => {
    const m = await addMember(t, 'adv', { libraryRole: 4 });
    await put(t.client, 'adv/x.txt', 'x');
    expect(await t.client.file2.getMemberPermission({ fullpath: 'adv', account: m.account })).toMatchObject({ dl: 1, ul: 0, rm: 0 });
    const before = (await t.client.file.info({ fullpath: 'adv' })) as unknown as { hash: string };
    const feed0 = await t.client.file.updates({ mode: 'compare', fetch_dateline: 0 });
    void feed0;
    await t.client.file2.setPermission({ fullpath: 'adv', permissions: JSON.stringify({ accounts: [m.account], permission: { role_id: 4, dl: -1, ul: 1 } }) });
    expect(await t.client.file2.getMemberPermission({ fullpath: 'adv/x.txt', member_id: String(m.id) })).toMatchObject({ dl: -1, ul: 1, ls: 1 });
    expect(await codeOf(m.client.user.open({ mount_id: mount, fullpath: 'adv/x.txt' }))).toBe(40310);
    await t.client.file2.batchSetPermission({ fullpaths: 'adv', type: 1, permissions: JSON.stringify({ member_ids: [m.id], permission: { role_id: 0, rm: 1 } }) });
    expect(await t.client.file2.getMemberPermission({ fullpath: 'adv', member_id: String(m.id) })).toMatchObject({ dl: 0, rm: 1, ls: 0 });
    await t.client.file2.batchSetPermission({ fullpaths: 'adv', type: 0, permissions: JSON.stringify({ member_ids: [m.id], permission: { dl: 1 } }) });
    expect(await t.client.file2.getMemberPermission({ fullpath: 'adv', member_id: String(m.id) })).toMatchObject({ dl: 1, rm: 1 });
    await t.client.file2.delPermission({ fullpath: 'adv', ids: JSON.stringify({ member_ids: [m.id] }) });
    expect(await t.client.file2.getMemberPermission({ fullpath: 'adv', member_id: String(m.id) })).toMatchObject({ dl: 1, rm: 0 });
    await t.client.file2.setPermissionInherit({ fullpath: 'adv', inherit: 0, keep: 0 });
    expect(await t.client.file2.getMemberPermission({ fullpath: 'adv', member_id: String(m.id) })).toMatchObject({ dl: 0, ls: 0 });
    const after = await t.client.file.updates({ mode: 'compare', fetch_dateline: 0 });
    expect(after.list.some((i) => i.hash === before.hash)).toBe(true);
    expect(await codeOf(t.client.file2.setPermission({ fullpath: 'adv', permissions: JSON.stringify({ member_ids: [m.id], permission: { fly: 1 } }) }))).toBe(40003);
    expect(await codeOf(t.client.file2.setPermission({ fullpath: 'adv', permissions: JSON.stringify({ member_ids: [m.id], permission: { dl: 2 } }) }))).toBe(40003);
    expect(await codeOf(t.client.file2.getGroupPermission({ fullpath: 'adv', group_id: '424242' }))).toBe(40407);
    // A missing inherit or member is refused, not defaulted; inheritance stays as it was (off).
    const states = await t.client.file2.getMemberPermission({ fullpath: 'adv', member_id: String(m.id) });
    expect(await uncheckedCode(t.client, 'file2', 'set_permission_inherit', { fullpath: 'adv', keep: '1' })).toBe(40003);
    expect(await uncheckedCode(t.client, 'file', 'set_permission_inherit', { fullpath: 'adv' })).toBe(40003);
    expect(await t.client.file2.getMemberPermission({ fullpath: 'adv', member_id: String(m.id) })).toEqual(states);
    expect(await uncheckedCode(t.client, 'file2', 'get_member_permission', { fullpath: 'adv' })).toBe(40003);
  });
});
