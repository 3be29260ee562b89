/**
 * Web upload: one multipart/form-data POST of a whole file to `{upload_server}/2/web_upload`, streamed
 * (the body is generated as the source is read; nothing is buffered whole). Two forms:
 * - library: `upload_servers` gives servers and a temporary key; the form carries org_client_id + key;
 * - user: `upload_server` (user API) gives the server; the form carries token + mount_id.
 * Not retried: the service may have taken the file when a connection drops.
 */
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { request } from 'undici';
import type { WebUploadResult } from '../shared/records.js';
import { transportError, type ServiceClient } from './client.js';
import { ServiceError, ErrorCode, redactSecrets } from './errors.js';
import { normalizeResult, normalizeServer } from './normalize.js';
import { SourceChangedError, type UploadSource } from './upload-source.js';
import { formEnvelope } from './multipart.js';
import { REDACT_KEYS } from '../shared/log.js';

export type { WebUploadResult };

export interface WebUploadArgs {
  /** Target folder in the library ('' = the root). */
  path: string;
  /** File name (no '/'). */
  name: string;
  source: UploadSource;
  /** Replace an existing file; false lets the service pick a numbered name. Default true. */
  overwrite?: boolean;
  /** Operator shown by the service (library form only). */
  operator?: { op_id?: string; op_name?: string };
  /** Set: the user form (user access token) for this storage space; unset: the library form. */
  mountId?: number;
  /** Validity asked for the temporary key of `upload_servers`, seconds. Default 600. */
  keyTimeoutSec?: number;
  /** Called with the file bytes sent so far and the total. */
  onProgress?: (sent: number, total: number) => void;
  signal?: AbortSignal;
}

/** Uploads `args.source` in one multipart request. Throws ServiceError (endpoint `upload.web_upload` / `upload.user_web_upload`). */
export async function webUpload(client: ServiceClient, args: WebUploadArgs): Promise<WebUploadResult> {
  const folder = checkArgs(args);
  const fullpath = folder === '' ? args.name : `${folder}/${args.name}`;
  const overwrite = args.overwrite === false ? '0' : '1';
  const fields: [string, string][] = [];
  let server: string;
  let endpoint: string;
  if (args.mountId !== undefined) {
    endpoint = 'upload.user_web_upload';
    const token = client.credentials.user?.token;
    if (!token) throw new TypeError('client: the user form needs a user access token (credentials.user), got none');
    const answer = await client.user.uploadServer({ mount_id: args.mountId, fullpath }, { signal: args.signal });
    server = normalizeServer(String(answer.server ?? ''));
    fields.push(['token', token], ['mount_id', String(args.mountId)]);
  } else {
    endpoint = 'upload.web_upload';
    const library = client.credentials.library;
    if (!library) throw new TypeError('client: the library form needs a library authorization (credentials.library), got none');
    const timeout = args.keyTimeoutSec ?? 600;
    if (!Number.isInteger(timeout) || timeout < 1) throw new TypeError(`keyTimeoutSec: expected a positive integer, got ${String(args.keyTimeoutSec)}`);
    const answer = await client.file.uploadServers({ fullpath, timeout, rand: randomBytes(8).toString('hex') }, { signal: args.signal });
    const servers = (Array.isArray(answer['m-upload']) ? answer['m-upload'] : [String(answer['m-upload'] ?? '')]).map((s) => normalizeServer(String(s))).filter((s) => s !== '');
    server = servers[Math.floor(Math.random() * servers.length)] ?? '';
    fields.push(['org_client_id', library.org_client_id], ['key', String(answer.key ?? '')]);
    if (args.operator?.op_id) fields.push(['op_id', args.operator.op_id]);
    if (args.operator?.op_name) fields.push(['op_name', args.operator.op_name]);
  }
  if (server === '') throw new ServiceError({ status: 503, code: ErrorCode.NoUploadServer, message: 'the service named no upload server', endpoint });
  fields.push(['path', folder], ['name', args.name], ['overwrite', overwrite], ['filefield', 'file']);
  return send(client, `${server}/2/web_upload`, endpoint, fields, args);
}

function checkArgs(args: WebUploadArgs): string {
  if (typeof args.name !== 'string' || args.name === '' || args.name.includes('/')) {
    throw new TypeError(`name: expected a file name without '/', got ${JSON.stringify(args.name)}`);
  }
  if (typeof args.path !== 'string') throw new TypeError(`path: expected a folder path ('' for the root), got ${typeof args.path}`);
  if (!Number.isSafeInteger(args.source?.size) || args.source.size < 0) throw new TypeError(`source.size: expected a byte count, got ${String(args.source?.size)}`);
  if (args.mountId !== undefined) {
    if (!Number.isSafeInteger(args.mountId) || args.mountId < 0) throw new TypeError(`mountId: expected a storage space id, got ${String(args.mountId)}`);
    if (args.operator?.op_id !== undefined || args.operator?.op_name !== undefined) {
      throw new TypeError('operator: not supported with the user form (mountId set): the token names the user');
    }
  }
  return args.path.replace(/^\/+|\/+$/g, '');
}

async function send(client: ServiceClient, url: string, endpoint: string, fields: [string, string][], args: WebUploadArgs): Promise<WebUploadResult> {
  const { contentType, head, tail } = formEnvelope(fields, { field: 'file', filename: args.name });
  const total = args.source.size;
  const secrets = [...client.secretValues(), ...fields.filter(([k]) => REDACT_KEYS.includes(k)).map(([, v]) => v)];
  const watchdog = new IdleWatchdog(client.timeoutMs, args.signal);
  const body = Readable.from(formBody(head, tail, args.source, watchdog, args.onProgress), { objectMode: false });
  try {
    let res;
    try {
      res = await request(url, {
        method: 'POST',
        dispatcher: client.dispatcher,
        headers: { 'content-type': contentType, 'content-length': String(head.length + total + tail.length) },
        body,
        signal: watchdog.signal,
      });
    } catch (err) {
      if (err instanceof SourceChangedError || watchdog.sourceError) throw watchdog.sourceError ?? err;
      throw transportError(err, 0, endpoint, watchdog, secrets);
    }
    watchdog.touch();
    let text: string;
    try {
      text = redactSecrets(await res.body.text(), secrets);
    } catch (err) {
      throw transportError(err, res.statusCode, endpoint, watchdog, secrets);
    }
    let parsed: unknown;
    try { parsed = text.trim() === '' ? {} : JSON.parse(text); } catch { parsed = undefined; }
    if (res.statusCode >= 400 || parsed === undefined) {
      const b = (parsed ?? {}) as { error_code?: unknown; error_msg?: unknown };
      const message = typeof b.error_msg === 'string' ? b.error_msg : text.trim() === '' ? `HTTP ${res.statusCode}` : text.slice(0, 300);
      throw new ServiceError({ status: res.statusCode, code: Number(b.error_code ?? 0) || 0, message, endpoint });
    }
    return normalizeResult(parsed) as WebUploadResult;
  } finally {
    body.destroy();
    watchdog.clear();
  }
}

async function* formBody(head: Buffer, tail: Buffer, source: UploadSource, watchdog: IdleWatchdog, onProgress?: (sent: number, total: number) => void): AsyncGenerator<Buffer> {
  yield head;
  let sent = 0;
  const stream = source.open(0);
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      sent += chunk.length;
      if (sent > source.size) break;
      watchdog.touch();
      yield chunk;
      onProgress?.(sent, source.size);
    }
  } finally {
    stream.destroy();
  }
  if (sent !== source.size) {
    const err = new SourceChangedError(source.size, sent);
    watchdog.fail(err); // the request must not end as if the file were complete
    throw err;
  }
  yield tail;
}

/**
 * Aborts a long request when nothing moved for `ms` (a whole-request deadline would cut large files):
 * each body chunk and the arrival of the answer reset it. Shaped like the client's Deadline.
 */
class IdleWatchdog {
  readonly signal: AbortSignal;
  sourceError?: Error;
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout;
  private expired = false;
  private readonly onAbort?: () => void;

  constructor(readonly ms: number, private readonly parent?: AbortSignal) {
    this.signal = this.controller.signal;
    this.timer = this.arm();
    if (parent) {
      if (parent.aborted) this.controller.abort(parent.reason);
      this.onAbort = () => this.controller.abort(parent.reason);
      parent.addEventListener('abort', this.onAbort, { once: true });
    }
  }

  get timedOut(): boolean { return this.expired; }

  touch(): void {
    clearTimeout(this.timer);
    this.timer = this.arm();
  }

  fail(err: Error): void {
    this.sourceError = err;
    this.controller.abort(err);
  }

  clear(): void {
    clearTimeout(this.timer);
    if (this.onAbort) this.parent?.removeEventListener('abort', this.onAbort);
  }

  private arm(): NodeJS.Timeout {
    const t = setTimeout(() => { this.expired = true; this.controller.abort(new Error(`no progress for ${this.ms} ms`)); }, this.ms);
    t.unref?.();
    return t;
  }
}
