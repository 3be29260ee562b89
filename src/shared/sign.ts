/**
 * Request signing (spec/signature.md): HMAC-SHA1 over the parameter values sorted by name, joined by "\n".
 * Pure: shared by the client (api/) and the embedded service (service/).
 */
import { createHmac } from 'node:crypto';

export type ParamValue = string | number | boolean;
export type Params = Record<string, ParamValue | undefined>;

/** Parameters left out of the signature of create_file (both the library and the user API). */
export const CREATE_FILE_UNSIGNED = ['filehash', 'filesize'] as const;

export function isCreateFilePath(path: string): boolean {
  return path === '/m-open/1/file/create_file' || path === '/m-api/2/file/create_file';
}

export interface SignOptions {
  /** Names to leave out besides `sign` (create_file: filehash, filesize). */
  exclude?: readonly string[];
  /** Leave empty-valued parameters out (a variant some clients use). Default false. */
  skipEmpty?: boolean;
}

/** The exact string that is signed: values ordered by parameter name (byte order), joined by "\n". */
export function signingString(params: Params, opts: SignOptions = {}): string {
  const exclude = new Set(['sign', ...(opts.exclude ?? [])]);
  const names = Object.keys(params)
    .filter((k) => !exclude.has(k) && params[k] !== undefined)
    .filter((k) => !opts.skipEmpty || String(params[k]) !== '')
    .sort(compareBytes);
  return names.map((k) => valueText(params[k] as ParamValue)).join('\n');
}

export function sign(secret: string, params: Params, opts: SignOptions = {}): string {
  return createHmac('sha1', secret).update(signingString(params, opts), 'utf8').digest('base64');
}

/** The variants the embedded service accepts (spec/decisions.md, "Signing tolerance"). */
export function signatureVariants(secret: string, params: Params, path: string): string[] {
  const out = new Set<string>();
  // Some clients sign create_file's filehash/filesize too (the vendor's own skills adapter does), some
  // leave them out everywhere: every path accepts both, the usual one of the path first.
  const excludes: (readonly string[])[] = isCreateFilePath(path) ? [CREATE_FILE_UNSIGNED, []] : [[], CREATE_FILE_UNSIGNED];
  for (const exclude of excludes) {
    for (const skipEmpty of [false, true]) out.add(sign(secret, params, { exclude, skipEmpty }));
  }
  return [...out];
}

export function valueText(v: ParamValue): string {
  if (typeof v === 'boolean') return v ? '1' : '0';
  return String(v);
}

function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}
