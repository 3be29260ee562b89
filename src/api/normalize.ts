/**
 * Being liberal in what the client accepts (spec/decisions.md): numbers sent as strings, `[]` for an
 * empty object, `property` as a JSON-encoded string. Applied to every result at the edge.
 */

/** Fields that are numbers in the spec's record tables. */
const NUMERIC = new Set([
  'dir', 'filesize', 'create_dateline', 'last_dateline', 'count', 'fetch_dateline', 'cmd', 'act', 'dateline', 'member_id',
  'org_id', 'mount_id', 'capacity', 'size', 'size_recycle', 'count_file', 'state', 'status', 'add_dateline', 'start_dateline',
  'finish_dateline', 'deadline', 'password', 'file_count', 'folder_count', 'files_size', 'lock', 'size_org_total', 'size_org_use',
  'dir_count', 'owner_id', 'ent_id', 'org_type', 'member_count', 'storage_ethernet', 'role_id', 'group_id', 'parent_id', 'id',
  'trial', 'end_dateline', 'member_limit', 'space', 'total', 'type', 'expires_in', 'expire', 'size_total', 'size_used',
]);
const OBJECT_FIELDS = new Set(['property', 'members', 'groups', 'roles', 'query', 'export_msg']);

/** `groups` is an object only in a permission result (beside `members`); in a member record it is an array. */
const isObjectField = (key: string, parent: Record<string, unknown>): boolean =>
  OBJECT_FIELDS.has(key) && (key !== 'groups' || 'members' in parent);

export function normalizeResult(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalizeResult);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  const parent = v as Record<string, unknown>;
  for (const [k, raw] of Object.entries(parent)) {
    let x = raw;
    if (isObjectField(k, parent)) {
      if (typeof x === 'string') {
        try { x = x.trim() === '' ? {} : JSON.parse(x); } catch { /* keep the text */ }
      }
      if (Array.isArray(x) && x.length === 0) x = {};
    }
    if (NUMERIC.has(k) && typeof x === 'string' && /^-?\d+(\.\d+)?$/.test(x)) x = Number(x);
    out[k] = normalizeResult(x);
  }
  return out;
}

/** The upload server of `create_file`: may be a comma-separated list and may lack the scheme. */
export function normalizeServer(server: string): string {
  const first = server.split(',').map((s) => s.trim()).find((s) => s !== '') ?? '';
  if (first === '') return '';
  const withScheme = /^https?:\/\//.test(first) ? first : `http://${first}`;
  return withScheme.replace(/\/+$/, '');
}
