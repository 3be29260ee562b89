/**
 * The enterprise API (/m-open/1/ent/, enterprise credential) beyond add/set/get_members (ent-members.ts)
 * and the synchronisation endpoints (ent-sync.ts): del_member, departments by path (add, set incl. move,
 * del), membership, get_member (with groups and libraries), get_groups, get_group_members, get_roles, log.
 */
import type { EntMember } from '../../shared/records.js';
import type { EnterpriseRow } from '../domain/directory.js';
import { Departments, type DepartmentRow } from '../domain/departments.js';
import { EnterpriseLog, EntLogType } from '../domain/enterprise-log.js';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { EnterpriseMembers, splitList, type MemberDbRow, type MemberKey } from '../domain/members.js';
import { FolderPermissions } from '../domain/permissions.js';
import { LIBRARY_ROLES } from '../domain/permissions-codes.js';
import type { RequestContext, Router } from '../http/router.js';
import type { ServiceParts } from './context.js';
import { filterInOrder, mapInOrder } from '../domain/in-order.js';

export function registerEntApi(router: Router, parts: ServiceParts): void {
  const db = parts.tree.db;
  const members = new EnterpriseMembers(db, parts.clock);
  const departments = new Departments(db, parts.clock);
  const entLog = new EnterpriseLog(db, parts.clock);
  // Temporary accounts stop at the end of their day even when no enterprise call arrives.
  const sweep = setInterval(async () => {
    if (db.open) await members.expireDue();
    else clearInterval(sweep);
  }, 60_000).unref();

  const entOf = async (ctx: RequestContext): Promise<EnterpriseRow> => {
    if (!ctx.caller.enterprise) throw new ServiceFault(FaultCode.NoPermission, 'this call needs the enterprise client_id');
    await members.expireDue();
    return ctx.caller.enterprise;
  };
  const accounts = (ctx: RequestContext, ent: EnterpriseRow, param = 'members'): Promise<MemberDbRow[]> =>
    members.requireList(ent.id, 'account', ctx.params.required(param), param);
  /** The department of `group_path`; omitted or empty = top level (0). */
  const groupAt = async (ctx: RequestContext, ent: EnterpriseRow): Promise<number> => {
    const path = ctx.params.str('group_path');
    return path === undefined || path.trim() === '' ? 0 : (await departments.requirePath(ent.id, path)).id;
  };
  const state = (ctx: RequestContext): number | undefined => {
    const v = ctx.params.str('state');
    return v === undefined || v === '' ? undefined : ctx.params.int('state', 1, { min: 0, max: 1 });
  };
  const orderby = (ctx: RequestContext): number | undefined => {
    const v = ctx.params.str('orderby');
    return v === undefined || v === '' ? undefined : ctx.params.int('orderby', 0);
  };

  router.register('ent', 'del_member', async (ctx) => {
    const ent = await entOf(ctx);
    const list = await accounts(ctx, ent);
    await members.remove(list);
    await entLog.record(ent.id, EntLogType.Member, `members removed: ${list.map((m) => m.account).join(',')}`, ctx.ip);
  });

  router.register('ent', 'add_group', async (ctx) => {
    const ent = await entOf(ctx);
    const p = ctx.params;
    const name = p.required('group_name').trim();
    const parentId = await departments.parentOf(ent.id, p.str('parent_group_path'), 'parent_group_path');
    const id = await departments.add(ent.id, { name, parentId, orderby: orderby(ctx), state: state(ctx) });
    await entLog.record(ent.id, EntLogType.Structure, `department added: ${name}`, ctx.ip);
    return { group_id: id };
  });

  router.register('ent', 'set_group', async (ctx) => {
    const ent = await entOf(ctx);
    const p = ctx.params;
    const row = await departments.requirePath(ent.id, p.required('group_path'));
    const name = p.str('group_name');
    if (name !== undefined && name.trim() === '') throw badParam('group_name', 'a non-empty name (omit it to keep the name)', name);
    const parent = p.str('parent_group_path');
    await departments.update(row, {
      name: name?.trim(),
      parentId: parent === undefined ? undefined : await departments.parentOf(ent.id, parent, 'parent_group_path'),
      orderby: orderby(ctx), state: state(ctx),
    });
    await entLog.record(ent.id, EntLogType.Structure, `department changed: ${p.str('group_path')}`, ctx.ip);
  });

  router.register('ent', 'del_group', async (ctx) => {
    const ent = await entOf(ctx);
    const rows = await mapInOrder(splitList(ctx.params.required('groups')), async (path) => departments.requirePath(ent.id, path, 'groups'));
    await departments.remove(rows);
    await entLog.record(ent.id, EntLogType.Structure, `departments removed: ${ctx.params.str('groups')}`, ctx.ip);
  });

  router.register('ent', 'add_group_member', async (ctx) => {
    const ent = await entOf(ctx);
    const group = await groupAt(ctx, ent);
    const list = await accounts(ctx, ent);
    await departments.addMembers(group, list.map((m) => m.id));
    await entLog.record(ent.id, EntLogType.Structure, `members ${list.map((m) => m.account).join(',')} added to department ${group}`, ctx.ip);
  });

  router.register('ent', 'del_group_member', async (ctx) => {
    const ent = await entOf(ctx);
    const group = await groupAt(ctx, ent);
    const list = await accounts(ctx, ent);
    await departments.removeMembers(group, list.map((m) => m.id));
    await entLog.record(ent.id, EntLogType.Structure, `members ${list.map((m) => m.account).join(',')} taken out of department ${group}`, ctx.ip);
  });

  router.register('ent', 'del_member_group', async (ctx) => {
    const ent = await entOf(ctx);
    const list = await accounts(ctx, ent);
    await departments.clearMemberships(list.map((m) => m.id));
    await entLog.record(ent.id, EntLogType.Structure, `members ${list.map((m) => m.account).join(',')} taken out of every department`, ctx.ip);
  });

  router.register('ent', 'get_member', async (ctx) => {
    const ent = await entOf(ctx);
    let row: MemberDbRow | undefined;
    for (const key of ['member_id', 'out_id', 'account', 'email'] as const satisfies readonly MemberKey[]) {
      const v = ctx.params.str(key);
      if (v !== undefined && v !== '') { row = await members.require(ent.id, key, v); break; }
    }
    if (!row) throw badParam('member_id', 'one of member_id, out_id, account, email', null);
    const out: EntMember = members.record(row);
    if (ctx.params.flag('show_groups')) {
      out.groups = await mapInOrder((await departments.ofMember(row.id)), async (d) => ({ id: d.id, name: d.name, group_code: await departments.code(d.id), out_id: d.out_id ?? '' }));
    }
    if (ctx.params.flag('show_orgs')) out.orgs = await orgsOf(row.ent_id, row.id);
    return out;
  });

  const roleNames = new Map(LIBRARY_ROLES.map((r) => [r.id, r.name]));
  const permissions = FolderPermissions.over(parts.tree, parts.directory);
  /**
   * The libraries a member takes part in (as account/mount counts it). `roles`: the member's own role in
   * the library and the roles of their departments (with the departments above them); omitted for the owner.
   */
  const orgsOf = async (entId: number, memberId: number): Promise<NonNullable<EntMember['orgs']>> => {
    const rows = await db.all(`SELECT l.*, COALESCE(o.name, '') AS owner_name,
        (SELECT COUNT(*) FROM library_members x WHERE x.library_id = l.id) AS member_count
      FROM libraries l LEFT JOIN members o ON o.id = l.owner_id
      WHERE l.ent_id = ? AND l.deleted = 0 ORDER BY l.id`, [entId]) as {
      id: number; name: string; type: number; owner_id: number; owner_name: string; member_count: number; capacity: number; size_used: number; mount_id: number;
    }[];
    const groups = await permissions.departments.departmentsOf(memberId);
    return mapInOrder((await filterInOrder(rows, async (l) => permissions.takesPart(l.id, memberId))), async (l) => {
      const org: NonNullable<EntMember['orgs']>[number] = {
        id: l.id, name: l.name, type: l.type, owner: l.owner_name, owner_id: l.owner_id, member_count: l.member_count,
        size_total: l.capacity, size_used: l.size_used, mount_id: l.mount_id,
      };
      if (l.owner_id !== memberId) {
        const groupRoles = await permissions.departments.libraryRoles(l.id);
        const roleIds = [await permissions.memberRole(l.id, memberId), ...groups.map((g) => groupRoles.get(g))].filter((r): r is number => !!r);
        org.roles = Object.fromEntries([...new Set(roleIds)].sort((a, b) => a - b).map((r) => [String(r), roleNames.get(r) ?? '']));
      }
      return org;
    });
  };

  router.register('ent', 'get_groups', async (ctx) => (await departments.all((await entOf(ctx)).id)).map((d) => departments.record(d)));

  router.register('ent', 'get_group_members', async (ctx) => {
    const ent = await entOf(ctx);
    const p = ctx.params;
    let group: DepartmentRow;
    if (p.str('group_id')) group = await departments.requireId(ent.id, p.int('group_id', 0, { min: 1 }));
    else if (p.str('group_path')) group = await departments.requirePath(ent.id, p.required('group_path'));
    else group = await departments.requireOutId(ent.id, p.required('out_id'));
    const ids = p.flag('show_child') ? await departments.subtree(group.id) : [group.id];
    const { start, size } = p.page(20);
    const page = await members.page(ent.id, start, size, `id IN (SELECT member_id FROM department_members WHERE group_id IN (${ids.map(() => '?').join(',')}))`, ids);
    return { list: page.list.map((m) => members.record(m)), count: page.count };
  });

  router.register('ent', 'get_roles', async (ctx) => {
    await entOf(ctx);
    return LIBRARY_ROLES.map((r) => ({ id: r.id, name: r.name }));
  });

  router.register('ent', 'log', async (ctx) => {
    const ent = await entOf(ctx);
    const p = ctx.params;
    const order = p.str('orderby') ?? 'desc';
    if (order !== 'asc' && order !== 'desc') throw badParam('orderby', "'asc' or 'desc'", order);
    const type = p.str('type');
    const { start, size } = p.page(100, 1000); // the spec: at most 1000
    return entLog.query(ent.id, {
      types: type === undefined || type === '' ? undefined : [p.int('type', 0, { min: 1, max: 9 })],
      order, start, size,
      startS: p.str('start_dateline') ? p.int('start_dateline', 0, { min: 0 }) : undefined,
      endS: p.str('end_dateline') ? p.int('end_dateline', 0, { min: 0 }) : undefined,
    });
  });
}
