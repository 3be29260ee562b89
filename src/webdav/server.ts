/**
 * WebdavServer: the WebDAV front end over a Vfs (class 1 and 2). Authenticates, evaluates the If header,
 * dispatches by method, and guards every request: whatever a request looks like, it ends in a response
 * (or a closed connection), never in an exception that reaches the process.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from '../shared/log.js';
import type { Vfs } from '../vfs/types.js';
import { Authenticator, type WebdavUser } from './auth.js';
import { DavRequest, type DavShared } from './context.js';
import { DeadPropertyStore } from './dead-properties.js';
import { EmptyCreates } from './empty-creates.js';
import { DavError, statusOf } from './errors.js';
import { JunkStore } from './junk-store.js';
import { LockTable } from './lock-table.js';
import { get, options } from './methods/read.js';
import { lock, releaseServiceLock, unlock } from './methods/lock.js';
import { propfind, proppatch } from './methods/props.js';
import { transfer } from './methods/transfer.js';
import { del, mkcol, put } from './methods/write.js';
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
  /** Anonymous access: false (default), true (read-write) or `{ readOnly }`. */
  anonymous?: boolean | { readOnly?: boolean };
  /** Keep `._*`, `.DS_Store`, `Thumbs.db`, `desktop.ini` on the gateway's disk only. Default true. */
  keepJunkLocal?: boolean;
  /** Folder for the dead property store, the lock table and local junk. Required. */
  dataDir: string;
  logger: Logger;
  metrics?: WebdavMetrics;
  /** How long a new empty file is held for the content that usually follows, ms. Default 2000. */
  emptyCreateGraceMs?: number;
  /** Largest XML request body, bytes. Default 1 MiB. */
  maxXmlBytes?: number;
  /** Realm shown by clients. Default `cloudlib`. */
  realm?: string;
}

export interface WebdavServer {
  /** The request handler (for an existing http.Server). */
  handler(req: IncomingMessage, res: ServerResponse): void;
  /** Listens (host default 127.0.0.1); resolves with the base URL, e.g. `http://127.0.0.1:8080/`. */
  listen(host?: string, port?: number): Promise<string>;
  /** Stops listening, commits held files, persists locks. */
  close(): Promise<void>;
}

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PROPFIND']);

export function createWebdavServer(opts: WebdavServerOptions): WebdavServer {
  if (!opts.vfs) throw new TypeError('createWebdavServer: expected a vfs, got none');
  if (typeof opts.dataDir !== 'string' || opts.dataDir === '') throw new TypeError(`createWebdavServer: expected a dataDir, got ${JSON.stringify(opts.dataDir)}`);
  const logger = opts.logger;
  const anonymous = opts.anonymous === true ? { readOnly: false } : opts.anonymous ? { readOnly: !!opts.anonymous.readOnly } : false;
  const auth = new Authenticator({ users: opts.users ?? [], anonymous, realm: opts.realm });
  const emptyCreates = new EmptyCreates({ vfs: opts.vfs, logger, graceMs: opts.emptyCreateGraceMs });
  const shared: DavShared = {
    vfs: opts.vfs,
    props: new DeadPropertyStore(opts.dataDir),
    junk: new JunkStore(opts.dataDir),
    emptyCreates,
    keepJunkLocal: opts.keepJunkLocal ?? true,
    logger,
    maxXmlBytes: opts.maxXmlBytes ?? 1024 * 1024,
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
  const opened = shared.locks.open().catch((err: unknown) => logger.warn({ err }, 'webdav: lock table not opened'));
  const labels = (method: string, status: number): Record<string, string> => ({ frontend: 'webdav', op: method.toLowerCase(), status: String(status) });

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    await opened;
    const method = (req.method ?? 'GET').toUpperCase();
    if (method === 'OPTIONS') {
      options({ res } as DavRequest);
      return;
    }
    const outcome = auth.check(req);
    const principal = outcome.principal;
    if (!principal) {
      const body = Buffer.from('401 authentication required\n');
      res.writeHead(401, { 'www-authenticate': auth.challenges('stale' in outcome && outcome.stale), 'content-type': 'text/plain; charset=utf-8', 'content-length': String(body.length) });
      res.end(body);
      return;
    }
    if (principal.user === null && principal.readOnly && !READ_METHODS.has(method)) {
      res.writeHead(401, { 'www-authenticate': auth.challenges(), 'content-length': '0' });
      res.end();
      return;
    }
    const r = new DavRequest(shared, req, res, principal);
    await r.checkIf();
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

  function handler(req: IncomingMessage, res: ServerResponse): void {
    const t0 = Date.now();
    const method = (req.method ?? 'GET').toUpperCase();
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
      server = createServer({ requestTimeout: 0, headersTimeout: 60_000, keepAliveTimeout: 5_000 }, handler);
      server.timeout = 0;
      server.on('clientError', (err, socket) => {
        logger.debug({ err }, 'webdav: malformed HTTP');
        if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
        else socket.destroy();
      });
      server.on('connection', (s: Socket) => {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
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
      await emptyCreates.close();
      await opened;
      await shared.locks.close();
    },
  };
}
