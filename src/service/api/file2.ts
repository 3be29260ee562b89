/**
 * Advanced file permissions (`/m-open/2/file/*`, library credential): set_permission,
 * batch_set_permission, del_permission, get_member_permission, get_group_permission and
 * set_permission_inherit with `keep`, over the one permission model of FolderPermissions.
 */
import { badParam } from '../domain/fault.js';
import type { FolderPermissions, Subject } from '../domain/permissions.js';
import { fullStates, parseAdvanced } from '../domain/permissions-codes.js';
import type { HandlerOf, RequestContext, Router } from '../http/router.js';
import type { EndpointName } from '../../shared/endpoints.js';
import { libraryOf, type ServiceParts } from './context.js';
import { memberNamed, parseJsonObject } from './request-params.js';
import { mapInOrder } from '../domain/in-order.js';

export function registerFile2Api(router: Router, parts: ServiceParts, permissions: FolderPermissions): void {
  const { tree, directory } = parts;
  const on = <N extends EndpointName<'file2'>>(name: N, handler: HandlerOf<'file2', N>) => router.register('file2', name, handler);

  /** Subjects of a permission object: one of group_ids / group_out_ids, one of member_ids / accounts / out_ids. */
  const subjectsOf = async (obj: Record<string, unknown>, entId: number, param: string): Promise<Subject[]> => {
    const list = (key: string, type: 'number' | 'string'): (string | number)[] | undefined => {
      const v = obj[key];
      if (v === undefined) return undefined;
      if (!Array.isArray(v) || !v.every((x) => typeof x === type || (type === 'number' && typeof x === 'string' && /^\d+$/.test(x)))) {
        throw badParam(`${param}.${key}`, `an array of ${type === 'number' ? 'integer ids' : 'strings'}`, v);
      }
      return type === 'number' ? v.map(Number) : (v as string[]);
    };
    const groupSets = [['group_ids', list('group_ids', 'number')], ['group_out_ids', list('group_out_ids', 'string')]] as const;
    const memberSets = [['member_ids', list('member_ids', 'number')], ['accounts', list('accounts', 'string')], ['out_ids', list('out_ids', 'string')]] as const;
    const given = <T extends readonly (readonly [string, unknown])[]>(sets: T) => sets.filter(([, v]) => v !== undefined);
    if (given(groupSets).length > 1) throw badParam(param, 'at most one of group_ids, group_out_ids', Object.keys(obj));
    if (given(memberSets).length > 1) throw badParam(param, 'at most one of member_ids, accounts, out_ids', Object.keys(obj));
    const out: Subject[] = [];
    const [g] = given(groupSets);
    if (g) out.push(...await permissions.groups(entId, g[0] === 'group_ids' ? 'id' : 'out_id', g[1] as (string | number)[]));
    const [m] = given(memberSets);
    if (m) out.push(...await permissions.members(entId, m[0] === 'member_ids' ? 'id' : m[0] === 'accounts' ? 'account' : 'out_id', m[1] as (string | number)[]));
    if (out.length === 0) throw badParam(param, 'member or department ids (group_ids, group_out_ids, member_ids, accounts or out_ids)', obj);
    return out;
  };
  const permissionOf = (obj: Record<string, unknown>) => parseAdvanced(obj.permission ?? {}, 'permissions.permission');

  on('set_permission', async (ctx) => {
    const lib = libraryOf(ctx);
    const { entryId } = await permissions.folder(lib.id, ctx.params.path('fullpath', { allowRoot: true }));
    const obj = parseJsonObject(ctx.params.required('permissions'), 'permissions');
    const { roleId, codes } = permissionOf(obj);
    await permissions.set(lib.id, entryId, await subjectsOf(obj, lib.ent_id, 'permissions'), roleId, codes);
  });

  on('batch_set_permission', async (ctx) => {
    const lib = libraryOf(ctx);
    const p = ctx.params;
    const folders = await mapInOrder(p.paths('fullpaths'), async (f) => (await permissions.folder(lib.id, f)).entryId);
    const type = p.int('type', 0, { min: 0, max: 1 });
    const inherit = p.str('inherit') ? p.int('inherit', 1, { min: 0, max: 1 }) === 1 : undefined;
    const obj = parseJsonObject(p.required('permissions'), 'permissions');
    const { roleId, codes } = permissionOf(obj);
    const subjects = await subjectsOf(obj, lib.ent_id, 'permissions');
    await tree.tx(async () => {
      for (const entryId of folders) {
        if (inherit !== undefined) await permissions.setInherit(lib.id, entryId, inherit, false);
        if (type === 1) await permissions.remove(lib.id, entryId);
        await permissions.set(lib.id, entryId, subjects, roleId, codes, type === 0);
      }
    });
  });

  on('del_permission', async (ctx) => {
    const lib = libraryOf(ctx);
    const { entryId } = await permissions.folder(lib.id, ctx.params.path('fullpath', { allowRoot: true }));
    const obj = parseJsonObject(ctx.params.required('ids'), 'ids');
    await permissions.remove(lib.id, entryId, await subjectsOf(obj, lib.ent_id, 'ids'));
  });

  on('set_permission_inherit', async (ctx) => {
    const lib = libraryOf(ctx);
    const { entryId } = await permissions.folder(lib.id, ctx.params.path('fullpath', { allowRoot: true }));
    const p = ctx.params;
    await permissions.setInherit(lib.id, entryId, p.requiredInt('inherit', { min: 0, max: 1 }) === 1, p.flag('keep'));
  });

  /** The folder whose permission applies to `fullpath` (a file: its folder). */
  const evalFolder = async (ctx: RequestContext, libId: number): Promise<number> => {
    const fullpath = ctx.params.path('fullpath', { allowRoot: true });
    if (fullpath === '') return 0;
    const row = await tree.require(libId, fullpath);
    return row.dir ? row.id : (row.parent_id ?? 0);
  };

  on('get_member_permission', async (ctx) => {
    const lib = libraryOf(ctx);
    const member = await memberNamed(directory, permissions, lib.ent_id, ctx);
    if (!member) throw badParam('member_id', 'one of member_id, out_id, account', null);
    return fullStates(await permissions.memberStates(lib.id, member.id, await evalFolder(ctx, lib.id)));
  });

  on('get_group_permission', async (ctx) => {
    const lib = libraryOf(ctx);
    const p = ctx.params;
    const [g] = p.str('group_id')
      ? await permissions.groups(lib.ent_id, 'id', [p.int('group_id', 0, { min: 1 })])
      : await permissions.groups(lib.ent_id, 'out_id', [p.required('group_out_id')]);
    return fullStates(await permissions.groupStates(lib.id, g!.id, await evalFolder(ctx, lib.id)));
  });
}
