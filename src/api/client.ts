/**
 * ServiceClient: a typed client of every endpoint in the EndpointTable. One `send()` does the wire work
 * (sign, send, parse); retries are the dispatcher's (the retry policy composed on, retry-policy.ts), the
 * token refresh a layer around `send()`.
 */
import { Agent, type Dispatcher } from 'undici';
import { ENDPOINTS, findEndpoint, validateParams, ParamError, type EndpointDef, type Endpoints, type Family, type ParamsOf, type ResultOf } from '../shared/endpoints.js';
import { sign, isCreateFilePath, CREATE_FILE_UNSIGNED, type Params } from '../shared/sign.js';
import { ServiceError, ErrorCode, redactSecrets, transportCodeOf } from './errors.js';
import { normalizeResult } from './normalize.js';
import { REDACT_KEYS, silentLogger, type Logger } from '../shared/log.js';
import { formEnvelope } from './multipart.js';
import { AttemptTimeoutError, serviceRetry, type AttemptRequest, type CallDispatchOptions } from './retry-policy.js';

export interface LibraryCredential { org_client_id: string; org_client_secret: string }
export interface ClientSecretPair { client_id: string; client_secret: string }
export interface UserCredential {
  /** The access token; refreshed in place when it expires and `refresh_token` is known. */
  token: string;
  /** The secret of the application the token was issued to (signs every user-API call). */
  client_secret: string;
  /** The application's id (needed only to refresh the token). */
  client_id?: string;
  refresh_token?: string;
}
export interface Credentials {
  library?: LibraryCredential;
  enterprise?: ClientSecretPair;
  partner?: ClientSecretPair;
  user?: UserCredential;
  /** An application pair (for the token endpoint). Defaults to the user credential's pair. */
  application?: ClientSecretPair;
}

export interface ClientOptions {
  /** The service's base URL, e.g. `http://127.0.0.1:8900`. */
  baseUrl: string;
  credentials: Credentials;
  /** Deadline of each attempt of a call in milliseconds: connect, headers and body together. Default 30 000. */
  timeoutMs?: number;
  /** Attempts after the first for calls that are safe to retry. Default 3. */
  retries?: number;
  /** First retry delay in ms; doubles each attempt, with jitter, capped at 5 s. Default 200. */
  retryBaseMs?: number;
  /** Longest `Retry-After` of the service a call waits for before asking again, ms; a longer one ends the call with that answer. Default 10 000. */
  retryAfterMaxMs?: number;
  /** Clock in milliseconds (for `dateline`). Default Date.now. */
  clock?: () => number;
  /** undici dispatcher; default a keep-alive Agent owned by the client. */
  dispatcher?: Dispatcher;
  /** Header prefix of the upload protocol. Default `x-svc-`. */
  uploadHeaderPrefix?: string;
  /** Called when a user token was refreshed, so the caller can persist it. */
  onTokenRefresh?: (user: UserCredential) => void;
  /** Structured logger: one debug line per exchange, a warning per retry. Never given parameters. Default silent. */
  logger?: Logger;
  /** Called after every exchange with the service (metrics): endpoint `family.name`, HTTP status (0 = no answer), milliseconds. */
  onExchange?: (e: { endpoint: string; status: number; ms: number }) => void;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Override the client's timeout for this call (ms). */
  timeoutMs?: number;
}

type CamelCase<S extends string> = S extends `${infer H}_${infer T}` ? `${H}${Capitalize<CamelCase<T>>}` : S;
export type FamilyClient<F extends Family> = {
  [K in keyof Endpoints[F] & string as CamelCase<K>]: (
    params: ParamsOf<Endpoints[F][K] & { params: object }>,
    opts?: CallOptions,
  ) => Promise<ResultOf<Endpoints[F][K] & { result: unknown }>>;
};

export function camelCase(s: string): string {
  return s.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

export class ServiceClient {
  readonly baseUrl: string;
  readonly credentials: Credentials;
  readonly dispatcher: Dispatcher;
  /**
   * The client's dispatcher with its retry policy composed on (`serviceRetry`, retry-policy.ts): every
   * JSON call and every download (range requests on download links) goes through it. Transient failures
   * are asked again up to `retries` times with backoff; a download's body cut mid-way is resumed where it
   * stopped; other answers of the service are passed on.
   */
  readonly retryingDispatcher: Dispatcher;
  readonly uploadHeaderPrefix: string;
  readonly clock: () => number;
  /** Deadline (ms) of each attempt of a call, and of each upload-server exchange: connect, headers and body together. */
  readonly timeoutMs: number;
  /** Attempts after the first for calls that are safe to retry. */
  readonly retries: number;
  /** First retry delay (ms). */
  readonly retryBaseMs: number;
  /** Longest `Retry-After` waited for (ms). */
  readonly retryAfterMaxMs: number;
  readonly logger: Logger;
  readonly onExchange?: (e: { endpoint: string; status: number; ms: number }) => void;
  private readonly ownsDispatcher: boolean;
  private readonly onTokenRefresh?: (user: UserCredential) => void;
  /** The token refresh under way, shared by every call that met the expired token. */
  private refreshing?: Promise<void>;

  readonly file: FamilyClient<'file'>;
  readonly file2: FamilyClient<'file2'>;
  readonly user: FamilyClient<'user'>;
  readonly org: FamilyClient<'org'>;
  readonly ent: FamilyClient<'ent'>;
  readonly partner: FamilyClient<'partner'>;

  constructor(opts: ClientOptions) {
    if (!/^https?:\/\//.test(opts.baseUrl)) throw new TypeError(`baseUrl: expected an http(s) URL, got ${JSON.stringify(opts.baseUrl)}`);
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.credentials = opts.credentials;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.retries = opts.retries ?? 3;
    this.retryBaseMs = opts.retryBaseMs ?? 200;
    this.retryAfterMaxMs = opts.retryAfterMaxMs ?? 10_000;
    this.clock = opts.clock ?? Date.now;
    this.uploadHeaderPrefix = opts.uploadHeaderPrefix ?? 'x-svc-';
    this.onTokenRefresh = opts.onTokenRefresh;
    this.logger = opts.logger ?? silentLogger;
    this.onExchange = opts.onExchange;
    if (!Number.isFinite(this.timeoutMs) || this.timeoutMs <= 0) throw new TypeError(`timeoutMs: expected a positive number of milliseconds, got ${String(opts.timeoutMs)}`);
    if (!Number.isInteger(this.retries) || this.retries < 0) throw new TypeError(`retries: expected a non-negative integer, got ${String(opts.retries)}`);
    this.ownsDispatcher = !opts.dispatcher;
    this.dispatcher = opts.dispatcher ?? new Agent({ keepAliveTimeout: 30_000, connections: 32, pipelining: 1 });
    this.retryingDispatcher = this.dispatcher.compose(serviceRetry({
      retries: this.retries, baseMs: this.retryBaseMs, maxDelayMs: 5_000, retryAfterMaxMs: this.retryAfterMaxMs,
    }));
    this.file = this.familyClient('file');
    this.file2 = this.familyClient('file2');
    this.user = this.familyClient('user');
    this.org = this.familyClient('org');
    this.ent = this.familyClient('ent');
    this.partner = this.familyClient('partner');
  }

  /** A copy of this client acting with other credentials (shares the connection pool). */
  withCredentials(credentials: Credentials): ServiceClient {
    return new ServiceClient({
      baseUrl: this.baseUrl, credentials, timeoutMs: this.timeoutMs, retries: this.retries, retryBaseMs: this.retryBaseMs, retryAfterMaxMs: this.retryAfterMaxMs,
      clock: this.clock, dispatcher: this.dispatcher, uploadHeaderPrefix: this.uploadHeaderPrefix, onTokenRefresh: this.onTokenRefresh,
      logger: this.logger, onExchange: this.onExchange,
    });
  }

  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close();
  }

  private familyClient<F extends Family>(family: F): FamilyClient<F> {
    const out: Record<string, unknown> = {};
    for (const name of Object.keys(ENDPOINTS[family])) {
      if (family === ('upload' as Family)) continue;
      out[camelCase(name)] = (params: Record<string, unknown>, opts?: CallOptions) => this.call(family, name, params, opts);
    }
    return out as FamilyClient<F>;
  }

  /** Calls an endpoint by family and snake_case name, validating parameters against the table first. */
  async call(family: string, name: string, params: Record<string, unknown> = {}, opts: CallOptions = {}): Promise<any> {
    const ref = findEndpoint(family, name);
    if (!ref || family === 'upload') throw new ParamError('method', `unknown endpoint ${family}.${name}`);
    validateParams(ref.def, params);
    const endpoint = `${family}.${name}`;
    const tokenUsed = this.credentials.user?.token;
    try {
      return normalizeResult(await this.send(ref.def, endpoint, params, opts));
    } catch (err) {
      if (!(err instanceof ServiceError) || err.code !== ErrorCode.TokenExpired || ref.def.credential !== 'token' || !this.credentials.user) throw err;
      // Refresh once and replay (decisions: user access tokens). When another call refreshed the token
      // since this one was signed, replaying is enough.
      if (this.credentials.user.token === tokenUsed) await this.refreshToken();
      return normalizeResult(await this.send(ref.def, endpoint, params, opts));
    }
  }

  /**
   * `create_file` with the content as a multipart part (what the official SDKs' createFile sends): one
   * exchange places the file when the service takes content this way (it answers state 1); a service
   * that does not answers as to a plain create_file (state 0 and an upload server) and the chunked
   * protocol follows. Retried only when nothing was sent (create_file is not idempotent).
   */
  async createFileWithContent(params: ParamsOf<Endpoints['file']['create_file']>, content: Buffer, opts: CallOptions = {}): Promise<ResultOf<Endpoints['file']['create_file']>> {
    const def = ENDPOINTS.file.create_file;
    validateParams(def, params);
    if (String(params.filesize) !== String(content.length)) throw new ParamError('filesize', `parameter 'filesize' expected the content's size (${content.length}), got ${JSON.stringify(params.filesize)}`);
    return normalizeResult(await this.send(def, 'file.create_file', { ...params, filefield: 'file' }, opts, { field: 'file', data: content })) as ResultOf<Endpoints['file']['create_file']>;
  }

  /**
   * Refreshes the user token with its refresh token (spec/decisions.md, user access tokens). Concurrent
   * callers share one refresh: a refresh token may be good for one use only.
   */
  refreshToken(): Promise<void> {
    this.refreshing ??= this.doRefreshToken().finally(() => { this.refreshing = undefined; });
    return this.refreshing;
  }

  private async doRefreshToken(): Promise<void> {
    const user = this.credentials.user;
    const app = this.credentials.application ?? (user?.client_id ? { client_id: user.client_id, client_secret: user.client_secret } : undefined);
    if (!user?.refresh_token || !app) throw new ServiceError({ status: 401, code: ErrorCode.TokenExpired, message: 'token expired and no refresh token (or application client_id) is known', endpoint: 'user.token' });
    const grant = (await this.withCredentials({ ...this.credentials, application: app }).send(ENDPOINTS.user.token, 'user.token', { grant_type: 'refresh_token', refresh_token: user.refresh_token }, {})) as { access_token?: unknown; refresh_token?: unknown };
    if (typeof grant.access_token !== 'string' || grant.access_token === '') {
      throw new ServiceError({ status: 200, code: 0, message: 'token refresh answered no access_token', endpoint: 'user.token' });
    }
    user.token = grant.access_token;
    if (typeof grant.refresh_token === 'string' && grant.refresh_token !== '') user.refresh_token = grant.refresh_token;
    this.logger.info({ endpoint: 'user.token' }, 'user access token refreshed');
    this.onTokenRefresh?.(user);
  }

  /** Every secret value known to this client (secrets, tokens): scrubbed from errors and never logged. */
  secretValues(): string[] {
    const c = this.credentials;
    return [
      c.library?.org_client_secret, c.enterprise?.client_secret, c.partner?.client_secret, c.application?.client_secret,
      c.user?.client_secret, c.user?.token, c.user?.refresh_token,
    ].filter((v): v is string => typeof v === 'string' && v !== '');
  }

  /** The signed wire parameters of a call: the endpoint's own, plus the credential's. */
  signedParams(def: EndpointDef, params: Record<string, unknown>): Record<string, string> {
    const wire: Record<string, string> = {};
    for (const [k, v] of Object.entries(params)) {
      if (v === undefined || v === null) continue;
      const text = typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v);
      if (text === '' && !allowsEmpty(def, k)) continue; // never send an empty value (decisions: signing)
      wire[k] = text;
    }
    const dateline = String(Math.floor(this.clock() / 1000));
    let secret: string;
    switch (def.credential) {
      case 'library': {
        const c = need(this.credentials.library, 'library authorization (org_client_id / org_client_secret)');
        wire.org_client_id = c.org_client_id; secret = c.org_client_secret; break;
      }
      case 'enterprise': {
        const c = need(this.credentials.enterprise, 'enterprise client_id / client_secret');
        wire.client_id = c.client_id; secret = c.client_secret; break;
      }
      case 'partner': {
        const c = need(this.credentials.partner, 'partner client_id / client_secret');
        wire.client_id = c.client_id; secret = c.client_secret; break;
      }
      case 'application': {
        const u = this.credentials.user;
        const c = need(this.credentials.application ?? (u?.client_id ? { client_id: u.client_id, client_secret: u.client_secret } : undefined), 'application client_id / client_secret');
        wire.client_id = c.client_id; secret = c.client_secret; break;
      }
      case 'token': {
        const c = need(this.credentials.user, 'user access token and application secret');
        wire.token = c.token; secret = c.client_secret; break;
      }
      default:
        throw new ParamError('credential', `endpoint ${def.path} is not a signed JSON endpoint`);
    }
    // Two calls with equal values in one second sign alike (the signature covers values only): the
    // service accepts that from the address that first used the signature (docs/service.md).
    wire.dateline = dateline;
    wire.sign = sign(secret, wire as Params, { exclude: isCreateFilePath(def.path) ? CREATE_FILE_UNSIGNED : [] });
    return wire;
  }

  /**
   * One call: sign, send, parse. Its attempts are the dispatcher's (`retryingDispatcher`): each within the
   * per-request deadline, each signed anew; a failed attempt that is asked again is logged and counted
   * here (`onExchange`) like the last one. With `file`, a POST is sent as multipart/form-data: the signed
   * parameters as fields, then the file part.
   */
  async send(def: EndpointDef, endpoint: string, params: Record<string, unknown>, opts: CallOptions, file?: { field: string; data: Buffer }): Promise<unknown> {
    // Secrets of the client, and every parameter of each attempt whose name says it is one (sign, password, refresh_token…).
    const secrets = this.secretValues();
    const build = (): AttemptRequest => {
      const wire = this.signedParams(def, params);
      secrets.push(...Object.entries(wire).filter(([k]) => REDACT_KEYS.includes(k)).map(([, v]) => v));
      const query = new URLSearchParams(wire).toString();
      const url = new URL(def.method === 'GET' ? `${this.baseUrl}${def.path}?${query}` : `${this.baseUrl}${def.path}`);
      const path = url.pathname + url.search;
      if (def.method === 'GET') return { path, headers: {} };
      if (!file) return { path, headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }, body: query };
      // The form as one buffer: undici's FormData would write each part on its own.
      const name = typeof params.fullpath === 'string' ? params.fullpath.split('/').pop() || 'file' : 'file';
      const form = formEnvelope(Object.entries(wire), { field: file.field, filename: name });
      return { path, headers: { 'content-type': form.contentType }, body: Buffer.concat([form.head, file.data, form.tail]) };
    };
    const first = build();
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    let started = Date.now();
    const requestOpts: Dispatcher.RequestOptions & CallDispatchOptions = {
      method: def.method, path: first.path, headers: first.headers, body: first.body, signal: opts.signal,
      attempts: {
        timeoutMs, idempotent: def.idempotent, renew: build,
        onRetry: (r) => {
          this.logger.debug({ endpoint, method: def.method, status: r.status, error_code: r.errorCode, transport: r.status === 0 || undefined, ms: r.ms }, 'service call failed');
          this.onExchange?.({ endpoint, status: r.status, ms: r.ms });
          this.logger.warn({ endpoint, attempt: r.attempt, status: r.status, error_code: r.errorCode, retryInMs: r.delayMs }, 'service call failed, retrying');
          started = Date.now() + r.delayMs;
        },
      },
    };
    let status = 0;
    try {
      const res = await this.retryingDispatcher.request({ ...requestOpts, origin: new URL(this.baseUrl).origin })
        .catch((err: unknown) => { throw transportError(err, 0, endpoint, undefined, secrets); });
      status = res.statusCode;
      const text = await res.body.text().catch((err: unknown) => { throw transportError(err, res.statusCode, endpoint, undefined, secrets); });
      const out = parseResponse(res.statusCode, redactSecrets(text, secrets), endpoint);
      this.logger.debug({ endpoint, method: def.method, status, ms: Date.now() - started }, 'service call');
      this.onExchange?.({ endpoint, status, ms: Date.now() - started });
      return out;
    } catch (err) {
      if (err instanceof ServiceError) {
        this.logger.debug({ endpoint, method: def.method, status: err.status, error_code: err.code || undefined, transport: err.transport || undefined, ms: Date.now() - started }, 'service call failed');
        this.onExchange?.({ endpoint, status: err.status, ms: Date.now() - started });
      }
      throw err;
    }
  }
}

/**
 * The deadline of one exchange: an AbortSignal that fires when the caller aborts or when `ms` have passed,
 * whichever comes first (undici's own timeouts are per phase, not per request).
 */
export class Deadline {
  readonly signal: AbortSignal;
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private expired = false;
  private readonly onAbort?: () => void;
  private readonly parent?: AbortSignal;

  constructor(readonly ms: number, parent?: AbortSignal) {
    this.signal = this.controller.signal;
    this.timer = setTimeout(() => { this.expired = true; this.controller.abort(new Error(`timed out after ${ms} ms`)); }, ms);
    this.timer.unref?.();
    if (parent) {
      this.parent = parent;
      if (parent.aborted) this.controller.abort(parent.reason);
      else {
        this.onAbort = () => this.controller.abort(parent.reason);
        parent.addEventListener('abort', this.onAbort, { once: true });
      }
    }
  }

  /** True when the deadline (not the caller) ended the exchange. */
  get timedOut(): boolean { return this.expired; }

  clear(): void {
    clearTimeout(this.timer);
    if (this.onAbort) this.parent?.removeEventListener('abort', this.onAbort);
  }
}

/** A transport failure as a ServiceError: no response (or a cut body), message scrubbed of secrets. */
export function transportError(err: unknown, status: number, endpoint: string, deadline: { readonly timedOut: boolean; readonly ms: number } | undefined, secrets: readonly string[]): ServiceError {
  if (err instanceof ServiceError) return err;
  const timedOut = (deadline?.timedOut ?? false) || err instanceof AttemptTimeoutError;
  const message = err instanceof AttemptTimeoutError ? err.message : timedOut ? `timed out after ${deadline!.ms} ms` : describeTransport(err);
  return new ServiceError({
    status, code: 0, message: redactSecrets(message, secrets), endpoint, transport: true,
    transportCode: timedOut ? 'ETIMEDOUT' : transportCodeOf(err),
  });
}

export function parseResponse(status: number, text: string, endpoint: string): unknown {
  let body: unknown = undefined;
  if (text.trim() !== '') {
    try {
      body = JSON.parse(text);
    } catch {
      if (status >= 400) throw new ServiceError({ status, code: 0, message: truncate(text), endpoint });
      throw new ServiceError({ status, code: 0, message: `response is not JSON: ${truncate(text)}`, endpoint });
    }
  }
  if (status >= 400) {
    const b = (body ?? {}) as { error_code?: unknown; error_msg?: unknown; error?: unknown; error_description?: unknown };
    const code = Number(b.error_code ?? 0) || 0;
    const msg = String(b.error_msg ?? b.error_description ?? b.error ?? `HTTP ${status}`);
    throw new ServiceError({ status, code, message: msg, endpoint });
  }
  return body ?? {};
}

function allowsEmpty(def: EndpointDef, name: string): boolean {
  // Parameters whose empty value has a meaning of its own in the spec ("empty string = top level / removed /
  // no limit"). Everything else is left out when empty.
  const meaningful = new Set(['fullpath', 'path', 'group_out_ids', 'parent_out_id', 'leader_out_id', 'leader_account', 'org_capacity', 'parent_group_path', 'group_path', 'role_id', 'mode']);
  return meaningful.has(name) && name in def.params;
}

function need<T>(v: T | undefined, what: string): T {
  if (!v) throw new ParamError('credentials', `this call needs the ${what}, which the client was not given`);
  return v;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(t); reject(signal!.reason); };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function describeTransport(err: unknown): string {
  const e = err as { code?: string; message?: string };
  return `${e.code ? e.code + ': ' : ''}${e.message ?? String(err)}`;
}

function truncate(s: string): string {
  return s.length > 300 ? s.slice(0, 300) + '…' : s;
}
