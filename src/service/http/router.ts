/**
 * Router: the service's JSON endpoints. Endpoint families register handlers by family and name of the
 * EndpointTable (src/shared/endpoints.ts), so the service's routes are the table's paths and cannot
 * drift from the client. For every request: parameters are read, the caller authenticated (client id,
 * dateline, signature), the parameters validated against the table (required, types, one-of; unknown
 * names tolerated), then the handler runs. Endpoints of the table without a handler answer
 * 501/50101 "not supported".
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { allEndpoints, findEndpoint, validateParams, type EndpointRef } from '../../shared/endpoints.js';
import type { Logger } from '../../shared/log.js';
import { FaultCode, ServiceFault } from '../domain/fault.js';
import type { Authenticator, Caller } from './auth.js';
import { ParamReader, readParams } from './params.js';
import { sendFault, sendJson } from './reply.js';

export interface RequestContext {
  endpoint: EndpointRef;
  params: ParamReader;
  caller: Caller;
  /** Address of the client (for logs). */
  ip: string;
}

/** Returns the JSON body; undefined answers `{}`. */
export type Handler = (ctx: RequestContext) => unknown;

export class Router {
  private readonly handlers = new Map<string, { endpoint: EndpointRef; handler: Handler }>();
  private readonly byPath = new Map<string, EndpointRef>();

  constructor(private readonly auth: Authenticator, private readonly log: Logger) {
    for (const ref of allEndpoints()) {
      if (ref.family === 'upload') continue;
      if (!this.byPath.has(ref.def.path)) this.byPath.set(ref.def.path, ref);
    }
  }

  /** Registers the handler of `family.name` (an endpoint of the table). */
  register(family: string, name: string, handler: Handler): void {
    const endpoint = findEndpoint(family, name);
    if (!endpoint) throw new TypeError(`register: expected an endpoint of the EndpointTable, got ${family}.${name}`);
    const key = `${family}.${name}`;
    if (this.handlers.has(key)) throw new TypeError(`register: ${key} is registered twice`);
    this.handlers.set(key, { endpoint, handler });
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
    const endpoint = this.byPath.get(url.pathname);
    try {
      if (!endpoint) throw new ServiceFault(FaultCode.NoSuchEndpoint, `no endpoint ${url.pathname}`);
      const raw = await readParams(req, url);
      const entry = this.handlers.get(`${endpoint.family}.${endpoint.name}`);
      const caller = this.auth.authenticate(endpoint.def.credential, url.pathname, raw);
      if (!entry) throw new ServiceFault(FaultCode.NotSupported, `${url.pathname} is not supported by the embedded service`);
      validateParams(endpoint.def, raw, { allowUnknown: true });
      const body = await entry.handler({ endpoint, params: new ParamReader(raw), caller, ip: req.socket.remoteAddress ?? '' });
      sendJson(res, 200, body ?? {});
    } catch (err) {
      sendFault(res, err, this.log, { path: url.pathname, endpoint: endpoint ? `${endpoint.family}.${endpoint.name}` : undefined });
    }
  }
}
