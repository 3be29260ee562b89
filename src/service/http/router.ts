/**
 * Router: the service's JSON endpoints. Endpoint families register handlers by family and name of the
 * EndpointTable (src/shared/endpoints.ts), so the service's routes are the table's paths and cannot
 * drift from the client. For every request: parameters are read, the caller authenticated (client id,
 * dateline, signature), the parameters validated against the table (required, types, one-of; unknown
 * names tolerated), then the handler runs. Endpoints of the table without a handler answer
 * 501/50101 "not supported".
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { allEndpoints, findEndpoint, validateParams, type EndpointDef, type EndpointName, type EndpointRef, type Endpoints, type Family, type ResultOf } from '../../shared/endpoints.js';
import type { Logger } from '../../shared/log.js';
import { FaultCode, ServiceFault } from '../domain/fault.js';
import { replayGuardOf, type Authenticator, type Caller } from './auth.js';
import { removeFileIfPresent } from '../../shared/atomic-file.js';
import type { ReceivedFile } from './form-data.js';
import { ParamReader, readRequest } from './params.js';
import { sendFault, sendJson } from './reply.js';

export interface RequestContext {
  endpoint: EndpointRef;
  params: ParamReader;
  caller: Caller;
  /** Address of the client (for logs). */
  ip: string;
  /** A file sent with the parameters as a multipart part (only where the router accepts one). */
  file?: ReceivedFile;
}

export interface RouterOptions {
  /** Folder for file parts of multipart requests (same file system as the blob store). */
  tempDir?: string;
  /** Paths whose multipart requests may carry a file part. */
  fileEndpoints?: readonly string[];
  /** Checked once the caller is known, before the parameters and the handler: throws to refuse the call. */
  admit?: (endpoint: EndpointRef, caller: Caller) => Promise<void>;
  /**
   * Runs one request (MetadataStore.request), and the paths of changes whose handlers do nothing but
   * metadata work before their transactions commit (no file part), and of reads whose work is metadata
   * statements: their replay guard's record goes ahead, in the round trip of their first transaction,
   * which commits once the guard let them through, or in one statement with their first read.
   */
  request?: <T>(fn: () => Promise<T>) => Promise<T>;
  guardAhead?: readonly string[];
  /** Sends a request's statements ahead still queued (MetadataStore.sendAhead). */
  sendAhead?: () => Promise<void>;
}

/** Returns the JSON body: the endpoint's result, or nothing (`{}`) where an empty object is one. */
export type Handler<R = unknown> = (ctx: RequestContext) => Answer<R> | Promise<Answer<R>>;
type Answer<R> = Record<string, never> extends R ? R | void : R;
/** The handler of `family.name`, typed by the table's result for it. */
export type HandlerOf<F extends Family, N extends EndpointName<F>> = Handler<EndpointResult<F, N>>;

/** The result type the EndpointTable gives `family.name`: what its handler must answer. */
export type EndpointResult<F extends Family, N extends EndpointName<F>> = ResultOf<Endpoints[F][N] & { result: unknown }>;

export class Router {
  private readonly handlers = new Map<string, { endpoint: EndpointRef; handler: Handler }>();
  private readonly byPath = new Map<string, EndpointRef>();

  private readonly fileEndpoints: Set<string>;
  private readonly guardAhead: Set<string>;

  constructor(private readonly auth: Authenticator, private readonly log: Logger, private readonly opts: RouterOptions = {}) {
    this.fileEndpoints = new Set(opts.tempDir ? opts.fileEndpoints ?? [] : []);
    this.guardAhead = new Set(opts.request ? opts.guardAhead ?? [] : []);
    for (const ref of allEndpoints()) {
      if (ref.family === 'upload') continue;
      if (!this.byPath.has(ref.def.path)) this.byPath.set(ref.def.path, ref);
    }
  }

  /**
   * Registers the handler of `family.name` (an endpoint of the table). The handler answers the table's
   * result type for that endpoint, so a handler of the wrong shape fails the type check.
   */
  register<F extends Family, N extends EndpointName<F>>(family: F, name: N, handler: HandlerOf<F, N>): void {
    const endpoint = findEndpoint(family, name);
    if (!endpoint) throw new TypeError(`register: expected an endpoint of the EndpointTable, got ${family}.${name}`);
    const key = `${family}.${name}`;
    if (this.handlers.has(key)) throw new TypeError(`register: ${key} is registered twice`);
    this.handlers.set(key, { endpoint, handler: handler as Handler });
  }

  /**
   * Registers an endpoint that is not in the EndpointTable: a path the vendor's own clients call that the
   * spec does not list (docs/service-decisions.md, "Endpoints the official clients call"). Its definition
   * is the service's own; the client of this project never calls it.
   */
  registerVendor<D extends EndpointDef>(family: Family, name: string, def: D, handler: Handler<D['result']>): void {
    if (findEndpoint(family, name)) throw new TypeError(`registerVendor: ${family}.${name} is in the EndpointTable; use register`);
    if (this.byPath.has(def.path)) throw new TypeError(`registerVendor: ${def.path} is already routed`);
    const endpoint: EndpointRef = { family, name, def };
    this.byPath.set(def.path, endpoint);
    this.handlers.set(`${family}.${name}`, { endpoint, handler: handler as Handler });
  }

  /** `family.name` of every registered endpoint. */
  registered(): string[] {
    return [...this.handlers.keys()];
  }

  /** True when `path` is one of the table's JSON endpoints. */
  owns(path: string): boolean {
    return this.byPath.has(path);
  }

  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    return this.opts.request ? this.opts.request(() => this.handleRequest(req, res, url)) : this.handleRequest(req, res, url);
  }

  private async handleRequest(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const endpoint = this.byPath.get(url.pathname);
    let file: ReceivedFile | undefined;
    try {
      if (!endpoint) throw new ServiceFault(FaultCode.NoSuchEndpoint, `no endpoint ${url.pathname}`);
      const request = await readRequest(req, url, { fileDir: this.fileEndpoints.has(url.pathname) ? this.opts.tempDir : undefined });
      const raw = request.params;
      file = request.file;
      const entry = this.handlers.get(`${endpoint.family}.${endpoint.name}`);
      const guard = replayGuardOf(endpoint.def);
      const { caller, guarded, ahead } = await this.auth.authenticate(endpoint.def.credential, url.pathname, raw, guard, clientAddress(req), {
        ahead: this.guardAhead.has(url.pathname) && !file,
      });
      guarded.catch(() => undefined); // awaited below; a failure meanwhile is not unhandled
      if (!entry) throw new ServiceFault(FaultCode.NotSupported, `${url.pathname} is not supported by the embedded service`);
      if (ahead) {
        // The record goes with the change's first transaction, which commits only once it let the call
        // through; the guard's refusal is the answer over any failure of the work.
        let body: unknown;
        let failure: { err: unknown } | undefined;
        try {
          await this.opts.admit?.(endpoint, caller);
          validateParams(endpoint.def, raw, { allowUnknown: true });
          body = await entry.handler({ endpoint, params: new ParamReader(raw), caller, ip: req.socket.remoteAddress ?? '' });
        } catch (err) {
          failure = { err };
        }
        await this.opts.sendAhead?.();
        await guarded;
        if (failure) throw failure.err;
        sendJson(res, 200, body ?? {});
        return;
      }
      // The replay guard's record and the admission check go side by side; a read's work goes beside the
      // record too (a read is never refused), which is made before its answer. Of two failures the
      // guard's is the one answered.
      const [guardedFirst, admitted] = await Promise.allSettled([guard === 'read' ? undefined : guarded, this.opts.admit?.(endpoint, caller)]);
      if (guardedFirst.status === 'rejected') throw guardedFirst.reason;
      if (admitted.status === 'rejected') throw admitted.reason;
      if (file) {
        // The content came with the call: what the table asks the client to declare is known.
        raw.filehash ??= file.sha1;
        raw.filesize ??= String(file.size);
      }
      let body: unknown;
      try {
        validateParams(endpoint.def, raw, { allowUnknown: true });
        body = await entry.handler({ endpoint, params: new ParamReader(raw), caller, ip: req.socket.remoteAddress ?? '', ...(file ? { file } : {}) });
      } catch (err) {
        // The guard's refusal (a cached authorization found changed, docs/service.md) is the answer over
        // the work's failure.
        await guarded;
        throw err;
      }
      await guarded;
      sendJson(res, 200, body ?? {});
    } catch (err) {
      sendFault(res, err, this.log, { path: url.pathname, endpoint: endpoint ? `${endpoint.family}.${endpoint.name}` : undefined });
    } finally {
      if (file) await removeFileIfPresent(file.tempFilePath);
    }
  }
}

/**
 * The client's address as the replay guard compares it: an IPv4 client of a dual-stack listener
 * (`::ffff:10.0.0.5`) is the same client as on an IPv4 listener (`10.0.0.5`).
 */
export function clientAddress(req: IncomingMessage): string {
  const a = req.socket.remoteAddress ?? '';
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}
