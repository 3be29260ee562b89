/**
 * EmbeddedService: the service of spec/service-api.md on one HTTP listener — the JSON endpoints
 * (`/m-open/*`, `/m-api/*`), the upload server below `/upload`, share-link pages below `/link`, download
 * links below `/download` and `GET /m-open/status`. Data lives in one folder: `service.db` (SQLite, unless
 * PostgreSQL holds the metadata), `blobs/` (content by SHA-1, unless an S3-compatible store holds it),
 * `tmp/` (uploads in progress, unless a shared staging folder holds them) and `credentials.json` (written
 * once the service is ready to serve). With the metadata in PostgreSQL, any number of processes on the
 * same stores serve one set of libraries: every state that matters across requests is in the stores
 * (docs/service.md, "Several processes").
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdir, rm } from 'node:fs/promises';
import { writeFileAtomic } from '../shared/atomic-file.js';
import { findEndpoint } from '../shared/endpoints.js';
import { join } from 'node:path';
import { silentLogger, type Logger } from '../shared/log.js';
import { metadataStoreAt } from './store/metadata-location.js';
import type { MetadataStore } from './store/metadata-store.js';
import { blobStoreAt } from './store/blob-location.js';
import { StoredBlobLocks } from './store/blob-locks.js';
import { Directory, type BootstrapCredentials } from './domain/directory.js';
import { FileTree } from './domain/file-tree.js';
import { FileQueries } from './domain/file-queries.js';
import { LibraryContent } from './domain/content.js';
import { PendingUploads } from './domain/pending-uploads.js';
import { FileCopies } from './domain/copy-queue.js';
import { Authenticator, type ReplayPolicy } from './http/auth.js';
import { Router } from './http/router.js';
import { DownloadLinks } from './http/download-links.js';
import { sendFault, sendJson } from './http/reply.js';
import { FaultCode, ServiceFault } from './domain/fault.js';
import { UploadServer } from './upload/upload-server.js';
import { ShareLinks } from './links/share-links.js';
import { LinkPages } from './links/link-pages.js';
import { LibraryUploadHost } from './hosts/upload-host.js';
import { LibraryLinkHost } from './hosts/link-host.js';
import { DailyTraffic, type TrafficKind } from './domain/daily-traffic.js';
import { registerTrafficStats } from './api/traffic-stats.js';
import { LinkTrafficCap } from './domain/traffic-cap.js';
import { registerOrgLog } from './api/org-log.js';
import { registerEntMembers } from './api/ent-members.js';
import { registerEntApi } from './api/ent.js';
import { registerEntSync } from './api/ent-sync.js';
import { registerPartnerApi } from './api/partner.js';
import { LibraryPreviewHost } from './hosts/preview-host.js';
import { PreviewServer } from './preview/index.js';
import { registerFileApi } from './api/file.js';
import { registerOrgApi } from './api/org.js';
import { registerMemberApis } from './api/permissions.js';
import { registerVendorRoutes } from './api/vendor-routes.js';
import type { ServiceParts } from './api/context.js';
import { AccessTokens, type TokenGrant } from './domain/tokens.js';
import { MetadataTemplates, type MetadataTemplate } from './domain/metadata.js';
import { EnterpriseTerm } from './domain/enterprise-term.js';

/** The content of `credentials.json`. */
export interface ServiceCredentials extends BootstrapCredentials {
  base_url: string;
  upload_server: string;
}

export interface EmbeddedServiceOptions {
  /** Folder of the service's data (created when missing). */
  dataDir: string;
  /** `host:port` to listen on. Default `127.0.0.1:0` (an ephemeral port). */
  listen?: string;
  logger?: Logger;
  /** Clock in milliseconds. Default Date.now. */
  clock?: () => number;
  /**
   * Serve HTTPS with this certificate and key (PEM). The request signature covers values only, so on an
   * open network the service belongs behind TLS (docs/service.md, "Signatures and TLS").
   */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /**
   * The address clients reach the service at, when it is not the listener's own (behind a port mapping,
   * or a TLS-terminating proxy in front: `https://files.example.com`). Credentials, links, preview and
   * download URLs and the upload server address use it. Default: the listen address (127.0.0.1 for 0.0.0.0).
   */
  publicUrl?: string;
  /**
   * Where file content lives (store/blob-location.ts): `file:///FOLDER` or `s3://BUCKET?endpoint=URL`.
   * Default `file://<dataDir>/blobs`.
   */
  blobs?: string;
  /**
   * Where the metadata lives (store/metadata-location.ts): `postgresql://USER@HOST:PORT/DB`. Default
   * SQLite in `<dataDir>/service.db`.
   */
  metadata?: string;
  /**
   * Folder of the chunked uploads in progress (one temporary file per session), with a folder blob store
   * only: every process of one service (same `metadata`) must name the same folder, so a session's parts
   * may reach any of them. Default `<dataDir>/tmp/upload/sessions`. With an S3 blob store the uploads in
   * progress are staged in the bucket, and a folder given here is refused.
   */
  uploadStaging?: string;
  /**
   * What happens to a signature already used for another endpoint within the dateline window
   * (http/auth.ts ReplayPolicy): `address` (default) accepts it from the address that first used it,
   * `strict` refuses it on calls that change state, `off` remembers no signature.
   */
  replayPolicy?: ReplayPolicy;
}

export class EmbeddedService {
  readonly dataDir: string;
  readonly baseUrl: string;
  readonly uploadServer: string;
  readonly credentials: ServiceCredentials;
  /** The service's parts (tests and benchmarks reach storage through them). */
  readonly parts: ServiceParts;
  readonly router: Router;
  private closing: Promise<void> | undefined;

  private constructor(args: { dataDir: string; baseUrl: string; credentials: ServiceCredentials; parts: ServiceParts; router: Router; server: Server; db: MetadataStore }) {
    this.dataDir = args.dataDir;
    this.baseUrl = args.baseUrl;
    this.uploadServer = `${args.baseUrl}/upload`;
    this.credentials = args.credentials;
    this.parts = args.parts;
    this.router = args.router;
    this.server = args.server;
    this.db = args.db;
  }

  private readonly server: Server;
  private readonly db: MetadataStore;

  static async start(opts: EmbeddedServiceOptions): Promise<EmbeddedService> {
    const clock = opts.clock ?? Date.now;
    // Parts bind their own `component`: they are children of the base logger, not of `log` (a key bound twice repeats in the line).
    const baseLog = opts.logger ?? silentLogger;
    const log = baseLog.child({ component: 'service' });
    const { host, port } = parseListen(opts.listen ?? '127.0.0.1:0');
    const dataDir = opts.dataDir;
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    const tmp = join(dataDir, 'tmp');
    const blobs = blobStoreAt(opts.blobs, dataDir, tmp);
    await blobs.open();
    await mkdir(join(tmp, 'upload'), { recursive: true, mode: 0o700 });
    await mkdir(join(tmp, 'links'), { recursive: true, mode: 0o700 });
    await rm(join(tmp, 'forms'), { recursive: true, force: true }); // parts of requests cut by a stop
    await mkdir(join(tmp, 'forms'), { recursive: true, mode: 0o700 });

    const db = await metadataStoreAt(opts.metadata, dataDir).catch(async (err: unknown) => {
      blobs.close();
      throw err;
    });
    try {
      // refused before anything starts: a staging folder with a store that stages in its bucket
      const staging = blobs.stagedUploads(db, opts.uploadStaging);
      const directory = new Directory(db, clock);
      const boot = await directory.bootstrap();
      const tree = new FileTree(db, directory, clock);
      const queries = new FileQueries(tree, directory);
      const content = new LibraryContent(tree, blobs, log, db.engine === 'postgresql' ? new StoredBlobLocks(db, blobs) : blobs);
      const uploads = new PendingUploads(tree, content, clock);
      await uploads.expire();
      const copies = new FileCopies(tree, queries, content, clock, log);
      await copies.open();
      const uploadHost = new LibraryUploadHost(join(tmp, 'upload'), directory, tree, content, uploads, clock);
      const uploadServer = new UploadServer(uploadHost, { db, logger: baseLog, clock, staging });
      await uploadServer.open();

      // The listener starts before the parts that need the address; nothing is announced until
      // credentials.json exists, and requests arriving earlier are answered 503.
      const ready: { handler?: (req: IncomingMessage, res: ServerResponse) => void } = {};
      const listener = (req: IncomingMessage, res: ServerResponse): void => {
        if (ready.handler) ready.handler(req, res);
        else sendJson(res, 503, { error_code: 50301, error_msg: 'starting' });
      };
      const server: Server = opts.tls ? createHttpsServer({ cert: opts.tls.cert, key: opts.tls.key }, listener) : createServer(listener);
      server.keepAliveTimeout = 30_000;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => { server.off('error', reject); resolve(); });
      });
      const addr = server.address() as AddressInfo;
      const reachable = addr.address === '0.0.0.0' ? '127.0.0.1' : addr.address === '::' ? '::1' : addr.address;
      const baseUrl = opts.publicUrl !== undefined
        ? parsePublicUrl(opts.publicUrl)
        : `${opts.tls ? 'https' : 'http'}://${reachable.includes(':') ? `[${reachable}]` : reachable}:${addr.port}`;
      const uploadServerUrl = `${baseUrl}/upload`;

      const traffic = new DailyTraffic(db, clock);
      const countTraffic = (lib: number, kind: TrafficKind, bytes: number): void => traffic.count(lib, kind, bytes);
      const linkCap = new LinkTrafficCap(db, traffic);
      const term = new EnterpriseTerm(db, clock);
      const links = new ShareLinks(new LibraryLinkHost(join(tmp, 'links'), tree, queries, content, clock, countTraffic, async (id) => linkCap.check(id),
        async (id) => term.requireOpen((await directory.requireLibrary(id)).ent_id)), { db, dataDir, baseUrl, clock, logger: baseLog });
      await links.open();
      const pages = new LinkPages(links);
      const downloads = new DownloadLinks({ baseUrl, key: await directory.secret('download-links'), blobs, clock, logger: log, countTraffic });
      const previews = new PreviewServer({
        host: new LibraryPreviewHost(blobs, await directory.secret('preview-links'), join(dataDir, 'cache'), countTraffic),
        logger: baseLog.child({ component: 'preview' }),
        clock,
      });
      const parts: ServiceParts = { directory, tree, queries, content, uploads, copies, downloads, links, uploadServer, uploadServerUrl, baseUrl, previews, countTraffic, traffic, clock };
      // create_file may carry its content as a multipart part (the official SDKs' createFile)
      const router = new Router(new Authenticator(directory, clock, db, opts.replayPolicy ?? 'address'), log, {
        tempDir: join(tmp, 'forms'), fileEndpoints: ['/m-open/1/file/create_file'],
        // The file API's changes whose work is all in the metadata store's transactions, and its reads
        // whose work is all in its statements: on PostgreSQL the replay guard's record goes in their first
        // transaction's round trip, or in one statement with their first read.
        ...(db.request && db.sendAhead ? {
          request: db.request.bind(db), sendAhead: db.sendAhead.bind(db),
          guardAhead: (['create_folder', 'create_file', 'move', 'del', 'add_tag', 'lock', 'ls', 'info', 'download_url', 'updates'] as const).map((n) => findEndpoint('file', n)!.def.path),
        } : {}),
        // An enterprise whose trial or subscription ended reads but changes nothing; its partner's calls
        // (order renews it) are not its own.
        admit: async (endpoint, caller) => {
          if (endpoint.def.idempotent || endpoint.family === 'partner') return;
          // A library's caller came with its enterprise's term: no statement of its own.
          if (caller.libraryTerm !== undefined) return term.requireOpenAt(caller.libraryTerm);
          const entId = caller.library?.ent_id ?? caller.enterprise?.id ?? caller.member?.ent_id;
          if (entId !== undefined) await term.requireOpen(entId);
        },
      });
      registerFileApi(router, parts);
      registerOrgApi(router, parts);
      registerTrafficStats(router, parts);
      registerOrgLog(router, parts);
      registerEntMembers(router, parts);
      registerEntApi(router, parts);
      registerEntSync(router, parts);
      const consoleLogin = await registerPartnerApi(router, parts);
      await registerMemberApis(router, parts);
      registerVendorRoutes(router, parts, consoleLogin);

      ready.handler = (req, res) => {
        void dispatch(req, res).catch((err: unknown) => sendFault(res, err, log));
      };
      const dispatch = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
        const url = new URL(req.url ?? '/', baseUrl);
        const path = url.pathname;
        if (path.startsWith('/upload/')) return uploadServer.handle(req, res, path.slice('/upload'.length));
        if (path.startsWith('/link/')) return pages.handle(req, res, path.slice('/link'.length));
        if (path.startsWith('/download/')) return downloads.handle(req, res, path.slice('/download'.length));
        if (path.startsWith('/preview/')) return previews.handle(req, res, path.slice('/preview'.length));
        if (path === '/m-open/status') return sendJson(res, 200, { status: 'ok' });
        if (consoleLogin.owns(path)) return consoleLogin.handle(req, res, path);
        if (router.owns(path)) return router.handle(req, res, url);
        req.resume();
        sendFault(res, new ServiceFault(FaultCode.NoSuchEndpoint, `no endpoint ${path}`), log);
      };

      const credentials: ServiceCredentials = { base_url: baseUrl, upload_server: uploadServerUrl, ...boot };
      const service = new EmbeddedService({ dataDir, baseUrl, credentials, parts, router, server, db });
      await writeCredentials(join(dataDir, 'credentials.json'), credentials);
      log.info({ baseUrl, dataDir, blobs: blobs.location }, 'service ready');
      return service;
    } catch (err) {
      await db.close();
      blobs.close();
      throw err;
    }
  }

  /** Stops listening, ends open connections, waits for background work, closes the database. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
      this.server.closeIdleConnections();
      const force = setTimeout(() => this.server.closeAllConnections(), 2_000);
      await closed;
      clearTimeout(force);
      await this.parts.uploadServer.close();
      await this.parts.copies.close();
      await this.parts.content.settled();
      await this.parts.traffic.flush();
      await this.db.close();
      this.parts.content.blobs.close();
    })();
    return this.closing;
  }
}

/**
 * Administration of a service's stores without serving (`cloudlib service token` and `metadata`): the
 * same stores the service opens, the same migrations.
 */
export class ServiceAdmin {
  private constructor(private readonly db: MetadataStore) {}

  static async open(opts: { dataDir: string; metadata?: string }): Promise<ServiceAdmin> {
    return new ServiceAdmin(await metadataStoreAt(opts.metadata, opts.dataDir));
  }

  /**
   * Mints an access token of member `account` for an application (default: the first by client id, which
   * is the service's own `app_…` before the partners' `pt_…`); `password` also sets the member's password.
   */
  async mintToken(req: { account: string; clientId?: string; ttlMs: number; password?: string }): Promise<TokenGrant & { member_id: number; client_id: string; client_secret: string }> {
    const member = await this.db.get<{ id: number; state: number }>('SELECT id, state FROM members WHERE account = ?', [req.account]);
    if (!member) throw new Error(`token: no member with account ${JSON.stringify(req.account)}`);
    if (member.state !== 1) throw new Error(`token: the account ${JSON.stringify(req.account)} is disabled`);
    const app = req.clientId !== undefined
      ? await this.db.get<{ client_id: string; client_secret: string }>('SELECT client_id, client_secret FROM applications WHERE client_id = ?', [req.clientId])
      : await this.db.get<{ client_id: string; client_secret: string }>('SELECT client_id, client_secret FROM applications ORDER BY client_id LIMIT 1');
    if (!app) throw new Error(req.clientId !== undefined ? `token: no application ${JSON.stringify(req.clientId)}` : 'token: the service has no application');
    const tokens = new AccessTokens(this.db, Date.now);
    if (req.password !== undefined) await tokens.setPassword(member.id, req.password);
    const grant = await tokens.issue(member.id, app.client_id, req.ttlMs);
    return { ...grant, member_id: member.id, client_id: app.client_id, client_secret: app.client_secret };
  }

  /** Defines (or replaces) a metadata template of the enterprise of library `orgId` (default the first library) and links it to that library. */
  async defineTemplate(orgId: number | undefined, template: unknown): Promise<{ ent_id: number; org_id: number; template: MetadataTemplate }> {
    const lib = orgId !== undefined
      ? await this.db.get<{ id: number; ent_id: number }>('SELECT id, ent_id FROM libraries WHERE id = ? AND deleted = 0', [orgId])
      : await this.db.get<{ id: number; ent_id: number }>('SELECT id, ent_id FROM libraries WHERE deleted = 0 ORDER BY id LIMIT 1');
    if (!lib) throw new Error(orgId !== undefined ? `metadata: no library ${orgId}` : 'metadata: the service has no library');
    const templates = new MetadataTemplates(this.db);
    const defined = await this.db.tx(async () => {
      const t = await templates.define(lib.ent_id, template);
      await templates.link(lib.id, t.key);
      return t;
    });
    return { ent_id: lib.ent_id, org_id: lib.id, template: defined };
  }

  close(): Promise<void> {
    return this.db.close();
  }
}

/** A public base URL: http(s), no query or fragment; the trailing `/` dropped. */
export function parsePublicUrl(text: string): string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new TypeError(`public URL: expected an http(s) URL such as https://files.example.com, got ${JSON.stringify(text)}`);
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '') {
    throw new TypeError(`public URL: expected an http(s) URL without query, fragment or user, got ${JSON.stringify(text)}`);
  }
  return `${u.origin}${u.pathname.replace(/\/+$/, '')}`;
}

export function parseListen(listen: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(listen.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65_535) throw new TypeError(`listen: expected host:port (e.g. 127.0.0.1:8900), got ${JSON.stringify(listen)}`);
  return { host: m[1] ?? m[2]!, port };
}

async function writeCredentials(file: string, credentials: ServiceCredentials): Promise<void> {
  await writeFileAtomic(file, JSON.stringify(credentials, null, 2) + '\n', { durability: 'fsync-file-and-folder', mode: 0o600 });
}
