/**
 * Permission vocabulary: the advanced codes of the spec, the library roles (a named set of codes), and
 * the simple permission names of `/m-open/1/file/` as sets of advanced codes — so that both models are
 * one (docs/service-users-permissions.md).
 */
import { badParam } from './fault.js';

/** Every advanced permission code (spec "Advanced permission codes"). */
export const PERMISSION_CODES = [
  'ls', 'cd', 'pv', 'dl', 'w', 'ul', 'mk', 'ren', 'rm', 'ln', 'rmk', 't', 'p',
  'ss', 'sren', 'srm', 'mls', 'b', 'br', 'be', 'mln', 'h', 'hr', 'rmka', 'trm', 'ps',
] as const;
export type PermissionCode = (typeof PERMISSION_CODES)[number];
const CODE_SET: ReadonlySet<string> = new Set(PERMISSION_CODES);

/** A state per code: 1 granted, -1 denied; a code absent is 0 (no permission). */
export type CodeStates = Partial<Record<PermissionCode, 1 | -1>>;

export interface LibraryRole { id: number; name: string; codes: readonly PermissionCode[] }

const VIEW: PermissionCode[] = ['ls', 'cd', 'ss', 'pv'];
const READ: PermissionCode[] = [...VIEW, 'dl', 'h', 'p', 'rmk'];
const EDIT: PermissionCode[] = PERMISSION_CODES.filter((c) => !['mls', 'be', 'mln', 'ps'].includes(c));

/**
 * Library roles: what a member or department with this role in a library may do. Role 0 is "no role"
 * (only what folder permissions grant); the library owner may do everything.
 */
export const LIBRARY_ROLES: readonly LibraryRole[] = [
  { id: 1, name: 'Administrator', codes: PERMISSION_CODES },
  { id: 2, name: 'Editor', codes: EDIT },
  { id: 3, name: 'Uploader and downloader', codes: [...READ, 'ul', 'mk', 'rmka', 't'] },
  { id: 4, name: 'Downloader', codes: READ },
  { id: 5, name: 'Previewer', codes: VIEW },
  { id: 6, name: 'Uploader', codes: ['ls', 'cd', 'ss', 'ul', 'mk'] },
];

export function roleCodes(roleId: number): readonly PermissionCode[] {
  if (roleId === 0) return [];
  const role = LIBRARY_ROLES.find((r) => r.id === roleId);
  if (!role) throw badParam('role_id', `0 or a role id (${LIBRARY_ROLES.map((r) => r.id).join(', ')})`, roleId);
  return role.codes;
}

/** Simple permission names (spec "Folder permission names") as advanced codes. Read implies preview; write implies read. */
export const SIMPLE_PERMISSIONS: Readonly<Record<string, readonly PermissionCode[]>> = {
  file_preview: VIEW,
  file_read: [...VIEW, 'dl'],
  file_upload: ['ls', 'cd', 'ss', 'ul', 'mk'],
  file_write: [...VIEW, 'dl', 'w'],
  file_delete: ['rm', 'srm'],
  file_link: ['ln'],
};

/** Codes granted by a list of simple names; an unknown name is refused. */
export function simpleToCodes(names: unknown, param: string): CodeStates {
  if (!Array.isArray(names) || !names.every((n) => typeof n === 'string')) throw badParam(param, 'an array of permission names', names);
  const states: CodeStates = {};
  for (const name of names as string[]) {
    // The C# SDK writes its enum names lowercased (`fileread`): the spec's name without the underscore.
    const codes = SIMPLE_PERMISSIONS[name] ?? SIMPLE_PERMISSIONS[name.replace(/^file(?=[a-z])/, 'file_')];
    if (!codes) throw badParam(param, `permission names among ${Object.keys(SIMPLE_PERMISSIONS).join(', ')}`, name);
    for (const c of codes) states[c] = 1;
  }
  return states;
}

/** Simple names whose codes are all granted. */
export function codesToSimple(states: CodeStates): string[] {
  return Object.entries(SIMPLE_PERMISSIONS).filter(([, codes]) => codes.every((c) => states[c] === 1)).map(([name]) => name);
}

/** Parses an advanced `permission` object: `role_id` and codes mapped to 1 / -1 / 0. */
export function parseAdvanced(value: unknown, param: string): { roleId: number; codes: CodeStates } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw badParam(param, 'an object of role_id and permission codes', value);
  let roleId = 0;
  const codes: CodeStates = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
    if (k === 'role_id') {
      if (typeof n !== 'number' || !Number.isInteger(n)) throw badParam(`${param}.role_id`, 'an integer', v);
      roleCodes(n);
      roleId = n;
      continue;
    }
    if (!CODE_SET.has(k)) throw badParam(param, `permission codes among ${PERMISSION_CODES.join(', ')}`, k);
    if (n !== 1 && n !== -1 && n !== 0) throw badParam(`${param}.${k}`, '1, -1 or 0', v);
    if (n !== 0) codes[k as PermissionCode] = n;
  }
  return { roleId, codes };
}

/** The states of an entry: its role's codes granted, then its own codes over them. */
export function entryStates(roleId: number, codes: CodeStates): CodeStates {
  const out: CodeStates = {};
  for (const c of roleCodes(roleId)) out[c] = 1;
  return { ...out, ...codes };
}

/** Every code with its state (0 included), as get_member_permission answers. */
export function fullStates(states: CodeStates): Record<PermissionCode, number> {
  return Object.fromEntries(PERMISSION_CODES.map((c) => [c, states[c] ?? 0])) as Record<PermissionCode, number>;
}
