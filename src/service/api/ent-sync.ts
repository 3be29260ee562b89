/**
 * The synchronisation endpoints of the enterprise API (/m-open/1/ent/*_sync_*, get_*_by_out_id,
 * add_sync_admin): members and departments addressed by their `out_id` in the enterprise's own
 * directory. They need the synchronisation feature of the enterprise (`sync_enabled`, set by the partner
 * at creation with `__setting_sync=1`); without it they answer 403/40306.
 *
 * Add-or-modify semantics as the spec says: on modify an omitted parameter leaves the field unchanged;
 * an empty `group_out_ids` / `parent_out_id` means the top level; an empty leader removes the leader.
 */
import type { EnterpriseRow } from '../domain/directory.js';
import { Departments } from '../domain/departments.js';
import { EnterpriseLog, EntLogType } from '../domain/enterprise-log.js';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { EnterpriseMembers, expiryDate, splitList, type MemberDbRow } from '../domain/members.js';
import { md5Hex } from '../domain/tokens.js';
import type { EndpointResult, RequestContext, Router } from '../http/router.js';
import type { ServiceParts } from './context.js';
import { mapInOrder } from '../domain/in-order.js';

export function registerEntSync(router: Router, parts: ServiceParts): void {
  const db = parts.tree.db;
  const members = new EnterpriseMembers(db, parts.clock);
  const departments = new Departments(db, parts.clock);
  const entLog = new EnterpriseLog(db, parts.clock);

  const syncEnt = async (ctx: RequestContext): Promise<EnterpriseRow> => {
    const ent = ctx.caller.enterprise;
    if (!ent) throw new ServiceFault(FaultCode.NoPermission, 'this call needs the enterprise client_id');
    const row = await db.get('SELECT sync_enabled FROM enterprises WHERE id = ?', [ent.id]) as { sync_enabled: number };
    if (row.sync_enabled !== 1) throw new ServiceFault(FaultCode.FeatureNotEnabled, 'directory synchronisation is not enabled for this enterprise');
    await members.expireDue();
    return ent;
  };
  const byOutIds = (ent: EnterpriseRow, list: string, param: string): Promise<MemberDbRow[]> =>
    members.requireList(ent.id, 'out_id', list, param);
  /** Department ids of a comma-separated out_id list; empty = top level only (no department). */
  const groupIds = async (ent: EnterpriseRow, list: string): Promise<number[]> => mapInOrder(splitList(list), async (o) => (await departments.requireOutId(ent.id, o)).id);
  const groupOf = async (ent: EnterpriseRow, outId: string | undefined): Promise<number> =>
    outId === undefined || outId === '' ? 0 : (await departments.requireOutId(ent.id, outId)).id;

  router.register('ent', 'add_sync_member', async (ctx) => {
    const ent = await syncEnt(ctx);
    const p = ctx.params;
    const outId = p.required('out_id');
    const existing = await members.find(ent.id, 'out_id', outId);
    const stateParam = p.str('state');
    const wanted = stateParam === undefined || stateParam === '' ? undefined : p.int('state', 1, { min: 0, max: 1 });
    const expireParam = p.str('expire');
    const expire = expireParam === undefined || expireParam === '' ? undefined : p.int('expire', 0, { min: 0 });
    const groupsParam = p.str('group_out_ids');
    const groups = groupsParam === undefined ? undefined : await groupIds(ent, groupsParam);
    let leader: number | null | undefined;
    for (const key of ['leader_out_id', 'leader_account'] as const) {
      const v = p.str(key);
      if (v === undefined) continue;
      leader = v === '' ? null : (await members.require(ent.id, key === 'leader_out_id' ? 'out_id' : 'account', v)).id;
    }
    const password = p.str('password');
    const email = p.str('member_email');
    return db.tx(async () => {
      let row: MemberDbRow;
      let state: number;
      if (existing) {
        row = existing;
        state = await members.allowedState(ent.id, wanted ?? existing.state, existing.id);
        const account = p.str('account');
        if (account !== undefined && account !== row.account) {
          if (account.trim() === '') throw badParam('account', 'a non-empty account', account);
          if (await db.get('SELECT 1 FROM members WHERE account = ?', [account])) throw new ServiceFault(FaultCode.NameExists, `account ${JSON.stringify(account)} exists`);
        }
        await db.run('UPDATE members SET account = ?, name = ?, email = ?, phone = ?, title = ?, password_md5 = COALESCE(?, password_md5) WHERE id = ?', [account || row.account, p.str('member_name') || row.name, email ?? row.email, p.str('member_phone') ?? row.phone, p.str('member_title') ?? row.title, password ? md5Hex(password) : null, row.id]);
        await members.setState(row.id, state);
      } else {
        const account = p.required('account').trim();
        if (await db.get('SELECT 1 FROM members WHERE account = ?', [account])) throw new ServiceFault(FaultCode.NameExists, `account ${JSON.stringify(account)} exists`);
        state = await members.allowedState(ent.id, wanted ?? 1);
        const id = await db.insert('INSERT INTO members (ent_id, out_id, account, name, email, phone, title, state, password_md5, listed, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)', [ent.id, outId, account, p.str('member_name') || account, email ?? '', p.str('member_phone') ?? '', p.str('member_title') ?? '', state, password ? md5Hex(password) : null, parts.clock()]);
        row = (await members.byId(ent.id, id))!;
      }
      if (expire !== undefined) await db.run('UPDATE members SET expire = ? WHERE id = ?', [expire === 0 ? null : expiryDate(expire), row.id]);
      if (leader !== undefined) await db.run('UPDATE members SET leader_id = ? WHERE id = ?', [leader, row.id]);
      if (groups !== undefined) {
        await departments.clearMemberships([row.id]);
        if (groups.length === 0) await departments.addMembers(0, [row.id]);
        for (const g of groups) await departments.addMembers(g, [row.id]);
      }
      await entLog.record(ent.id, EntLogType.Member, `member ${existing ? 'changed' : 'added'} by synchronisation: ${outId}`, ctx.ip);
      return { member_id: row.id, state };
    });
  });

  router.register('ent', 'del_sync_member', async (ctx) => {
    const ent = await syncEnt(ctx);
    const list = await byOutIds(ent, ctx.params.required('members'), 'members');
    await members.remove(list);
    await entLog.record(ent.id, EntLogType.Member, `members removed by synchronisation: ${list.map((m) => m.out_id).join(',')}`, ctx.ip);
  });

  router.register('ent', 'add_sync_group', async (ctx) => {
    const ent = await syncEnt(ctx);
    const p = ctx.params;
    const outId = p.required('out_id');
    const existing = await departments.byOutId(ent.id, outId);
    const parentParam = p.str('parent_out_id');
    const parentId = parentParam === undefined ? undefined : await groupOf(ent, parentParam);
    const orderParam = p.str('orderby');
    const orderby = orderParam === undefined || orderParam === '' ? undefined : p.int('orderby', 0);
    await db.tx(async () => {
      if (existing) {
        const name = p.str('name');
        if (name !== undefined && name.trim() === '') throw badParam('name', 'a non-empty name (omit it to keep the name)', name);
        await departments.update(existing, { name: name?.trim(), parentId, orderby });
      } else {
        await departments.add(ent.id, { name: p.required('name').trim(), parentId: parentId ?? 0, orderby, outId });
      }
    });
    await entLog.record(ent.id, EntLogType.Structure, `department ${existing ? 'changed' : 'added'} by synchronisation: ${outId}`, ctx.ip);
  });

  router.register('ent', 'del_sync_group', async (ctx) => {
    const ent = await syncEnt(ctx);
    const rows = await mapInOrder(splitList(ctx.params.required('groups')), async (o) => departments.requireOutId(ent.id, o));
    await departments.remove(rows);
    await entLog.record(ent.id, EntLogType.Structure, `departments removed by synchronisation: ${ctx.params.str('groups')}`, ctx.ip);
  });

  router.register('ent', 'add_sync_group_member', async (ctx) => {
    const ent = await syncEnt(ctx);
    const group = await groupOf(ent, ctx.params.str('group_out_id'));
    const list = await byOutIds(ent, ctx.params.required('members'), 'members');
    await departments.addMembers(group, list.map((m) => m.id));
    await entLog.record(ent.id, EntLogType.Structure, `members added to department ${group} by synchronisation`, ctx.ip);
  });

  router.register('ent', 'del_sync_group_member', async (ctx) => {
    const ent = await syncEnt(ctx);
    const group = await groupOf(ent, ctx.params.str('group_out_id'));
    const list = await byOutIds(ent, ctx.params.required('members'), 'members');
    await departments.removeMembers(group, list.map((m) => m.id));
    await entLog.record(ent.id, EntLogType.Structure, `members taken out of department ${group} by synchronisation`, ctx.ip);
  });

  router.register('ent', 'del_sync_member_group', async (ctx) => {
    const ent = await syncEnt(ctx);
    const list = await byOutIds(ent, ctx.params.required('members'), 'members');
    await departments.clearMemberships(list.map((m) => m.id));
    await entLog.record(ent.id, EntLogType.Structure, 'members taken out of every department by synchronisation', ctx.ip);
  });

  router.register('ent', 'get_member_by_out_id', async (ctx) => {
    const ent = await syncEnt(ctx);
    const byAccount = !ctx.params.str('out_ids');
    const ids = splitList(byAccount ? ctx.params.required('user_ids') : ctx.params.required('out_ids'));
    const out: EndpointResult<'ent', 'get_member_by_out_id'> = {};
    for (const id of ids) {
      const m = await members.find(ent.id, byAccount ? 'account' : 'out_id', id);
      if (!m) continue;
      const { out_id: _omit, ...rest } = members.record(m);
      out[id] = rest;
    }
    return out;
  });

  router.register('ent', 'get_group_by_out_id', async (ctx) => {
    const ent = await syncEnt(ctx);
    const out: EndpointResult<'ent', 'get_group_by_out_id'> = {};
    for (const id of splitList(ctx.params.required('out_ids'))) {
      const d = await departments.byOutId(ent.id, id);
      if (d) out[id] = { group_id: d.id, name: d.name, out_id: d.out_id ?? '', parent_id: d.parent_id };
    }
    return out;
  });

  router.register('ent', 'add_sync_admin', async (ctx) => {
    const ent = await syncEnt(ctx);
    const p = ctx.params;
    const member = await members.require(ent.id, 'out_id', p.required('out_id'));
    const type = p.int('type', 0, { min: 0, max: 1 });
    const email = p.str('member_email');
    await db.run('UPDATE members SET admin_type = ?, email = ? WHERE id = ?', [type, email || member.email, member.id]);
    await entLog.record(ent.id, EntLogType.SubAdmin, `${type === 1 ? 'super administrator' : 'administrator'} set by synchronisation: ${member.account}`, ctx.ip);
  });
}
