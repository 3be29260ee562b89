/**
 * Folder permissions of the library file API: the simple endpoints of `/m-open/1/file/`
 * (file_permission, get_permission, get_all_permission, reset_permission, set_permission_inherit) over
 * the one permission model of FolderPermissions. Also the registration of everything built on that
 * model: the user file API, the advanced permissions of `/m-open/2/file/` and metadata.
 */
import { badParam } from '../domain/fault.js';
import { FolderPermissions } from '../domain/permissions.js';
import { PERMISSION_CODES, codesToSimple, entryStates, simpleToCodes, type CodeStates } from '../domain/permissions-codes.js';
import { AccessTokens } from '../domain/tokens.js';
import { MetadataTemplates } from '../domain/metadata.js';
import type { HandlerOf, RequestContext, Router } from '../http/router.js';
import type { EndpointName } from '../../shared/endpoints.js';
import { libraryOf, type ServiceParts } from './context.js';
import { registerFile2Api } from './file2.js';
import { registerMetadataApi } from './metadata.js';
import { registerUserApi } from './user.js';
import { memberNamed, parseJsonObject } from './request-params.js';
import { filterInOrder } from '../domain/in-order.js';

/** Registers the user file API, the simple and advanced permission endpoints, and metadata. */
export async function registerMemberApis(router: Router, parts: ServiceParts): Promise<void> {
  const permissions = FolderPermissions.over(parts.tree, parts.directory);
  const tokens = new AccessTokens(parts.tree.db, parts.clock);
  await tokens.expire();
  registerUserApi(router, parts, { tokens, permissions });
  registerPermissionApi(router, parts, permissions);
  registerFile2Api(router, parts, permissions);
  registerMetadataApi(router, parts, new MetadataTemplates(parts.tree.db));
}

const DENY_ALL: CodeStates = Object.fromEntries(PERMISSION_CODES.map((c) => [c, -1])) as CodeStates;

export function registerPermissionApi(router: Router, parts: ServiceParts, permissions: FolderPermissions): void {
  const { directory, tree } = parts;
  const on = <N extends EndpointName<'file'>>(name: N, handler: HandlerOf<'file', N>) => router.register('file', name, handler);
  const folderOf = async (ctx: RequestContext) => {
    const lib = libraryOf(ctx);
    return { lib, ...await permissions.folder(lib.id, ctx.params.path('fullpath', { allowRoot: true })) };
  };

  on('set_permission_inherit', async (ctx) => {
    const { lib, entryId } = await folderOf(ctx);
    await permissions.setInherit(lib.id, entryId, ctx.params.requiredInt('inherit', { min: 0, max: 1 }) === 1, true);
  });

  on('get_all_permission', async (ctx) => {
    const { lib, entryId } = await folderOf(ctx);
    const out = { members: {} as Record<string, string[]>, groups: {} as Record<string, string[]> };
    for (const e of await permissions.entriesAt(lib.id, entryId)) {
      (e.subject.kind === 'm' ? out.members : out.groups)[String(e.subject.id)] = codesToSimple(entryStates(e.roleId, e.codes));
    }
    return out;
  });

  on('file_permission', async (ctx) => {
    const { lib, entryId } = await folderOf(ctx);
    const p = ctx.params;
    const map = parseJsonObject(p.required('permissions'), 'permissions');
    const isGroup = p.flag('is_group');
    const isOut = p.flag('is_out');
    await tree.tx(async () => {
      for (const [id, names] of Object.entries(map)) {
        const codes = simpleToCodes(names, `permissions.${id}`);
        if (!isOut && !/^\d+$/.test(id)) throw badParam('permissions', `${isGroup ? 'department' : 'member'} ids as keys`, id);
        const subject = isGroup
          ? await permissions.groups(lib.ent_id, isOut ? 'out_id' : 'id', [id])
          : await permissions.members(lib.ent_id, isOut ? 'out_id' : 'id', [isOut ? id : Number(id)]);
        await permissions.set(lib.id, entryId, subject, 0, codes);
      }
    });
  });

  on('reset_permission', async (ctx) => {
    const { lib, entryId } = await folderOf(ctx);
    const p = ctx.params;
    const members = await permissions.members(lib.ent_id, 'id', idList(p.str('members'), 'members'));
    const groups = await permissions.groups(lib.ent_id, 'id', idList(p.str('groups'), 'groups'));
    const inheriting = await permissions.inherits(entryId);
    await tree.tx(async () => {
      await permissions.remove(lib.id, entryId, [...members, ...groups]);
      if (inheriting || !p.flag('clear')) return;
      // Not inheriting, clear=1: a member who still has a permission here through a department gets none.
      const held = await filterInOrder(members, async (m) => Object.values(await permissions.memberStates(lib.id, m.id, entryId)).some((v) => v === 1));
      if (held.length) await permissions.set(lib.id, entryId, held, 0, DENY_ALL);
    });
  });

  on('get_permission', async (ctx) => {
    const lib = libraryOf(ctx);
    const p = ctx.params;
    const fullpath = p.path('fullpath', { allowRoot: true });
    const row = fullpath === '' ? undefined : await tree.require(lib.id, fullpath);
    const entryId = !row ? 0 : row.dir ? row.id : (row.parent_id ?? 0);
    const one = await memberNamed(directory, permissions, lib.ent_id, ctx);
    if (one) return codesToSimple(await permissions.memberStates(lib.id, one.id, entryId));
    const members: Record<string, string[]> = {};
    for (const id of await permissions.candidates(lib.id)) {
      const names = codesToSimple(await permissions.memberStates(lib.id, id, entryId));
      if (names.length) members[String(id)] = names;
    }
    return { members };
  });
}

function idList(raw: string | undefined, name: string): number[] {
  if (raw === undefined || raw === '') return [];
  return raw.split(',').map((s) => s.trim()).filter((s) => s !== '').map((s) => {
    if (!/^\d+$/.test(s)) throw badParam(name, 'comma-separated ids', raw);
    return Number(s);
  });
}
