/** The chunked upload protocol on the wire, as a client speaks it (undici), for the upload server tests. */
import { request } from 'undici';
import { crc32 } from '../../../../src/shared/crc32.js';

export interface Answer { status: number; text: string; json: Record<string, unknown> }

async function answer(res: Awaited<ReturnType<typeof request>>): Promise<Answer> {
  const text = await res.body.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // plain text (upload_req)
  }
  return { status: res.statusCode, text, json };
}

export class UploadWire {
  constructor(readonly url: string, readonly auth: { orgClientId?: string; token?: string } = { orgClientId: 'oc_test' }) {}

  async init(headers: { filename?: string; pathhash?: string; filehash?: string; filesize?: number | string }): Promise<Answer> {
    const h: Record<string, string> = {};
    if (headers.filename !== undefined) h['x-svc-upload-filename'] = encodeURIComponent(headers.filename);
    if (headers.pathhash !== undefined) h['x-svc-upload-pathhash'] = headers.pathhash;
    if (headers.filehash !== undefined) h['x-svc-upload-filehash'] = headers.filehash;
    if (headers.filesize !== undefined) h['x-svc-upload-filesize'] = String(headers.filesize);
    if (this.auth.token) h['x-svc-token'] = this.auth.token;
    const q = this.auth.orgClientId ? `?org_client_id=${encodeURIComponent(this.auth.orgClientId)}` : '';
    return answer(await request(`${this.url}/upload_init${q}`, { method: 'POST', headers: h }));
  }

  async part(session: string | undefined, range: string | undefined, body: Buffer, opts: { crc?: number | string | false } = {}): Promise<Answer> {
    const h: Record<string, string> = {};
    if (session !== undefined) h['x-svc-upload-session'] = session;
    if (range !== undefined) h['x-svc-upload-range'] = range;
    if (opts.crc !== false) h['x-svc-upload-crc'] = String(opts.crc ?? crc32(body));
    return answer(await request(`${this.url}/upload_part`, { method: 'PUT', headers: h, body }));
  }

  async post(op: 'upload_req' | 'upload_finish' | 'upload_abort', session: string | undefined): Promise<Answer> {
    const h: Record<string, string> = session === undefined ? {} : { 'x-svc-upload-session': session };
    return answer(await request(`${this.url}/${op}`, { method: 'POST', headers: h }));
  }
}
