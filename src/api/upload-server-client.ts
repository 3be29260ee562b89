/**
 * UploadServerClient: the five exchanges of the chunked upload protocol (spec section G) with one upload
 * server, each one HTTP request within the client's per-request deadline. No retries and no policy here:
 * answers the protocol defines (202, 409 with `expect`) come back as values, everything else is a
 * ServiceError (endpoint `upload.<name>`). The policy lives in the uploader (upload.ts).
 */
import { request, type Dispatcher } from 'undici';
import { Deadline, transportError, type ServiceClient } from './client.js';
import { ServiceError, redactSecrets } from './errors.js';

/** Who is uploading: the library authorization (URL parameter) or a user access token (header). */
export type UploadCaller = { orgClientId: string } | { token: string };

export interface InitHeaders {
  /** The file's name (not its path); sent RFC 3986 encoded. */
  filename: string;
  /** create_file's `hash`. */
  pathhash: string;
  /** SHA-1 hex of the content. */
  filehash: string;
  filesize: number;
}

export type InitAnswer = { kind: 'session'; session: string } | { kind: 'done'; body: Record<string, unknown> };
export type PartAnswer = { kind: 'stored' } | { kind: 'complete' } | { kind: 'expect'; offset: number | undefined };
export type FinishAnswer = { kind: 'done'; body: Record<string, unknown> } | { kind: 'processing' } | { kind: 'incomplete'; offset: number | undefined };

/** error_code of a block whose CRC-32 did not match (spec section G, errors). */
export const CRC_MISMATCH = 40001;

/** RFC 3986 percent-encoding (encodeURIComponent leaves `!'()*` alone). */
export function encodeRfc3986(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export class UploadServerClient {
  private readonly prefix: string;
  private readonly secrets: string[];

  constructor(private readonly client: ServiceClient, readonly server: string, private readonly caller: UploadCaller) {
    this.prefix = client.uploadHeaderPrefix;
    this.secrets = client.secretValues();
  }

  async init(h: InitHeaders, signal?: AbortSignal): Promise<InitAnswer> {
    const query = 'orgClientId' in this.caller ? `?org_client_id=${encodeURIComponent(this.caller.orgClientId)}` : '';
    const headers: Record<string, string> = {
      [`${this.prefix}upload-filename`]: encodeRfc3986(h.filename),
      [`${this.prefix}upload-pathhash`]: h.pathhash,
      [`${this.prefix}upload-filehash`]: h.filehash,
      [`${this.prefix}upload-filesize`]: String(h.filesize),
    };
    if ('token' in this.caller) headers[`${this.prefix}token`] = this.caller.token;
    const { status, text } = await this.exchange('upload_init', 'POST', `/upload_init${query}`, headers, undefined, signal);
    if (status === 202) return { kind: 'done', body: jsonObject(text) };
    if (status === 200) {
      const session = jsonObject(text).session;
      if (typeof session !== 'string' && typeof session !== 'number') throw this.error('upload_init', status, text, 'answer has no session');
      return { kind: 'session', session: String(session) };
    }
    throw this.error('upload_init', status, text);
  }

  /** Sends the block that starts at `start`, with its CRC-32. */
  async part(session: string, start: number, block: Uint8Array, crc: number, signal?: AbortSignal): Promise<PartAnswer> {
    const headers = {
      [`${this.prefix}upload-session`]: session,
      [`${this.prefix}upload-range`]: `${start}-${start + block.length - 1}`,
      [`${this.prefix}upload-crc`]: String(crc >>> 0),
      'content-type': 'application/octet-stream',
    };
    const { status, text } = await this.exchange('upload_part', 'PUT', '/upload_part', headers, block, signal);
    if (status === 200) return { kind: 'stored' };
    if (status === 202) return { kind: 'complete' };
    if (status === 409) return { kind: 'expect', offset: expectOf(text) };
    throw this.error('upload_part', status, text);
  }

  /** The byte count the server holds (upload_req; plain text or a JSON number). */
  async received(session: string, signal?: AbortSignal): Promise<number> {
    const { status, text } = await this.exchange('upload_req', 'POST', '/upload_req', this.sessionHeader(session), undefined, signal);
    if (status !== 200) throw this.error('upload_req', status, text);
    const n = Number(text.trim());
    if (!Number.isSafeInteger(n) || n < 0) throw this.error('upload_req', status, text, `expected a byte count, got ${JSON.stringify(text.slice(0, 40))}`);
    return n;
  }

  async finish(session: string, signal?: AbortSignal): Promise<FinishAnswer> {
    const { status, text } = await this.exchange('upload_finish', 'POST', '/upload_finish', this.sessionHeader(session), undefined, signal);
    if (status === 200) return { kind: 'done', body: jsonObject(text) };
    if (status === 202) return { kind: 'processing' };
    if (status === 409) return { kind: 'incomplete', offset: expectOf(text) };
    throw this.error('upload_finish', status, text);
  }

  async abort(session: string, signal?: AbortSignal): Promise<void> {
    const { status, text } = await this.exchange('upload_abort', 'POST', '/upload_abort', this.sessionHeader(session), undefined, signal);
    if (status !== 200) throw this.error('upload_abort', status, text);
  }

  private sessionHeader(session: string): Record<string, string> {
    return { [`${this.prefix}upload-session`]: session };
  }

  private async exchange(
    name: string, method: 'POST' | 'PUT', path: string, headers: Record<string, string>, body: Uint8Array | undefined, signal?: AbortSignal,
  ): Promise<{ status: number; text: string }> {
    const endpoint = `upload.${name}`;
    const deadline = new Deadline(this.client.timeoutMs, signal);
    try {
      let res: Dispatcher.ResponseData;
      try {
        res = await request(`${this.server}${path}`, { method, headers, body, dispatcher: this.client.dispatcher, signal: deadline.signal });
      } catch (err) {
        throw transportError(err, 0, endpoint, deadline, this.secrets);
      }
      let text: string;
      try {
        text = await res.body.text();
      } catch (err) {
        throw transportError(err, res.statusCode, endpoint, deadline, this.secrets);
      }
      return { status: res.statusCode, text: redactSecrets(text, this.secrets) };
    } finally {
      deadline.clear();
    }
  }

  private error(name: string, status: number, text: string, detail?: string): ServiceError {
    let code = 0;
    let message = detail ?? (text.trim() === '' ? `HTTP ${status}` : text.slice(0, 300));
    try {
      const b = JSON.parse(text) as { error_code?: unknown; error_msg?: unknown };
      code = Number(b.error_code ?? 0) || 0;
      if (!detail && typeof b.error_msg === 'string') message = b.error_msg;
    } catch { /* not JSON: the text is the message */ }
    return new ServiceError({ status, code, message, endpoint: `upload.${name}` });
  }
}

function jsonObject(text: string): Record<string, unknown> {
  if (text.trim() === '') return {};
  try {
    const v = JSON.parse(text) as unknown;
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function expectOf(text: string): number | undefined {
  const v = Number(jsonObject(text).expect);
  return Number.isSafeInteger(v) && v >= 0 ? v : undefined;
}
