/**
 * The library management API (`/m-open/1/org/*`), enterprise credential: create, set, info, search, ls,
 * personal libraries (info_by_member, set_by_member), bind, unbind, members and departments of a
 * library with their roles, set_owner, destroy. (`log` is in org-log.ts.)
 */
import type { LibraryListItem, LibraryMember } from '../../shared/records.js';
import type { EnterpriseRow, LibraryRow } from '../domain/directory.js';
import { Departments } from '../domain/departments.js';
import { EnterpriseLibraries } from '../domain/enterprise-libraries.js';
import { EnterpriseLog, EntLogType } from '../domain/enterprise-log.js';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { EnterpriseMembers, splitList, type MemberKey } from '../domain/members.js';
import { FolderPermissions } from '../domain/permissions.js';
import type { RequestContext, Router } from '../http/router.js';
import type { ServiceParts } from './context.js';
import { filterInOrder } from '../domain/in-order.js';

export function registerOrgApi(router: Router, parts: ServiceParts): void {
  const { directory } = parts;
  const db = parts.tree.db;
  const members = new EnterpriseMembers(db, parts.clock);
  const departments = new Departments(db, parts.clock);
  const libraries = new EnterpriseLibraries(db, directory);
  const entLog = new EnterpriseLog(db, parts.clock);
  const permissions = FolderPermissions.over(parts.tree, directory);
  const enterpriseOf = (ctx: RequestContext): EnterpriseRow => {
    if (!ctx.caller.enterprise) throw new ServiceFault(FaultCode.NoPermission, 'this call needs the enterprise client_id');
    return ctx.caller.enterprise;
  };
  /** The enterprise's library named by one of org_id / mount_id / out_id. */
  const libraryOf = async (ctx: RequestContext, ent: EnterpriseRow): Promise<LibraryRow> => {
    const p = ctx.params;
    for (const field of ['org_id', 'mount_id', 'out_id'] as const) {
      const v = p.str(field);
      if (v === undefined || v === '') continue;
      if (field !== 'out_id' && !/^\d+$/.test(v)) throw badParam(field, 'an integer id', v);
      const lib = await directory.libraryBy(field === 'org_id' ? 'id' : field, field === 'out_id' ? v : Number(v), ent.id);
      if (!lib) throw new ServiceFault(FaultCode.LibraryMissing, `library ${field}=${v} not found or deleted`);
      return lib;
    }
    throw badParam('org_id', 'one of org_id, mount_id, out_id', null);
  };

  router.register('org', 'create', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const p = ctx.params;
    const name = p.required('org_name');
    const capacity = p.int('org_capacity', -1, { min: -1 });
    const outId = p.str('out_id') || undefined;
    if (outId !== undefined && await directory.libraryBy('out_id', outId, ent.id)) throw new ServiceFault(FaultCode.NameExists, `a library with out_id ${JSON.stringify(outId)} exists`);
    const lib = await directory.createLibrary(ent.id, { name, capacity, logoUrl: p.str('org_logo'), outId });
    await entLog.record(ent.id, EntLogType.Library, `library ${lib.id} created: ${name}`, ctx.ip);
    return { org_id: lib.id, mount_id: lib.mount_id };
  });

  router.register('org', 'set', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const lib = await libraryOf(ctx, ent);
    const p = ctx.params;
    const name = p.str('org_name');
    if (name !== undefined && name.trim() === '') throw badParam('org_name', 'a non-empty name (omit it to keep the name)', name);
    const cap = p.str('org_capacity');
    const capacity = cap === undefined ? lib.capacity : cap === '' ? -1 : p.int('org_capacity', -1, { min: -1 });
    await db.run('UPDATE libraries SET name = ?, logo_url = ?, capacity = ? WHERE id = ?', [name ?? lib.name, p.str('org_logo') ?? lib.logo_url, capacity, lib.id]);
    await entLog.record(ent.id, EntLogType.Library, `library ${lib.id} changed`, ctx.ip);
  });

  router.register('org', 'search', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const p = ctx.params;
    const size = p.int('size', 10, { min: 1, max: 1000 });
    const name = p.str('name');
    const rows = name !== undefined && name !== ''
      ? await db.all('SELECT * FROM libraries WHERE ent_id = ? AND deleted = 0 AND name = ? ORDER BY id LIMIT ?', [ent.id, name, size])
      : await db.all("SELECT * FROM libraries WHERE ent_id = ? AND deleted = 0 AND substr(name, 1, length(?)) = ? ORDER BY name, id LIMIT ?", [ent.id, p.required('prefix'), p.required('prefix'), size]);
    return { list: (rows as LibraryRow[]).map(listItem) };
  });

  const memberOf = async (ctx: RequestContext, ent: EnterpriseRow) => {
    for (const key of ['member_id', 'out_id', 'account', 'email'] as const satisfies readonly MemberKey[]) {
      const v = ctx.params.str(key);
      if (v !== undefined && v !== '') return members.require(ent.id, key, v);
    }
    throw badParam('member_id', 'one of member_id, out_id, account, email', null);
  };

  router.register('org', 'info_by_member', async (ctx) => {
    const member = await memberOf(ctx, enterpriseOf(ctx));
    const lib = await libraries.personalOf(member.id);
    if (!lib) return { info: { size_org_total: member.personal_capacity ?? -1 } };
    return {
      info: {
        org_id: lib.id, org_name: lib.name, org_logo_url: lib.logo_url, size_org_total: lib.capacity, size_org_use: lib.size_used,
        file_count: lib.file_count, dir_count: lib.dir_count, mount_id: lib.mount_id,
      },
    };
  });

  router.register('org', 'set_by_member', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const capacity = ctx.params.requiredInt('capacity', { min: -1 });
    const member = await memberOf(ctx, ent);
    await libraries.setPersonalCapacity(member, capacity);
    await entLog.record(ent.id, EntLogType.Library, `personal library capacity of ${member.account}: ${capacity}`, ctx.ip);
  });

  /** Member ids of a comma-separated list, each a member of the enterprise. */
  const memberIdsOf = async (ctx: RequestContext, ent: EnterpriseRow): Promise<number[]> =>
    (await members.requireList(ent.id, 'member_id', ctx.params.required('member_ids'), 'member_ids')).map((m) => m.id);
  const roleOf = (ctx: RequestContext): number => ctx.params.int('role_id', 0, { min: 0 });

  router.register('org', 'get_members', async (ctx) => {
    const lib = await libraryOf(ctx, enterpriseOf(ctx));
    const { start, size } = ctx.params.page(20);
    return libraries.members(lib.id, start, size);
  });

  router.register('org', 'get_member', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const lib = await libraryOf(ctx, ent);
    const type = ctx.params.required('type');
    if (type !== 'account' && type !== 'out_id' && type !== 'member_id') throw badParam('type', 'account, out_id or member_id', type);
    const out: Record<string, LibraryMember> = {};
    for (const id of splitList(ctx.params.required('ids'))) {
      const m = await members.find(ent.id, type, id);
      const lm = m ? await libraries.member(lib.id, m.id) : undefined;
      if (lm) out[id] = lm;
    }
    return out;
  });

  router.register('org', 'add_member', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const lib = await libraryOf(ctx, ent);
    const ids = await memberIdsOf(ctx, ent);
    await libraries.addMembers(lib.id, ids, roleOf(ctx));
    await entLog.record(ent.id, EntLogType.Library, `library ${lib.id}: members ${ids.join(',')} added`, ctx.ip);
  });

  router.register('org', 'set_member_role', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const lib = await libraryOf(ctx, ent);
    const ids = await memberIdsOf(ctx, ent);
    await libraries.setMemberRole(lib.id, ids, roleOf(ctx));
    await entLog.record(ent.id, EntLogType.Library, `library ${lib.id}: role of members ${ids.join(',')} set`, ctx.ip);
  });

  router.register('org', 'del_member', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const lib = await libraryOf(ctx, ent);
    const ids = await memberIdsOf(ctx, ent);
    await libraries.removeMembers(lib, ids);
    await entLog.record(ent.id, EntLogType.Library, `library ${lib.id}: members ${ids.join(',')} removed`, ctx.ip);
  });

  router.register('org', 'set_owner', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const lib = await libraryOf(ctx, ent);
    const owner = await members.require(ent.id, 'member_id', ctx.params.required('member_id'));
    const role = ctx.params.str('role_id');
    await libraries.setOwner(lib, owner.id, role === undefined || role === '' ? undefined : roleOf(ctx));
    await entLog.record(ent.id, EntLogType.Library, `library ${lib.id}: owner ${owner.account}`, ctx.ip);
  });

  const groupOf = async (ctx: RequestContext, ent: EnterpriseRow): Promise<number> => {
    const id = ctx.params.int('group_id', 0, { min: 1 });
    return (await departments.requireId(ent.id, id)).id;
  };

  router.register('org', 'get_groups', async (ctx) => libraries.groups((await libraryOf(ctx, enterpriseOf(ctx))).id));

  router.register('org', 'add_group', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const lib = await libraryOf(ctx, ent);
    const role = roleOf(ctx);
    await libraries.setGroup(lib.id, await groupOf(ctx, ent), role, false);
    await entLog.record(ent.id, EntLogType.Library, `library ${lib.id}: department ${ctx.params.str('group_id')} added`, ctx.ip);
  });

  router.register('org', 'set_group_role', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const lib = await libraryOf(ctx, ent);
    const role = roleOf(ctx);
    await libraries.setGroup(lib.id, await groupOf(ctx, ent), role, true);
    await entLog.record(ent.id, EntLogType.Library, `library ${lib.id}: role of department ${ctx.params.str('group_id')} set`, ctx.ip);
  });

  router.register('org', 'del_group', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const lib = await libraryOf(ctx, ent);
    await libraries.removeGroup(lib.id, await groupOf(ctx, ent));
    await entLog.record(ent.id, EntLogType.Library, `library ${lib.id}: department ${ctx.params.str('group_id')} removed`, ctx.ip);
  });

  router.register('org', 'destroy', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const orgClientId = ctx.params.str('org_client_id');
    let lib: LibraryRow;
    if (orgClientId !== undefined && orgClientId !== '' && !ctx.params.str('org_id')) {
      const auth = await directory.libraryAuth(orgClientId);
      if (!auth || auth.ent_client_id !== ent.client_id) throw new ServiceFault(FaultCode.ClientNotFound, 'org_client_id not found for this enterprise');
      lib = await directory.requireLibrary(auth.library_id);
    } else {
      lib = await libraryOf(ctx, ent);
    }
    await libraries.destroy(lib.id);
    parts.content.scheduleCollect();
    await entLog.record(ent.id, EntLogType.Library, `library ${lib.id} destroyed: ${lib.name}`, ctx.ip);
  });

  router.register('org', 'info', async (ctx) => {
    const lib = await libraryOf(ctx, enterpriseOf(ctx));
    return {
      info: {
        org_id: lib.id, org_name: lib.name, org_logo_url: lib.logo_url, size_org_total: lib.capacity, size_org_use: lib.size_used,
        file_count: lib.file_count, dir_count: lib.dir_count, mount_id: lib.mount_id, owner_id: lib.owner_id,
      },
    };
  });

  router.register('org', 'ls', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const type = ctx.params.int('type', 0, { min: 0, max: 2 });
    const given = ctx.params.str('member_id');
    // "Takes part" as in the user API's account/mount: owner, member, a department of theirs, a folder entry.
    const member = given === undefined || given === '' ? undefined : await members.require(ent.id, 'member_id', given);
    const list = await filterInOrder((await directory.librariesOf(ent.id, { type })), async (lib) => !member || await permissions.takesPart(lib.id, member.id));
    return { list: list.map(listItem) };
  });

  router.register('org', 'bind', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const lib = await libraryOf(ctx, ent);
    const auth = await directory.bind(ent.client_id, lib.id, ctx.params.required('title'));
    return { org_client_id: auth.org_client_id, org_client_secret: auth.org_client_secret };
  });

  router.register('org', 'unbind', async (ctx) => {
    const ent = enterpriseOf(ctx);
    const id = ctx.params.required('org_client_id');
    if (!await directory.unbind(ent.client_id, id)) throw new ServiceFault(FaultCode.ClientNotFound, 'org_client_id not found for this enterprise');
  });
}

export function listItem(lib: LibraryRow): LibraryListItem {
  return {
    org_id: lib.id, org_name: lib.name, org_logo_url: lib.logo_url, size_org_total: lib.capacity, size_org_use: lib.size_used,
    mount_id: lib.mount_id, owner_id: lib.owner_id,
  };
}
