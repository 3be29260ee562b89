/**
 * Enterprise directory: departments by path (add, set incl. move, del), membership, get_member with
 * groups and libraries, group members with sub-departments, roles, log; synchronisation by out_id
 * behind the per-enterprise switch; temporary accounts that expire.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceClient } from '../../../src/api/client.js';
import { clientFor, startTestService, type TestService } from '../../support/service.js';
import { codeOf } from './helpers.js';

let now = Date.parse('2026-03-10T12:00:00Z');
let t: TestService;
let ent: ServiceClient;
beforeAll(async () => {
  t = await startTestService({ clock: () => now });
  ent = clientFor(t, 'enterprise');
});
afterAll(async () => { await t?.close(); });

const setSync = async (on: boolean) => t.service.parts.tree.db.run('UPDATE enterprises SET sync_enabled = ? WHERE id = ?', [on ? 1 : 0, t.service.credentials.enterprise.ent_id]);

describe('ent departments and membership', { timeout: 30_000 }, () => {
  it('adds departments by path, moves and renames one, refuses bad moves and names', async () => {
    const sales = await ent.ent.addGroup({ group_name: 'Sales' });
    const emea = await ent.ent.addGroup({ group_name: 'EMEA', parent_group_path: 'Sales' });
    const north = await ent.ent.addGroup({ group_name: 'North', parent_group_path: 'Sales/EMEA', orderby: 2 });
    expect(await codeOf(ent.ent.addGroup({ group_name: 'EMEA', parent_group_path: 'Sales' }))).toBe(40901);
    expect(await codeOf(ent.ent.addGroup({ group_name: 'X', parent_group_path: 'Nowhere' }))).toBe(40407);
    expect(await codeOf(ent.ent.addGroup({ group_name: 'a/b' }))).toBe(40003);
    let groups = await ent.ent.getGroups({});
    expect(groups).toEqual(expect.arrayContaining([
      { id: sales.group_id, name: 'Sales', out_id: '', parent_id: 0 },
      { id: emea.group_id, name: 'EMEA', out_id: '', parent_id: sales.group_id },
      { id: north.group_id, name: 'North', out_id: '', parent_id: emea.group_id },
    ]));
    // Move North to the top level and rename it; a department cannot move below itself.
    await ent.ent.setGroup({ group_path: 'Sales/EMEA/North', group_name: 'Nord', parent_group_path: '/' });
    expect(await codeOf(ent.ent.setGroup({ group_path: 'Sales', parent_group_path: 'Sales/EMEA' }))).toBe(40003);
    groups = await ent.ent.getGroups({});
    expect(groups.find((g) => g.id === north.group_id)).toMatchObject({ name: 'Nord', parent_id: 0 });
    expect(groups.find((g) => g.id === sales.group_id)).toMatchObject({ parent_id: 0 });
    await ent.ent.setGroup({ group_path: 'Nord', parent_group_path: 'Sales' });
    expect((await ent.ent.getGroups({})).find((g) => g.id === north.group_id)).toMatchObject({ parent_id: sales.group_id });
  });

  it('puts members in departments, lists them with sub-departments, shows groups and libraries, removes', async () => {
    const a = await ent.ent.addMember({ account: 'd1@example.com', group_path: 'Sales/EMEA' });
    const b = await ent.ent.addMember({ account: 'd2@example.com' });
    await ent.ent.addGroupMember({ group_path: 'Sales', members: 'd2@example.com' });
    expect(await codeOf(ent.ent.addGroupMember({ group_path: 'Sales', members: 'd2@example.com,ghost@example.com' }))).toBe(40406);
    const direct = await ent.ent.getGroupMembers({ group_path: 'Sales' });
    expect(direct.list.map((m) => m.account)).toEqual(['d2@example.com']);
    const all = await ent.ent.getGroupMembers({ group_path: 'Sales', show_child: 1 });
    expect(all.list.map((m) => m.account).sort()).toEqual(['d1@example.com', 'd2@example.com']);
    expect(all.count).toBe(2);
    expect((await ent.ent.getGroupMembers({ group_path: 'Sales', show_child: 1, size: 1, start: 1 })).list).toHaveLength(1);

    const { org_id } = await ent.org.create({ org_name: 'Sales docs' });
    await ent.org.addMember({ org_id, member_ids: String(a.member_id), role_id: 4 });
    const rec = await ent.ent.getMember({ account: 'd1@example.com', show_groups: 1, show_orgs: 1 });
    expect(rec.groups).toHaveLength(1);
    expect(rec.groups![0]).toMatchObject({ name: 'EMEA', out_id: '' });
    expect(rec.groups![0]!.group_code).toMatch(/^\d+-\d+$/);
    expect(rec.orgs).toEqual([expect.objectContaining({ id: org_id, name: 'Sales docs', roles: { 4: 'Downloader' }, member_count: 1 })]);
    expect((await ent.ent.getMember({ member_id: String(b.member_id) })).groups).toBeUndefined();

    await ent.ent.delGroupMember({ group_path: 'Sales', members: 'd2@example.com' });
    expect((await ent.ent.getGroupMembers({ group_path: 'Sales' })).count).toBe(0);
    await ent.ent.delMemberGroup({ members: 'd1@example.com' });
    expect(Object.keys((await ent.ent.getMember({ account: 'd1@example.com', show_groups: 1 })).groups ?? {})).toHaveLength(0);

    await ent.ent.delGroup({ groups: 'Sales' });
    expect((await ent.ent.getGroups({})).some((g) => g.name === 'Sales' || g.name === 'EMEA' || g.name === 'Nord')).toBe(false);
    expect(await codeOf(ent.ent.delGroup({ groups: 'Sales' }))).toBe(40407);

    await ent.ent.delMember({ members: 'd1@example.com,d2@example.com' });
    expect(await codeOf(ent.ent.getMember({ account: 'd1@example.com' }))).toBe(40406);
    expect((await ent.org.getMembers({ org_id })).count).toBe(0);
    expect(await codeOf(ent.ent.delMember({ members: 'd1@example.com' }))).toBe(40406);
  });

  it('roles and the log (types, order, time filter, paging)', async () => {
    const roles = await ent.ent.getRoles({});
    expect(roles.map((r) => r.id)).toEqual([1, 2, 3, 4, 5, 6]);
    const log = await ent.ent.log({});
    expect(log.total).toBeGreaterThan(5);
    expect(new Set(log.list.map((i) => i.type))).toEqual(new Set([2, 4, 8]));
    const structure = await ent.ent.log({ type: 4, orderby: 'asc', size: 2 });
    expect(structure.list).toHaveLength(2);
    expect(structure.list[0]!.content).toContain('Sales');
    expect(structure.list.every((i) => i.type === 4 && i.admin === 'API')).toBe(true);
    expect((await ent.ent.log({ start_dateline: Math.floor(now / 1000) + 1 })).total).toBe(0);
    expect(await codeOf(ent.ent.log({ orderby: 'sideways' }))).toBe(40003);
    expect(await codeOf(ent.ent.log({ size: 1001 }))).toBe(40003);
  });
});

describe('ent synchronisation by out_id', { timeout: 30_000 }, () => {
  it('is refused while the feature is off', async () => {
    await setSync(false);
    const calls: [string, Record<string, string>][] = [
      ['add_sync_member', { out_id: 'u1', account: 'u1' }], ['del_sync_member', { members: 'u1' }],
      ['add_sync_group', { out_id: 'g1', name: 'G1' }], ['del_sync_group', { groups: 'g1' }],
      ['add_sync_group_member', { group_out_id: 'g1', members: 'u1' }], ['del_sync_group_member', { group_out_id: 'g1', members: 'u1' }],
      ['del_sync_member_group', { members: 'u1' }], ['get_member_by_out_id', { out_ids: 'u1' }],
      ['get_group_by_out_id', { out_ids: 'g1' }], ['add_sync_admin', { out_id: 'u1', type: '1' }],
    ];
    const groups = (await ent.ent.getGroups({})).length;
    for (const [name, params] of calls) {
      const err = await ent.call('ent', name, params).catch((e: unknown) => e) as { status: number; code: number; message: string };
      expect([name, err.status, err.code]).toEqual([name, 403, 40306]);
      expect(err.message).toContain('synchronisation is not enabled');
    }
    expect((await ent.ent.getGroups({})).length).toBe(groups);
    expect((await ent.ent.getMembers({ size: 1000 })).list.some((m) => m.account === 'u1')).toBe(false);
  });

  it('adds and modifies departments and members with omitted = unchanged, empty = top level / removed', async () => {
    await setSync(true);
    await ent.ent.addSyncGroup({ out_id: 'g-eng', name: 'Engineering' });
    await ent.ent.addSyncGroup({ out_id: 'g-web', name: 'Web', parent_out_id: 'g-eng', orderby: 1 });
    expect(await codeOf(ent.ent.addSyncGroup({ out_id: 'g-new' }))).toBe(40003);
    let g = await ent.ent.getGroupByOutId({ out_ids: 'g-web,g-none' });
    expect(Object.keys(g)).toEqual(['g-web']);
    const eng = (await ent.ent.getGroupByOutId({ out_ids: 'g-eng' }))['g-eng']!;
    expect(g['g-web']).toMatchObject({ name: 'Web', parent_id: eng.group_id });
    await ent.ent.addSyncGroup({ out_id: 'g-web', name: 'Web team' }); // parent omitted: unchanged
    g = await ent.ent.getGroupByOutId({ out_ids: 'g-web' });
    expect(g['g-web']).toMatchObject({ name: 'Web team', parent_id: eng.group_id });
    await ent.call('ent', 'add_sync_group', { out_id: 'g-web', parent_out_id: '' });
    expect((await ent.ent.getGroupByOutId({ out_ids: 'g-web' }))['g-web']).toMatchObject({ name: 'Web team', parent_id: 0 });

    // Added without group_out_ids: not listed in the console until a department membership follows.
    const lead = await ent.ent.addSyncMember({ out_id: 'u-lead', account: 'lead', member_name: 'Lead' });
    expect(lead.state).toBe(1);
    expect((await ent.ent.getMembers({ size: 1000 })).list.some((m) => m.account === 'lead')).toBe(false);
    await ent.ent.addSyncGroupMember({ group_out_id: 'g-eng', members: 'u-lead' });
    expect((await ent.ent.getMembers({ size: 1000 })).list.some((m) => m.account === 'lead')).toBe(true);

    const dev = await ent.ent.addSyncMember({ out_id: 'u-dev', account: 'dev', member_name: 'Dev', member_title: 'Engineer', group_out_ids: 'g-eng,g-web', leader_out_id: 'u-lead' });
    const devRow = async () => await t.service.parts.tree.db.get('SELECT * FROM members WHERE id = ?', [dev.member_id]) as { leader_id: number | null; title: string; name: string; state: number };
    expect((await devRow()).leader_id).toBe(lead.member_id);
    expect((await ent.ent.getMember({ out_id: 'u-dev', show_groups: 1 })).groups!.map((x) => x.out_id).sort()).toEqual(['g-eng', 'g-web']);
    // Modify: only member_name given — title, groups and leader unchanged.
    await ent.ent.addSyncMember({ out_id: 'u-dev', member_name: 'Developer' });
    expect(await devRow()).toMatchObject({ name: 'Developer', title: 'Engineer', leader_id: lead.member_id });
    expect((await ent.ent.getMember({ out_id: 'u-dev', show_groups: 1 })).groups).toHaveLength(2);
    // Empty group_out_ids: top level; empty leader: removed; state 0 disables.
    await ent.call('ent', 'add_sync_member', { out_id: 'u-dev', group_out_ids: '', leader_out_id: '', state: 0 });
    expect(Object.keys((await ent.ent.getMember({ out_id: 'u-dev', show_groups: 1 })).groups ?? {})).toHaveLength(0);
    expect(await devRow()).toMatchObject({ leader_id: null, state: 0 });
    expect(await codeOf(ent.ent.addSyncMember({ out_id: 'u-x', account: 'x', group_out_ids: 'g-none' }))).toBe(40407);
    expect(await codeOf(ent.ent.getMember({ out_id: 'u-x' }))).toBe(40406);

    const byId = await ent.ent.getMemberByOutId({ out_ids: 'u-dev,u-none' });
    expect(Object.keys(byId)).toEqual(['u-dev']);
    expect(byId['u-dev']).toMatchObject({ member_id: dev.member_id, account: 'dev', state: 0 });
    expect(Object.keys(await ent.ent.getMemberByOutId({ user_ids: 'lead' }))).toEqual(['lead']);

    await ent.ent.addSyncAdmin({ out_id: 'u-lead', type: 1 });
    expect((await ent.ent.log({ type: 1 })).total).toBe(1);
    await ent.ent.delSyncGroupMember({ group_out_id: 'g-eng', members: 'u-lead' });
    expect(Object.keys((await ent.ent.getMember({ out_id: 'u-lead', show_groups: 1 })).groups ?? {})).toHaveLength(0);
    await ent.ent.addSyncGroupMember({ group_out_id: 'g-web', members: 'u-lead' });
    await ent.ent.delSyncMemberGroup({ members: 'u-lead' });
    expect(Object.keys((await ent.ent.getMember({ out_id: 'u-lead', show_groups: 1 })).groups ?? {})).toHaveLength(0);
    await ent.ent.delSyncGroup({ groups: 'g-web' });
    expect(await ent.ent.getGroupByOutId({ out_ids: 'g-web' })).toEqual({});
    await ent.ent.delSyncMember({ members: 'u-dev' });
    expect(await ent.ent.getMemberByOutId({ out_ids: 'u-dev' })).toEqual({});
  });

  it('group_out_id omitted = the top level: listing a member without a department, and unlisting it', async () => {
    await setSync(true);
    await ent.ent.addSyncMember({ out_id: 'u-top', account: 'top-only', member_name: 'Top' });
    const listed = async () => (await ent.ent.getMembers({ size: 1000 })).list.some((m) => m.account === 'top-only');
    expect(await listed()).toBe(false);
    await ent.ent.addSyncGroupMember({ members: 'u-top' });
    expect(await listed()).toBe(true);
    expect((await ent.ent.getMember({ out_id: 'u-top', show_groups: 1 })).groups ?? []).toEqual([]);
    await ent.ent.delSyncGroupMember({ members: 'u-top' });
    expect(await listed()).toBe(false);
    expect(await codeOf(ent.ent.addSyncGroupMember({ members: 'u-top,u-none' }))).toBe(40406);
    expect(await listed()).toBe(false);
    await ent.ent.delSyncMember({ members: 'u-top' });
  });

  it('enabled accounts beyond the limit are forced to disabled', async () => {
    await setSync(true);
    const db = t.service.parts.tree.db;
    const entId = t.service.credentials.enterprise.ent_id;
    const enabled = (await db.get('SELECT COUNT(*) AS n FROM members WHERE ent_id = ? AND state = 1', [entId]) as { n: number }).n;
    await db.run('UPDATE enterprises SET member_limit = ? WHERE id = ?', [enabled, entId]);
    expect(await ent.ent.addSyncMember({ out_id: 'u-over', account: 'over-sync', group_out_ids: '' })).toMatchObject({ state: 0 });
    expect(await ent.ent.addSyncMember({ out_id: 'u-over', state: 1 })).toMatchObject({ state: 0 });
    await db.run('UPDATE enterprises SET member_limit = 1000 WHERE id = ?', [entId]);
    expect(await ent.ent.addSyncMember({ out_id: 'u-over', state: 1 })).toMatchObject({ state: 1 });
  });

  it('temporary accounts stop at the end of their day; expire 0 removes the expiry', async () => {
    await setSync(true);
    const day = Math.floor(now / 1000);
    const tmp = await ent.ent.addSyncMember({ out_id: 'u-tmp', account: 'temp', expire: day + 3600, group_out_ids: '' });
    const rec = await ent.ent.getMember({ out_id: 'u-tmp' });
    expect(rec.expire).toBe(Date.parse('2026-03-10T00:00:00Z') / 1000);
    expect(rec.state).toBe(1);
    now = Date.parse('2026-03-11T00:00:01Z');
    expect((await ent.ent.getMember({ member_id: String(tmp.member_id) })).state).toBe(0);
    await ent.ent.addSyncMember({ out_id: 'u-tmp', expire: 0, state: 1 });
    const back = await ent.ent.getMember({ out_id: 'u-tmp' });
    expect(back.state).toBe(1);
    expect(back.expire).toBeUndefined();
  });
});
