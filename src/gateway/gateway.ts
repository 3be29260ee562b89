/**
 * Gateway: everything `cloudlib up` runs, started in order and stopped in reverse. The embedded service
 * (unless a remote service is configured), the Vfs over its libraries, the WebDAV server, the FUSE mount
 * where FUSE is usable, the control socket, and the admin listener (/metrics, /healthz). When all is
 * ready it writes `<data>/endpoints.json` atomically; stop() stops accepting, flushes pending uploads
 * (bounded: what is left stays in the journal for the next start), unmounts and closes.
 */
import { access, chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { constants } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { ServiceClient, type Credentials } from '../api/client.js';
import { LibraryRemote } from '../api/remote.js';
import { ControlServer, clearStaleSocket } from '../control/server.js';
import { endpointMethods, type ServedLibrary } from '../control/methods.js';
import { gatewayMethods } from '../control/gateway-methods.js';
import type { Logger } from '../shared/log.js';
import { createVfs } from '../vfs/index.js';
import type { GatewayVfs } from '../vfs/gateway-vfs.js';
import { resolveLibraries } from '../vfs/library-set.js';
import { parseHostPort, type GatewayConfig, type UserConfig } from './config.js';
import { GatewayMetrics } from './metrics.js';

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
}

/** Loads a module by a computed specifier (front ends load on demand, so a machine without FUSE still serves WebDAV). */
async function load<T>(specifier: string): Promise<T> {
  return (await import(specifier)) as T;
}

/** True when this machine can serve a FUSE mount: /dev/fuse usable and the libfuse 3 engine built and loading. */
export async function fuseUsable(): Promise<boolean> {
  try {
    await access('/dev/fuse', constants.R_OK | constants.W_OK);
    const engine = await load<{ loadFuse3Binding(): unknown }>('../fuse/engine/binding.js');
    engine.loadFuse3Binding();
    return true;
  } catch {
    return false;
  }
}

async function writeFileAtomic(path: string, text: string, mode = 0o600): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, text, { mode });
  await chmod(tmp, mode);
  await rename(tmp, path);
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
  await writeFileAtomic(file, JSON.stringify(u) + '\n');
  return u;
}

export class Gateway {
  readonly metrics = new GatewayMetrics();
  readonly startedMs = Date.now();
  service?: EmbeddedServiceHandle;
  vfs!: GatewayVfs;
  webdav?: WebdavServerHandle;
  webdavUrl: string | null = null;
  mount?: MountHandle;
  control!: ControlServer;
  admin?: Server;
  adminUrl: string | null = null;
  serviceUrl = '';
  credentialsPath: string | null = null;
  webdavUser: UserConfig | null = null;
  /** Clients the gateway opened (closed on stop): enterprise, partner, user token, libraries added at run time. */
  private readonly clients: ServiceClient[] = [];
  private readonly roleClients: Partial<Record<'enterprise' | 'partner' | 'token', ServiceClient>> = {};
  private stopping?: Promise<void>;
  /** endpoints.json is this instance's (a start refused because another instance runs leaves that one's alone). */
  private wroteEndpoints = false;

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
    await mkdir(config.data, { recursive: true, mode: 0o700 });
    // Another instance serving this data folder answers on its control socket: refuse before touching anything.
    await clearStaleSocket(join(config.data, 'control.sock'));

    // 1. The service: remote, or embedded in <data>/service.
    let service = config.service;
    if (!service) {
      const mod = await load<{ EmbeddedService: { start(o: { dataDir: string; listen?: string; logger?: Logger }): Promise<EmbeddedServiceHandle> } }>('../service/index.js');
      this.service = await mod.EmbeddedService.start({ dataDir: join(config.data, 'service'), listen: config.service_listen, logger: logger.child({ part: 'service' }) });
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
    this.vfs = await createVfs({ config: { ...config, service }, logger: logger.child({ part: 'vfs' }), onExchange: this.metrics.observeExchange });

    // 3. The control socket (before the front ends: `ctl status` works while they come up).
    const controlTarget = {
      vfs: this.vfs,
      libraries: () => this.servedLibraries(),
      clientFor: (role: 'enterprise' | 'partner' | 'token') => this.roleClients[role],
      addLibrary: (auth: { org_client_id: string; org_client_secret: string; name?: string }) => this.addLibrary(service.base_url, service.upload_header_prefix, auth),
      removeLibrary: (name: string) => this.vfs.removeLibrary(name),
      describe: () => this.describe(),
    };
    this.control = new ControlServer({
      socketPath: join(config.data, 'control.sock'),
      methods: [...endpointMethods(controlTarget), ...gatewayMethods(controlTarget)],
      logger: logger.child({ part: 'control' }),
    });
    await this.control.start();

    // 4. WebDAV.
    if (config.webdav.listen) {
      const users = config.webdav.users.length > 0 || config.webdav.anonymous ? config.webdav.users : [(this.webdavUser = await defaultWebdavUser(config.data))];
      const mod = await load<{ createWebdavServer(o: Record<string, unknown>): WebdavServerHandle }>('../webdav/index.js');
      this.webdav = mod.createWebdavServer({
        vfs: this.vfs,
        users: users.map((u) => ({ name: u.name, password: u.password, opId: u.op_id, opName: u.op_name, readOnly: u.read_only })),
        anonymous: config.webdav.anonymous === false ? false : { readOnly: config.webdav.anonymous === 'read-only' },
        keepJunkLocal: config.webdav.keep_junk_local,
        dataDir: join(config.data, 'webdav'),
        metrics: this.metrics,
        logger: logger.child({ part: 'webdav' }),
      });
      const { host, port } = parseHostPort(config.webdav.listen, 'webdav listen address');
      this.webdavUrl = await this.webdav.listen(host, port);
    }

    // 5. The mount.
    if (config.mount.path) {
      const fuse = await load<{ mountVfs(o: Record<string, unknown>): Promise<MountHandle> }>('../fuse/index.js');
      this.mount = await fuse.mountVfs({
        vfs: this.vfs,
        mountpoint: config.mount.path,
        uid: config.mount.uid,
        gid: config.mount.gid,
        umask: config.mount.umask,
        allowOther: config.mount.allow_other,
        readOnly: config.mount.read_only,
        attrTimeoutS: config.feed.interval_ms / 1000,
        flushTimeoutMs: 0,
        logger: logger.child({ part: 'fuse' }),
      });
    }

    // 6. Metrics and health.
    this.registerGauges();
    if (config.admin_listen) this.adminUrl = await this.startAdmin(config.admin_listen);

    await this.writeEndpoints();
    logger.info({ webdav: this.webdavUrl, mount: this.mount?.mountpoint ?? null, control: this.control.socketPath, admin: this.adminUrl }, 'gateway ready');
  }

  private newClient(baseUrl: string, prefix: string, credentials: Credentials): ServiceClient {
    const c = new ServiceClient({ baseUrl, credentials, uploadHeaderPrefix: prefix, onExchange: this.metrics.observeExchange });
    this.clients.push(c);
    return c;
  }

  private servedLibraries(): ServedLibrary[] {
    return this.vfs.libraryNames().flatMap((name) => {
      const remote = this.vfs.remoteOf(name);
      return remote instanceof LibraryRemote ? [{ name, client: remote.client }] : [];
    });
  }

  private async addLibrary(baseUrl: string, prefix: string, auth: { org_client_id: string; org_client_secret: string; name?: string }): Promise<{ name: string; id: string }> {
    const client = this.newClient(baseUrl, prefix, { library: { org_client_id: auth.org_client_id, org_client_secret: auth.org_client_secret } });
    const [lib] = await resolveLibraries([{ name: auth.name, client }]);
    await this.vfs.addLibrary(lib!);
    return { name: lib!.name, id: lib!.id };
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
    await writeFileAtomic(join(this.config.data, 'endpoints.json'), JSON.stringify(this.endpoints(), null, 2) + '\n');
  }

  private registerGauges(): void {
    const reg = this.metrics.registry;
    const status = () => this.vfs.status();
    reg.gauge('cloudlib_uploads_pending', 'Files waiting for or in upload', () => [{ value: status().uploads.length }]);
    reg.gauge('cloudlib_uploads_stranded', 'Journal entries of libraries not served', () => [{ value: status().stranded.length }]);
    reg.gauge('cloudlib_local_files', 'Files with local content (open, written, pending)', () => [{ value: status().localFiles }]);
    reg.gauge('cloudlib_feed_lag_seconds', 'Time since the last successful poll of each library feed', () =>
      status().feeds.map((f) => ({ labels: { library: f.library }, value: f.lastPollMs ? (Date.now() - f.lastPollMs) / 1000 : -1 })));
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
      } else if (path === '/metrics') {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(req.method === 'HEAD' ? undefined : this.metrics.registry.render());
      } else if (path === '/healthz') {
        const feeds = this.vfs.status().feeds;
        const failing = feeds.filter((f) => !f.healthy).map((f) => f.library);
        const body = JSON.stringify({ ok: failing.length === 0, failing_feeds: failing, ...this.describe() });
        res.writeHead(failing.length === 0 ? 200 : 503, { 'content-type': 'application/json' }).end(req.method === 'HEAD' ? undefined : body);
      } else {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics or /healthz\n');
      }
    });
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
    if (this.control) await step('closing the control socket', () => this.control.close());
    if (this.admin) await step('closing the admin listener', () => new Promise<void>((r) => { this.admin!.closeAllConnections(); this.admin!.close(() => r()); }));
    if (this.vfs) await step('closing the Vfs', () => this.vfs.close());
    await Promise.all(this.clients.map((c) => step('closing a client', () => c.close())));
    if (this.service) await step('stopping the embedded service', () => this.service!.close());
    log.info('gateway stopped');
  }
}
