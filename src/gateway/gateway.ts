/**
 * Gateway: everything `cloudlib up` runs, started in order and stopped in reverse. The embedded service
 * (unless a remote service is configured), the Vfs over its libraries, the WebDAV server, the FUSE mount
 * where FUSE is usable, the control socket, and the admin listener (/metrics, /healthz). When all is
 * ready it writes `<data>/endpoints.json` atomically; stop() stops accepting, flushes pending uploads
 * (bounded: what is left stays in the journal for the next start), unmounts and closes.
 */
import { access, readFile, rm } from 'node:fs/promises';
import { writeFileAtomic } from '../shared/atomic-file.js';
import { bandwidthLimitOf, type BandwidthLimit, type BucketCounters } from '../shared/bandwidth-limit.js';
import { constants } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { ServiceClient, type Credentials } from '../api/client.js';
import { ControlServer, clearStaleSocket } from '../control/server.js';
import { endpointMethods } from '../control/methods.js';
import { gatewayMethods } from '../control/gateway-methods.js';
import { watchMethod } from '../control/watch-method.js';
import { RpcErrorCode, RpcFailure } from '../control/protocol.js';
import type { Logger, RecentProblems } from '../shared/log.js';
import { STATUS_SCRIPT, statusPage } from './status-page.js';
import { serveEventStream } from './event-stream.js';
import { vfsFromConfig } from './vfs-from-config.js';
import { ServedLibraries, serveLibraries } from '../remote/served-libraries.js';
import type { GatewayVfs } from '../vfs/gateway-vfs.js';
import { parseHostPort, webdavLimitsOf, type GatewayConfig, type UserConfig } from './config.js';
import { makePrivateFolder } from './private-folder.js';
import { KeptAddresses, explainListenError, type KeptListener } from './kept-addresses.js';
import { GatewayMetrics } from './metrics.js';
import { LibraryChoices } from './library-choices.js';
import type { MemberSessions } from './member-sessions.js';
import { embeddedApplication, startMemberSessions, wantsMembers, webdavMemberHooks } from './member-setup.js';

/** `<data>/service/credentials.json` of the embedded service. */
export interface ServiceCredentialsFile {
  base_url: string;
  upload_server: string;
  partner: { client_id: string; client_secret: string };
  enterprise: { ent_id: number | string; client_id: string; client_secret: string };
  library: { org_id: number | string; mount_id: number | string; org_client_id: string; org_client_secret: string };
  member: { member_id: number | string; account: string; token: string; client_secret: string };
}

/** What the gateway uses of the embedded service (src/service). */
interface EmbeddedServiceHandle {
  baseUrl: string;
  credentials: ServiceCredentialsFile;
  close(): Promise<void>;
}

/** What the gateway uses of the WebDAV front end (src/webdav). */
interface WebdavServerHandle {
  listen(host: string, port: number): Promise<string>;
  close(): Promise<void>;
}

/** What the gateway uses of the FUSE front end (src/fuse). */
interface MountHandle {
  readonly mountpoint: string;
  unmount(): Promise<void>;
}

/** `<data>/endpoints.json`: where tools find the running gateway. */
export interface EndpointsFile {
  service_url: string;
  credentials: string | null;
  webdav_url: string | null;
  mount: string | null;
  control_socket: string;
  admin_url: string | null;
  webdav_user: string | null;
  webdav_password: string | null;
}

export interface GatewayStartOptions {
  config: GatewayConfig;
  logger: Logger;
  /** Wait for pending uploads on stop, ms; what is left stays in the journal. Default 10 000. */
  stopFlushMs?: number;
  /** Warnings and errors logged (the status page lists the recent ones). */
  problems?: RecentProblems;
}

/** True when this machine can serve a FUSE mount: /dev/fuse usable and the libfuse 3 engine built and loading. */
export async function fuseUsable(): Promise<boolean> {
  try {
    await access('/dev/fuse', constants.R_OK | constants.W_OK);
    // Loaded on demand (as the front ends and the service are below): a machine without FUSE still serves WebDAV.
    const engine = await import('../fuse/engine/binding.js');
    engine.loadFuse3Binding();
    return true;
  } catch {
    return false;
  }
}

/** True for the wildcard addresses (listening on every interface). */
export function isEveryInterface(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]';
}

/** A listener's URL as a client connects to it: the wildcard address is no address to connect to. */
export function connectableUrl(url: string): string {
  const u = new URL(url);
  if (u.hostname === '0.0.0.0') u.hostname = '127.0.0.1';
  else if (u.hostname === '[::]') u.hostname = '[::1]';
  const text = u.toString();
  return url.endsWith('/') || u.pathname !== '/' ? text : text.replace(/\/$/, '');
}

/** The WebDAV login of a gateway with no users configured: one user, password generated once and kept. */
async function defaultWebdavUser(dataDir: string): Promise<UserConfig> {
  const file = join(dataDir, 'webdav-user.json');
  try {
    const u = JSON.parse(await readFile(file, 'utf8')) as UserConfig;
    if (typeof u.name === 'string' && typeof u.password === 'string' && u.password.length >= 12) return u;
  } catch {
    // first start, or an unreadable file: make a new one
  }
  const u: UserConfig = { name: 'cloudlib', password: randomBytes(12).toString('base64url') };
  // Kept through a power loss: the password must not change under the clients that saved it.
  await writeFileAtomic(file, JSON.stringify(u) + '\n', { durability: 'fsync-file-and-folder', mode: 0o600 });
  return u;
}

export class Gateway {
  readonly metrics = new GatewayMetrics();
  readonly startedMs = Date.now();
  /** The bandwidth limit (`bwlimit`) every served library's transfers share. */
  private bandwidth: BandwidthLimit = {};
  service?: EmbeddedServiceHandle;
  vfs!: GatewayVfs;
  /** The libraries served: the Vfs serves these entries, the control socket calls the service with their clients. */
  libraries!: ServedLibraries;
  webdav?: WebdavServerHandle;
  /** The WebDAV URL a client on this machine connects to (127.0.0.1 when listening on every interface). */
  webdavUrl: string | null = null;
  /** WebDAV listens on every interface (0.0.0.0 or ::): other machines connect by this one's address. */
  webdavOnEveryInterface = false;
  mount?: MountHandle;
  control!: ControlServer;
  admin?: Server;
  adminUrl: string | null = null;
  serviceUrl = '';
  credentialsPath: string | null = null;
  webdavUser: UserConfig | null = null;
  /** Members acting as themselves (member logins, `member` users, `mount.member`), when configured. */
  members?: MemberSessions;
  /** Clients the gateway opened (closed on stop): enterprise, partner, user token, libraries added at run time. */
  private readonly clients: ServiceClient[] = [];
  private readonly roleClients: Partial<Record<'enterprise' | 'partner' | 'token', ServiceClient>> = {};
  private stopping?: Promise<void>;
  private choices!: LibraryChoices;
  /** endpoints.json is this instance's to remove (a start refused because another instance runs leaves that one's alone). */
  private wroteEndpoints = false;
  private kept?: KeptAddresses;

  private constructor(readonly config: GatewayConfig, private readonly logger: Logger, private readonly opts: GatewayStartOptions) {}

  static async start(opts: GatewayStartOptions): Promise<Gateway> {
    const g = new Gateway(opts.config, opts.logger, opts);
    try {
      await g.startAll();
    } catch (err) {
      await g.stop().catch((e: Error) => opts.logger.error({ err: e.message }, 'cleanup after a failed start'));
      throw err;
    }
    return g;
  }

  private async startAll(): Promise<void> {
    const { config, logger } = this;
    // Everything below the data folder (journal, spool, caches, properties, locks, credentials) is the
    // owner's only: the folder is 0700 (tightened, and said so, when others could read it).
    await makePrivateFolder(config.data, logger);
    // Another instance serving this data folder answers on its control socket: refuse before touching anything.
    await clearStaleSocket(join(config.data, 'control.sock'));
    // A crashed instance's endpoints.json names endpoints nobody serves: gone before anything starts, so
    // that a readiness check sees it only once this instance is ready.
    await rm(join(config.data, 'endpoints.json'), { force: true });
    this.wroteEndpoints = true;

    // 1. The service: remote, or embedded in <data>/service.
    let service = config.service;
    if (!service) {
      const mod = await import('../service/index.js');
      const listen = await this.listenAddress('service', config.service_listen, config.keep_listen.service);
      try {
        this.service = await mod.EmbeddedService.start({ dataDir: join(config.data, 'service'), listen: listen.listen, publicUrl: config.service_url, metadata: config.service_metadata, logger: logger.child({ part: 'service' }) });
      } catch (err) {
        throw listen.explain(err);
      }
      await listen.keep();
      const c = this.service.credentials;
      this.credentialsPath = join(config.data, 'service', 'credentials.json');
      service = {
        base_url: this.service.baseUrl,
        upload_header_prefix: 'x-svc-',
        libraries: [{ org_client_id: c.library.org_client_id, org_client_secret: c.library.org_client_secret }],
        enterprise: { client_id: c.enterprise.client_id, client_secret: c.enterprise.client_secret },
        partner: { client_id: c.partner.client_id, client_secret: c.partner.client_secret },
        user: { token: c.member.token, client_secret: c.member.client_secret },
      };
    }
    this.serviceUrl = service.base_url;
    const roles: [keyof typeof this.roleClients, Credentials | undefined][] = [
      ['enterprise', service.enterprise ? { enterprise: service.enterprise } : undefined],
      ['partner', service.partner ? { partner: service.partner } : undefined],
      ['token', service.user ? { user: service.user } : undefined],
    ];
    for (const [role, credentials] of roles) if (credentials) this.roleClients[role] = this.newClient(service.base_url, service.upload_header_prefix, credentials);

    // 2. The Vfs.
    this.bandwidth = bandwidthLimitOf(config.bwlimit);
    const served = await vfsFromConfig({ ...config, service }, logger.child({ part: 'vfs' }), this.metrics.observeExchange, this.bandwidth);
    this.vfs = served.vfs;
    this.libraries = new ServedLibraries(served.libraries);

    // 2b. What `ctl library add/remove` changed in earlier runs. A library that cannot be served now
    // (service unreachable, authorization revoked) is logged and kept on record; its journaled uploads
    // stay in the journal (stranded) until it is served again.
    this.choices = await LibraryChoices.open(config.data);
    for (const a of this.choices.added) {
      if (this.libraries.has(a.folder)) continue;
      try {
        await this.addLibrary(service.base_url, service.upload_header_prefix, a);
      } catch (err) {
        logger.warn({ library: a.folder, err: (err as Error).message }, 'a library added by `ctl library add` is not served this time; its pending uploads are kept');
      }
    }
    for (const folder of this.choices.removed) {
      if (!this.libraries.has(folder)) continue;
      try {
        await this.removeLibrary(folder);
      } catch (err) {
        logger.warn({ library: folder, err: (err as Error).message }, 'a library removed by `ctl library remove` is served again: it has pending files');
      }
    }

    // 2c. Members acting as themselves: one session (token, Vfs, journal) per member.
    if (wantsMembers(config)) {
      const application = service.application ?? (this.service ? embeddedApplication(this.service.credentials) : undefined);
      this.members = startMemberSessions({
        config, baseUrl: service.base_url, uploadHeaderPrefix: service.upload_header_prefix, application, libraries: () => this.libraries.list(),
        logger: logger.child({ part: 'members' }), onExchange: this.metrics.observeExchange, bandwidth: this.bandwidth,
      });
    }

    // 3. The control socket (before the front ends: `ctl status` works while they come up).
    const controlTarget = {
      vfs: this.vfs,
      libraries: () => this.libraries.list(),
      clientFor: (role: 'enterprise' | 'partner' | 'token') => this.roleClients[role],
      addLibrary: async (auth: { org_client_id: string; org_client_secret: string; name?: string }) => {
        const added = await this.addLibrary(service.base_url, service.upload_header_prefix, auth);
        await this.choices.recordAdded({ ...auth, folder: added.name });
        return added;
      },
      bindLibrary: (org: string) => this.bindLibrary(org),
      removeLibrary: async (name: string) => {
        await this.removeLibrary(name);
        await this.choices.recordRemoved(name);
      },
      describe: () => this.describe(),
      members: this.members,
    };
    this.control = new ControlServer({
      socketPath: join(config.data, 'control.sock'),
      methods: [...endpointMethods(controlTarget), ...gatewayMethods(controlTarget), watchMethod(this.vfs.changes)],
      logger: logger.child({ part: 'control' }),
    });
    await this.control.start();

    // 4. WebDAV.
    if (config.webdav.listen) {
      // No users configured: the generated login, also beside anonymous access (both work).
      const users = config.webdav.users.length > 0 ? config.webdav.users : [(this.webdavUser = await defaultWebdavUser(config.data))];
      const mod = await import('../webdav/index.js');
      this.webdav = mod.createWebdavServer({
        ...webdavLimitsOf(config.webdav),
        vfs: this.vfs,
        users: users.map((u) => ({ name: u.name, password: u.password, opId: u.op_id, opName: u.op_name, readOnly: u.read_only })),
        anonymous: config.webdav.anonymous === false ? false : { readOnly: config.webdav.anonymous === 'read-only' },
        keepJunkLocal: config.webdav.keep_junk_local,
        memberLogins: this.members ? webdavMemberHooks(this.members, config) : undefined,
        dataDir: join(config.data, 'webdav'),
        metrics: this.metrics,
        logger: logger.child({ part: 'webdav' }),
      });
      const { host, port } = parseHostPort(config.webdav.listen, 'webdav listen address');
      this.webdavUrl = connectableUrl(await this.webdav.listen(host, port));
      this.webdavOnEveryInterface = isEveryInterface(host);
    }

    // 5. The mount.
    if (config.mount.path) {
      const fuse = await import('../fuse/index.js');
      const member = config.mount.member;
      this.mount = await fuse.mountVfs({
        vfs: member && this.members ? (await this.members.pinned(member, config.mount.member_password!)).vfs : this.vfs,
        mountpoint: config.mount.path,
        uid: config.mount.uid,
        gid: config.mount.gid,
        umask: config.mount.umask,
        allowOther: config.mount.allow_other,
        readOnly: config.mount.read_only,
        transport: config.mount.transport,
        ringDepth: config.mount.ring_depth,
        writeMode: config.mount.write_mode,
        links: config.mount.links,
        attrTimeoutS: config.feed.interval_ms / 1000,
        flushTimeoutMs: 0,
        logger: logger.child({ part: 'fuse' }),
      });
    }

    // 6. Metrics and health.
    this.registerGauges();
    if (config.admin_listen) {
      const listen = await this.listenAddress('admin', config.admin_listen, config.keep_listen.admin);
      try {
        this.adminUrl = connectableUrl(await this.startAdmin(listen.listen));
      } catch (err) {
        throw listen.explain(err);
      }
      await listen.keep();
    }

    await this.writeEndpoints();
    logger.info({ webdav: this.webdavUrl, mount: this.mount?.mountpoint ?? null, control: this.control.socketPath, admin: this.adminUrl }, 'gateway ready');
  }

  /**
   * Where a listener listens: as given, or (a default address) the one kept from earlier starts, else the
   * default when free, else any free port, kept once listening.
   */
  private async listenAddress(which: KeptListener, given: string, keep: boolean): Promise<{ listen: string; explain(err: unknown): Error; keep(): Promise<void> }> {
    if (!keep) return { listen: given, explain: (err) => explainListenError(which, given, err), keep: async () => undefined };
    this.kept ??= await KeptAddresses.open(this.config.data);
    const kept = this.kept;
    const chosen = await kept.choose(which, given);
    if (!chosen.kept && chosen.listen !== given) this.logger.warn({ taken: given, listen: chosen.listen }, `${which === 'service' ? 'the embedded service' : 'the admin listener'}: the default address is taken; listening on another, kept for later starts`);
    return { listen: chosen.listen, explain: (err) => kept.explain(which, chosen.listen, err, chosen.kept), keep: () => kept.keep(which, chosen.listen) };
  }

  private newClient(baseUrl: string, prefix: string, credentials: Credentials): ServiceClient {
    const c = new ServiceClient({ baseUrl, credentials, uploadHeaderPrefix: prefix, onExchange: this.metrics.observeExchange });
    this.clients.push(c);
    return c;
  }

  private async addLibrary(baseUrl: string, prefix: string, auth: { org_client_id: string; org_client_secret: string; name?: string }): Promise<{ name: string; id: string }> {
    const client = this.newClient(baseUrl, prefix, { library: { org_client_id: auth.org_client_id, org_client_secret: auth.org_client_secret } });
    const [lib] = await serveLibraries([{ name: auth.name, client }], undefined, this.bandwidth);
    await this.vfs.addLibrary(lib!);
    this.libraries.add(lib!);
    return { name: lib!.name, id: lib!.id };
  }

  /** Stops serving a library: the Vfs first (it refuses while files of the library are open or pending). */
  private async removeLibrary(name: string): Promise<void> {
    await this.vfs.removeLibrary(name);
    this.libraries.remove(name);
  }

  /** A library authorization for a library of the enterprise, found by name or org_id. */
  private async bindLibrary(org: string): Promise<{ org_client_id: string; org_client_secret: string }> {
    const ent = this.roleClients.enterprise;
    if (!ent) throw new RpcFailure(RpcErrorCode.InvalidParams, 'the gateway has no enterprise credentials: give org_client_id and org_client_secret', { param: 'org' });
    const { list } = await ent.org.ls({});
    const hits = list.filter((l) => l.org_name === org || String(l.org_id) === org);
    if (hits.length !== 1) {
      throw new RpcFailure(RpcErrorCode.InvalidParams, hits.length === 0
        ? `no library '${org}' in the enterprise (libraries: ${list.map((l) => l.org_name).join(', ') || 'none'})`
        : `${hits.length} libraries are named '${org}': give its org_id (${hits.map((h) => h.org_id).join(', ')})`, { param: 'org' });
    }
    const bound = await ent.org.bind({ org_id: String(hits[0]!.org_id), title: 'cloudlib' });
    return { org_client_id: bound.org_client_id, org_client_secret: bound.org_client_secret };
  }

  describe(): Record<string, unknown> {
    return {
      service_url: this.serviceUrl,
      embedded_service: !!this.service,
      webdav_url: this.webdavUrl,
      mount: this.mount?.mountpoint ?? null,
      control_socket: this.control?.socketPath ?? null,
      admin_url: this.adminUrl,
      uptime_s: Math.round((Date.now() - this.startedMs) / 1000),
    };
  }

  endpoints(): EndpointsFile {
    return {
      service_url: this.serviceUrl,
      credentials: this.credentialsPath,
      webdav_url: this.webdavUrl,
      mount: this.mount?.mountpoint ?? null,
      control_socket: this.control.socketPath,
      admin_url: this.adminUrl,
      webdav_user: this.webdavUser?.name ?? null,
      webdav_password: this.webdavUser?.password ?? null,
    };
  }

  private async writeEndpoints(): Promise<void> {
    this.wroteEndpoints = true;
    // Written at every start and removed at stop: only readers now need it whole.
    await writeFileAtomic(join(this.config.data, 'endpoints.json'), JSON.stringify(this.endpoints(), null, 2) + '\n', { durability: 'rename', mode: 0o600 });
  }

  private registerGauges(): void {
    const reg = this.metrics.registry;
    const status = () => this.vfs.status();
    reg.gauge('cloudlib_bwlimit_bytes', 'Bytes taken through the bandwidth limit since start, by direction (both: one limit for the two)', () => bandwidthSamples(this.bandwidth, (c) => c.bytes));
    reg.gauge('cloudlib_bwlimit_waits', 'Transfers that waited for the bandwidth limit since start, by direction', () => bandwidthSamples(this.bandwidth, (c) => c.waits));
    reg.gauge('cloudlib_uploads_pending', 'Files waiting for or in upload', () => [{ value: status().uploads.length }]);
    reg.gauge('cloudlib_uploads_stranded', 'Journal entries of libraries not served', () => [{ value: status().stranded.length }]);
    reg.gauge('cloudlib_local_files', 'Files with local content (open, written, pending)', () => [{ value: status().localFiles }]);
    reg.gauge('cloudlib_feed_lag_seconds', 'Time since the last successful poll of each library feed', () =>
      status().feeds.map((f) => ({ labels: { library: f.library }, value: f.lastPollMs ? (Date.now() - f.lastPollMs) / 1000 : -1 })));
    reg.gauge('cloudlib_library_online', 'Whether each library\'s service answers (1) or the library is served offline (0)', () =>
      this.vfs.status().libraries.map((l) => ({ labels: { library: l.library }, value: l.online ? 1 : 0 })));
    reg.gauge('cloudlib_feed_healthy', 'Whether each library feed is healthy (1) or failing (0)', () =>
      status().feeds.map((f) => ({ labels: { library: f.library }, value: f.healthy ? 1 : 0 })));
    reg.gauge('cloudlib_cache_hits', 'Cache hits since start, by cache', () => {
      const s = status();
      return [{ labels: { cache: 'metadata' }, value: s.metadata.hits }, { labels: { cache: 'blocks' }, value: s.blocks.hits }, ...(s.disk ? [{ labels: { cache: 'disk' }, value: s.disk.hits }] : [])];
    });
    reg.gauge('cloudlib_cache_misses', 'Cache misses since start, by cache', () => {
      const s = status();
      return [{ labels: { cache: 'metadata' }, value: s.metadata.misses }, { labels: { cache: 'blocks' }, value: s.blocks.misses }, ...(s.disk ? [{ labels: { cache: 'disk' }, value: s.disk.misses }] : [])];
    });
    reg.gauge('cloudlib_cache_bytes', 'Bytes held, by cache', () => {
      const s = status();
      return [{ labels: { cache: 'metadata' }, value: s.metadata.bytes }, { labels: { cache: 'blocks' }, value: s.blocks.bytes }, ...(s.disk ? [{ labels: { cache: 'disk' }, value: s.disk.bytes }] : [])];
    });
  }

  private async startAdmin(listen: string): Promise<string> {
    const { host, port } = parseHostPort(listen, 'admin listen address');
    const server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { allow: 'GET, HEAD' }).end();
      } else if (path === '/' || path === '/index.html') {
        const html = statusPage({ describe: this.describe(), status: this.vfs.status(), libraries: this.vfs.libraryNames(), problems: this.opts.problems?.list() ?? [], nowMs: Date.now() });
        res.writeHead(200, {
          'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store',
          'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        }).end(req.method === 'HEAD' ? undefined : html);
      } else if (path === '/status.js') {
        res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache' }).end(req.method === 'HEAD' ? undefined : STATUS_SCRIPT);
      } else if (path === '/events') {
        serveEventStream(req, res, this.vfs.changes);
      } else if (path === '/metrics') {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(req.method === 'HEAD' ? undefined : this.metrics.registry.render());
      } else if (path === '/healthz') {
        const status = this.vfs.status();
        const failing = status.feeds.filter((f) => !f.healthy).map((f) => f.library);
        const offline = status.libraries.filter((l) => !l.online).map((l) => ({ library: l.library, since: new Date(l.offlineSinceMs ?? 0).toISOString(), pending_uploads: l.pendingUploads }));
        // Degraded: a library's service is away (served from what the gateway has) or its feed fails.
        const state = failing.length === 0 && offline.length === 0 ? 'ok' : 'degraded';
        const body = JSON.stringify({ ok: state === 'ok', status: state, offline, failing_feeds: failing, ...this.describe() });
        res.writeHead(state === 'ok' ? 200 : 503, { 'content-type': 'application/json' }).end(req.method === 'HEAD' ? undefined : body);
      } else {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /, /events, /metrics or /healthz\n');
      }
    });
    // GET and HEAD only, answered from memory: a request that takes long is a client holding the socket.
    server.headersTimeout = 10_000;
    server.requestTimeout = 15_000;
    server.keepAliveTimeout = 5_000;
    server.timeout = 30_000;
    this.admin = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => { server.off('error', reject); resolve(); });
    });
    const addr = server.address();
    const p = typeof addr === 'object' && addr ? addr.port : port;
    return `http://${host.includes(':') ? `[${host}]` : host}:${p}`;
  }

  /** Stops accepting, flushes (bounded), unmounts, closes. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= this.stopAll();
    return this.stopping;
  }

  private async stopAll(): Promise<void> {
    const log = this.logger;
    const step = async (what: string, fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (err) {
        log.error({ err: (err as Error).message }, `stop: ${what} failed`);
      }
    };
    if (this.wroteEndpoints) await rm(join(this.config.data, 'endpoints.json'), { force: true });
    if (this.webdav) await step('closing WebDAV', () => this.webdav!.close());
    if (this.vfs) {
      await step('flushing uploads', () => this.vfs.flushAll({ timeoutMs: this.opts.stopFlushMs ?? 10_000 }));
      const left = this.vfs.status().uploads.length;
      if (left > 0) log.warn({ pending: left }, 'stop: uploads still pending are kept in the journal for the next start');
    }
    if (this.mount) await step('unmounting', () => this.mount!.unmount());
    if (this.members) await step('closing member sessions', () => this.members!.close());
    if (this.control) await step('closing the control socket', () => this.control.close());
    if (this.admin) await step('closing the admin listener', () => new Promise<void>((r) => { this.admin!.closeAllConnections(); this.admin!.close(() => r()); }));
    if (this.vfs) await step('closing the Vfs', () => this.vfs.close());
    await Promise.all(this.clients.map((c) => step('closing a client', () => c.close())));
    if (this.service) await step('stopping the embedded service', () => this.service!.close());
    log.info('gateway stopped');
  }
}

/** One sample a bucket of `limit` (direction `both` for a bucket the two share). */
function bandwidthSamples(limit: BandwidthLimit, read: (c: BucketCounters) => number): { labels: { direction: string }; value: number }[] {
  if (limit.upload && limit.upload === limit.download) return [{ labels: { direction: 'both' }, value: read(limit.upload.counters) }];
  const out: { labels: { direction: string }; value: number }[] = [];
  if (limit.upload) out.push({ labels: { direction: 'upload' }, value: read(limit.upload.counters) });
  if (limit.download) out.push({ labels: { direction: 'download' }, value: read(limit.download.counters) });
  return out;
}
