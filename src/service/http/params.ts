/**
 * Request parameters: the query string and a form body (application/x-www-form-urlencoded or
 * multipart/form-data), UTF-8, merged (the body wins). `ParamReader` reads typed values with "expected X, got Y" errors.
 */
import type { IncomingMessage } from 'node:http';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { normalizePath } from '../domain/paths.js';
import { isMultipart, readMultipart, type ReceivedFile } from './form-data.js';

/** Largest form body accepted (bytes): 1 MiB. */
export const MAX_FORM_BYTES = 1024 * 1024;

/** Largest file part of a multipart API request (bytes): 50 MiB, the official SDKs' limit for create_file with content. */
export const MAX_FORM_FILE_BYTES = 50 * 1024 * 1024;

/** Most items of one page (`ParamReader.page`). */
export const PAGE_MAX = 1000;

export async function readParams(req: IncomingMessage, url: URL): Promise<Record<string, string>> {
  return (await readRequest(req, url)).params;
}

/**
 * Parameters of a request: query string, then a URL-encoded or multipart/form-data body (the body wins).
 * A multipart file part is accepted only with `fileDir` (see form-data.ts); the caller removes the file.
 */
export async function readRequest(req: IncomingMessage, url: URL, opts: { fileDir?: string } = {}): Promise<{ params: Record<string, string>; file?: ReceivedFile }> {
  const params: Record<string, string> = {};
  for (const [k, v] of url.searchParams) params[k] = v;
  if (req.method === 'GET' || req.method === 'HEAD') return { params };
  const type = String(req.headers['content-type'] ?? '').toLowerCase();
  if (isMultipart(type)) {
    const file = await readMultipart(req, params, { maxFieldBytes: MAX_FORM_BYTES, fileDir: opts.fileDir, maxFileBytes: MAX_FORM_FILE_BYTES });
    return file ? { params, file } : { params };
  }
  return { params: await readFormBody(req, type, params) };
}

async function readFormBody(req: IncomingMessage, type: string, params: Record<string, string>): Promise<Record<string, string>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) throw new ServiceFault(FaultCode.BodyTooLarge, `request body: expected at most ${MAX_FORM_BYTES} bytes, got more`);
    chunks.push(chunk);
  }
  if (size === 0) return params;
  if (type !== '' && !type.startsWith('application/x-www-form-urlencoded')) {
    throw new ServiceFault(FaultCode.BadParam, `request body: expected application/x-www-form-urlencoded or multipart/form-data, got ${JSON.stringify(type)}`);
  }
  for (const [k, v] of new URLSearchParams(Buffer.concat(chunks).toString('utf8'))) params[k] = v;
  return params;
}

export class ParamReader {
  constructor(readonly raw: Record<string, string>) {}

  has(name: string): boolean {
    return this.raw[name] !== undefined;
  }

  str(name: string): string | undefined {
    return this.raw[name];
  }

  /** A string that must be given and non-empty. */
  required(name: string): string {
    const v = this.raw[name];
    if (v === undefined || v === '') throw badParam(name, 'a non-empty value', v ?? null);
    return v;
  }

  int(name: string, fallback: number, range: { min?: number; max?: number } = {}): number {
    const v = this.raw[name];
    if (v === undefined || v === '') return fallback;
    if (!/^-?\d+$/.test(v.trim())) throw badParam(name, 'an integer', v);
    const n = Number(v.trim());
    if ((range.min !== undefined && n < range.min) || (range.max !== undefined && n > range.max)) {
      throw badParam(name, `an integer from ${range.min ?? '-∞'} to ${range.max ?? '∞'}`, v);
    }
    return n;
  }

  /** An integer that must be given (the spec's "req"): omitted or empty is refused, not defaulted. */
  requiredInt(name: string, range: { min?: number; max?: number } = {}): number {
    this.required(name);
    return this.int(name, 0, range);
  }

  /** 0/1 flag. */
  flag(name: string): boolean {
    return this.int(name, 0, { min: 0, max: 1 }) === 1;
  }

  /** A normalised library path; the root ('') only with allowRoot. */
  path(name: string, opts: { allowRoot?: boolean } = {}): string {
    return normalizePath(name, this.raw[name] ?? '', opts);
  }

  /** `|`-separated paths. */
  paths(name: string): string[] {
    return this.required(name).split('|').filter((s) => s !== '').map((p) => normalizePath(name, p));
  }

  /**
   * `start` and `size` of a page. Where the spec sets a largest `size` (`max`), a larger one is refused
   * (400); where it sets none, a larger one is served as PAGE_MAX: an answer holds at most 1000 items and
   * its count tells the client to page on.
   */
  page(defSize: number, max?: number): { start: number; size: number } {
    if (max !== undefined) return { start: this.int('start', 0, { min: 0 }), size: this.int('size', defSize, { min: 1, max }) };
    return { start: this.int('start', 0, { min: 0 }), size: Math.min(this.int('size', defSize, { min: 1 }), PAGE_MAX) };
  }
}
