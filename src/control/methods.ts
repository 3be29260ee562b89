/**
 * The control socket's method table: one method per endpoint of the EndpointTable (`file.ls`,
 * `org.bind`, `partner.create_ent`, …) signed with the gateway's stored credentials, plus the gateway's
 * own methods. Help and completion for `cloudlib ctl` are generated from the same table.
 */
import { allEndpoints, validateParams, ParamError, type EndpointDef, type Family } from '../shared/endpoints.js';
import { ServiceError } from '../api/errors.js';
import type { ServiceClient } from '../api/client.js';
import { RpcErrorCode, RpcFailure } from './protocol.js';

export interface MethodParamHelp { name: string; required: boolean; type: string; note?: string }
export interface MethodInfo {
  name: string;
  summary: string;
  params: MethodParamHelp[];
  /** Groups of which exactly one is required. */
  oneOf?: string[][];
  /** A remark on the parameters for the method's help. */
  paramsNote?: string;
}

/** A progress notification's content: `done` of `total` (0 when not known) `unit`s, in the phase `what`. */
export interface Progress {
  done: number; total: number; unit: 'bytes' | 'files'; what?: string;
  /** Files done of those the call moves (folder copies: both known before the first byte moves). */
  files?: { done: number; total: number };
}

export interface CallEnv {
  /** Sends a progress notification to the caller (upload, download, copy, flush). */
  progress(p: Progress): void;
  /**
   * Sends an event notification to the caller (a call that streams, as `watch`); false when the caller does
   * not read them as fast as they come (its backlog is over the bound): the call should end.
   */
  event(e: Record<string, unknown>): boolean;
  signal: AbortSignal;
}

export interface ControlMethod extends MethodInfo {
  handler(params: Record<string, unknown>, env: CallEnv): Promise<unknown>;
}

/** `rpc.methods`: the server's own method, answered from its method table. */
export const RPC_METHODS: MethodInfo = { name: 'rpc.methods', summary: 'Lists every method with its parameters (used for help and completion)', params: [] };

/** A library the gateway serves, with a client that holds its library authorization. */
export interface ServedLibrary { name: string; client: ServiceClient }

/** What the control socket needs from the running gateway. */
export interface ControlTarget {
  /** The libraries served, by gateway name. */
  libraries(): ServedLibrary[];
  /** A client holding the credentials of a family (`user`, `org`, `ent`, `partner`); undefined if not configured. */
  clientFor(credential: 'enterprise' | 'partner' | 'token'): ServiceClient | undefined;
}

/** Families reachable by name, and the wire families behind them. */
export const RPC_FAMILIES: Family[] = ['file', 'file2', 'user', 'org', 'ent', 'partner'];

/**
 * Parameters of library file methods that hold a path and may be given as a gateway path
 * `/<library>/<fullpath>` (a fullpath of the service never starts with `/`); the multi-path ones are
 * `|`-separated lists.
 */
export const PATH_PARAMS = ['fullpath', 'from_fullpath', 'dest_fullpath', 'path'];
export const MULTI_PATH_PARAMS = ['fullpaths', 'from_fullpaths', 'paths'];

export function endpointMethods(target: ControlTarget): ControlMethod[] {
  const out: ControlMethod[] = [];
  for (const { family, name, def } of allEndpoints()) {
    if (!RPC_FAMILIES.includes(family)) continue;
    const libraryScoped = def.credential === 'library';
    const params: MethodParamHelp[] = Object.entries(def.params).map(([n, p]) => ({ name: n, required: p.required, type: p.type }));
    if (libraryScoped) params.unshift({ name: 'library', required: false, type: 'string', note: 'library name (needed when the gateway serves several and no gateway path is given)' });
    out.push({
      name: `${family}.${name}`,
      summary: `${def.method} ${def.path}`,
      ...(def.unmarked ? { paramsNote: 'The service\'s documentation does not say which of these are required; "required" here is how cloudlib reads it (docs/service-decisions.md).' } : {}),
      params,
      oneOf: def.oneOf?.map((g) => [...g]),
      handler: async (raw) => {
        checkWireTypes(def, raw, libraryScoped);
        const params = { ...raw };
        let client: ServiceClient | undefined;
        if (libraryScoped) {
          client = resolveLibrary(target, params).client;
        } else {
          client = target.clientFor(def.credential as 'enterprise' | 'partner' | 'token');
          if (!client) throw new RpcFailure(RpcErrorCode.InvalidParams, `the gateway has no ${def.credential} credentials configured for ${family}.${name}`);
        }
        checkParams(def, params);
        try {
          return await client.call(family, name, params);
        } catch (err) {
          throw toRpcFailure(err);
        }
      },
    });
  }
  return out;
}

/**
 * Picks the library for a library-scoped call from `library=NAME` or from gateway paths
 * (`/<library>/<fullpath>`) in the path parameters, rewriting those to plain fullpaths. Mutates `params`.
 */
export function resolveLibrary(target: ControlTarget, params: Record<string, unknown>): ServedLibrary {
  const libs = target.libraries();
  if (params.library !== undefined && typeof params.library !== 'string') {
    throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter 'library' expected a string, got ${JSON.stringify(params.library)}`, { param: 'library' });
  }
  let name = params.library === undefined ? undefined : params.library;
  delete params.library;
  const pick = (n: string) => {
    if (name !== undefined && name !== n) throw new RpcFailure(RpcErrorCode.InvalidParams, `paths name two libraries: '${name}' and '${n}'`, { param: 'library' });
    name = n;
  };
  for (const key of PATH_PARAMS) {
    const v = params[key];
    if (typeof v === 'string' && v.startsWith('/')) {
      const [lib, rest] = splitGatewayPath(v);
      pick(lib);
      params[key] = rest;
    }
  }
  for (const key of MULTI_PATH_PARAMS) {
    const v = params[key];
    if (typeof v === 'string' && v.includes('/') && v.split('|').every((p) => p.startsWith('/'))) {
      params[key] = v.split('|').map((p) => { const [lib, rest] = splitGatewayPath(p); pick(lib); return rest; }).join('|');
    }
  }
  if (name === undefined) {
    if (libs.length === 1) return libs[0]!;
    throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter 'library' is required: the gateway serves ${libs.length} libraries (${libs.map((l) => l.name).join(', ')}), or give a gateway path /<library>/<path>`, { param: 'library' });
  }
  const lib = libs.find((l) => l.name === name);
  if (!lib) throw new RpcFailure(RpcErrorCode.InvalidParams, `unknown library '${name}'; served: ${libs.map((l) => l.name).join(', ') || 'none'}`, { param: 'library' });
  return lib;
}

/** `/<library>/<fullpath>` → [library, fullpath]. */
export function splitGatewayPath(p: string): [string, string] {
  const parts = p.split('/').filter((s) => s !== '');
  if (parts.length === 0) throw new RpcFailure(RpcErrorCode.InvalidParams, `gateway path '${p}' names no library`, { param: 'library' });
  return [parts[0]!, parts.slice(1).join('/')];
}

/**
 * The JSON types of a call as it arrives on the socket: a parameter the table says is a string must be a
 * JSON string (`fullpath: 123` is refused, not read as the path "123"); an int a JSON number or a string
 * of digits (what `key=value` on the command line gives); json any JSON value.
 */
function checkWireTypes(def: EndpointDef, params: Record<string, unknown>, libraryScoped: boolean): void {
  const bad = (name: string, want: string, v: unknown): RpcFailure =>
    new RpcFailure(RpcErrorCode.InvalidParams, `parameter '${name}' expected ${want}, got ${v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v} ${JSON.stringify(v)?.slice(0, 60) ?? ''}`.trim(), { param: name });
  if (libraryScoped && params.library !== undefined && typeof params.library !== 'string') throw bad('library', 'a string', params.library);
  for (const [name, p] of Object.entries(def.params)) {
    const v = params[name];
    if (v === undefined) continue;
    if (p.type === 'string' && typeof v !== 'string') throw bad(name, 'a string', v);
    if (p.type === 'int' && typeof v !== 'number' && typeof v !== 'string') throw bad(name, 'an integer', v);
  }
}

function checkParams(def: EndpointDef, params: Record<string, unknown>): void {
  try {
    validateParams(def, params);
  } catch (err) {
    if (err instanceof ParamError) throw new RpcFailure(RpcErrorCode.InvalidParams, err.message, { param: err.param });
    throw err;
  }
}

export function toRpcFailure(err: unknown): RpcFailure {
  if (err instanceof RpcFailure) return err;
  if (err instanceof ServiceError) {
    return new RpcFailure(RpcErrorCode.ServiceError, err.message, {
      status: err.status, error_code: err.code, error_msg: err.serviceMessage, endpoint: err.endpoint,
    });
  }
  if (err instanceof ParamError) return new RpcFailure(RpcErrorCode.InvalidParams, err.message, { param: err.param });
  const e = err as { code?: unknown; message?: string; name?: string };
  if (e?.name === 'VfsError') return new RpcFailure(RpcErrorCode.GatewayError, e.message ?? String(err), { code: e.code });
  return new RpcFailure(RpcErrorCode.Internal, e?.message ?? String(err));
}
