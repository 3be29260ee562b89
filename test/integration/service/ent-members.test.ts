/** Enterprise members: add, change, disable (tokens end), list, the account limit, bad input. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceClient } from '../../../src/api/client.js';
import { clientFor, startTestService, type TestService } from '../../support/service.js';
import { codeOf } from './helpers.js';
import { addMember } from './user-fixtures.js';

let t: TestService;
let ent: ServiceClient;
beforeAll(async () => {
  t = await startTestService();
  ent = clientFor(t, 'enterprise');
});
afterAll(async () => { await t?.close(); });

describe('ent members', { timeout: 30_000 }, () => {
  it('adds a member, lists it, changes it; a repeated account or a non-e-mail account is refused', async () => {
    const added = await ent.ent.addMember({ account: 'bob@example.com', member_name: 'Bob', member_title: 'Engineer' });
    expect(added).toMatchObject({ state: 1 });
    const page = await ent.ent.getMembers({ start: 0, size: 100 });
    expect(page.count).toBe(page.list.length);
    expect(page.list.find((m) => m.account === 'bob@example.com')).toMatchObject({ member_id: added.member_id, member_name: 'Bob', member_title: 'Engineer', state: 1 });
    await ent.ent.setMember({ account: 'bob@example.com', member_phone: '555' });
    const bob = (await ent.ent.getMembers({ size: 100 })).list.find((m) => m.account === 'bob@example.com')!;
    expect(bob).toMatchObject({ member_name: 'Bob', member_phone: '555', member_title: 'Engineer' });
    expect(await codeOf(ent.ent.addMember({ account: 'bob@example.com' }))).toBe(40901);
    expect(await codeOf(ent.ent.addMember({ account: 'not-an-email' }))).toBe(40003);
    expect(await codeOf(ent.ent.setMember({ account: 'nobody@example.com', state: 0 }))).toBe(40406);
    expect(await codeOf(ent.ent.addMember({ account: 'carol@example.com', group_path: 'Sales' }))).toBe(40407);
    expect((await ent.ent.getMembers({ size: 100 })).list.some((m) => m.account === 'carol@example.com')).toBe(false);
  });

  it('disabling a member ends its tokens at once', async () => {
    const m = await addMember(t, 'dora', { libraryRole: 1 });
    await m.client.user.ls({ mount_id: t.service.credentials.library.mount_id, fullpath: '' });
    expect(await ent.ent.setMember({ account: m.account, state: 0 })).toMatchObject({ state: 0 });
    expect(await codeOf(m.client.user.ls({ mount_id: t.service.credentials.library.mount_id, fullpath: '' }))).toBeGreaterThanOrEqual(40100);
  });

  it('accounts enabled beyond the limit are forced to disabled', async () => {
    const db = t.service.parts.tree.db;
    const entId = t.service.credentials.enterprise.ent_id;
    const enabled = (await db.get('SELECT COUNT(*) AS n FROM members WHERE ent_id = ? AND state = 1', [entId]) as { n: number }).n;
    await db.run('UPDATE enterprises SET member_limit = ? WHERE id = ?', [enabled, entId]);
    expect(await ent.ent.addMember({ account: 'over@example.com' })).toMatchObject({ state: 0 });
    expect(await ent.ent.setMember({ account: 'over@example.com', state: 1 })).toMatchObject({ state: 0 });
  });
});
