/**
 * EndpointTable: every endpoint of spec/service-api.md, one definition each. It drives the typed client
 * (api/), the control socket's method list (control/), and the embedded service checks its routes against
 * it (service/). Parameter marking follows the spec; where the spec leaves a parameter unmarked, the
 * marking here is our decision (docs/service-decisions.md) and `unmarked` is set on the endpoint.
 */
import type * as R from './records.js';

export type Family = 'file' | 'file2' | 'user' | 'org' | 'ent' | 'partner' | 'upload';
/** Which credential identifies and signs a call. */
export type Credential =
  | 'library' // org_client_id + org_client_secret
  | 'enterprise' // client_id + enterprise client_secret
  | 'partner' // client_id + partner client_secret
  | 'token' // token + the application's client_secret
  | 'application' // client_id + the application's client_secret (token endpoint)
  | 'upload' // upload server: org_client_id URL parameter or x-svc-token header, then the session header
  | 'upload-key'; // web upload with the temporary key of upload_servers (library) or the token (user)

export type ParamType = 'string' | 'int' | 'json';
export interface ParamDef { readonly required: boolean; readonly type: ParamType }

export interface EndpointDef {
  readonly method: 'GET' | 'POST' | 'PUT';
  /** Path under base_url (or under the upload server for family `upload`). */
  readonly path: string;
  readonly credential: Credential;
  readonly params: Readonly<Record<string, ParamDef>>;
  /** Groups of which exactly one must be given (the spec's "one-of"). */
  readonly oneOf?: readonly (readonly string[])[];
  /** Groups of which at most one may be given, none required (the spec's "pass one of", optional). */
  readonly atMostOne?: readonly (readonly string[])[];
  /** The spec gives no required/optional marking; ours is a documented decision. */
  readonly unmarked?: boolean;
  /** Extra parameters with this prefix are passed through (partner `__setting_`). */
  readonly extraPrefix?: string;
  /** Never retried automatically (changes state). Reads are retried; writes are not. */
  readonly idempotent: boolean;
  /**
   * Hands out a credential (an access token, a login link). The official clients call such an endpoint
   * right after a read with the very same values (so the same signature): the service's replay guard
   * lets that through from the address that made the first call only (docs/service.md).
   */
  readonly issuesCredential?: boolean;
  /** Phantom: the result type. */
  readonly result: unknown;
}

const S = { required: true, type: 'string' } as const;
const s = { required: false, type: 'string' } as const;
const I = { required: true, type: 'int' } as const;
const i = { required: false, type: 'int' } as const;
const J = { required: true, type: 'json' } as const;
const j = { required: false, type: 'json' } as const;
const OP = { op_id: s, op_name: s } as const;
const res = <T>(): T => undefined as unknown as T;

const FILE = '/m-open/1/file/';
const FILE2 = '/m-open/2/file/';
const ORG = '/m-open/1/org/';
const ENT = '/m-open/1/ent/';
const PARTNER = '/m-api/1/thirdparty/';

export const ENDPOINTS = {
  file: {
    ls: { method: 'POST', path: FILE + 'ls', credential: 'library', idempotent: true, params: { fullpath: s, tag: s, start: i, size: i, hashs: s }, result: res<R.FileList>() },
    updates: { method: 'POST', path: FILE + 'updates', credential: 'library', idempotent: true, params: { mode: s, fetch_dateline: I, dir: i }, result: res<R.Updates>() },
    updates_count: { method: 'POST', path: FILE + 'updates_count', credential: 'library', idempotent: true, params: { begin_dateline: I, end_dateline: I, showdel: i }, result: res<{ count: number }>() },
    download_url: { method: 'POST', path: FILE + 'download_url', credential: 'library', idempotent: true, params: { fullpath: s, hash: s, filehash: s, open: i, filename: s, net: s, ...OP }, oneOf: [['fullpath', 'hash']], result: res<{ urls: string[] }>() },
    preview_url: { method: 'POST', path: FILE + 'preview_url', credential: 'library', idempotent: true, params: { fullpath: s, hash: s, watermark: i, wm_content: s, member_name: s, thumbnail: i, annotation: s, annotation_mode: s, out_id: s, account: s, ...OP }, oneOf: [['fullpath', 'hash']], result: res<R.PreviewUrl>() },
    preview_download_url: { method: 'POST', path: FILE + 'preview_download_url', credential: 'library', idempotent: true, params: { fullpath: s, hash: s, watermark: i, wm_content: s }, oneOf: [['fullpath', 'hash']], result: res<{ url: string; path: string; query: Record<string, string>; export_msg: { filename: string; wm: string } }>() },
    cedit_url: { method: 'POST', path: FILE + 'cedit_url', credential: 'library', idempotent: true, params: { fullpath: s, hash: s, readonly: i, timeout: i, op_id: s, out_id: s, account: s }, oneOf: [['fullpath', 'hash'], ['op_id', 'out_id', 'account']], result: res<{ url: string }>() },
    info: { method: 'POST', path: FILE + 'info', credential: 'library', idempotent: true, params: { fullpath: s, hash: s, net: s, attribute: i, hid: s, nop: i, ignores: s }, oneOf: [['fullpath', 'hash']], result: res<R.FileInfo>() },
    search: { method: 'POST', path: FILE + 'search', credential: 'library', idempotent: true, params: { keywords: S, path: s, scope: j, start: i, size: i }, result: res<R.FileList>() },
    create_folder: { method: 'POST', path: FILE + 'create_folder', credential: 'library', idempotent: false, params: { fullpath: S, ...OP }, result: res<R.PathResult>() },
    create_file: { method: 'POST', path: FILE + 'create_file', credential: 'library', idempotent: false, params: { fullpath: S, filehash: S, filesize: I, overwrite: i, ...OP }, result: res<R.CreateFileResult>() },
    upload_servers: { method: 'POST', path: FILE + 'upload_servers', credential: 'library', idempotent: false, params: { fullpath: S, timeout: I, rand: S }, result: res<R.UploadServers>() },
    copy: { method: 'POST', path: FILE + 'copy', credential: 'library', idempotent: false, params: { from_fullpath: S, fullpath: S, overwrite: i, ...OP }, result: res<R.CopyResult>() },
    mcopy: { method: 'POST', path: FILE + 'mcopy', credential: 'library', idempotent: false, params: { from_fullpaths: S, paths: S, copy_all: i, sp: s, ...OP }, result: res<R.CopyResult[]>() },
    move: { method: 'POST', path: FILE + 'move', credential: 'library', idempotent: false, params: { fullpath: S, dest_fullpath: S, ...OP }, result: res<R.Ok>() },
    del: { method: 'POST', path: FILE + 'del', credential: 'library', idempotent: false, params: { fullpath: s, fullpaths: s, tag: s, path: s, destroy: i, ...OP }, oneOf: [['fullpath', 'fullpaths', 'tag']], result: res<R.Ok>() },
    del_completely: { method: 'POST', path: FILE + 'del_completely', credential: 'library', idempotent: false, params: { fullpaths: s, tag: s, ...OP }, oneOf: [['fullpaths', 'tag']], result: res<R.Ok>() },
    recycle: { method: 'POST', path: FILE + 'recycle', credential: 'library', idempotent: true, params: { start: i, size: i, order: s, keyword: s }, result: res<R.RecycleList>() },
    recover: { method: 'POST', path: FILE + 'recover', credential: 'library', idempotent: false, params: { fullpaths: S, ...OP }, result: res<R.Ok>() },
    history: { method: 'POST', path: FILE + 'history', credential: 'library', idempotent: true, params: { fullpath: S, start: i, size: i }, result: res<R.HistoryList>() },
    link: { method: 'POST', path: FILE + 'link', credential: 'library', idempotent: false, params: { fullpath: S, deadline: i, auth: s, password: s, dir: i, startline: i, keep: i, access_limit: i, wm_content: s, ...OP }, result: res<R.LinkResult>() },
    link_close: { method: 'POST', path: FILE + 'link_close', credential: 'library', idempotent: false, params: { code: s, fullpath: s, ...OP }, oneOf: [['code', 'fullpath']], result: res<R.Ok>() },
    links: { method: 'POST', path: FILE + 'links', credential: 'library', idempotent: true, params: { file: i }, result: res<R.LinkItem[]>() },
    lock: { method: 'POST', path: FILE + 'lock', credential: 'library', idempotent: false, params: { fullpath: S, lock: S, ...OP }, result: res<R.Ok>() },
    set_permission_inherit: { method: 'POST', path: FILE + 'set_permission_inherit', credential: 'library', idempotent: false, params: { fullpath: S, inherit: I }, result: res<R.Ok>() },
    get_all_permission: { method: 'POST', path: FILE + 'get_all_permission', credential: 'library', idempotent: true, params: { fullpath: S }, result: res<R.PermissionResult>() },
    file_permission: { method: 'POST', path: FILE + 'file_permission', credential: 'library', idempotent: false, params: { fullpath: S, permissions: J, is_group: i, is_out: i }, result: res<R.Ok>() },
    reset_permission: { method: 'POST', path: FILE + 'reset_permission', credential: 'library', idempotent: false, params: { fullpath: S, members: s, groups: s, clear: i }, result: res<R.Ok>() },
    get_permission: { method: 'POST', path: FILE + 'get_permission', credential: 'library', idempotent: true, params: { fullpath: S, member_id: s, out_id: s, account: s }, atMostOne: [['member_id', 'out_id', 'account']], result: res<string[] | Pick<R.PermissionResult, 'members'>>() },
    add_tag: { method: 'POST', path: FILE + 'add_tag', credential: 'library', idempotent: false, params: { fullpath: S, tag: S, ...OP }, result: res<R.Ok>() },
    del_tag: { method: 'POST', path: FILE + 'del_tag', credential: 'library', idempotent: false, params: { fullpath: S, tag: S, ...OP }, result: res<R.Ok>() },
    set_metadata: { method: 'POST', path: FILE + 'set_metadata', credential: 'library', idempotent: false, params: { fullpath: s, hash: s, key: S, metadata: J, display: s }, oneOf: [['fullpath', 'hash']], result: res<R.Ok>() },
    del_metadata: { method: 'POST', path: FILE + 'del_metadata', credential: 'library', idempotent: false, params: { fullpath: s, hash: s, key: S }, oneOf: [['fullpath', 'hash']], result: res<R.Ok>() },
    stat: { method: 'POST', path: FILE + 'stat', credential: 'library', idempotent: true, params: {}, result: res<R.LibraryStat>() },
    queue_status: { method: 'POST', path: FILE + 'queue_status', credential: 'library', idempotent: true, params: { queue_id: S }, result: res<R.QueueStatus>() },
  },
  file2: {
    set_permission: { method: 'POST', path: FILE2 + 'set_permission', credential: 'library', idempotent: false, unmarked: true, params: { fullpath: S, permissions: J }, result: res<R.Ok>() },
    set_permission_inherit: { method: 'POST', path: FILE2 + 'set_permission_inherit', credential: 'library', idempotent: false, unmarked: true, params: { fullpath: S, inherit: I, keep: i }, result: res<R.Ok>() },
    batch_set_permission: { method: 'POST', path: FILE2 + 'batch_set_permission', credential: 'library', idempotent: false, unmarked: true, params: { fullpaths: S, type: i, inherit: i, permissions: J }, result: res<R.Ok>() },
    del_permission: { method: 'POST', path: FILE2 + 'del_permission', credential: 'library', idempotent: false, unmarked: true, params: { fullpath: S, ids: J }, result: res<R.Ok>() },
    get_member_permission: { method: 'POST', path: FILE2 + 'get_member_permission', credential: 'library', idempotent: true, unmarked: true, params: { fullpath: S, member_id: s, out_id: s, account: s }, oneOf: [['member_id', 'out_id', 'account']], result: res<Record<string, number>>() },
    get_group_permission: { method: 'POST', path: FILE2 + 'get_group_permission', credential: 'library', idempotent: true, unmarked: true, params: { fullpath: S, group_id: s, group_out_id: s }, oneOf: [['group_id', 'group_out_id']], result: res<Record<string, number>>() },
  },
  user: {
    token: { method: 'POST', path: '/m-api/oauth2/token2', credential: 'application', idempotent: false, issuesCredential: true, unmarked: true, params: { grant_type: S, username: s, password: s, refresh_token: s }, result: res<R.TokenGrant>() },
    mount: { method: 'GET', path: '/m-api/1/account/mount', credential: 'token', idempotent: true, unmarked: true, params: {}, result: res<{ list: R.UserLibraryItem[] }>() },
    library_create: { method: 'POST', path: '/m-api/1/library/create', credential: 'token', idempotent: false, unmarked: true, params: { name: S, ent_id: i, capacity: i, storage_point: s }, result: res<{ org_id: number; mount_id: number; storage_point: string }>() },
    ls: { method: 'GET', path: '/m-api/1/file/ls', credential: 'token', idempotent: true, unmarked: true, params: { mount_id: I, fullpath: s, sort: i, dir: i, start: i, size: i, order: s }, atMostOne: [['fullpath', 'sort']], result: res<{ count: number; list: R.UserFileRecord[] }>() },
    open: { method: 'GET', path: '/m-api/2/file/open', credential: 'token', idempotent: true, unmarked: true, params: { mount_id: I, fullpath: s, hash: s }, oneOf: [['fullpath', 'hash']], result: res<{ hash: string; filehash: string; filesize: number; lock: number; uris: string[] }>() },
    preview_url: { method: 'GET', path: '/m-api/2/file/preview_url', credential: 'token', idempotent: true, unmarked: true, params: { mount_id: I, fullpath: s, hash: s, watermark: i }, oneOf: [['fullpath', 'hash']], result: res<{ url: string }>() },
    info: { method: 'GET', path: '/m-api/2/file/info', credential: 'token', idempotent: true, unmarked: true, params: { mount_id: I, fullpath: s, hash: s }, oneOf: [['fullpath', 'hash']], result: res<R.UserFileRecord>() },
    attribute: { method: 'GET', path: '/m-api/2/file/attribute', credential: 'token', idempotent: true, unmarked: true, params: { mount_id: I, fullpath: s, hash: s }, oneOf: [['fullpath', 'hash']], result: res<{ file_count: number; folder_count: number }>() },
    create_folder: { method: 'POST', path: '/m-api/2/file/create_folder', credential: 'token', idempotent: false, unmarked: true, params: { mount_id: I, fullpath: S, overwrite: i }, result: res<R.PathResult>() },
    create_file: { method: 'POST', path: '/m-api/2/file/create_file', credential: 'token', idempotent: false, unmarked: true, params: { mount_id: I, fullpath: S, filehash: S, filesize: I, overwrite: i }, result: res<R.CreateFileResult>() },
    upload_server: { method: 'GET', path: '/m-api/1/file/upload_server', credential: 'token', idempotent: true, unmarked: true, params: { mount_id: I, fullpath: s }, result: res<{ server: string }>() },
    copy: { method: 'POST', path: '/m-api/1/file/copy', credential: 'token', idempotent: false, unmarked: true, params: { mount_id: I, fullpath: s, fullpaths: s, target_mount_id: i, target_fullpath: S, overwrite: i, delete_from: i }, oneOf: [['fullpath', 'fullpaths']], result: res<R.Ok>() },
    move: { method: 'POST', path: '/m-api/1/file/move', credential: 'token', idempotent: false, unmarked: true, params: { mount_id: I, fullpath: s, fullpaths: s, target_fullpath: S }, oneOf: [['fullpath', 'fullpaths']], result: res<R.Ok>() },
    rename: { method: 'POST', path: '/m-api/1/file/rename', credential: 'token', idempotent: false, unmarked: true, params: { mount_id: I, fullpath: S, newname: S }, result: res<R.Ok>() },
    del: { method: 'POST', path: '/m-api/1/file/del', credential: 'token', idempotent: false, unmarked: true, params: { mount_id: I, fullpath: S }, result: res<R.Ok>() },
    favorites_add_file: { method: 'POST', path: '/m-api/1/favorites/add_file', credential: 'token', idempotent: false, unmarked: true, params: { mount_id: I, fullpath: S, fav_id: i }, result: res<R.Ok>() },
    favorites_del_file: { method: 'POST', path: '/m-api/1/favorites/del_file', credential: 'token', idempotent: false, unmarked: true, params: { mount_id: I, fullpath: S, fav_id: i }, result: res<R.Ok>() },
    favorites_get_files: { method: 'GET', path: '/m-api/1/favorites/get_files', credential: 'token', idempotent: true, unmarked: true, params: { fav_id: i, start: i, size: i }, result: res<{ list: R.UserFileRecord[] }>() },
    search: { method: 'GET', path: '/m-api/2/file/search', credential: 'token', idempotent: true, unmarked: true, params: { keyword: S, mount_id: i, fullpath: s, scope: j, ext: j, start: i, size: i }, result: res<{ count: number; list: R.UserFileRecord[] }>() },
  },
  org: {
    create: { method: 'POST', path: ORG + 'create', credential: 'enterprise', idempotent: false, params: { org_name: S, org_logo: s, org_capacity: i, storage_point_name: s, out_id: s }, result: res<{ org_id: number; mount_id: number }>() },
    set: { method: 'POST', path: ORG + 'set', credential: 'enterprise', idempotent: false, params: { org_id: s, mount_id: s, org_name: s, org_logo: s, org_capacity: s }, oneOf: [['org_id', 'mount_id']], result: res<R.Ok>() },
    info: { method: 'POST', path: ORG + 'info', credential: 'enterprise', idempotent: true, params: { org_id: s, mount_id: s, out_id: s }, oneOf: [['org_id', 'mount_id', 'out_id']], result: res<{ info: R.LibraryInfo }>() },
    search: { method: 'POST', path: ORG + 'search', credential: 'enterprise', idempotent: true, params: { name: s, prefix: s, size: i }, oneOf: [['name', 'prefix']], result: res<{ list: R.LibraryListItem[] }>() },
    info_by_member: { method: 'POST', path: ORG + 'info_by_member', credential: 'enterprise', idempotent: true, params: { member_id: s, out_id: s, account: s, email: s }, oneOf: [['member_id', 'out_id', 'account', 'email']], result: res<{ info: Partial<R.LibraryInfo> }>() },
    set_by_member: { method: 'POST', path: ORG + 'set_by_member', credential: 'enterprise', idempotent: false, params: { member_id: s, out_id: s, account: s, email: s, capacity: I }, oneOf: [['member_id', 'out_id', 'account', 'email']], result: res<R.Ok>() },
    ls: { method: 'POST', path: ORG + 'ls', credential: 'enterprise', idempotent: true, params: { type: i, member_id: i }, result: res<{ list: R.LibraryListItem[] }>() },
    bind: { method: 'POST', path: ORG + 'bind', credential: 'enterprise', idempotent: false, params: { org_id: s, mount_id: s, title: S }, oneOf: [['org_id', 'mount_id']], result: res<{ org_client_id: string; org_client_secret: string }>() },
    unbind: { method: 'POST', path: ORG + 'unbind', credential: 'enterprise', idempotent: false, params: { org_client_id: S }, result: res<R.Ok>() },
    get_members: { method: 'POST', path: ORG + 'get_members', credential: 'enterprise', idempotent: true, params: { org_id: I, start: i, size: i }, result: res<{ list: R.LibraryMember[]; count: number }>() },
    get_member: { method: 'POST', path: ORG + 'get_member', credential: 'enterprise', idempotent: true, params: { org_id: I, ids: S, type: S }, result: res<Record<string, R.LibraryMember>>() },
    set_owner: { method: 'POST', path: ORG + 'set_owner', credential: 'enterprise', idempotent: false, unmarked: true, params: { org_id: I, member_id: I, role_id: s }, result: res<R.Ok>() },
    add_member: { method: 'POST', path: ORG + 'add_member', credential: 'enterprise', idempotent: false, unmarked: true, params: { org_id: I, member_ids: S, role_id: I }, result: res<R.Ok>() },
    set_member_role: { method: 'POST', path: ORG + 'set_member_role', credential: 'enterprise', idempotent: false, unmarked: true, params: { org_id: I, member_ids: S, role_id: I }, result: res<R.Ok>() },
    del_member: { method: 'POST', path: ORG + 'del_member', credential: 'enterprise', idempotent: false, unmarked: true, params: { org_id: I, member_ids: S }, result: res<R.Ok>() },
    get_groups: { method: 'POST', path: ORG + 'get_groups', credential: 'enterprise', idempotent: true, unmarked: true, params: { org_id: I }, result: res<R.LibraryGroup[]>() },
    add_group: { method: 'POST', path: ORG + 'add_group', credential: 'enterprise', idempotent: false, unmarked: true, params: { org_id: I, group_id: I, role_id: I }, result: res<R.Ok>() },
    del_group: { method: 'POST', path: ORG + 'del_group', credential: 'enterprise', idempotent: false, unmarked: true, params: { org_id: I, group_id: I }, result: res<R.Ok>() },
    set_group_role: { method: 'POST', path: ORG + 'set_group_role', credential: 'enterprise', idempotent: false, unmarked: true, params: { org_id: I, group_id: I, role_id: I }, result: res<R.Ok>() },
    destroy: { method: 'POST', path: ORG + 'destroy', credential: 'enterprise', idempotent: false, params: { org_id: s, org_client_id: s }, oneOf: [['org_id', 'org_client_id']], result: res<R.Ok>() },
    log: { method: 'POST', path: ORG + 'log', credential: 'enterprise', idempotent: true, params: { org_id: s, mount_id: s, act: s, orderby: s, start_dateline: i, end_dateline: i, start: i, size: i }, atMostOne: [['org_id', 'mount_id']], result: res<{ total: number; list: R.OrgLogItem[] }>() },
  },
  ent: {
    add_sync_member: { method: 'POST', path: ENT + 'add_sync_member', credential: 'enterprise', idempotent: false, unmarked: true, params: { out_id: S, member_name: s, account: s, member_email: s, member_phone: s, member_title: s, password: s, state: i, expire: i, group_out_ids: s, leader_out_id: s, leader_account: s }, atMostOne: [['leader_out_id', 'leader_account']], result: res<R.MemberState>() },
    del_sync_member: { method: 'POST', path: ENT + 'del_sync_member', credential: 'enterprise', idempotent: false, unmarked: true, params: { members: S }, result: res<R.Ok>() },
    add_sync_group: { method: 'POST', path: ENT + 'add_sync_group', credential: 'enterprise', idempotent: false, unmarked: true, params: { out_id: S, name: s, parent_out_id: s, orderby: i }, result: res<R.Ok>() },
    del_sync_group: { method: 'POST', path: ENT + 'del_sync_group', credential: 'enterprise', idempotent: false, unmarked: true, params: { groups: S }, result: res<R.Ok>() },
    add_sync_group_member: { method: 'POST', path: ENT + 'add_sync_group_member', credential: 'enterprise', idempotent: false, unmarked: true, params: { group_out_id: s, members: S }, result: res<R.Ok>() },
    del_sync_group_member: { method: 'POST', path: ENT + 'del_sync_group_member', credential: 'enterprise', idempotent: false, unmarked: true, params: { group_out_id: s, members: S }, result: res<R.Ok>() },
    del_sync_member_group: { method: 'POST', path: ENT + 'del_sync_member_group', credential: 'enterprise', idempotent: false, unmarked: true, params: { members: S }, result: res<R.Ok>() },
    get_member_by_out_id: { method: 'POST', path: ENT + 'get_member_by_out_id', credential: 'enterprise', idempotent: true, unmarked: true, params: { out_ids: s, user_ids: s }, oneOf: [['out_ids', 'user_ids']], result: res<Record<string, Omit<R.EntMember, 'out_id' | 'groups' | 'orgs'>>>() },
    get_group_by_out_id: { method: 'POST', path: ENT + 'get_group_by_out_id', credential: 'enterprise', idempotent: true, unmarked: true, params: { out_ids: S }, result: res<Record<string, { group_id: number; name: string; out_id: string; parent_id: number }>>() },
    add_sync_admin: { method: 'POST', path: ENT + 'add_sync_admin', credential: 'enterprise', idempotent: false, unmarked: true, params: { out_id: S, member_email: s, type: i }, result: res<R.Ok>() },
    add_member: { method: 'POST', path: ENT + 'add_member', credential: 'enterprise', idempotent: false, unmarked: true, params: { account: S, password: s, member_name: s, member_phone: s, member_title: s, state: i, group_path: s, create_personal_org: i }, result: res<R.MemberState>() },
    set_member: { method: 'POST', path: ENT + 'set_member', credential: 'enterprise', idempotent: false, unmarked: true, params: { account: S, member_name: s, member_phone: s, member_title: s, password: s, state: i }, result: res<R.MemberState>() },
    del_member: { method: 'POST', path: ENT + 'del_member', credential: 'enterprise', idempotent: false, unmarked: true, params: { members: S }, result: res<R.Ok>() },
    add_group: { method: 'POST', path: ENT + 'add_group', credential: 'enterprise', idempotent: false, unmarked: true, params: { group_name: S, parent_group_path: s, orderby: i, state: i }, result: res<{ group_id: number }>() },
    set_group: { method: 'POST', path: ENT + 'set_group', credential: 'enterprise', idempotent: false, unmarked: true, params: { group_path: S, group_name: s, parent_group_path: s, orderby: i, state: i }, result: res<R.Ok>() },
    del_group: { method: 'POST', path: ENT + 'del_group', credential: 'enterprise', idempotent: false, unmarked: true, params: { groups: S }, result: res<R.Ok>() },
    add_group_member: { method: 'POST', path: ENT + 'add_group_member', credential: 'enterprise', idempotent: false, unmarked: true, params: { group_path: s, members: S }, result: res<R.Ok>() },
    del_group_member: { method: 'POST', path: ENT + 'del_group_member', credential: 'enterprise', idempotent: false, unmarked: true, params: { group_path: s, members: S }, result: res<R.Ok>() },
    del_member_group: { method: 'POST', path: ENT + 'del_member_group', credential: 'enterprise', idempotent: false, unmarked: true, params: { members: S }, result: res<R.Ok>() },
    get_members: { method: 'POST', path: ENT + 'get_members', credential: 'enterprise', idempotent: true, unmarked: true, params: { start: i, size: i }, result: res<{ list: R.EntMember[]; count: number }>() },
    get_member: { method: 'POST', path: ENT + 'get_member', credential: 'enterprise', idempotent: true, unmarked: true, params: { member_id: s, out_id: s, account: s, email: s, show_groups: i, show_orgs: i }, oneOf: [['member_id', 'out_id', 'account', 'email']], result: res<R.EntMember>() },
    get_groups: { method: 'POST', path: ENT + 'get_groups', credential: 'enterprise', idempotent: true, unmarked: true, params: {}, result: res<R.EntGroup[]>() },
    get_group_members: { method: 'POST', path: ENT + 'get_group_members', credential: 'enterprise', idempotent: true, unmarked: true, params: { group_id: s, group_path: s, out_id: s, show_child: i, start: i, size: i }, oneOf: [['group_id', 'group_path', 'out_id']], result: res<{ list: R.EntMember[]; count: number }>() },
    get_roles: { method: 'POST', path: ENT + 'get_roles', credential: 'enterprise', idempotent: true, unmarked: true, params: {}, result: res<R.Role[]>() },
    log: { method: 'POST', path: ENT + 'log', credential: 'enterprise', idempotent: true, unmarked: true, params: { type: i, orderby: s, start_dateline: i, end_dateline: i, start: i, size: i }, result: res<{ total: number; list: R.EntLogItem[] }>() },
  },
  partner: {
    create_ent: { method: 'POST', path: PARTNER + 'create_ent', credential: 'partner', idempotent: false, extraPrefix: '__setting_', params: { out_id: S, ent_name: S, member_count: i, days: i, space: i, account: s }, result: res<{ id: number; end_dateline: number; account?: string; password?: string }>() },
    ent_info: { method: 'POST', path: PARTNER + 'ent_info', credential: 'partner', idempotent: true, params: { out_id: S }, result: res<R.PartnerEnt>() },
    ent_list: { method: 'POST', path: PARTNER + 'ent_list', credential: 'partner', idempotent: true, params: { begin_date: s, end_date: s, start: i, size: i, order: s }, result: res<{ list: R.PartnerEnt[] }>() },
    order: { method: 'POST', path: PARTNER + 'order', credential: 'partner', idempotent: false, params: { out_id: S, type: S, days: i, member_count: i, space: i, month: i }, result: res<R.Ok>() },
    get_client_id: { method: 'POST', path: PARTNER + 'get_client_id', credential: 'partner', idempotent: true, params: { out_id: S, title: S }, result: res<{ client_id: string; client_secret: string }>() },
    ent_sso_url: { method: 'POST', path: PARTNER + 'ent_sso_url', credential: 'partner', idempotent: false, issuesCredential: true, params: { out_id: S }, result: res<{ url: string }>() },
    ent_daily_stats: { method: 'POST', path: PARTNER + 'ent_daily_stats', credential: 'partner', idempotent: true, params: { out_id: S, type: S, start_date: S, end_date: s }, result: res<{ list: { date: string; download: number; link: number; preview: number }[] }>() },
    set_ent_setting: { method: 'POST', path: PARTNER + 'set_ent_setting', credential: 'partner', idempotent: false, params: { out_id: S, max_link_flow: I }, result: res<R.Ok>() },
  },
  upload: {
    upload_init: { method: 'POST', path: '/upload_init', credential: 'upload', idempotent: false, params: {}, result: res<{ session: string }>() },
    upload_part: { method: 'PUT', path: '/upload_part', credential: 'upload', idempotent: false, params: {}, result: res<R.Ok>() },
    upload_req: { method: 'POST', path: '/upload_req', credential: 'upload', idempotent: true, params: {}, result: res<number>() },
    upload_finish: { method: 'POST', path: '/upload_finish', credential: 'upload', idempotent: false, params: {}, result: res<R.Ok>() },
    upload_abort: { method: 'POST', path: '/upload_abort', credential: 'upload', idempotent: false, params: {}, result: res<R.Ok>() },
    web_upload: { method: 'POST', path: '/2/web_upload', credential: 'upload-key', idempotent: false, params: { path: s, name: S, overwrite: i, key: S, ...OP }, result: res<R.WebUploadResult>() },
    user_web_upload: { method: 'POST', path: '/2/web_upload', credential: 'upload-key', idempotent: false, params: { mount_id: I, path: s, name: S, overwrite: i }, result: res<R.WebUploadResult>() },
  },
} as const satisfies Record<Family, Record<string, EndpointDef>>;

export type Endpoints = typeof ENDPOINTS;
export type EndpointName<F extends Family> = keyof Endpoints[F] & string;

type TypeOf<P> = P extends { type: 'int' } ? number : P extends { type: 'json' } ? unknown : string;
type ReqKeys<D> = { [K in keyof D]: D[K] extends { required: true } ? K : never }[keyof D];
type OptKeys<D> = { [K in keyof D]: D[K] extends { required: true } ? never : K }[keyof D];
export type ParamsOf<E extends { params: object }> = { [K in ReqKeys<E['params']>]: TypeOf<E['params'][K]> } & {
  [K in OptKeys<E['params']>]?: TypeOf<E['params'][K]>;
};
export type ResultOf<E extends { result: unknown }> = E['result'];

export interface EndpointRef { family: Family; name: string; def: EndpointDef }

/** Every endpoint as a flat list. */
export function allEndpoints(): EndpointRef[] {
  const out: EndpointRef[] = [];
  for (const [family, eps] of Object.entries(ENDPOINTS) as [Family, Record<string, EndpointDef>][]) {
    for (const [name, def] of Object.entries(eps)) out.push({ family, name, def });
  }
  return out;
}

export function findEndpoint(family: string, name: string): EndpointRef | undefined {
  const eps = (ENDPOINTS as Record<string, Record<string, EndpointDef>>)[family];
  const def = eps?.[name];
  return def ? { family: family as Family, name, def } : undefined;
}

/** Parameters every endpoint of a credential carries besides its own (added by the client). */
export const COMMON_PARAMS: Record<Credential, readonly string[]> = {
  library: ['org_client_id', 'dateline', 'sign'],
  enterprise: ['client_id', 'dateline', 'sign'],
  partner: ['client_id', 'dateline', 'sign'],
  token: ['token', 'dateline', 'sign'],
  application: ['client_id', 'dateline', 'sign'],
  upload: [],
  'upload-key': ['org_client_id', 'token', 'filefield'],
};

export class ParamError extends Error {
  constructor(readonly param: string, message: string) {
    super(message);
    this.name = 'ParamError';
  }
}

/**
 * Validates a parameter object against an endpoint definition: required present, types, one-of groups,
 * no unknown names. Throws ParamError naming the parameter. Used by the client before sending, by the
 * control socket, and by the service on receipt.
 */
export function validateParams(def: EndpointDef, params: Record<string, unknown>, opts: { allowUnknown?: boolean } = {}): void {
  const given = (k: string) => params[k] !== undefined && params[k] !== null;
  for (const [name, p] of Object.entries(def.params)) {
    const v = params[name];
    if (!given(name)) {
      if (p.required) throw new ParamError(name, `missing required parameter '${name}'`);
      continue;
    }
    if (p.type === 'int') {
      const text = typeof v === 'number' ? String(v) : typeof v === 'string' ? v : '';
      if (!/^-?\d+$/.test(text.trim())) throw new ParamError(name, `parameter '${name}' expected an integer, got ${JSON.stringify(v)}`);
    } else if (p.type === 'string' && typeof v !== 'string' && typeof v !== 'number') {
      throw new ParamError(name, `parameter '${name}' expected a string, got ${typeof v}`);
    }
  }
  for (const group of def.oneOf ?? []) {
    const n = group.filter(given).length;
    if (n !== 1) throw new ParamError(group[0]!, `exactly one of ${group.map((g) => `'${g}'`).join(', ')} is required, got ${n}`);
  }
  for (const group of def.atMostOne ?? []) {
    const n = group.filter(given).length;
    if (n > 1) throw new ParamError(group[1]!, `at most one of ${group.map((g) => `'${g}'`).join(', ')} may be given, got ${n}`);
  }
  if (!opts.allowUnknown) {
    for (const k of Object.keys(params)) {
      if (!(k in def.params) && !(def.extraPrefix && k.startsWith(def.extraPrefix)) && given(k)) {
        throw new ParamError(k, `unknown parameter '${k}'`);
      }
    }
  }
}
