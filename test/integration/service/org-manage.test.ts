/**
 * Library management: set, info by org_id / mount_id / out_id, search, personal libraries, ls,
 * members and departments with roles, set_owner, destroy (files, authorizations and blobs gone).
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceClient } from '../../../src/api/client.js';
import { clientFor, startTestService, type TestService } from '../../support/service.js';
import { codeOf, fetchFile, put, uncheckedCode } from './helpers.js';

let t: TestService;
let ent: ServiceClient;
beforeAll(async () => {
  t = await startTestService();
  ent = clientFor(t, 'enterprise');
});
afterAll(async () => { await t?.close(); });

async function blobFiles(dir: string): Promise<number> {
  const all = await readdir(join(dir, 'blobs'), { recursive: true, withFileTypes: true });
  return all.filter((e) => e.isFile()).length;
}

describe('org management', { timeout: 30_000 }, () => {
  it('creates, sets and finds a library by org_id, mount_id and out_id; bad input changes nothing', async () => {
    const made = await ent.org.create({ org_name: 'Projects', out_id: 'ext-1', org_capacity: 1000 });
    for (const by of [{ org_id: String(made.org_id) }, { mount_id: String(made.mount_id) }, { out_id: 'ext-1' }]) {
      expect((await ent.org.info(by)).info).toMatchObject({ org_id: made.org_id, org_name: 'Projects', size_org_total: 1000 });
    }
    expect(await codeOf(ent.org.create({ org_name: 'Again', out_id: 'ext-1' }))).toBe(40901);
    await ent.org.set({ org_id: String(made.org_id), org_name: 'Projects 2' });
    expect((await ent.org.info({ out_id: 'ext-1' })).info).toMatchObject({ org_name: 'Projects 2', size_org_total: 1000 });
    await ent.org.set({ mount_id: String(made.mount_id), org_capacity: '-1' });
    expect((await ent.org.info({ org_id: String(made.org_id) })).info.size_org_total).toBe(-1);
    expect(await codeOf(ent.org.set({ org_id: String(made.org_id), org_capacity: 'lots' }))).toBe(40003);
    expect(await codeOf(ent.org.set({ org_id: '99999', org_name: 'x' }))).toBe(40401);
    expect((await ent.org.info({ org_id: String(made.org_id) })).info.org_name).toBe('Projects 2');
  });

  it('searches by exact name and by prefix, size at most 1000', async () => {
    await ent.org.create({ org_name: 'Alpha one' });
    await ent.org.create({ org_name: 'Alpha two' });
    await ent.org.create({ org_name: 'Beta' });
    expect((await ent.org.search({ name: 'Alpha one' })).list.map((l) => l.org_name)).toEqual(['Alpha one']);
    expect((await ent.org.search({ prefix: 'Alpha' })).list.map((l) => l.org_name)).toEqual(['Alpha one', 'Alpha two']);
    expect((await ent.org.search({ prefix: 'Alpha', size: 1 })).list).toHaveLength(1);
    expect((await ent.org.search({ name: 'Alpha' })).list).toEqual([]);
    expect(await codeOf(ent.org.search({ prefix: 'A', size: 1001 }))).toBe(40003);
  });

  it('personal libraries: capacity set before and after creation, info by member keys, ls by type', async () => {
    const { member_id } = await ent.ent.addMember({ account: 'pat@example.com', member_name: 'Pat' });
    await ent.org.setByMember({ account: 'pat@example.com', capacity: 5000 });
    expect((await ent.org.infoByMember({ member_id: String(member_id) })).info).toEqual({ size_org_total: 5000 });
    const { member_id: q } = await ent.ent.addMember({ account: 'quinn@example.com', create_personal_org: 1 });
    const info = (await ent.org.infoByMember({ email: 'quinn@example.com' })).info;
    expect(info).toMatchObject({ size_org_total: -1, size_org_use: 0, file_count: 0 });
    await ent.org.setByMember({ member_id: String(q), capacity: 42 });
    expect((await ent.org.infoByMember({ account: 'quinn@example.com' })).info.size_org_total).toBe(42);
    const personal = await ent.org.ls({ type: 2 });
    expect(personal.list.map((l) => l.org_id)).toEqual([info.org_id]);
    expect(personal.list[0]!.owner_id).toBe(q);
    expect((await ent.org.ls({ type: 1 })).list.some((l) => l.org_id === info.org_id)).toBe(false);
    expect((await ent.org.ls({ member_id: q })).list.map((l) => l.org_id)).toEqual([info.org_id]);
    expect(await codeOf(ent.org.infoByMember({ account: 'nobody@example.com' }))).toBe(40406);
    expect(await codeOf(ent.org.setByMember({ account: 'pat@example.com', capacity: -2 }))).toBe(40003);
    expect(await uncheckedCode(ent, 'org', 'set_by_member', { account: 'pat@example.com' })).toBe(40003);
    expect((await ent.org.infoByMember({ account: 'pat@example.com' })).info).toEqual({ size_org_total: 5000 });
  });

  it('members of a library with roles, get_member by type, set_owner, del_member', async () => {
    const { org_id } = await ent.org.create({ org_name: 'Team' });
    const lib = String(org_id);
    const a = await ent.ent.addMember({ account: 'ann@example.com', member_name: 'Ann' });
    const b = await ent.ent.addMember({ account: 'ben@example.com', member_name: 'Ben' });
    await ent.org.addMember({ org_id, member_ids: `${a.member_id},${b.member_id}`, role_id: 4 });
    let page = await ent.org.getMembers({ org_id });
    expect(page.count).toBe(2);
    expect(page.list.map((m) => [m.account, m.role_id])).toEqual([['ann@example.com', 4], ['ben@example.com', 4]]);
    await ent.org.setMemberRole({ org_id, member_ids: String(b.member_id), role_id: 2 });
    const got = await ent.org.getMember({ org_id, ids: 'ben@example.com,nobody@example.com', type: 'account' });
    expect(Object.keys(got)).toEqual(['ben@example.com']);
    expect(got['ben@example.com']).toMatchObject({ member_id: b.member_id, role_id: 2, member_name: 'Ben' });
    expect(await codeOf(ent.org.addMember({ org_id, member_ids: '999999', role_id: 1 }))).toBe(40406);
    expect(await codeOf(ent.org.addMember({ org_id, member_ids: String(a.member_id), role_id: 77 }))).toBe(40003);
    expect(await codeOf(ent.org.getMember({ org_id, ids: '1', type: 'phone' }))).toBe(40003);

    await ent.org.setOwner({ org_id, member_id: a.member_id });
    expect((await ent.org.info({ org_id: lib })).info.owner_id).toBe(a.member_id);
    await ent.org.setOwner({ org_id, member_id: b.member_id, role_id: '3' });
    expect((await ent.org.info({ org_id: lib })).info.owner_id).toBe(b.member_id);
    expect((await ent.org.getMember({ org_id, ids: String(a.member_id), type: 'member_id' }))[String(a.member_id)]).toMatchObject({ role_id: 3 });
    await ent.org.setOwner({ org_id, member_id: a.member_id });
    expect(Object.keys(await ent.org.getMember({ org_id, ids: String(b.member_id), type: 'member_id' }))).toEqual([]);
    expect(await codeOf(ent.org.delMember({ org_id, member_ids: String(a.member_id) }))).toBe(40003);
    await ent.org.addMember({ org_id, member_ids: String(b.member_id), role_id: 5 });
    await ent.org.delMember({ org_id, member_ids: String(b.member_id) });
    page = await ent.org.getMembers({ org_id, start: 0, size: 10 });
    expect(page.list.map((m) => m.account)).toEqual(['ann@example.com']);
  });

  it('departments of a library with roles', async () => {
    const { org_id } = await ent.org.create({ org_name: 'Depts' });
    const { group_id } = await ent.ent.addGroup({ group_name: 'Ops' });
    await ent.org.addGroup({ org_id, group_id, role_id: 4 });
    expect(await ent.org.getGroups({ org_id })).toEqual([{ id: group_id, name: 'Ops', role_id: 4 }]);
    await ent.org.setGroupRole({ org_id, group_id, role_id: 2 });
    expect((await ent.org.getGroups({ org_id }))[0]!.role_id).toBe(2);
    await ent.org.delGroup({ org_id, group_id });
    expect(await ent.org.getGroups({ org_id })).toEqual([]);
    expect(await codeOf(ent.org.setGroupRole({ org_id, group_id, role_id: 2 }))).toBe(40407);
    expect(await codeOf(ent.org.addGroup({ org_id, group_id: 999999, role_id: 2 }))).toBe(40407);
  });

  it('destroy removes files, history, links and authorizations, and releases the blobs no other library holds', async () => {
    const made = await ent.org.create({ org_name: 'Doomed' });
    const auth = await ent.org.bind({ org_id: String(made.org_id), title: 't' });
    const lib = t.client.withCredentials({ library: auth });
    const before = await blobFiles(t.dir);
    await put(lib, 'a/unique-1.bin', 'content only in the doomed library 1');
    await put(lib, 'a/unique-1.bin', 'content only in the doomed library 2');
    await put(lib, 'b.bin', 'content only in the doomed library 3');
    expect(await blobFiles(t.dir)).toBe(before + 3);
    // Content the library shares with another library stays for the other one.
    await put(lib, 'shared.bin', 'content in both libraries');
    await put(t.client, 'kept.bin', 'content in both libraries');
    const { link } = await lib.file.link({ fullpath: 'b.bin', auth: 'download' });
    const shown = await request(link);
    await shown.body.dump();
    expect(shown.statusCode).toBe(200);
    expect(await codeOf(ent.org.destroy({ org_client_id: 'oc_none' }))).toBe(40103);
    await ent.org.destroy({ org_client_id: auth.org_client_id });
    await t.service.parts.content.settled();
    expect(await blobFiles(t.dir)).toBe(before + 1);
    expect((await fetchFile(t.client, 'kept.bin')).body.toString()).toBe('content in both libraries');
    const visit = await request(link);
    await visit.body.dump();
    expect(visit.statusCode).toBe(404);
    expect(await codeOf(lib.file.stat({}))).toBe(40103);
    expect(await codeOf(ent.org.info({ org_id: String(made.org_id) }))).toBe(40401);
    expect((await ent.org.ls({})).list.some((l) => l.org_id === made.org_id)).toBe(false);
    expect(await codeOf(ent.org.destroy({ org_id: String(made.org_id) }))).toBe(40401);
  });
});
