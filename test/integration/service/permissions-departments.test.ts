/**
 * Department permissions through the user API: a department's role in the library, simple and
 * advanced grants to a department, department inheritance (a grant on a department reaches the members
 * of the departments below it), deny wins across a member's departments, reset and removal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceClient } from '../../../src/api/client.js';
import { clientFor, startTestService, type TestService } from '../../support/service.js';
import { codeOf, put } from './helpers.js';
import { addMember, type TestMember } from './user-fixtures.js';

let t: TestService;
let ent: ServiceClient;
let mount: number;
let orgId: number;
let parent: number;
let child: number;
let inChild: TestMember;
let outside: TestMember;
beforeAll(async () => {
  t = await startTestService();
  ent = clientFor(t, 'enterprise');
  mount = t.service.credentials.library.mount_id;
  orgId = t.service.credentials.library.org_id;
  parent = (await ent.ent.addGroup({ group_name: 'Sales' })).group_id;
  child = (await ent.ent.addGroup({ group_name: 'North', parent_group_path: 'Sales' })).group_id;
  inChild = await addMember(t, 'north');
  outside = await addMember(t, 'outside');
  await ent.ent.addGroupMember({ group_path: 'Sales/North', members: inChild.account });
  await put(t.client, 'plans/q1.txt', 'quarter one');
  await put(t.client, 'top.txt', 'top');
});
afterAll(async () => { await t?.close(); });

const open = (m: TestMember, fullpath: string) => codeOf(m.client.user.open({ mount_id: mount, fullpath }));
const mounts = async (m: TestMember) => (await m.client.user.mount({})).list.map((l) => l.org_id);

describe('department permissions (user API)', { timeout: 30_000 }, () => {
  it('a role given to a parent department reaches members of its sub-department', async () => {
    expect(await mounts(inChild)).not.toContain(orgId);
    expect(await codeOf(inChild.client.user.ls({ mount_id: mount, fullpath: '' }))).toBe(40311);
    const orgLs = async (m: TestMember) => (await ent.org.ls({ member_id: m.id })).list.map((l) => l.org_id);
    expect(await orgLs(inChild)).not.toContain(orgId);
    await ent.org.addGroup({ org_id: orgId, group_id: parent, role_id: 5 }); // Previewer
    expect(await mounts(inChild)).toContain(orgId);
    expect(await orgLs(inChild)).toContain(orgId); // org/ls member_id agrees with account/mount
    const roleName = (await ent.ent.getRoles({})).find((r) => r.id === 5)!.name;
    const orgs = (await ent.ent.getMember({ member_id: String(inChild.id), show_orgs: 1 })).orgs!;
    expect(orgs.find((o) => o.id === orgId)).toMatchObject({ roles: { 5: roleName } });
    expect(await codeOf(ent.org.ls({ member_id: 987654 }))).toBe(40406);
    expect((await inChild.client.user.ls({ mount_id: mount, fullpath: '' })).list.map((r) => r.fullpath)).toContain('top.txt');
    expect(await open(inChild, 'top.txt')).toBe(40310); // a previewer may not download
    expect(await codeOf(outside.client.user.ls({ mount_id: mount, fullpath: '' }))).toBe(40311);
    await ent.org.setGroupRole({ org_id: orgId, group_id: parent, role_id: 4 }); // Downloader
    expect(await open(inChild, 'top.txt')).toBe(0);
    await ent.org.delGroup({ org_id: orgId, group_id: parent });
    expect(await codeOf(inChild.client.user.ls({ mount_id: mount, fullpath: '' }))).toBe(40311);
  });

  it('advanced grants by group_ids and group_out_ids; a deny on the sub-department wins over the parent\'s grant', async () => {
    await t.client.file2.setPermission({ fullpath: 'plans', permissions: JSON.stringify({ group_ids: [parent], permission: { role_id: 0, ls: 1, cd: 1, dl: 1 } }) });
    expect(await open(inChild, 'plans/q1.txt')).toBe(0);
    expect(await open(outside, 'plans/q1.txt')).toBe(40311);
    expect(await t.client.file2.getGroupPermission({ fullpath: 'plans', group_id: String(child) })).toMatchObject({ dl: 1, ul: 0 });
    expect(await t.client.file2.getMemberPermission({ fullpath: 'plans', member_id: String(inChild.id) })).toMatchObject({ dl: 1, cd: 1 });

    const outId = 'dept-north';
    await t.service.parts.tree.db.run('UPDATE departments SET out_id = ? WHERE id = ?', [outId, child]);
    await t.client.file2.setPermission({ fullpath: 'plans', permissions: JSON.stringify({ group_out_ids: [outId], permission: { role_id: 0, dl: -1 } }) });
    expect(await open(inChild, 'plans/q1.txt')).toBe(40310);
    expect(await t.client.file2.getMemberPermission({ fullpath: 'plans', member_id: String(inChild.id) })).toMatchObject({ dl: -1, cd: 1 });

    await t.client.file2.delPermission({ fullpath: 'plans', ids: JSON.stringify({ group_ids: [child] }) });
    expect(await open(inChild, 'plans/q1.txt')).toBe(0);
    await t.client.file2.delPermission({ fullpath: 'plans', ids: JSON.stringify({ group_ids: [parent] }) });
    expect(await open(inChild, 'plans/q1.txt')).toBe(40311);
  });

  it('simple file_permission for a department; get_permission, reset_permission; leaving the department ends it', async () => {
    await t.client.file.filePermission({ fullpath: 'plans', is_group: 1, permissions: JSON.stringify({ [parent]: ['file_read'] }) });
    expect(await t.client.file.getAllPermission({ fullpath: 'plans' })).toEqual({ members: {}, groups: { [parent]: ['file_preview', 'file_read'] } });
    expect(await t.client.file.getPermission({ fullpath: 'plans/q1.txt', member_id: String(inChild.id) })).toEqual(['file_preview', 'file_read']);
    const all = await t.client.file.getPermission({ fullpath: 'plans' }) as { members: Record<string, string[]> };
    expect(Object.keys(all.members)).toContain(String(inChild.id));
    expect(await open(inChild, 'plans/q1.txt')).toBe(0);

    await ent.ent.delGroupMember({ group_path: 'Sales/North', members: inChild.account });
    expect(await open(inChild, 'plans/q1.txt')).toBe(40311);
    await ent.ent.addGroupMember({ group_path: 'Sales/North', members: inChild.account });
    expect(await open(inChild, 'plans/q1.txt')).toBe(0);

    await t.client.file.resetPermission({ fullpath: 'plans', groups: String(parent) });
    expect(await t.client.file.getAllPermission({ fullpath: 'plans' })).toEqual({ members: {}, groups: {} });
    expect(await open(inChild, 'plans/q1.txt')).toBe(40311);
  });

  it('reset_permission on a folder that does not inherit: a department member falls back to the department, or with clear=1 to nothing', async () => {
    await put(t.client, 'closed/doc.txt', 'closed');
    await t.client.file.setPermissionInherit({ fullpath: 'closed', inherit: 0 });
    await t.client.file.filePermission({ fullpath: 'closed', is_group: 1, permissions: JSON.stringify({ [parent]: ['file_read'] }) });
    await t.client.file.filePermission({ fullpath: 'closed', permissions: JSON.stringify({ [inChild.id]: ['file_write', 'file_delete'] }) });
    const names = () => t.client.file.getPermission({ fullpath: 'closed', member_id: String(inChild.id) });
    expect(await names()).toEqual(['file_preview', 'file_read', 'file_write', 'file_delete']);
    await t.client.file.resetPermission({ fullpath: 'closed', members: String(inChild.id) });
    expect(await names()).toEqual(['file_preview', 'file_read']);
    expect(await open(inChild, 'closed/doc.txt')).toBe(0);
    await t.client.file.resetPermission({ fullpath: 'closed', members: String(inChild.id), clear: 1 });
    expect(await names()).toEqual([]);
    expect(await open(inChild, 'closed/doc.txt')).toBe(40310);
    await t.client.file.resetPermission({ fullpath: 'closed', members: String(inChild.id), groups: String(parent) });
    const left = await t.client.file.getAllPermission({ fullpath: 'closed' });
    expect(Object.keys(left.members)).not.toContain(String(inChild.id));
    expect(left.groups).toEqual({});
  });

  it('a removed department takes its permissions with it; unknown departments change nothing', async () => {
    const extra = (await ent.ent.addGroup({ group_name: 'Temp', parent_group_path: 'Sales' })).group_id;
    await ent.ent.addGroupMember({ group_path: 'Sales/Temp', members: outside.account });
    await t.client.file2.setPermission({ fullpath: 'plans', permissions: JSON.stringify({ group_ids: [extra], permission: { role_id: 4 } }) });
    expect(await open(outside, 'plans/q1.txt')).toBe(0);
    await ent.ent.delGroup({ groups: 'Sales/Temp' });
    expect(await open(outside, 'plans/q1.txt')).toBe(40311);
    expect(await t.client.file.getAllPermission({ fullpath: 'plans' })).toEqual({ members: {}, groups: {} });

    const bad = JSON.stringify({ group_ids: [parent, 987654], permission: { role_id: 4 } });
    expect(await codeOf(t.client.file2.setPermission({ fullpath: 'plans', permissions: bad }))).toBe(40407);
    expect(await codeOf(t.client.file2.setPermission({ fullpath: 'plans', permissions: JSON.stringify({ group_out_ids: ['none'], permission: { role_id: 4 } }) }))).toBe(40407);
    expect(await codeOf(t.client.file.filePermission({ fullpath: 'plans', is_group: 1, permissions: JSON.stringify({ [parent]: ['file_read'], 987654: ['file_read'] }) }))).toBe(40407);
    expect(await t.client.file.getAllPermission({ fullpath: 'plans' })).toEqual({ members: {}, groups: {} });
  });
});
