/**
 * `cloudlib ctl`: talks to a running gateway's control socket. Everyday verbs for people, `call` for
 * every method by name, `--json` for scripts. Exit codes: 0 done, 1 the service or gateway refused,
 * 2 bad usage or parameters, 3 no gateway answering.
 */
import { resolve } from 'node:path';
import { ControlClient, ControlCallError } from '../control/client.js';
import { RpcErrorCode } from '../control/protocol.js';
import type { MethodInfo } from '../control/methods.js';
import type { Subcommand } from './main.js';

export const EXIT = { ok: 0, refused: 1, usage: 2, unreachable: 3 } as const;

class UsageError extends Error {}

export function defaultSocketPath(env = process.env): string {
  if (env.CLOUDLIB_SOCKET) return env.CLOUDLIB_SOCKET;
  return resolve(env.CLOUDLIB_HOME ?? '.cloudlib', 'control.sock');
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

/** Splits verb arguments into positionals and `--flag value` / `--flag=value` / `--bool` options. */
export function parseVerbArgs(args: string[], booleans: string[] = []): { pos: string[]; opts: Record<string, string | boolean> } {
  const pos: string[] = [];
  const opts: Record<string, string | boolean> = {};
  for (let k = 0; k < args.length; k++) {
    const a = args[k]!;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const name = a.slice(2, eq === -1 ? undefined : eq);
      if (eq !== -1) opts[name] = a.slice(eq + 1);
      else if (booleans.includes(name)) opts[name] = true;
      else {
        const v = args[++k];
        if (v === undefined) throw new UsageError(`--${name} needs a value`);
        opts[name] = v;
      }
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
  booleans?: string[];
  /** Builds the method call, or runs several. */
  build(pos: string[], opts: Record<string, string | boolean>): { method: string; params: Record<string, unknown> };
}

function need(pos: string[], i: number, what: string): string {
  const v = pos[i];
  if (v === undefined) throw new UsageError(`missing ${what}`);
  return v;
}
const str = (v: string | boolean | undefined) => (typeof v === 'string' ? v : undefined);

/** The everyday verbs: `<noun> <verb>` or a single word. */
export const VERBS: Record<string, Verb> = {
  status: { usage: 'status', help: 'libraries, feeds, caches and pending uploads of the gateway', build: () => ({ method: 'status', params: {} }) },
  flush: { usage: 'flush', help: 'wait until every pending upload is on the service', build: () => ({ method: 'flush', params: {} }) },
  'cache drop': { usage: 'cache drop', help: 'drop the metadata and block caches', build: () => ({ method: 'cache.drop', params: {} }) },
  'library ls': { usage: 'library ls', help: 'libraries served by the gateway', build: () => ({ method: 'library.ls', params: {} }) },
  'library add': { usage: 'library add ORG_CLIENT_ID --secret-env VAR [--name NAME]', help: 'serve one more library (secret from an environment variable of ctl)', build: (pos, o) => {
    const env = str(o['secret-env']);
    if (!env || process.env[env] === undefined) throw new UsageError('--secret-env VAR is required and VAR must be set (secrets never go on the command line)');
    return { method: 'library.add', params: { org_client_id: need(pos, 0, 'ORG_CLIENT_ID'), org_client_secret: process.env[env], name: str(o.name) } };
  } },
  'library remove': { usage: 'library remove NAME', help: 'stop serving a library', build: (pos) => ({ method: 'library.remove', params: { name: need(pos, 0, 'NAME') } }) },
  upload: { usage: 'upload LOCAL_FILE PATH', help: 'upload a local file to a gateway path /<library>/<fullpath>', build: (pos) => ({ method: 'upload', params: { local: resolve(need(pos, 0, 'LOCAL_FILE')), path: need(pos, 1, 'PATH') } }) },
  download: { usage: 'download PATH LOCAL_FILE', help: 'download a file to a local path', build: (pos) => ({ method: 'download', params: { path: need(pos, 0, 'PATH'), local: resolve(need(pos, 1, 'LOCAL_FILE')) } }) },
  'link create': { usage: 'link create PATH [--expires 7d] [--password P] [--auth preview|download|upload] [--limit N]', help: 'create a share link', build: (pos, o) => ({ method: 'file.link', params: {
    fullpath: need(pos, 0, 'PATH'), deadline: o.expires ? parseExpiry(String(o.expires)) : undefined, password: str(o.password), auth: str(o.auth),
    access_limit: o.limit ? Number(o.limit) : undefined, dir: o.dir ? 1 : undefined,
  } }), booleans: ['dir'] },
  'link ls': { usage: 'link ls [--library NAME]', help: 'list share links', build: (_p, o) => ({ method: 'file.links', params: { library: str(o.library) } }) },
  'link close': { usage: 'link close CODE|PATH [--library NAME]', help: 'close a link by code, or all links of a path', build: (pos, o) => {
    const x = need(pos, 0, 'CODE or PATH');
    return { method: 'file.link_close', params: x.startsWith('/') ? { fullpath: x } : { code: x, library: str(o.library) } };
  } },
  'perm set': { usage: 'perm set PATH (--member ACCOUNT | --dept ID) [--allow codes] [--deny codes]', help: 'set advanced permissions on a folder', build: (pos, o) => {
    const who = o.member ? { accounts: [String(o.member)] } : o.dept ? { group_ids: [Number(o.dept)] } : undefined;
    if (!who) throw new UsageError('--member ACCOUNT or --dept ID is required');
    return { method: 'file2.set_permission', params: { fullpath: need(pos, 0, 'PATH'), permissions: JSON.stringify({ ...who, permission: permissionObject(str(o.allow), str(o.deny)) }) } };
  } },
  'perm show': { usage: 'perm show PATH [--member ACCOUNT]', help: 'show permissions set on a folder, or one member\'s', build: (pos, o) => o.member
    ? { method: 'file2.get_member_permission', params: { fullpath: need(pos, 0, 'PATH'), account: String(o.member) } }
    : { method: 'file.get_all_permission', params: { fullpath: need(pos, 0, 'PATH') } } },
  lock: { usage: 'lock PATH', help: 'lock a file on the service', build: (pos) => ({ method: 'file.lock', params: { fullpath: need(pos, 0, 'PATH'), lock: 'lock' } }) },
  unlock: { usage: 'unlock PATH', help: 'unlock a file', build: (pos) => ({ method: 'file.lock', params: { fullpath: need(pos, 0, 'PATH'), lock: 'unlock' } }) },
  'tag add': { usage: 'tag add PATH TAG...', help: 'add tags', build: (pos) => ({ method: 'file.add_tag', params: { fullpath: need(pos, 0, 'PATH'), tag: tags(pos) } }) },
  'tag rm': { usage: 'tag rm PATH TAG...', help: 'remove tags', build: (pos) => ({ method: 'file.del_tag', params: { fullpath: need(pos, 0, 'PATH'), tag: tags(pos) } }) },
  history: { usage: 'history PATH [--size N]', help: 'versions and operations of a file', build: (pos, o) => ({ method: 'file.history', params: { fullpath: need(pos, 0, 'PATH'), size: o.size ? Number(o.size) : 100 } }) },
  restore: { usage: 'restore PATH --version FILEHASH|HID', help: 'make an earlier version current again', build: (pos, o) => {
    if (!o.version) throw new UsageError('--version is required (a filehash or hid from `ctl history`)');
    return { method: 'version.restore', params: { path: need(pos, 0, 'PATH'), version: String(o.version) } };
  } },
  'trash ls': { usage: 'trash ls [--library NAME] [--keyword K]', help: 'list the recycle bin', build: (_p, o) => ({ method: 'file.recycle', params: { library: str(o.library), keyword: str(o.keyword), size: 1000 } }) },
  'trash restore': { usage: 'trash restore PATH...', help: 'restore deleted items to their paths', build: (pos) => ({ method: 'file.recover', params: { fullpaths: need(pos, 0, 'PATH') && pos.join('|') } }) },
  'trash purge': { usage: 'trash purge PATH...', help: 'remove deleted items for good', build: (pos) => ({ method: 'file.del_completely', params: { fullpaths: need(pos, 0, 'PATH') && pos.join('|') } }) },
  'member add': { usage: 'member add ACCOUNT [--name N] [--password-env VAR] [--dept PATH]', help: 'add an enterprise member', build: (pos, o) => ({ method: 'ent.add_member', params: {
    account: need(pos, 0, 'ACCOUNT'), member_name: str(o.name), group_path: str(o.dept), password: o['password-env'] ? process.env[String(o['password-env'])] : undefined,
  } }) },
  'member ls': { usage: 'member ls [--start N] [--size N]', help: 'list enterprise members', build: (_p, o) => ({ method: 'ent.get_members', params: { start: o.start ? Number(o.start) : undefined, size: o.size ? Number(o.size) : 100 } }) },
  'member disable': { usage: 'member disable ACCOUNT', help: 'disable a member', build: (pos) => ({ method: 'ent.set_member', params: { account: need(pos, 0, 'ACCOUNT'), state: 0 } }) },
  'member enable': { usage: 'member enable ACCOUNT', help: 'enable a member', build: (pos) => ({ method: 'ent.set_member', params: { account: need(pos, 0, 'ACCOUNT'), state: 1 } }) },
  'dept ls': { usage: 'dept ls', help: 'list departments', build: () => ({ method: 'ent.get_groups', params: {} }) },
  'dept add': { usage: 'dept add NAME [--parent PATH]', help: 'add a department', build: (pos, o) => ({ method: 'ent.add_group', params: { group_name: need(pos, 0, 'NAME'), parent_group_path: str(o.parent) } }) },
  'dept rm': { usage: 'dept rm PATH...', help: 'remove departments', build: (pos) => ({ method: 'ent.del_group', params: { groups: need(pos, 0, 'PATH') && pos.join(',') } }) },
  'org ls': { usage: 'org ls', help: 'list the enterprise\'s libraries', build: () => ({ method: 'org.ls', params: {} }) },
  'org create': { usage: 'org create NAME [--capacity BYTES]', help: 'create a library', build: (pos, o) => ({ method: 'org.create', params: { org_name: need(pos, 0, 'NAME'), org_capacity: o.capacity ? Number(o.capacity) : undefined } }) },
  'org bind': { usage: 'org bind ORG_ID [--title T]', help: 'create (or return) a library authorization', build: (pos, o) => ({ method: 'org.bind', params: { org_id: need(pos, 0, 'ORG_ID'), title: str(o.title) ?? 'cloudlib' } }) },
  'partner ent create': { usage: 'partner ent create OUT_ID NAME [--days N] [--space GB] [--members N] [--account A]', help: 'create an enterprise', build: (pos, o) => ({ method: 'partner.create_ent', params: {
    out_id: need(pos, 0, 'OUT_ID'), ent_name: need(pos, 1, 'NAME'), days: o.days ? Number(o.days) : undefined, space: o.space ? Number(o.space) : undefined,
    member_count: o.members ? Number(o.members) : undefined, account: str(o.account),
  } }) },
  'partner ent ls': { usage: 'partner ent ls', help: 'list enterprises', build: () => ({ method: 'partner.ent_list', params: { size: 1000 } }) },
  'partner ent order': { usage: 'partner ent order OUT_ID TYPE [--days N] [--members N] [--space GB] [--month N]', help: 'trial.extend, subscribe, renew, upgrade, unsubscribe', build: (pos, o) => ({ method: 'partner.order', params: {
    out_id: need(pos, 0, 'OUT_ID'), type: need(pos, 1, 'TYPE'), days: o.days ? Number(o.days) : undefined, member_count: o.members ? Number(o.members) : undefined,
    space: o.space ? Number(o.space) : undefined, month: o.month ? Number(o.month) : undefined,
  } }) },
};

function tags(pos: string[]): string {
  const t = pos.slice(1);
  if (!t.length) throw new UsageError('missing TAG');
  return t.join(';');
}

function findVerb(words: string[]): { verb: Verb; rest: string[] } | undefined {
  for (const n of [3, 2, 1]) {
    const key = words.slice(0, n).join(' ');
    if (VERBS[key]) return { verb: VERBS[key], rest: words.slice(n) };
  }
  return undefined;
}

// ---- output -------------------------------------------------------------------------------------------

/** Renders a result for a person: tables for lists of records, key: value for records, one line otherwise. */
export function renderHuman(result: unknown): string {
  if (result === null || result === undefined) return 'ok';
  if (typeof result !== 'object') return String(result);
  const rows = Array.isArray(result) ? result : Array.isArray((result as { list?: unknown }).list) ? (result as { list: unknown[] }).list : undefined;
  if (rows) {
    const extra = Array.isArray(result) ? '' : Object.entries(result).filter(([k]) => k !== 'list').map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join('  ');
    return [table(rows), extra].filter(Boolean).join('\n');
  }
  const entries = Object.entries(result as Record<string, unknown>);
  if (entries.length === 0) return 'ok';
  const w = Math.max(...entries.map(([k]) => k.length));
  return entries.map(([k, v]) => `${k.padEnd(w)}  ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`).join('\n');
}

function table(rows: unknown[]): string {
  if (rows.length === 0) return '(none)';
  if (rows.some((r) => typeof r !== 'object' || r === null)) return rows.map(String).join('\n');
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r as object)))].filter((c) => c !== 'property' || rows.length < 2);
  const cell = (v: unknown) => (v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
  const widths = cols.map((c) => Math.min(48, Math.max(c.length, ...rows.map((r) => cell((r as Record<string, unknown>)[c]).length))));
  const line = (vals: string[]) => vals.map((v, k) => (v.length > widths[k]! ? v.slice(0, widths[k]! - 1) + '…' : v.padEnd(widths[k]!))).join('  ').trimEnd();
  return [line(cols.map((c) => c.toUpperCase())), ...rows.map((r) => line(cols.map((c) => cell((r as Record<string, unknown>)[c]))))].join('\n');
}

function progressBar(p: Record<string, unknown>, tty: boolean): void {
  if (!tty) return;
  const done = Number(p.done ?? 0);
  const total = Number(p.total ?? 0);
  const frac = total > 0 ? Math.min(1, done / total) : 0;
  const width = 30;
  const bar = '#'.repeat(Math.round(frac * width)).padEnd(width, '.');
  process.stderr.write(`\r[${bar}] ${(frac * 100).toFixed(0).padStart(3)}% ${formatBytes(done)}/${formatBytes(total)} ${p.what ? String(p.what) : ''}`);
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let k = 0;
  while (n >= 1024 && k < units.length - 1) { n /= 1024; k++; }
  return `${k === 0 ? n : n.toFixed(1)} ${units[k]}`;
}

// ---- help and completion ------------------------------------------------------------------------------

export function verbsHelp(): string {
  const w = Math.max(...Object.values(VERBS).map((v) => v.usage.length));
  return Object.values(VERBS).map((v) => `  ${v.usage.padEnd(w)}  ${v.help}`).join('\n');
}

export function methodHelp(m: MethodInfo): string {
  const lines = [`${m.name} — ${m.summary}`, '', 'Parameters:'];
  for (const p of m.params) lines.push(`  ${p.name}${p.required ? ' (required)' : ''}  ${p.type}${p.note ? ` — ${p.note}` : ''}`);
  if (!m.params.length) lines.push('  (none)');
  for (const g of m.oneOf ?? []) lines.push(`  exactly one of: ${g.join(', ')}`);
  return lines.join('\n');
}

export function bashCompletion(methods: string[]): string {
  const words = [...new Set([...Object.keys(VERBS).map((k) => k.split(' ')[0]), 'call', 'methods', 'help', 'completion'])].join(' ');
  return [
    '# cloudlib ctl completion for bash: source <(cloudlib ctl completion bash)',
    '_cloudlib_ctl() {',
    '  local cur=${COMP_WORDS[COMP_CWORD]}',
    '  if [ "${COMP_WORDS[1]}" = ctl ] && [ $COMP_CWORD -eq 2 ]; then COMPREPLY=($(compgen -W "' + words + '" -- "$cur")); return; fi',
    '  if [ "${COMP_WORDS[2]}" = call ] && [ $COMP_CWORD -eq 3 ]; then COMPREPLY=($(compgen -W "' + methods.join(' ') + '" -- "$cur")); return; fi',
    '}',
    'complete -F _cloudlib_ctl cloudlib',
  ].join('\n');
}

const USAGE = [
  'Usage: cloudlib ctl [--socket PATH] [--json] <verb> [args]',
  '       cloudlib ctl call METHOD [key=value ...]   any method by name (see `ctl methods`)',
  '       cloudlib ctl methods | help METHOD | completion bash',
  '',
  'Verbs:',
].join('\n');

export const ctlCommand: Subcommand = {
  summary: 'Talk to a running gateway through its control socket (the whole service API, and the gateway\'s own state).',
  get usage() { return `${USAGE}\n${verbsHelp()}\n\nThe socket: --socket PATH, else $CLOUDLIB_SOCKET, else $CLOUDLIB_HOME/control.sock (default ./.cloudlib).\nPATH arguments are gateway paths: /<library>/<path inside it>.`; },
  options: { socket: { type: 'string' }, json: { type: 'boolean' } },
  passThrough: true,
  async run(values, positionals) {
    const json = Boolean(values.json);
    const socket = String(values.socket ?? defaultSocketPath());
    const out = (v: unknown) => process.stdout.write((json ? JSON.stringify(v, null, 2) : renderHuman(v)) + '\n');
    try {
      const [first, ...rest] = positionals;
      if (!first) throw new UsageError('missing verb');
      if (first === 'completion') {
        const client = await ControlClient.connect(socket).catch(() => undefined);
        const methods = client ? ((await client.call('rpc.methods')) as MethodInfo[]).map((m) => m.name) : [];
        client?.close();
        process.stdout.write(bashCompletion(methods) + '\n');
        return EXIT.ok;
      }
      let method: string;
      let params: Record<string, unknown>;
      if (first === 'call') {
        method = rest[0] ?? '';
        if (!method) throw new UsageError('missing METHOD');
        params = parseKeyValues(rest.slice(1));
      } else if (first === 'methods' || first === 'help') {
        const client = await connectOrExit(socket);
        const methods = (await client.call('rpc.methods')) as MethodInfo[];
        client.close();
        if (first === 'help' && rest[0]) {
          const m = methods.find((x) => x.name === rest[0]);
          if (!m) throw new UsageError(`unknown method '${rest[0]}'`);
          process.stdout.write(methodHelp(m) + '\n');
        } else if (json) out(methods);
        else process.stdout.write(methods.map((m) => `  ${m.name.padEnd(36)} ${m.summary}`).join('\n') + '\n');
        return EXIT.ok;
      } else {
        const found = findVerb(positionals);
        if (!found) throw new UsageError(`unknown verb '${positionals.slice(0, 2).join(' ')}'`);
        const { pos, opts } = parseVerbArgs(found.rest, found.verb.booleans);
        ({ method, params } = found.verb.build(pos, opts));
        for (const k of Object.keys(params)) if (params[k] === undefined) delete params[k];
      }
      const client = await connectOrExit(socket);
      const tty = process.stderr.isTTY === true && !json;
      try {
        const result = await client.call(method, params, (p) => progressBar(p, tty));
        if (tty) process.stderr.write('\n');
        out(result);
      } finally {
        client.close();
      }
      return EXIT.ok;
    } catch (err) {
      if (err instanceof UsageError) {
        process.stderr.write(`cloudlib ctl: ${err.message}\n\n${this.usage}\n`);
        return EXIT.usage;
      }
      if (err instanceof Unreachable) {
        process.stderr.write(`cloudlib ctl: ${err.message}\n`);
        return EXIT.unreachable;
      }
      if (err instanceof ControlCallError) {
        process.stderr.write(`cloudlib ctl: ${err.message}\n`);
        if (json && err.data !== undefined) process.stderr.write(JSON.stringify(err.data) + '\n');
        return err.code === RpcErrorCode.InvalidParams || err.code === RpcErrorCode.MethodNotFound ? EXIT.usage : EXIT.refused;
      }
      process.stderr.write(`cloudlib ctl: ${(err as Error).message}\n`);
      return EXIT.refused;
    }
  },
};

class Unreachable extends Error {}

async function connectOrExit(socket: string): Promise<ControlClient> {
  try {
    return await ControlClient.connect(socket);
  } catch (err) {
    throw new Unreachable((err as Error).message);
  }
}
