/**
 * WebdavServer: the WebDAV front end over a Vfs (class 1 and 2). Authenticates, evaluates the If header,
 * dispatches by method, and guards every request: whatever a request looks like, it ends in a response
 * (or a closed connection), never in an exception that reaches the process.
 */
import { chmod, mkdir } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from '../shared/log.js';
import type { Vfs } from '../vfs/types.js';
import { Authenticator, basicCredentials, type MemberLogins, type Principal, type WebdavUser } from './auth.js';
import { DavRequest, type DavShared } from './context.js';
import { DEFAULT_PROPERTY_LIMITS, DeadPropertyStore } from './dead-properties.js';
import { DavError, statusOf } from './errors.js';
import { JunkStore } from './junk-store.js';
import { LockTable } from './lock-table.js';
import { get, options } from './methods/read.js';
import { lock, releaseServiceLock, unlock } from './methods/lock.js';
import { propfind, proppatch } from './methods/props.js';
import { transfer } from './methods/transfer.js';
import { del, mkcol, put } from './methods/write.js';
import { refuseInReadOnlyView } from './read-only-view.js';
import { sendError, sendStatus } from './reply.js';

/** Counters the gateway's /metrics shows (optional). */
export interface WebdavMetrics {
  requests: { inc(labels?: Record<string, string>, by?: number): void };
  bytesWritten?: { inc(labels?: Record<string, string>, by?: number): void };
}

export interface WebdavServerOptions {
  vfs: Vfs;
  /** Users allowed in (HTTP Basic and Digest). Default none. */
  users?: WebdavUser[];
  /** Members of the service logging in as themselves (Basic only), each through their own Vfs. Default none. */
  memberLogins?: MemberLogins;
  /** Anonymous access: false (default), true (read-write) or `{ readOnly }`. */
  anonymous?: boolean | { readOnly?: boolean };
  /** Keep `._*`, `.DS_Store`, `Thumbs.db`, `desktop.ini` on the gateway's disk only. Default true. */
  keepJunkLocal?: boolean;
  /** Folder for the dead property store, the lock table and local junk. Required. */
  dataDir: string;
  logger: Logger;
  metrics?: WebdavMetrics;
  /** How long the upload of a new empty file waits for the content that usually follows, ms. Default 2000. */
  emptyCreateGraceMs?: number;
  /** Largest XML request body, bytes (larger: 413). Default 1 MiB. */
  maxXmlBytes?: number;
  /** Dead properties one resource may hold (more: 507). Default 1000. */
  maxPropertiesPerResource?: number;
  /** Bytes of dead properties (names and values) one resource may hold (more: 507). Default 1 MiB. */
  maxPropertyBytesPerResource?: number;
  /** Largest value of one dead property, bytes (larger: 507). Default 64 KiB. */
  maxPropertyValueBytes?: number;
  /** Realm shown by clients. Default `cloudlib`. */
  realm?: string;
  /** Connection limits and timeouts (docs/webdav.md). */
  limits?: Partial<ConnectionLimits>;
}

/** How long a client may take and how much of the server it may hold. */
export interface ConnectionLimits {
  /** A request's headers must arrive within this, ms (else 408). Default 30 000. */
  headersTimeoutMs: number;
  /** A request body that stops arriving (no byte for this long, ms) is cut (408). Also an answer the client stops reading. Default 60 000. */
  idleTimeoutMs: number;
  /** An idle kept-alive connection is closed after this, ms. Default 5 000. */
  keepAliveTimeoutMs: number;
  /** A whole request (headers and body) must arrive within this, ms; 0 = no bound beyond the idle one. Default 21 600 000 (6 h). */
  requestTimeoutMs: number;
  /** Connections one client address may hold at once; more are answered 503 and closed. Default 64. */
  maxConnectionsPerClient: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 30_000,
  idleTimeoutMs: 60_000,
  keepAliveTimeoutMs: 5_000,
  requestTimeoutMs: 6 * 3600_000,
  maxConnectionsPerClient: 64,
};

export interface WebdavServer {
  /** The request handler (for an existing http.Server). */
  handler(req: IncomingMessage, res: ServerResponse): void;
  /** Listens (host default 127.0.0.1); resolves with the base URL, e.g. `http://127.0.0.1:8080/`. */
  listen(host?: string, port?: number): Promise<string>;
  /** Stops listening, persists locks. */
  close(): Promise<void>;
}

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PROPFIND']);

export function createWebdavServer(opts: WebdavServerOptions): WebdavServer {
  if (!opts.vfs) throw new TypeError('createWebdavServer: expected a vfs, got none');
  if (typeof opts.dataDir !== 'string' || opts.dataDir === '') throw new TypeError(`createWebdavServer: expected a dataDir, got ${JSON.stringify(opts.dataDir)}`);
  const logger = opts.logger;
  const anonymous = opts.anonymous === true ? { readOnly: false } : opts.anonymous ? { readOnly: !!opts.anonymous.readOnly } : false;
  const auth = new Authenticator({ users: opts.users ?? [], anonymous, realm: opts.realm });
  // Members log in with Basic only (the gateway keeps no password to check a Digest answer against).
  const challenges = (stale = false): string[] => (opts.memberLogins?.loginsOn ? auth.challenges(stale).filter((c) => c.startsWith('Basic')) : auth.challenges(stale));
  const shared: DavShared = {
    vfs: opts.vfs,
    props: new DeadPropertyStore(opts.dataDir, {
      maxPerObject: opts.maxPropertiesPerResource ?? DEFAULT_PROPERTY_LIMITS.maxPerObject,
      maxBytesPerObject: opts.maxPropertyBytesPerResource ?? DEFAULT_PROPERTY_LIMITS.maxBytesPerObject,
    }),
    junk: new JunkStore(opts.dataDir),
    emptyCreateGraceMs: opts.emptyCreateGraceMs ?? 2000,
    keepJunkLocal: opts.keepJunkLocal ?? true,
    logger,
    maxXmlBytes: opts.maxXmlBytes ?? 1024 * 1024,
    maxPropertyValueBytes: opts.maxPropertyValueBytes ?? 64 * 1024,
    // Counted where the body is consumed: a 'data' listener here would switch the request to flowing
    // mode and lose the bytes that arrive before the handler reads them.
    countBodyBytes: opts.metrics?.bytesWritten ? (n) => opts.metrics!.bytesWritten!.inc({ frontend: 'webdav' }, n) : undefined,
    locks: new LockTable({
      dataDir: opts.dataDir,
      logger,
      onExpire: (l) => {
        if (l.serviceLock) void releaseServiceLock({ vfs: opts.vfs, call: {}, shared }, l);
      },
    }),
  };
  // The folder holds properties, locks and local junk files: the owner's only (0700, files 0600).
  const opened = mkdir(opts.dataDir, { recursive: true, mode: 0o700 })
    .then(() => chmod(opts.dataDir, 0o700))
    .catch((err: unknown) => logger.warn({ err, dir: opts.dataDir }, 'webdav: data folder not made private'))
    .then(() => shared.locks.open())
    .catch((err: unknown) => logger.warn({ err }, 'webdav: lock table not opened'));
  const limits: ConnectionLimits = { ...DEFAULT_CONNECTION_LIMITS, ...opts.limits };
  for (const [k, v] of Object.entries(limits)) {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new TypeError(`createWebdavServer: expected limits.${k} to be a number ≥ 0, got ${JSON.stringify(v)}`);
  }
  if (limits.idleTimeoutMs === 0 || limits.headersTimeoutMs === 0 || limits.keepAliveTimeoutMs === 0) {
    throw new TypeError('createWebdavServer: the idle, header and keep-alive timeouts must be above 0 (a client could hold a connection forever)');
  }
  if (limits.maxConnectionsPerClient < 1) throw new TypeError(`createWebdavServer: expected limits.maxConnectionsPerClient ≥ 1, got ${limits.maxConnectionsPerClient}`);
  const labels = (method: string, status: number): Record<string, string> => ({ frontend: 'webdav', op: method.toLowerCase(), status: String(status) });

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    await opened;
    const method = (req.method ?? 'GET').toUpperCase();
    if (method === 'OPTIONS') {
      options({ res } as DavRequest);
      return;
    }
    const outcome = auth.check(req);
    let principal: Principal | null = outcome.principal;
    const member = !principal && opts.memberLogins?.loginsOn ? basicCredentials(req.headers.authorization) : undefined;
    if (member && !auth.hasUser(member.user)) {
      const login = await opts.memberLogins!.login(member.user, member.password, (req.socket.remoteAddress ?? '').replace(/^::ffff:/, ''));
      if ('vfs' in login) principal = { user: member.user, readOnly: false, vfs: login.vfs };
    } else if (principal?.user && opts.memberLogins?.forUser) {
      // A configured user acting as a member: the member's own Vfs, the member the operator.
      const vfs = await opts.memberLogins.forUser(principal.user);
      if (vfs) principal = { ...principal, operator: undefined, vfs };
    }
    if (!principal) {
      const body = Buffer.from('401 authentication required\n');
      res.writeHead(401, { 'www-authenticate': challenges('stale' in outcome && outcome.stale), 'content-type': 'text/plain; charset=utf-8', 'content-length': String(body.length) });
      res.end(body);
      return;
    }
    if (principal.user === null && principal.readOnly && !READ_METHODS.has(method)) {
      res.writeHead(401, { 'www-authenticate': challenges(), 'content-length': '0' });
      res.end();
      return;
    }
    // An application is being served: background work of its Vfs (the uploads) gives way meanwhile.
    (principal.vfs ?? opts.vfs).foreground?.touch();
    const r = new DavRequest(shared, req, res, principal);
    await r.checkIf();
    await refuseInReadOnlyView(r, method);
    switch (method) {
      case 'GET': return get(r, false);
      case 'HEAD': return get(r, true);
      case 'PROPFIND': return propfind(r);
      case 'PROPPATCH': return proppatch(r);
      case 'PUT': return put(r);
      case 'MKCOL': return mkcol(r);
      case 'DELETE': return del(r);
      case 'COPY': return transfer(r, false);
      case 'MOVE': return transfer(r, true);
      case 'LOCK': return lock(r);
      case 'UNLOCK': return unlock(r);
      default: throw new DavError(405, `method ${method.slice(0, 20)} is not supported`);
    }
  }

  /** The request being served on each connection (the idle timeout tells a stalled client from a busy server). */
  const serving = new WeakMap<Socket, { req: IncomingMessage; res: ServerResponse }>();

  function handler(req: IncomingMessage, res: ServerResponse): void {
    const t0 = Date.now();
    const method = (req.method ?? 'GET').toUpperCase();
    const socket = req.socket;
    serving.set(socket, { req, res });
    res.on('close', () => { if (serving.get(socket)?.req === req) serving.delete(socket); });
    req.on('error', (err) => logger.debug({ err }, 'webdav: request stream error'));
    res.on('error', (err) => logger.debug({ err }, 'webdav: response stream error'));
    res.on('finish', () => {
      opts.metrics?.requests.inc(labels(method, res.statusCode));
      logger.debug({ method, url: req.url, status: res.statusCode, ms: Date.now() - t0 }, 'webdav request');
    });
    let p: Promise<void>;
    try {
      p = serve(req, res);
    } catch (err) {
      p = Promise.reject(err);
    }
    p.then(
      () => {
        if (!res.headersSent && !res.writableEnded) sendStatus(res, 204);
        // An unread body (refused request) is drained so the connection stays usable.
        if (!req.readableEnded) req.resume();
      },
      (err: unknown) => {
        const status = statusOf(err);
        if (res.destroyed || req.readableAborted) {
          logger.debug({ err, method, url: req.url }, 'webdav: client went away');
        } else if (status >= 500) {
          logger.warn({ err, method, url: req.url, status }, 'webdav: request failed');
        } else {
          logger.debug({ method, url: req.url, status, reason: (err as Error)?.message }, 'webdav: request refused');
        }
        try {
          sendError(res, err, method);
        } catch (sendErr) {
          logger.warn({ err: sendErr }, 'webdav: could not answer');
          res.destroy();
        }
        if (!req.readableEnded) req.resume();
      },
    ).catch((err: unknown) => {
      logger.error({ err }, 'webdav: unexpected failure in the request guard');
      res.destroy();
    });
  }

  let server: Server | undefined;
  const sockets = new Set<Socket>();
  return {
    handler,
    async listen(host = '127.0.0.1', port = 0) {
      server = createServer({
        requestTimeout: limits.requestTimeoutMs,
        headersTimeout: limits.requestTimeoutMs > 0 ? Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) : limits.headersTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        // How often the header and request timeouts are checked.
        connectionsCheckingInterval: Math.max(100, Math.min(30_000, Math.floor(limits.headersTimeoutMs / 4))),
      }, handler);
      // Socket inactivity: a body that stops arriving, an answer not read, a connection left idle.
      server.timeout = limits.idleTimeoutMs;
      server.on('timeout', (socket: Socket) => {
        const current = serving.get(socket);
        if (current) {
          const { req, res } = current;
          // Waiting on the server, not on the client: the body is all in, or as much of it is buffered as
          // is taken before the handler reads on (backpressure); and nothing is queued for the client to take.
          const waitingOnUs = (req.complete || req.readableLength >= req.readableHighWaterMark) && socket.writableLength === 0;
          if (waitingOnUs) return;
          logger.info({ method: req.method, url: req.url, idleMs: limits.idleTimeoutMs, client: socket.remoteAddress }, req.complete ? 'webdav: client stopped reading the answer; connection closed' : 'webdav: request body stopped arriving; connection closed');
          if (!res.headersSent && !req.complete) {
            res.writeHead(408, { connection: 'close', 'content-type': 'text/plain; charset=utf-8' });
            res.end(`408 no byte of the request body for ${Math.round(limits.idleTimeoutMs / 1000)} s\n`);
            setTimeout(() => socket.destroy(), 1000).unref();
            return;
          }
        }
        socket.destroy();
      });
      server.on('clientError', (err, socket) => {
        logger.debug({ err }, 'webdav: malformed HTTP');
        const timedOut = (err as NodeJS.ErrnoException).code === 'ERR_HTTP_REQUEST_TIMEOUT';
        if (socket.writable) socket.end(`HTTP/1.1 ${timedOut ? '408 Request Timeout' : '400 Bad Request'}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
        else socket.destroy();
      });
      const perClient = new Map<string, number>();
      server.on('connection', (s: Socket) => {
        const client = (s.remoteAddress ?? '').replace(/^::ffff:/, '');
        const n = (perClient.get(client) ?? 0) + 1;
        if (n > limits.maxConnectionsPerClient) {
          logger.warn({ client, limit: limits.maxConnectionsPerClient }, 'webdav: too many connections from one client; refused');
          s.on('error', () => undefined);
          s.end('HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\nretry-after: 5\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 34\r\n\r\n503 too many connections from you\n');
          setTimeout(() => s.destroy(), 1000).unref();
          return;
        }
        perClient.set(client, n);
        sockets.add(s);
        s.on('close', () => {
          sockets.delete(s);
          const left = (perClient.get(client) ?? 1) - 1;
          if (left <= 0) perClient.delete(client);
          else perClient.set(client, left);
        });
      });
      await new Promise<void>((resolve, reject) => {
        server!.once('error', reject);
        server!.listen(port, host, () => {
          server!.off('error', reject);
          resolve();
        });
      });
      const a = server.address() as AddressInfo;
      const shown = a.family === 'IPv6' ? `[${a.address}]` : a.address;
      const url = `http://${shown}:${a.port}/`;
      logger.info({ url }, 'webdav: listening');
      return url;
    },
    async close() {
      if (server) {
        const s = server;
        server = undefined;
        await new Promise<void>((resolve) => {
          s.close(() => resolve());
          s.closeIdleConnections();
          setTimeout(() => { for (const c of sockets) c.destroy(); }, 2000).unref();
        });
      }
      await opened;
      await shared.locks.close();
    },
  };
}
