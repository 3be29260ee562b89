/** Request parameters shared by the permission, advanced-permission and metadata endpoints. */
import type { Directory } from '../domain/directory.js';
import { badParam } from '../domain/fault.js';
import type { FolderPermissions, Subject } from '../domain/permissions.js';
import type { RequestContext } from '../http/router.js';

/** The member named by one of member_id / out_id / account, if any is given. */
export async function memberNamed(_directory: Directory, permissions: FolderPermissions, entId: number, ctx: RequestContext): Promise<Subject | undefined> {
  const p = ctx.params;
  if (p.str('member_id')) {
    const v = p.str('member_id')!;
    if (!/^\d+$/.test(v)) throw badParam('member_id', 'a member id (integer)', v);
    return (await permissions.members(entId, 'id', [Number(v)]))[0];
  }
  if (p.str('out_id')) return (await permissions.members(entId, 'out_id', [p.str('out_id')!]))[0];
  if (p.str('account')) return (await permissions.members(entId, 'account', [p.str('account')!]))[0];
  return undefined;
}

export function parseJsonObject(raw: string, name: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    v = undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw badParam(name, 'a JSON object', raw);
  return v as Record<string, unknown>;
}
