/**
 * `cloudlib ctl`: talks to a running gateway's control socket. Everyday verbs for people, `call` for
 * every method by name, `--json` for scripts. Exit codes: 0 done, 1 the service or gateway refused,
 * 2 bad usage or parameters, 3 no gateway answering.
 */
import { watchLine } from './watch-line.js';
import { resolve } from 'node:path';
import { ControlClient, ControlCallError } from '../control/client.js';
import { RpcErrorCode } from '../control/protocol.js';
import type { MethodInfo } from '../control/methods.js';
import { methodCatalog } from '../control/catalog.js';
import type { Subcommand } from './subcommand.js';
import { defaultControlSocket } from '../gateway/data-folder.js';
import { formatBytes, renderHistory, renderHuman, renderLibraries, renderListing, renderPermissions, renderStatus, twoColumns, wrap } from './ctl-output.js';

export { formatBytes, renderHuman };

export const EXIT = { ok: 0, refused: 1, usage: 2, unreachable: 3 } as const;

class UsageError extends Error {}

/** `--socket`, else $CLOUDLIB_SOCKET, else the socket of `--data`, $CLOUDLIB_HOME or the user's data folder. */
export function defaultSocketPath(env = process.env, data?: string): string {
  return defaultControlSocket(env, data);
}

/** `7d`, `12h`, `30m`, `90s`, or a unix timestamp → unix seconds. */
export function parseExpiry(text: string, nowS = Math.floor(Date.now() / 1000)): number {
  const m = /^(\d+)\s*([smhdw])$/.exec(text.trim());
  if (m) return nowS + Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400, w: 604800 }[m[2] as 's' | 'm' | 'h' | 'd' | 'w'];
  if (/^\d{9,}$/.test(text.trim())) return Number(text.trim());
  throw new UsageError(`--expires: expected a duration like 7d, 12h, 30m or a unix time, got '${text}'`);
}

/** `key=value` words → params; a value that is valid JSON object/array text is kept as text (the table says json). */
export function parseKeyValues(words: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const w of words) {
    const eq = w.indexOf('=');
    if (eq <= 0) throw new UsageError(`expected key=value, got '${w}'`);
    out[w.slice(0, eq)] = w.slice(eq + 1);
  }
  return out;
}

export type VerbOptions = Record<string, string | boolean | string[]>;

/**
 * Splits verb arguments into positionals and `--flag value` / `--flag=value` / `--bool` options. With
 * `known`, an option not in it is refused as unknown before any value is taken; a `lists` option may
 * be given several times (its values in order).
 */
export function parseVerbArgs(args: string[], booleans: string[] = [], known?: Set<string>, lists: string[] = []): { pos: string[]; opts: VerbOptions } {
  const pos: string[] = [];
  const opts: VerbOptions = {};
  for (let k = 0; k < args.length; k++) {
    const a = args[k]!;
    if (a === '--') {
      pos.push(...args.slice(k + 1));
      break;
    }
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const name = a.slice(2, eq === -1 ? undefined : eq);
      if (known && !known.has(name)) throw new UsageError(`unknown option --${name}`);
      let value: string | boolean;
      if (eq !== -1) value = a.slice(eq + 1);
      else if (booleans.includes(name)) value = true;
      else {
        const v = args[++k];
        if (v === undefined) throw new UsageError(`--${name} needs a value`);
        value = v;
      }
      if (lists.includes(name) && typeof value === 'string') opts[name] = [...((opts[name] as string[] | undefined) ?? []), value];
      else opts[name] = value;
    } else pos.push(a);
  }
  return { pos, opts };
}

const ADVANCED_CODES = ['ls', 'cd', 'pv', 'dl', 'w', 'ul', 'mk', 'ren', 'rm', 'ln', 'rmk', 't', 'p', 'ss', 'sren', 'srm', 'mls', 'b', 'br', 'be', 'mln', 'h', 'hr', 'rmka', 'trm', 'ps'];

/** `--allow dl,pv --deny rm` → advanced permission object (1 granted, -1 denied). */
export function permissionObject(allow?: string, deny?: string): Record<string, number> {
  const perm: Record<string, number> = { role_id: 0 };
  for (const [list, value] of [[allow, 1], [deny, -1]] as const) {
    for (const code of (list ?? '').split(',').map((c) => c.trim()).filter(Boolean)) {
      if (!ADVANCED_CODES.includes(code)) throw new UsageError(`unknown permission code '${code}'; known: ${ADVANCED_CODES.join(',')}`);
      perm[code] = value;
    }
  }
  return perm;
}

interface Verb {
  usage: string;
  help: string;
  /** The methods the verb may call (its help lists their parameters). */
  calls: string[];
  booleans?: string[];
  /** Options that may be given several times. */
  lists?: string[];
  /** Builds the method call. */
  build(pos: string[], opts: VerbOptions): { method: string; params: Record<string, unknown> };
  /** A one-line confirmation for a person (default: the result rendered). */
  done?(result: unknown, call: { params: Record<string, unknown> }): string;
  /** The result for a person, when a table of its own reads better than the generic rendering. */
  render?(result: unknown): string;
  /** Further calls that make the result, for people and for --json alike (e.g. one call per library). */
  gather?(result: unknown, call: (method: string, params: Record<string, unknown>) => Promise<unknown>, params: Record<string, unknown>): Promise<unknown>;
  /** Further calls that complete the result for a person (e.g. each member's permissions). */
  follow?(result: unknown, call: (method: string, params: Record<string, unknown>) => Promise<unknown>, params: Record<string, unknown>): Promise<unknown>;
  /** A call that streams events (`watch`): each event's line for a person, printed as it comes (--json: the event). */
  event?(event: Record<string, unknown>): string;
}

function need(pos: string[], i: number, what: string): string {
  const v = pos[i];
  if (v === undefined) throw new UsageError(`missing ${what}`);
  return v;
}
const str = (v: string | boolean | string[] | undefined) => (typeof v === 'string' ? v : undefined);
/** A whole number option (`--size 10`), checked here so that nothing is sent with a bad one. */
function int(opts: VerbOptions, name: string): number | undefined {
  const v = opts[name];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (typeof v !== 'string' || !/^\d+$/.test(v) || !Number.isSafeInteger(n)) throw new UsageError(`--${name}: expected a whole number, got '${String(v)}'`);
  return n;
}
const field = (r: unknown, k: string) => String((r as Record<string, unknown> | null)?.[k] ?? '');
const said = (text: string) => () => text;
const p0 = (call: { params: Record<string, unknown> }, k = 'fullpath') => String(call.params[k]);

/** The everyday verbs: `<noun> <verb>` or a single word. */
export const VERBS: Record<string, Verb> = {
  status: { usage: 'status', help: 'libraries, feeds, caches and pending uploads of the gateway', calls: ['status'], build: () => ({ method: 'status', params: {} }), render: renderStatus },
  watch: {
    usage: 'watch [PATH]', help: 'print changes as they come (created, changed, deleted, moved, locked; by whom), under PATH', calls: ['watch'],
    build: (pos) => ({ method: 'watch', params: { path: pos[0] } }), event: (e) => watchLine(e), done: (r) => `watch ended after ${field(r, 'events')} changes`,
  },
  flush: { usage: 'flush [--timeout S]', help: 'wait until every pending upload is on the service', calls: ['flush'], build: (_p, o) => ({ method: 'flush', params: { timeout_s: int(o, 'timeout') } }), done: said('all uploads are on the service') },
  pin: { usage: 'pin PATH [--wait]', help: 'keep a file or folder on this machine: fetched now, kept current, readable without the service (refused when it does not fit in the cache); --wait returns once all of it is here', calls: ['pin'], booleans: ['wait'],
    build: (pos, o) => ({ method: 'pin', params: { path: need(pos, 0, 'PATH'), wait: o.wait ? 1 : undefined } }),
    done: (r) => `pinned ${field(r, 'path')}: ${field(r, 'files')} file(s), ${formatBytes(Number(field(r, 'bytes')))}` },
  unpin: { usage: 'unpin PATH', help: 'stop keeping a file or folder on this machine (inside a pinned folder: an exception to it)', calls: ['unpin'], build: (pos) => ({ method: 'unpin', params: { path: need(pos, 0, 'PATH') } }), done: (r) => `unpinned ${field(r, 'path')}` },
  evict: { usage: 'evict PATH', help: 'free up space: drop cached content under PATH that is neither pinned, nor open, nor waiting to upload', calls: ['evict'], build: (pos) => ({ method: 'evict', params: { path: need(pos, 0, 'PATH') } }),
    done: (r) => `freed ${formatBytes(Number(field(r, 'bytes')))} (${field(r, 'files')} file(s)) under ${field(r, 'path')}` },
  'cache drop': { usage: 'cache drop', help: 'drop the metadata and block caches', calls: ['cache.drop'], build: () => ({ method: 'cache.drop', params: {} }), done: said('caches dropped') },
  'library ls': { usage: 'library ls', help: 'libraries served by the gateway', calls: ['library.ls'], build: () => ({ method: 'library.ls', params: {} }), render: renderLibraries },
  'library add': { usage: 'library add (ORG_CLIENT_ID --secret-env VAR | --org NAME) [--name FOLDER]', help: 'serve one more library, now and after a restart: by its authorization (the secret from an environment variable of ctl) or by its name in the enterprise', calls: ['library.add'], build: (pos, o) => {
    const org = str(o.org);
    if (org !== undefined) {
      if (pos.length || o['secret-env'] !== undefined) throw new UsageError('give --org NAME, or ORG_CLIENT_ID with --secret-env VAR, not both');
      return { method: 'library.add', params: { org, name: str(o.name) } };
    }
    const env = str(o['secret-env']);
    if (!env || process.env[env] === undefined) throw new UsageError('--secret-env VAR is required with ORG_CLIENT_ID, and VAR must be set (secrets never go on the command line)');
    return { method: 'library.add', params: { org_client_id: need(pos, 0, 'ORG_CLIENT_ID (or --org NAME)'), org_client_secret: process.env[env], name: str(o.name) } };
  }, done: (r) => `serving library /${field(r, 'name')}` },
  'library remove': { usage: 'library remove NAME', help: 'stop serving a library', calls: ['library.remove'], build: (pos) => ({ method: 'library.remove', params: { name: need(pos, 0, 'NAME') } }), done: (r) => `no longer serving /${field(r, 'removed')}` },
  upload: { usage: 'upload LOCAL PATH [--include GLOB]... [--exclude GLOB]... [--dry-run] [--bwlimit RATE]', help: 'upload a local file, or a folder and everything in it, to a gateway path /<library>/<path>; a folder\'s files are filtered with rclone\'s glob rules (`*.txt`, `build/**`); local symbolic links are stored as NAME.rclonelink files, as the mount keeps them; --dry-run lists what would be uploaded; --bwlimit limits this copy as rclone\'s (10M, 512k)', calls: ['upload'],
    booleans: ['dry-run'], lists: ['include', 'exclude'],
    build: (pos, o) => ({ method: 'upload', params: { local: resolve(need(pos, 0, 'LOCAL')), path: need(pos, 1, 'PATH'), ...treeParams(o) } }),
    done: (r) => copyDone('upload', r, 'path') },
  download: { usage: 'download PATH LOCAL [--include GLOB]... [--exclude GLOB]... [--dry-run] [--bwlimit RATE]', help: 'download a file, or a folder and everything in it, to a local path (a folder\'s files go into LOCAL; NAME.rclonelink files become symbolic links); filters, --dry-run and --bwlimit as for upload', calls: ['download'],
    booleans: ['dry-run'], lists: ['include', 'exclude'],
    build: (pos, o) => ({ method: 'download', params: { path: need(pos, 0, 'PATH'), local: resolve(need(pos, 1, 'LOCAL')), ...treeParams(o) } }),
    done: (r) => copyDone('download', r, 'local') },
  cp: { usage: 'cp SRC DST [--overwrite]', help: 'copy a file or folder, within a library or across libraries (DST includes the name)', calls: ['copy'], booleans: ['overwrite'],
    build: (pos, o) => ({ method: 'copy', params: { from: need(pos, 0, 'SRC'), to: need(pos, 1, 'DST'), overwrite: o.overwrite ? 1 : undefined } }),
    done: (r) => `copied ${field(r, 'from')} to ${field(r, 'to')} (${field(r, 'files')} file(s), ${formatBytes(Number(field(r, 'size')))})` },
  'link create': { usage: 'link create PATH [--expires 7d] [--password P] [--auth preview|download|upload] [--limit N] [--dir]', help: 'create a share link', calls: ['file.link'], booleans: ['dir'], build: (pos, o) => ({ method: 'file.link', params: {
    fullpath: need(pos, 0, 'PATH'), deadline: o.expires ? parseExpiry(String(o.expires)) : undefined, password: str(o.password), auth: str(o.auth),
    access_limit: int(o, 'limit'), dir: o.dir ? 1 : undefined,
  } }), done: (r) => `${field(r, 'link')}  (code ${field(r, 'code')})` },
  'link ls': { usage: 'link ls [--library NAME]', help: 'list share links, of every library served unless --library names one', calls: ['file.links', 'library.ls'],
    build: (_p, o) => (str(o.library) ? { method: 'file.links', params: { library: str(o.library) } } : { method: 'library.ls', params: {} }),
    gather: async (result, call, params) => {
      if (params.library !== undefined) return result;
      const list: Record<string, unknown>[] = [];
      for (const l of result as { name: string }[]) {
        const links = (await call('file.links', { library: l.name })) as Record<string, unknown>[] | { list?: Record<string, unknown>[] };
        for (const link of Array.isArray(links) ? links : links.list ?? []) list.push({ library: l.name, ...link });
      }
      return { list };
    } },
  'link close': { usage: 'link close CODE|PATH [--library NAME]', help: 'close a link by code, or all links of a path', calls: ['file.link_close'], build: (pos, o) => {
    const x = need(pos, 0, 'CODE or PATH');
    return { method: 'file.link_close', params: x.startsWith('/') ? { fullpath: x } : { code: x, library: str(o.library) } };
  }, done: said('link closed') },
  'perm set': { usage: 'perm set PATH (--member ACCOUNT | --dept ID) [--allow codes] [--deny codes]', help: 'set advanced permissions on a folder', calls: ['file2.set_permission'], build: (pos, o) => {
    const who = o.member ? { accounts: [String(o.member)] } : o.dept ? { group_ids: [int(o, 'dept')] } : undefined;
    if (!who) throw new UsageError('--member ACCOUNT or --dept ID is required');
    return { method: 'file2.set_permission', params: { fullpath: need(pos, 0, 'PATH'), permissions: JSON.stringify({ ...who, permission: permissionObject(str(o.allow), str(o.deny)) }) } };
  }, done: (_r, c) => `permissions set on ${p0(c)}` },
  'perm show': { usage: 'perm show PATH [--member ACCOUNT]', help: 'show the permissions set on a folder (simple and advanced, by member and department), or one member\'s', calls: ['file.get_all_permission', 'file2.get_member_permission', 'file2.get_group_permission'],
    build: (pos, o) => o.member
      ? { method: 'file2.get_member_permission', params: { fullpath: need(pos, 0, 'PATH'), account: String(o.member) } }
      : { method: 'file.get_all_permission', params: { fullpath: need(pos, 0, 'PATH') } },
    follow: async (result, call, params) => {
      if (params.account !== undefined) return result;
      const all = result as { members?: Record<string, string[]>; groups?: Record<string, string[]> };
      const rows: { who: string; simple: string[]; allowed: string[]; denied: string[] }[] = [];
      const split = (perm: unknown) => {
        const codes = Object.entries((perm ?? {}) as Record<string, unknown>).filter(([k]) => k !== 'role_id');
        const allowed = codes.filter(([, v]) => Number(v) === 1).map(([k]) => k);
        return { allowed: ADVANCED_CODES.every((c) => allowed.includes(c)) ? ['all'] : allowed, denied: codes.filter(([, v]) => Number(v) === -1).map(([k]) => k) };
      };
      // Members by account where the gateway may list them (enterprise credentials), else by id.
      const accounts = new Map<string, string>();
      if (Object.keys(all.members ?? {}).length) {
        const listed = await call('ent.get_members', { size: 1000 }).catch(() => undefined) as { list?: { member_id: unknown; account: string }[] } | undefined;
        for (const m of listed?.list ?? []) accounts.set(String(m.member_id), m.account);
      }
      for (const [id, simple] of Object.entries(all.members ?? {})) {
        rows.push({ who: accounts.get(id) ?? `member ${id}`, simple, ...split(await call('file2.get_member_permission', { fullpath: params.fullpath, member_id: id })) });
      }
      for (const [id, simple] of Object.entries(all.groups ?? {})) {
        rows.push({ who: `department ${id}`, simple, ...split(await call('file2.get_group_permission', { fullpath: params.fullpath, group_id: id })) });
      }
      return rows;
    },
    render: (r) => (Array.isArray(r) ? renderPermissions(r) : renderHuman(r)) },
  lock: { usage: 'lock PATH', help: 'lock a file on the service', calls: ['file.lock'], build: (pos) => ({ method: 'file.lock', params: { fullpath: need(pos, 0, 'PATH'), lock: 'lock' } }), done: (_r, c) => `locked ${p0(c)}` },
  unlock: { usage: 'unlock PATH', help: 'unlock a file', calls: ['file.lock'], build: (pos) => ({ method: 'file.lock', params: { fullpath: need(pos, 0, 'PATH'), lock: 'unlock' } }), done: (_r, c) => `unlocked ${p0(c)}` },
  'tag add': { usage: 'tag add PATH TAG...', help: 'add tags', calls: ['file.add_tag'], build: (pos) => ({ method: 'file.add_tag', params: { fullpath: need(pos, 0, 'PATH'), tag: tags(pos) } }), done: (_r, c) => `tagged ${p0(c)}: ${p0(c, 'tag')}` },
  'tag rm': { usage: 'tag rm PATH TAG...', help: 'remove tags', calls: ['file.del_tag'], build: (pos) => ({ method: 'file.del_tag', params: { fullpath: need(pos, 0, 'PATH'), tag: tags(pos) } }), done: (_r, c) => `untagged ${p0(c)}: ${p0(c, 'tag')}` },
  ls: { usage: 'ls PATH', help: 'a folder as the gateway serves it, with each file\'s state (synced, pending, uploading, offline-only, conflict, locked-by NAME)', calls: ['ls'], build: (pos) => ({ method: 'ls', params: { path: need(pos, 0, 'PATH') } }), render: renderListing },
  history: { usage: 'history PATH [--size N]', help: 'versions and operations of a file', calls: ['file.history'], build: (pos, o) => ({ method: 'file.history', params: { fullpath: need(pos, 0, 'PATH'), size: int(o, 'size') ?? 100 } }), render: renderHistory },
  restore: { usage: 'restore PATH --version FILEHASH|HID', help: 'make an earlier version current again', calls: ['version.restore'], build: (pos, o) => {
    if (!str(o.version)) throw new UsageError('--version is required (a filehash or hid from `ctl history`, or 7 or more of its first characters)');
    return { method: 'version.restore', params: { path: need(pos, 0, 'PATH'), version: String(o.version) } };
  }, done: (r) => `restored ${field(r, 'path')} to ${field(r, 'filehash')}` },
  'trash ls': { usage: 'trash ls [--library NAME] [--keyword K]', help: 'list the recycle bin', calls: ['file.recycle'], build: (_p, o) => ({ method: 'file.recycle', params: { library: str(o.library), keyword: str(o.keyword), size: 1000 } }) },
  'trash restore': { usage: 'trash restore PATH...', help: 'restore deleted items to their paths', calls: ['file.recover'], build: (pos) => ({ method: 'file.recover', params: { fullpaths: need(pos, 0, 'PATH') && pos.join('|') } }), done: (_r, c) => `restored ${p0(c, 'fullpaths').split('|').join(', ')}` },
  'trash purge': { usage: 'trash purge PATH...', help: 'remove deleted items for good', calls: ['file.del_completely'], build: (pos) => ({ method: 'file.del_completely', params: { fullpaths: need(pos, 0, 'PATH') && pos.join('|') } }), done: (_r, c) => `purged ${p0(c, 'fullpaths').split('|').join(', ')}` },
  'member add': { usage: 'member add ACCOUNT [--name N] [--password-env VAR] [--dept PATH]', help: 'add an enterprise member', calls: ['ent.add_member'], build: (pos, o) => {
    const env = str(o['password-env']);
    if (env !== undefined && process.env[env] === undefined) throw new UsageError(`--password-env ${env}: the variable is not set`);
    return { method: 'ent.add_member', params: { account: need(pos, 0, 'ACCOUNT'), member_name: str(o.name), group_path: str(o.dept), password: env ? process.env[env] : undefined } };
  }, done: (r, c) => `added member ${p0(c, 'account')} (id ${field(r, 'member_id')}, state ${field(r, 'state')})` },
  'member ls': { usage: 'member ls [--start N] [--size N]', help: 'list enterprise members', calls: ['ent.get_members'], build: (_p, o) => ({ method: 'ent.get_members', params: { start: int(o, 'start'), size: int(o, 'size') ?? 100 } }) },
  'member disable': { usage: 'member disable ACCOUNT', help: 'disable a member', calls: ['ent.set_member'], build: (pos) => ({ method: 'ent.set_member', params: { account: need(pos, 0, 'ACCOUNT'), state: 0 } }), done: (r, c) => `member ${p0(c, 'account')}: state ${field(r, 'state')}` },
  'member enable': { usage: 'member enable ACCOUNT', help: 'enable a member', calls: ['ent.set_member'], build: (pos) => ({ method: 'ent.set_member', params: { account: need(pos, 0, 'ACCOUNT'), state: 1 } }), done: (r, c) => `member ${p0(c, 'account')}: state ${field(r, 'state')}` },
  'dept ls': { usage: 'dept ls', help: 'list departments', calls: ['ent.get_groups'], build: () => ({ method: 'ent.get_groups', params: {} }) },
  'dept add': { usage: 'dept add NAME [--parent PATH]', help: 'add a department', calls: ['ent.add_group'], build: (pos, o) => ({ method: 'ent.add_group', params: { group_name: need(pos, 0, 'NAME'), parent_group_path: str(o.parent) } }),
    done: (r, c) => `added department ${[c.params.parent_group_path, c.params.group_name].filter(Boolean).join('/')} (id ${field(r, 'group_id')})` },
  'dept rm': { usage: 'dept rm PATH...', help: 'remove departments', calls: ['ent.del_group'], build: (pos) => ({ method: 'ent.del_group', params: { groups: need(pos, 0, 'PATH') && pos.join(',') } }), done: (_r, c) => `removed department(s) ${p0(c, 'groups')}` },
  'dept members': { usage: 'dept members PATH', help: 'list a department\'s members', calls: ['ent.get_group_members'], build: (pos) => ({ method: 'ent.get_group_members', params: { group_path: need(pos, 0, 'PATH') } }) },
  'org ls': { usage: 'org ls', help: 'list the enterprise\'s libraries', calls: ['org.ls'], build: () => ({ method: 'org.ls', params: {} }) },
  'org create': { usage: 'org create NAME [--capacity BYTES]', help: 'create a library', calls: ['org.create'], build: (pos, o) => ({ method: 'org.create', params: { org_name: need(pos, 0, 'NAME'), org_capacity: int(o, 'capacity') } }),
    done: (r, c) => `created library ${p0(c, 'org_name')} (org_id ${field(r, 'org_id')}, mount_id ${field(r, 'mount_id')})` },
  'org bind': { usage: 'org bind ORG_ID [--title T]', help: 'create (or return) a library authorization', calls: ['org.bind'], build: (pos, o) => ({ method: 'org.bind', params: { org_id: need(pos, 0, 'ORG_ID'), title: str(o.title) ?? 'cloudlib' } }) },
  'partner ent create': { usage: 'partner ent create OUT_ID NAME [--days N] [--space GB] [--members N] [--account A]', help: 'create an enterprise', calls: ['partner.create_ent'], build: (pos, o) => ({ method: 'partner.create_ent', params: {
    out_id: need(pos, 0, 'OUT_ID'), ent_name: need(pos, 1, 'NAME'), days: int(o, 'days'), space: int(o, 'space'), member_count: int(o, 'members'), account: str(o.account),
  } }) },
  'partner ent ls': { usage: 'partner ent ls', help: 'list enterprises', calls: ['partner.ent_list'], build: () => ({ method: 'partner.ent_list', params: { size: 1000 } }) },
  'partner ent info': { usage: 'partner ent info OUT_ID', help: 'one enterprise', calls: ['partner.ent_info'], build: (pos) => ({ method: 'partner.ent_info', params: { out_id: need(pos, 0, 'OUT_ID') } }) },
  'partner ent order': { usage: 'partner ent order OUT_ID TYPE [--days N] [--members N] [--space GB] [--month N]', help: 'trial.extend, subscribe, renew, upgrade, unsubscribe', calls: ['partner.order'], build: (pos, o) => ({ method: 'partner.order', params: {
    out_id: need(pos, 0, 'OUT_ID'), type: need(pos, 1, 'TYPE'), days: int(o, 'days'), member_count: int(o, 'members'), space: int(o, 'space'), month: int(o, 'month'),
  } }), done: (_r, c) => `order ${p0(c, 'type')} placed for ${p0(c, 'out_id')}` },
};

/** The include/exclude/dry-run options of a copy as method parameters. */
function treeParams(o: VerbOptions): Record<string, unknown> {
  const list = (v: VerbOptions[string]) => (Array.isArray(v) ? v : typeof v === 'string' ? [v] : undefined);
  return { include: list(o.include), exclude: list(o.exclude), dry_run: o['dry-run'] ? 1 : undefined, bwlimit: typeof o.bwlimit === 'string' ? o.bwlimit : undefined };
}

/** What an upload or a download did (or, with --dry-run, would do), for a person. */
function copyDone(verb: 'upload' | 'download', r: unknown, key: 'path' | 'local'): string {
  const res = r as { files?: number; size: number; links?: number; dry_run?: boolean; list?: Record<string, unknown>[]; skipped?: string[] } & Record<string, unknown>;
  const files = res.files ?? 1;
  const links = res.links ? ` (${res.links} as symbolic link${res.links === 1 ? '' : 's'})` : '';
  const amount = `${files} file${files === 1 ? '' : 's'}${links}, ${formatBytes(Number(res.size))}`;
  const skipped = res.skipped?.length ? [`skipped ${res.skipped.length} special file(s) or link(s) too long to store: ${res.skipped.slice(0, 5).join(', ')}${res.skipped.length > 5 ? ', …' : ''}`] : [];
  if (res.dry_run) {
    const lines = (res.list ?? []).map((f) => `  ${String(f[key])}  ${f.link ? 'symbolic link' : formatBytes(Number(f.size))}`);
    return [...lines, `would ${verb} ${amount} (dry run: nothing was copied)`, ...skipped].join('\n');
  }
  const past = verb === 'upload' ? 'uploaded' : 'downloaded';
  return [`${past} ${res.files === undefined ? String(res[key]) : `${amount} to ${String(res[key])}`}${res.files === undefined ? ` (${formatBytes(Number(res.size))})` : ''}`, ...skipped].join('\n');
}

function tags(pos: string[]): string {
  const t = pos.slice(1);
  if (!t.length) throw new UsageError('missing TAG');
  return t.join(';');
}

function findVerb(words: string[]): { key: string; verb: Verb; rest: string[] } | undefined {
  for (const n of [3, 2, 1]) {
    const key = words.slice(0, n).join(' ');
    if (VERBS[key]) return { key, verb: VERBS[key], rest: words.slice(n) };
  }
  return undefined;
}

// ---- output -------------------------------------------------------------------------------------------

/**
 * Speed and time left of a call's progress, from the notifications of the last few seconds of its
 * current phase (a new `what` starts over).
 */
export class ProgressMeter {
  private samples: { at: number; done: number }[] = [];
  private what: unknown;

  constructor(private readonly windowMs = 5000, private readonly now: () => number = Date.now) {}

  sample(p: Record<string, unknown>): { perSecond: number; etaMs?: number } | undefined {
    if (p.what !== this.what) { this.what = p.what; this.samples = []; }
    const at = this.now();
    const done = Number(p.done ?? 0);
    this.samples.push({ at, done });
    while (this.samples.length > 2 && at - this.samples[0]!.at > this.windowMs) this.samples.shift();
    const first = this.samples[0]!;
    if (at - first.at < 500) return undefined;
    const perSecond = ((done - first.done) * 1000) / (at - first.at);
    const total = Number(p.total ?? 0);
    return { perSecond, ...(total > 0 && perSecond > 0 ? { etaMs: ((total - done) / perSecond) * 1000 } : {}) };
  }
}

/** `0:42`, `12:05`, `1:02:03`. */
export function formatEta(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const hms = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  return hms[0] ? `${hms[0]}:${String(hms[1]).padStart(2, '0')}:${String(hms[2]).padStart(2, '0')}` : `${hms[1]}:${String(hms[2]).padStart(2, '0')}`;
}

/**
 * One line of progress within 80 columns: a bar when the total is known, a count otherwise; files done
 * of the total for folder copies; speed and time left once measured.
 */
export function progressLine(p: Record<string, unknown>, rate?: { perSecond: number; etaMs?: number }): string {
  const done = Number(p.done ?? 0);
  const total = Number(p.total ?? 0);
  const amount = (n: number) => (p.unit === 'files' ? String(n) : formatBytes(n));
  const what = p.what ? ` ${String(p.what)}` : '';
  const unit = p.unit === 'files' ? ' files' : '';
  const files = p.files as { done: number; total: number } | undefined;
  const extra = [
    ...(files ? [`${files.done}/${files.total} files`] : []),
    ...(rate ? [`${p.unit === 'files' ? `${rate.perSecond.toFixed(1)} files` : formatBytes(Math.round(rate.perSecond))}/s`] : []),
    ...(rate?.etaMs !== undefined ? [`ETA ${formatEta(rate.etaMs)}`] : []),
  ];
  const tail = extra.length ? `, ${extra.join(', ')}` : '';
  if (!(total > 0)) return `${amount(done)}${unit}${what}${tail}`;
  const frac = Math.min(1, done / total);
  const pct = `${(frac * 100).toFixed(0)}%`;
  // With files, speed and time left there is no room for a bar in 80 columns (rclone's -P has none either).
  if (extra.length) return `${p.what ? `${String(p.what)} ` : ''}${amount(done)}/${amount(total)}${unit} (${pct})${tail}`;
  const width = 30;
  const bar = '#'.repeat(Math.round(frac * width)).padEnd(width, '.');
  return `[${bar}] ${pct.padStart(4)} ${amount(done)}/${amount(total)}${unit}${what}`;
}

// ---- help and completion ------------------------------------------------------------------------------

export function verbsHelp(): string {
  return twoColumns(Object.values(VERBS).map((v) => [v.usage, v.help]));
}

/** `Usage: …` in 80 columns, continued lines indented under the command. */
function usageLines(command: string): string[] {
  return wrap(command, 73).map((l, i) => (i === 0 ? `Usage: ${l}` : `         ${l}`));
}

export function methodHelp(m: MethodInfo): string {
  const lines = [...wrap(`${m.name} — ${m.summary}`, 80), '', ...usageLines(`cloudlib ctl call ${m.name}${m.params.map((p) => (p.required ? ` ${p.name}=…` : '')).join('')} [key=value …]`), '', 'Parameters:'];
  const w = Math.max(0, ...m.params.map((p) => p.name.length));
  for (const p of m.params) {
    const text = wrap(`${p.type}${p.required ? ', required' : ''}${p.note ? ` — ${p.note}` : ''}`, Math.max(30, 76 - w));
    lines.push(`  ${p.name.padEnd(w)}  ${text[0]}`, ...text.slice(1).map((l) => `  ${' '.repeat(w)}  ${l}`));
  }
  if (!m.params.length) lines.push('  (none)');
  for (const g of m.oneOf ?? []) lines.push(`  exactly one of: ${g.join(', ')}`);
  if (m.paramsNote) lines.push('', ...wrap(m.paramsNote, 78));
  return lines.join('\n');
}

/** Help of a verb: its usage, then the parameters of the methods it calls (from the method table). */
export function verbHelp(verb: Verb, catalog = methodCatalog()): string {
  const lines = [...usageLines(`cloudlib ctl ${verb.usage}`), '', ...wrap(`${verb.help[0]!.toUpperCase()}${verb.help.slice(1)}.`, 80),
    ...wrap(`Calls ${verb.calls.join(', ')}${/\bPATH\b/.test(verb.usage) ? '; PATH is a gateway path /<library>/<path>' : ''}.`, 80)];
  for (const name of verb.calls) {
    const m = catalog.find((x) => x.name === name);
    if (m) lines.push('', methodHelp(m));
  }
  return lines.join('\n');
}

/** `ctl help WORDS…` and `ctl WORDS… --help`: a verb, a noun's verbs, or a method (`call METHOD`: the method). */
export function helpFor(words: string[], usage: string, catalog = methodCatalog()): string {
  const call = words[0] === 'call';
  const w = call ? words.slice(1) : words;
  if (w.length === 0) return usage;
  const found = call ? undefined : findVerb(w);
  if (found) return verbHelp(found.verb, catalog);
  const method = catalog.find((m) => m.name === w[0]);
  if (method) return methodHelp(method);
  const prefix = w.join(' ') + ' ';
  const under = Object.entries(VERBS).filter(([k]) => k.startsWith(prefix));
  if (under.length) {
    return twoColumns(under.map(([, v]) => [v.usage, v.help]));
  }
  throw new UsageError(`no verb or method '${w.join(' ')}' (see \`cloudlib ctl methods\`)`);
}

const GLOBAL_WORDS = ['call', 'methods', 'help', 'completion'];

/** A bash completion script (zsh: through bashcompinit), generated from the verb and method tables. */
export function completionScript(shell: 'bash' | 'zsh', catalog = methodCatalog()): string {
  const q = (words: Iterable<string>) => [...new Set(words)].join(' ');
  const keys = Object.keys(VERBS);
  // Words that may follow each partial verb ("" = the first word).
  const next = new Map<string, string[]>();
  for (const k of keys) {
    const parts = k.split(' ');
    for (let i = 0; i < parts.length; i++) {
      const at = parts.slice(0, i).join(' ');
      next.set(at, [...(next.get(at) ?? []), parts[i]!]);
    }
  }
  next.set('', [...next.get('')!, ...GLOBAL_WORDS]);
  const optionsOf = (v: Verb) => [...v.usage.matchAll(/--([a-z-]+)/g)].map((m) => `--${m[1]}`);
  const byLength = [...keys].sort((a, b) => b.length - a.length);
  return [
    `# cloudlib ctl completion for ${shell}: source <(cloudlib ctl completion ${shell})`,
    ...(shell === 'zsh' ? ['autoload -U +X bashcompinit && bashcompinit'] : []),
    '_cloudlib_ctl() {',
    '  local cur=${COMP_WORDS[COMP_CWORD]} i words=()',
    '  [ "${COMP_WORDS[1]}" = ctl ] || return 0',
    '  for ((i = 2; i < COMP_CWORD; i++)); do',
    '    case ${COMP_WORDS[i]} in --socket) ((i++)) ;; -*) ;; *) words+=("${COMP_WORDS[i]}") ;; esac',
    '  done',
    '  local key="${words[*]}"',
    '  if [[ $cur == -* ]]; then',
    '    local opts="--json --socket --help"',
    '    case "$key" in',
    ...byLength.filter((k) => optionsOf(VERBS[k]!).length).map((k) => `      "${k}"|"${k} "*) opts="$opts ${q(optionsOf(VERBS[k]!))}" ;;`),
    '    esac',
    '    COMPREPLY=($(compgen -W "$opts" -- "$cur")); return 0',
    '  fi',
    '  case "$key" in',
    ...[...next].map(([at, words]) => `    "${at}") COMPREPLY=($(compgen -W "${q(words)}" -- "$cur")) ;;`),
    `    call|help) COMPREPLY=($(compgen -W "${q(catalog.map((m) => m.name))}" -- "$cur")) ;;`,
    '    "call "*)',
    '      case "${words[1]}" in',
    ...catalog.filter((m) => m.params.length).map((m) => `        ${m.name}) COMPREPLY=($(compgen -W "${q(m.params.map((p) => `${p.name}=`))}" -- "$cur")) ;;`),
    '      esac',
    '      [[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null ;;',
    '  esac',
    '}',
    'complete -o default -F _cloudlib_ctl cloudlib',
  ].join('\n');
}

const USAGE = [
  'Usage: cloudlib ctl [--socket PATH | --data DIR] [--json] <verb> [args]',
  '       cloudlib ctl call METHOD [key=value ...]     any method by name',
  '       cloudlib ctl methods | help VERB|METHOD | completion bash|zsh',
  '',
  '`cloudlib ctl VERB --help`: one verb; `cloudlib ctl help METHOD`: one method.',
  '`--` ends the options: every word after it is an argument.',
  '',
  'Verbs:',
].join('\n');

export const ctlCommand: Subcommand = {
  summary: 'Talk to a running gateway through its control socket (the whole service API,\nand the gateway\'s own state).',
  get usage() {
    return `${USAGE}\n${verbsHelp()}\n\n${[
      'The socket: --socket PATH, else $CLOUDLIB_SOCKET, else control.sock of the data folder: --data DIR, else $CLOUDLIB_HOME, else ~/.local/share/cloudlib ($XDG_DATA_HOME/cloudlib), the default of `cloudlib up` from any folder.',
      'PATH arguments are gateway paths: /<library>/<path inside it>.',
      'Exit codes: 0 done, 1 the service or gateway refused, 2 bad usage or parameters (nothing was sent), 3 no gateway answering.',
    ].map((t) => wrap(t, 80).join('\n')).join('\n')}`;
  },
  options: { socket: { type: 'string' }, data: { type: 'string' }, json: { type: 'boolean' } },
  passThrough: true,
  async run(values, positionals) {
    const json = Boolean(values.json);
    const socket = String(values.socket ?? defaultSocketPath(process.env, values.data as string | undefined));
    const print = (text: string) => process.stdout.write(text + '\n');
    let verb: Verb | undefined;
    try {
      const end = positionals.indexOf('--');
      const flags = end === -1 ? positionals : positionals.slice(0, end);
      const wantsHelp = flags.some((w) => w === '--help' || w === '-h');
      const words = [...flags.filter((w) => w !== '--help' && w !== '-h'), ...(end === -1 ? [] : positionals.slice(end))];
      const [first, ...rest] = words;
      if (first === 'help' || wantsHelp) {
        print(helpFor(first === 'help' ? rest : words, this.usage));
        return EXIT.ok;
      }
      if (!first) throw new UsageError('missing verb');
      if (first.startsWith('-')) throw new UsageError(`unknown option ${first}`);
      if (first === 'completion') {
        const shell = rest[0] ?? 'bash';
        if (shell !== 'bash' && shell !== 'zsh') throw new UsageError(`completion: expected bash or zsh, got '${shell}'`);
        print(completionScript(shell));
        return EXIT.ok;
      }
      if (first === 'methods') {
        const methods = methodCatalog();
        print(json ? JSON.stringify(methods, null, 2) : twoColumns(methods.map((m) => [m.name, m.summary])));
        return EXIT.ok;
      }
      let method: string;
      let params: Record<string, unknown>;
      if (first === 'call') {
        method = rest[0] ?? '';
        if (!method) throw new UsageError('missing METHOD');
        params = parseKeyValues(rest.slice(1));
      } else {
        const found = findVerb(words);
        if (!found) throw new UsageError(`unknown verb '${words.slice(0, 2).join(' ')}'`);
        verb = found.verb;
        const known = new Set([...verb.usage.matchAll(/--([a-z-]+)/g)].map((m) => m[1]!));
        const { pos, opts } = parseVerbArgs(found.rest, verb.booleans, known, verb.lists);
        ({ method, params } = verb.build(pos, opts));
        for (const k of Object.keys(params)) if (params[k] === undefined) delete params[k];
      }
      const client = await connectOrExit(socket);
      const tty = process.stderr.isTTY === true && !json;
      const meter = new ProgressMeter();
      try {
        const eventLine = verb?.event;
        let result = await client.call(method, params, (p) => {
          if (tty) process.stderr.write(`\r${progressLine(p, meter.sample(p))}\x1b[K`);
        }, eventLine ? (e) => print(json ? JSON.stringify(e) : eventLine(e)) : undefined);
        if (tty) process.stderr.write('\r\x1b[K');
        if (verb?.gather) result = await verb.gather(result, (m, p) => client.call(m, p), params);
        if (!json && verb?.follow) result = await verb.follow(result, (m, p) => client.call(m, p), params);
        print(json ? JSON.stringify(result, null, 2) : verb?.done ? verb.done(result, { params }) : verb?.render ? verb.render(result) : renderHuman(result));
      } finally {
        client.close();
      }
      return EXIT.ok;
    } catch (err) {
      if (err instanceof UsageError) {
        process.stderr.write(`cloudlib ctl: ${err.message}\n${verb ? `usage: cloudlib ctl ${verb.usage}` : 'run `cloudlib ctl --help` for the verbs'}\n`);
        return EXIT.usage;
      }
      if (err instanceof Unreachable) {
        process.stderr.write(`cloudlib ctl: ${err.message}\n`);
        return EXIT.unreachable;
      }
      if (err instanceof ControlCallError) {
        process.stderr.write(`cloudlib ctl: ${err.message}\n`);
        if (json && err.data !== undefined) process.stderr.write(JSON.stringify(err.data) + '\n');
        return USAGE_CODES.has(err.code) ? EXIT.usage : EXIT.refused;
      }
      process.stderr.write(`cloudlib ctl: ${(err as Error).message}\n`);
      return EXIT.refused;
    }
  },
};

/** JSON-RPC errors that mean the request was wrong (nothing was done): exit 2. */
const USAGE_CODES = new Set<number>([RpcErrorCode.InvalidParams, RpcErrorCode.MethodNotFound, RpcErrorCode.InvalidRequest, RpcErrorCode.ParseError, RpcErrorCode.TooLarge]);

class Unreachable extends Error {}

async function connectOrExit(socket: string): Promise<ControlClient> {
  try {
    return await ControlClient.connect(socket);
  } catch (err) {
    throw new Unreachable((err as Error).message);
  }
}
