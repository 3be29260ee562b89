/**
 * GatewayConfig: what `cloudlib up` serves and where. Read from a config file (TOML or JSON), then
 * environment variables, then flags (each later source wins). Secrets come from a file or an environment
 * variable, never only from the command line. Every key is documented in docs/configuration.md.
 */
import { readFile } from 'node:fs/promises';
import { resolve, dirname, isAbsolute } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { defaultDataFolder } from './data-folder.js';
import { parseBandwidthLimit } from '../shared/bandwidth-limit.js';

export interface LibraryAuthConfig { name?: string; org_client_id: string; org_client_secret: string }
export interface UserConfig {
  name: string; password: string; op_id?: string; op_name?: string; read_only?: boolean;
  /** The member of the enterprise this user acts as (their account), with that member's password for the token endpoint. */
  member?: string; member_password?: string;
}

export interface GatewayConfig {
  /** Data folder: journal, caches, embedded service data, control socket. Default $CLOUDLIB_HOME, else the user's (data-folder.ts). */
  data: string;
  /** A remote service; absent = the embedded service. */
  service?: {
    base_url: string;
    /** Upload protocol header prefix. Default `x-svc-`. */
    upload_header_prefix: string;
    libraries: LibraryAuthConfig[];
    enterprise?: { client_id: string; client_secret: string };
    partner?: { client_id: string; client_secret: string };
    user?: { token: string; client_id?: string; client_secret: string; refresh_token?: string };
    /** The application the gateway asks the token endpoint as (member logins, `member` users, `mount.member`). */
    application?: { client_id: string; client_secret: string };
  };
  /**
   * Embedded service listen address (ignored with a remote service). Default 127.0.0.1:8081, or any free
   * port when that is taken at the first start; the address taken is kept (kept-addresses.ts).
   */
  service_listen: string;
  /** Which listen addresses are the defaults, kept across starts in `<data>/addresses.json` (not given). */
  keep_listen: { service: boolean; admin: boolean };
  /**
   * The embedded service's URL as its clients reach it (share links, preview and download URLs carry
   * it). Default: its listen address (127.0.0.1 for a listener on every interface).
   */
  service_url?: string;
  /**
   * Where the embedded service keeps its metadata: `postgresql://USER@HOST:PORT/DB` (password from
   * PGPASSWORD or the password file, never the URL). Default SQLite under `<data>/service`.
   */
  service_metadata?: string;
  webdav: {
    /** HOST:PORT, or null to serve no WebDAV. Default 127.0.0.1:8080. */
    listen: string | null;
    /** Users; default one user `cloudlib` with a generated password kept in <data>/webdav-user.json. */
    users: UserConfig[];
    anonymous: false | 'read-only' | 'read-write';
    /** Anonymous read-write on an address other than loopback: refused unless this is true. Default false. */
    allow_anonymous_write_from_network: boolean;
    /** Members of the enterprise log in with their own account and password and act as themselves. Default false. */
    member_logins: boolean;
    /** Member sessions open at once (the least recently used is closed first). Default 100. */
    member_sessions: number;
    /** A member session with no request for this long is closed, s. Default 900. */
    member_idle_s: number;
    /** Keep `.DS_Store`, `._*`, `Thumbs.db`, `desktop.ini` local-only. Default true. */
    keep_junk_local: boolean;
    /** No byte of a request body (or of an answer taken) for this long cuts the connection, s. Default 60. */
    idle_timeout_s: number;
    /** A request's headers must arrive within this, s. Default 30. */
    headers_timeout_s: number;
    /** An idle kept-alive connection is closed after this, s. Default 5. */
    keep_alive_timeout_s: number;
    /** A whole request must arrive within this, s (0 = bounded by idle_timeout_s only). Default 21 600 (6 h). */
    request_timeout_s: number;
    /** Connections one client address may hold at once. Default 64. */
    max_connections_per_client: number;
    /** Largest XML request body (PROPFIND, PROPPATCH, LOCK), bytes. Default 1 048 576. */
    max_xml_body_bytes: number;
    /** Dead properties one file or folder may hold. Default 1000. */
    max_properties_per_resource: number;
    /** Bytes of dead properties one file or folder may hold. Default 1 048 576. */
    max_property_bytes_per_resource: number;
    /** Largest value of one dead property, bytes. Default 65 536. */
    max_property_value_bytes: number;
  };
  mount: {
    /** Mount point, or null for no mount. Default `./mnt` when FUSE is usable. */
    path: string | null;
    uid?: number;
    gid?: number;
    umask?: number;
    allow_other: boolean;
    read_only: boolean;
    /** How the kernel's requests reach the mount: "auto" (io_uring when offered), "uring" or "dev". Default "auto". */
    transport: 'auto' | 'uring' | 'dev';
    /** Request buffers of each CPU's ring over io_uring. Default 16. */
    ring_depth: number;
    /** How files written through the mount reach their spools: "auto" (passthrough as root), "passthrough" or "writeback". Default "auto". */
    write_mode: 'auto' | 'passthrough' | 'writeback';
    /** Symbolic links stored as `NAME.rclonelink` files, shown as links (docs/fuse.md, Symbolic links). Default true. */
    links: boolean;
    /** The mount acts as this member (their account) with their permissions, `member_password` for the token endpoint. */
    member?: string;
    member_password?: string;
  };
  cache: {
    /** Metadata entries kept. Default 100 000. */
    metadata_entries: number;
    /** In-memory block cache, MiB. Default 256. */
    block_cache_mb: number;
    /** On-disk content cache, MiB (0 = off). Default 1024. */
    disk_cache_mb: number;
    /** Share of the content cache's disk always left free, percent (the cache holds less when the disk fills). Default 5. */
    min_free_percent: number;
  };
  feed: { /** Updates feed poll interval, ms. Default 2000. */ interval_ms: number };
  journal: {
    /**
     * When a closed file is safe against power loss: "group" (default) fsyncs within `group_commit_ms` of
     * the close, and at once on fsync; "close" fsyncs at every close. A crash of the gateway loses nothing
     * acknowledged either way.
     */
    durability: 'group' | 'close';
    /** Longest wait of a closed file for its fsync with durability "group", ms. Default 1000. */
    group_commit_ms: number;
    /** Write-back delay: a closed file is uploaded this long after its last close, ms. Default 2000. */
    upload_delay_ms: number;
    /** Uploads of files over 256 KiB at once. Default 4. */
    upload_concurrency: number;
    /** Uploads of files up to 256 KiB at once (one exchange each), beside the large ones. Default 16. */
    small_upload_concurrency: number;
    /** Largest file a write may make, MiB (EFBIG / 507 beyond it); 0 for no limit. Default 0. */
    max_file_mb: number;
    /** Bytes waiting to upload at most, MiB (0: no bound): writers wait for uploads to make room, then ENOSPC. */
    max_pending_mb: number;
  };
  /** Admin HTTP listener (status page, /metrics, /healthz), or null. Default 127.0.0.1:8082, kept like service_listen. */
  admin_listen: string | null;
  /**
   * Bandwidth limit of the gateway's uploads and downloads, as rclone's `--bwlimit`: `RATE` for both
   * together or `UP:DOWN` (`10M`, `512k`, `10M:2M`), bytes a second; `off` for none. Default `off`.
   */
  bwlimit: string;
  /** Log level; and a file the log lines are appended to instead of stderr (JSON lines). */
  log: { level: string; file?: string };
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export interface ConfigFlags {
  config?: string;
  data?: string;
  webdav?: string;
  mount?: string;
  noMount?: boolean;
  serviceListen?: string;
  serviceUrl?: string;
  adminListen?: string;
  logLevel?: string;
  logFile?: string;
  readOnly?: boolean;
  /** `--bwlimit` (see GatewayConfig.bwlimit). */
  bwlimit?: string;
}

/** The embedded service's default address (the Docker image publishes the same port). */
export const DEFAULT_SERVICE_LISTEN = '127.0.0.1:8081';
/** The admin listener's default address. */
export const DEFAULT_ADMIN_LISTEN = '127.0.0.1:8082';

/** Write-back delay of a closed file before its upload starts, ms (`journal.upload_delay_ms`). */
export const DEFAULT_UPLOAD_DELAY_MS = 2000;

/** Default of `feed.interval_ms`: how often each library's updates feed is polled. */
export const DEFAULT_FEED_INTERVAL_MS = 2000;

const HOSTPORT = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

export function parseHostPort(text: string, what: string): { host: string; port: number } {
  const m = HOSTPORT.exec(text.trim());
  if (!m || Number(m[2]) > 65535) throw new ConfigError(`${what}: expected HOST:PORT, got '${text}'`);
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) };
}

/** True for an address only this machine reaches (127.0.0.0/8, ::1, localhost). */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || /^::ffff:127\./.test(h);
}

/** The WebDAV server's limits and timeouts from the configuration (createWebdavServer's options). */
export function webdavLimitsOf(w: GatewayConfig['webdav']): Record<string, unknown> {
  return {
    maxXmlBytes: w.max_xml_body_bytes,
    maxPropertiesPerResource: w.max_properties_per_resource,
    maxPropertyBytesPerResource: w.max_property_bytes_per_resource,
    maxPropertyValueBytes: w.max_property_value_bytes,
    limits: {
      idleTimeoutMs: w.idle_timeout_s * 1000,
      headersTimeoutMs: w.headers_timeout_s * 1000,
      keepAliveTimeoutMs: w.keep_alive_timeout_s * 1000,
      requestTimeoutMs: w.request_timeout_s * 1000,
      maxConnectionsPerClient: w.max_connections_per_client,
    },
  };
}

/** A secret from `<key>`, `<key>_file` or `<key>_env` of a config table. */
async function secret(table: Record<string, unknown>, key: string, where: string, baseDir: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (typeof table[key] === 'string') return table[key] as string;
  const file = table[`${key}_file`];
  if (typeof file === 'string') {
    const p = isAbsolute(file) ? file : resolve(baseDir, file);
    try {
      return (await readFile(p, 'utf8')).trim();
    } catch (err) {
      throw new ConfigError(`${where}.${key}_file: cannot read ${p}: ${(err as Error).message}`);
    }
  }
  const envName = table[`${key}_env`];
  if (typeof envName === 'string') {
    const v = env[envName];
    if (v === undefined) throw new ConfigError(`${where}.${key}_env: environment variable ${envName} is not set`);
    return v;
  }
  return undefined;
}

function obj(v: unknown, where: string): Record<string, unknown> {
  if (v === undefined) return {};
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ConfigError(`${where}: expected a table, got ${JSON.stringify(v)}`);
  return v as Record<string, unknown>;
}
function str(v: unknown, where: string): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new ConfigError(`${where}: expected a string, got ${JSON.stringify(v)}`);
  return v;
}
function num(v: unknown, where: string, min = 0): number | undefined {
  if (v === undefined) return undefined;
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < min) throw new ConfigError(`${where}: expected a number ≥ ${min}, got ${JSON.stringify(v)}`);
  return n;
}
function percentBelow100(v: unknown, where: string): number | undefined {
  const n = num(v, where);
  if (n !== undefined && n >= 100) throw new ConfigError(`${where}: expected a percentage from 0 to below 100, got ${JSON.stringify(v)}`);
  return n;
}
function oneOf<T extends string>(v: unknown, where: string, values: readonly T[]): T | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !values.includes(v as T)) throw new ConfigError(`${where}: expected one of ${values.map((x) => JSON.stringify(x)).join(', ')}, got ${JSON.stringify(v)}`);
  return v as T;
}
function intIn(v: unknown, where: string, min: number, max: number): number | undefined {
  const n = num(v, where, min);
  if (n !== undefined && (!Number.isInteger(n) || n > max)) throw new ConfigError(`${where}: expected an integer from ${min} to ${max}, got ${JSON.stringify(v)}`);
  return n;
}
function bool(v: unknown, where: string): boolean | undefined {
  if (v === undefined) return undefined;
  if (typeof v === 'boolean') return v;
  if (v === '1' || v === 'true') return true;
  if (v === '0' || v === 'false') return false;
  throw new ConfigError(`${where}: expected true or false, got ${JSON.stringify(v)}`);
}

const KNOWN_WEBDAV = new Set([
  'listen', 'users', 'anonymous', 'member_logins', 'member_sessions', 'member_idle_s', 'allow_anonymous_write_from_network', 'keep_junk_local', 'idle_timeout_s', 'headers_timeout_s', 'keep_alive_timeout_s',
  'request_timeout_s', 'max_connections_per_client', 'max_xml_body_bytes', 'max_properties_per_resource', 'max_property_bytes_per_resource', 'max_property_value_bytes',
]);
const KNOWN_TOP = new Set(['data', 'service', 'service_listen', 'service_url', 'service_metadata', 'webdav', 'mount', 'cache', 'feed', 'journal', 'admin_listen', 'log', 'bwlimit']);

/** Loads and validates the configuration. `fuseUsable` decides the default mount. */
/**
 * A listener's address from its flag, its environment variable or its key in the file (the first given
 * wins), else `fallback`; null (no listener) for `off` in any of them, or `false` in the file.
 */
function listenAddress(flag: string | undefined, envValue: string | undefined, fileValue: unknown, where: string, fallback: string): string | null {
  const given = flag ?? envValue ?? (fileValue === false ? 'off' : str(fileValue, where));
  if (given === undefined) return fallback;
  return given === 'off' ? null : given;
}

/**
 * The default address of a kept listener: `envValue` (CLOUDLIB_DEFAULT_SERVICE_LISTEN or
 * CLOUDLIB_DEFAULT_ADMIN_LISTEN) when set, else `builtIn`. Unlike an address given by flag, environment or
 * file, a default is tried at a first start and kept, exactly as the built-in one.
 */
function defaultListen(envValue: string | undefined, name: string, builtIn: string): string {
  if (envValue === undefined) return builtIn;
  parseHostPort(envValue, name);
  return envValue;
}

export async function loadConfig(flags: ConfigFlags, env: NodeJS.ProcessEnv = process.env, opts: { fuseUsable: boolean; cwd?: string } = { fuseUsable: false }): Promise<GatewayConfig> {
  const cwd = opts.cwd ?? process.cwd();
  const file = flags.config ?? env.CLOUDLIB_CONFIG;
  let raw: Record<string, unknown> = {};
  let baseDir = cwd;
  if (file) {
    const p = resolve(cwd, file);
    baseDir = dirname(p);
    let text: string;
    try {
      text = await readFile(p, 'utf8');
    } catch (err) {
      throw new ConfigError(`config file ${p}: ${(err as Error).message}`);
    }
    try {
      raw = p.endsWith('.json') ? JSON.parse(text) : (parseToml(text) as Record<string, unknown>);
    } catch (err) {
      throw new ConfigError(`config file ${p}: ${(err as Error).message}`);
    }
    for (const k of Object.keys(raw)) if (!KNOWN_TOP.has(k)) throw new ConfigError(`config file ${p}: unknown key '${k}'`);
  }

  const explicitData = flags.data ?? env.CLOUDLIB_HOME ?? str(raw.data, 'data');
  const data = explicitData !== undefined ? resolve(cwd, explicitData) : defaultDataFolder(env, cwd);

  // Remote service.
  const svc = obj(raw.service, 'service');
  const baseUrl = env.CLOUDLIB_BASE_URL ?? str(svc.base_url, 'service.base_url');
  let service: GatewayConfig['service'];
  if (baseUrl) {
    if (!/^https?:\/\/[^/]+/.test(baseUrl)) throw new ConfigError(`service.base_url: expected an http(s) URL, got '${baseUrl}'`);
    const libraries: LibraryAuthConfig[] = [];
    const libs = svc.libraries === undefined ? [] : svc.libraries;
    if (!Array.isArray(libs)) throw new ConfigError('service.libraries: expected an array of tables');
    for (const [k, l] of libs.entries()) {
      const t = obj(l, `service.libraries[${k}]`);
      const id = str(t.org_client_id, `service.libraries[${k}].org_client_id`);
      const sec = await secret(t, 'org_client_secret', `service.libraries[${k}]`, baseDir, env);
      if (!id || !sec) throw new ConfigError(`service.libraries[${k}]: org_client_id and org_client_secret (or _file / _env) are required`);
      libraries.push({ name: str(t.name, `service.libraries[${k}].name`), org_client_id: id, org_client_secret: sec });
    }
    if (env.CLOUDLIB_ORG_CLIENT_ID) {
      const sec = env.CLOUDLIB_ORG_CLIENT_SECRET ?? (env.CLOUDLIB_ORG_CLIENT_SECRET_FILE ? (await readFile(env.CLOUDLIB_ORG_CLIENT_SECRET_FILE, 'utf8')).trim() : undefined);
      if (!sec) throw new ConfigError('CLOUDLIB_ORG_CLIENT_ID is set but neither CLOUDLIB_ORG_CLIENT_SECRET nor CLOUDLIB_ORG_CLIENT_SECRET_FILE');
      libraries.push({ org_client_id: env.CLOUDLIB_ORG_CLIENT_ID, org_client_secret: sec });
    }
    const pair = async (key: 'enterprise' | 'partner' | 'application', envPrefix: string) => {
      const t = obj(svc[key], `service.${key}`);
      const id = env[`${envPrefix}_CLIENT_ID`] ?? str(t.client_id, `service.${key}.client_id`);
      const sec = env[`${envPrefix}_CLIENT_SECRET`] ?? (await secret(t, 'client_secret', `service.${key}`, baseDir, env));
      if (!id && !sec) return undefined;
      if (!id || !sec) throw new ConfigError(`service.${key}: client_id and client_secret (or _file / _env) go together`);
      return { client_id: id, client_secret: sec };
    };
    const enterprise = await pair('enterprise', 'CLOUDLIB_ENT');
    const partner = await pair('partner', 'CLOUDLIB_PARTNER');
    const application = await pair('application', 'CLOUDLIB_APP');
    if (!libraries.length && !enterprise) throw new ConfigError('service: give library authorizations (service.libraries) or an enterprise client_id/secret (service.enterprise) to list and bind libraries');
    const u = obj(svc.user, 'service.user');
    const token = await secret(u, 'token', 'service.user', baseDir, env);
    const userSecret = await secret(u, 'client_secret', 'service.user', baseDir, env);
    service = {
      base_url: baseUrl.replace(/\/+$/, ''),
      upload_header_prefix: env.CLOUDLIB_UPLOAD_HEADER_PREFIX ?? str(svc.upload_header_prefix, 'service.upload_header_prefix') ?? 'x-svc-',
      libraries,
      enterprise,
      partner,
      ...(application ? { application } : {}),
      user: token && userSecret ? { token, client_secret: userSecret, client_id: str(u.client_id, 'service.user.client_id'), refresh_token: await secret(u, 'refresh_token', 'service.user', baseDir, env) } : undefined,
    };
    if (!/^[a-z0-9-]+-$/i.test(service.upload_header_prefix)) throw new ConfigError(`service.upload_header_prefix: expected a header prefix ending in '-', got '${service.upload_header_prefix}'`);
  }

  const wd = obj(raw.webdav, 'webdav');
  for (const k of Object.keys(wd)) if (!KNOWN_WEBDAV.has(k)) throw new ConfigError(`webdav.${k}: unknown key (docs/configuration.md lists them)`);
  const webdavListen = listenAddress(flags.webdav, env.CLOUDLIB_WEBDAV, wd.listen, 'webdav.listen', '127.0.0.1:8080');
  if (webdavListen) parseHostPort(webdavListen, 'webdav listen address');
  const users: UserConfig[] = [];
  const rawUsers = wd.users === undefined ? [] : wd.users;
  if (!Array.isArray(rawUsers)) throw new ConfigError('webdav.users: expected an array of tables');
  for (const [k, u] of rawUsers.entries()) {
    const t = obj(u, `webdav.users[${k}]`);
    const name = str(t.name, `webdav.users[${k}].name`);
    const password = await secret(t, 'password', `webdav.users[${k}]`, baseDir, env);
    if (!name || !password) throw new ConfigError(`webdav.users[${k}]: name and password (or password_file / password_env) are required`);
    const member = str(t.member, `webdav.users[${k}].member`);
    const memberPassword = await secret(t, 'member_password', `webdav.users[${k}]`, baseDir, env);
    if (member !== undefined && !memberPassword) throw new ConfigError(`webdav.users[${k}].member: the member's password is required too (member_password, member_password_file or member_password_env)`);
    if (member === undefined && memberPassword !== undefined) throw new ConfigError(`webdav.users[${k}].member_password: given without member`);
    if (member !== undefined && (t.op_id !== undefined || t.op_name !== undefined)) throw new ConfigError(`webdav.users[${k}]: member and op_id/op_name do not go together (a member is the operator themselves)`);
    users.push({
      name, password, op_id: str(t.op_id, `webdav.users[${k}].op_id`), op_name: str(t.op_name, `webdav.users[${k}].op_name`), read_only: bool(t.read_only, `webdav.users[${k}].read_only`),
      ...(member !== undefined ? { member, member_password: memberPassword } : {}),
    });
  }
  const anon = wd.anonymous ?? false;
  if (![false, 'read-only', 'read-write'].includes(anon as string | boolean)) throw new ConfigError(`webdav.anonymous: expected false, "read-only" or "read-write", got ${JSON.stringify(anon)}`);
  const allowAnonymousWrite = bool(wd.allow_anonymous_write_from_network, 'webdav.allow_anonymous_write_from_network') ?? false;
  if (anon === 'read-write' && webdavListen && !isLoopback(parseHostPort(webdavListen, 'webdav listen address').host) && !allowAnonymousWrite) {
    throw new ConfigError(`webdav.anonymous = "read-write" on ${webdavListen} lets anyone who reaches that address change every library; listen on 127.0.0.1, or set webdav.allow_anonymous_write_from_network = true to mean it`);
  }
  const seconds = (key: string, dflt: number, min: number): number => {
    const v = num(wd[key], `webdav.${key}`, min) ?? dflt;
    if (key !== 'request_timeout_s' && v === 0) throw new ConfigError(`webdav.${key}: expected a number > 0, got 0`);
    return v;
  };

  const mt = obj(raw.mount, 'mount');
  let mountPath: string | null;
  if (flags.noMount || env.CLOUDLIB_MOUNT === 'off' || mt.path === false) mountPath = null;
  else {
    const explicit = flags.mount ?? env.CLOUDLIB_MOUNT ?? str(mt.path, 'mount.path');
    mountPath = explicit ? resolve(cwd, explicit) : opts.fuseUsable ? resolve(cwd, 'mnt') : null;
  }

  const mountMember = str(mt.member, 'mount.member');
  const mountMemberPassword = await secret(mt, 'member_password', 'mount', baseDir, env);
  if (mountMember !== undefined && !mountMemberPassword) throw new ConfigError("mount.member: the member's password is required too (member_password, member_password_file or member_password_env)");
  if (mountMember === undefined && mountMemberPassword !== undefined) throw new ConfigError('mount.member_password: given without mount.member');

  const cache = obj(raw.cache, 'cache');
  const feed = obj(raw.feed, 'feed');
  const journal = obj(raw.journal, 'journal');
  for (const k of Object.keys(journal)) if (!['durability', 'group_commit_ms', 'upload_delay_ms', 'upload_concurrency', 'small_upload_concurrency', 'max_file_mb', 'max_pending_mb'].includes(k)) throw new ConfigError(`journal.${k}: unknown key (docs/configuration.md lists them)`);
  const durability = oneOf(journal.durability, 'journal.durability', ['group', 'close'] as const) ?? 'group';
  const groupCommitMs = num(journal.group_commit_ms, 'journal.group_commit_ms', 1) ?? 1000;
  if (groupCommitMs > 60_000) throw new ConfigError(`journal.group_commit_ms: expected at most 60000, got ${groupCommitMs}`);
  const uploadDelayMs = num(journal.upload_delay_ms, 'journal.upload_delay_ms', 0) ?? DEFAULT_UPLOAD_DELAY_MS;
  if (uploadDelayMs > 60_000) throw new ConfigError(`journal.upload_delay_ms: expected at most 60000, got ${uploadDelayMs}`);
  const uploadConcurrency = intIn(journal.upload_concurrency, 'journal.upload_concurrency', 1, 256) ?? 4;
  const smallUploadConcurrency = intIn(journal.small_upload_concurrency, 'journal.small_upload_concurrency', 1, 256) ?? 16;
  const maxFileMb = intIn(journal.max_file_mb, 'journal.max_file_mb', 0, 2 ** 32) ?? 0;
  const maxPendingMb = intIn(journal.max_pending_mb, 'journal.max_pending_mb', 0, 2 ** 32) ?? 0;
  const log = obj(raw.log, 'log');
  const adminListen = listenAddress(flags.adminListen, env.CLOUDLIB_ADMIN, raw.admin_listen, 'admin_listen', defaultListen(env.CLOUDLIB_DEFAULT_ADMIN_LISTEN, 'CLOUDLIB_DEFAULT_ADMIN_LISTEN', DEFAULT_ADMIN_LISTEN));
  const adminGiven = flags.adminListen ?? env.CLOUDLIB_ADMIN ?? (raw.admin_listen === undefined ? undefined : 'given');
  if (adminListen) parseHostPort(adminListen, 'admin listen address');
  const serviceGiven = flags.serviceListen ?? env.CLOUDLIB_SERVICE_LISTEN ?? str(raw.service_listen, 'service_listen');
  const serviceListen = serviceGiven ?? defaultListen(env.CLOUDLIB_DEFAULT_SERVICE_LISTEN, 'CLOUDLIB_DEFAULT_SERVICE_LISTEN', DEFAULT_SERVICE_LISTEN);
  parseHostPort(serviceListen, 'service listen address');
  const serviceUrl = flags.serviceUrl ?? env.CLOUDLIB_SERVICE_URL ?? str(raw.service_url, 'service_url');
  if (serviceUrl !== undefined && !/^https?:\/\/[^/\s]+\/?$/.test(serviceUrl)) throw new ConfigError(`service url: expected http(s)://HOST[:PORT], got '${serviceUrl}'`);
  const serviceMetadata = env.CLOUDLIB_SERVICE_METADATA ?? str(raw.service_metadata, 'service_metadata');
  if (serviceMetadata !== undefined) {
    let u: URL | undefined;
    try { u = new URL(serviceMetadata); } catch { /* refused below */ }
    if (!u || (u.protocol !== 'postgresql:' && u.protocol !== 'postgres:')) throw new ConfigError('service_metadata: expected postgresql://USER@HOST:PORT/DATABASE');
    if (u.password !== '') throw new ConfigError('service_metadata: the password does not go in the URL; set PGPASSWORD or use a password file (PGPASSFILE)');
  }
  const level = flags.logLevel ?? env.CLOUDLIB_LOG_LEVEL ?? str(log.level, 'log.level') ?? 'info';
  const logFileText = flags.logFile ?? env.CLOUDLIB_LOG_FILE ?? str(log.file, 'log.file');
  const logFile = logFileText === undefined ? undefined : resolve(flags.logFile !== undefined || env.CLOUDLIB_LOG_FILE !== undefined ? cwd : baseDir, logFileText);
  if (logFile !== undefined && mountPath && (logFile === mountPath || logFile.startsWith(mountPath + '/'))) {
    throw new ConfigError(`log file ${logFile}: inside the mount ${mountPath}; the gateway cannot write its log through its own mount`);
  }
  if (!['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'].includes(level)) throw new ConfigError(`log level: expected trace, debug, info, warn, error, fatal or silent, got '${level}'`);

  return {
    data,
    service,
    service_listen: serviceListen,
    keep_listen: { service: serviceGiven === undefined, admin: adminGiven === undefined },
    ...(serviceUrl ? { service_url: serviceUrl.replace(/\/$/, '') } : {}),
    ...(serviceMetadata ? { service_metadata: serviceMetadata } : {}),
    webdav: {
      listen: webdavListen,
      users,
      anonymous: anon as GatewayConfig['webdav']['anonymous'],
      allow_anonymous_write_from_network: allowAnonymousWrite,
      member_logins: bool(wd.member_logins, 'webdav.member_logins') ?? false,
      member_sessions: num(wd.member_sessions, 'webdav.member_sessions', 1) ?? 100,
      member_idle_s: num(wd.member_idle_s, 'webdav.member_idle_s', 1) ?? 900,
      keep_junk_local: bool(wd.keep_junk_local, 'webdav.keep_junk_local') ?? true,
      idle_timeout_s: seconds('idle_timeout_s', 60, 0),
      headers_timeout_s: seconds('headers_timeout_s', 30, 0),
      keep_alive_timeout_s: seconds('keep_alive_timeout_s', 5, 0),
      request_timeout_s: seconds('request_timeout_s', 21_600, 0),
      max_connections_per_client: num(wd.max_connections_per_client, 'webdav.max_connections_per_client', 1) ?? 64,
      max_xml_body_bytes: num(wd.max_xml_body_bytes, 'webdav.max_xml_body_bytes', 1024) ?? 1024 * 1024,
      max_properties_per_resource: num(wd.max_properties_per_resource, 'webdav.max_properties_per_resource', 1) ?? 1000,
      max_property_bytes_per_resource: num(wd.max_property_bytes_per_resource, 'webdav.max_property_bytes_per_resource', 1024) ?? 1024 * 1024,
      max_property_value_bytes: num(wd.max_property_value_bytes, 'webdav.max_property_value_bytes', 64) ?? 64 * 1024,
    },
    mount: {
      path: mountPath,
      uid: num(mt.uid, 'mount.uid'),
      gid: num(mt.gid, 'mount.gid'),
      umask: mt.umask === undefined ? undefined : typeof mt.umask === 'string' ? parseInt(mt.umask, 8) : num(mt.umask, 'mount.umask'),
      allow_other: bool(mt.allow_other, 'mount.allow_other') ?? false,
      read_only: flags.readOnly ?? bool(mt.read_only, 'mount.read_only') ?? false,
      transport: oneOf(mt.transport, 'mount.transport', ['auto', 'uring', 'dev'] as const) ?? 'auto',
      ring_depth: intIn(mt.ring_depth, 'mount.ring_depth', 1, 256) ?? 16,
      write_mode: oneOf(mt.write_mode, 'mount.write_mode', ['auto', 'passthrough', 'writeback'] as const) ?? 'auto',
      links: bool(mt.links, 'mount.links') ?? true,
      ...(mountMember !== undefined ? { member: mountMember, member_password: mountMemberPassword } : {}),
    },
    cache: {
      metadata_entries: num(cache.metadata_entries, 'cache.metadata_entries', 100) ?? 100_000,
      block_cache_mb: num(cache.block_cache_mb, 'cache.block_cache_mb', 1) ?? 256,
      disk_cache_mb: num(cache.disk_cache_mb, 'cache.disk_cache_mb') ?? 1024,
      min_free_percent: percentBelow100(cache.min_free_percent, 'cache.min_free_percent') ?? 5,
    },
    feed: { interval_ms: num(env.CLOUDLIB_FEED_INTERVAL_MS ?? feed.interval_ms, 'feed.interval_ms', 100) ?? DEFAULT_FEED_INTERVAL_MS },
    journal: { durability, group_commit_ms: groupCommitMs, upload_delay_ms: uploadDelayMs, upload_concurrency: uploadConcurrency, small_upload_concurrency: smallUploadConcurrency, max_file_mb: maxFileMb, max_pending_mb: maxPendingMb },
    admin_listen: adminListen,
    bwlimit: bandwidthLimitText(flags.bwlimit ?? env.CLOUDLIB_BWLIMIT ?? str(raw.bwlimit, 'bwlimit') ?? 'off'),
    log: { level, ...(logFile !== undefined ? { file: logFile } : {}) },
  };
}

/** A `bwlimit` value, checked (a ConfigError saying what was expected otherwise). */
function bandwidthLimitText(text: string): string {
  try {
    parseBandwidthLimit(text);
  } catch (err) {
    throw new ConfigError(`bwlimit: ${(err as Error).message.replace(/^bandwidth limit: /, '')}`);
  }
  return text;
}
