/** Shared helpers of the service's integration tests. */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { request } from 'undici';
import type { ServiceClient } from '../../../src/api/client.js';
import { ServiceError } from '../../../src/api/errors.js';
import { uploadFile, type UploadSource } from '../../../src/api/upload.js';
import { ENDPOINTS, type EndpointDef, type Family } from '../../../src/shared/endpoints.js';
import type { StoreStats } from '../../../src/service/store/metadata-store.js';

export const sha1 = (data: Buffer | string): string => createHash('sha1').update(data).digest('hex');

export function bufferSource(data: Buffer | string): UploadSource {
  const buf = Buffer.from(data);
  return { size: buf.length, filehash: sha1(buf), open: (start: number) => Readable.from([buf.subarray(start)]) };
}

/** Uploads `data` to `fullpath` through create_file and the chunk protocol. */
export function put(client: ServiceClient, fullpath: string, data: Buffer | string, opts: { overwrite?: boolean; op_name?: string } = {}) {
  return uploadFile(client, bufferSource(data), { fullpath, overwrite: opts.overwrite ?? true, operator: opts.op_name ? { op_name: opts.op_name } : undefined, finishWaitMs: 50 });
}

/** The ServiceError code (error_code) a call ends with; 0 when it succeeds. */
export async function codeOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 0;
  } catch (err) {
    if (err instanceof ServiceError) return err.code;
    throw err;
  }
}

/** Downloads a file through download_url. */
export async function fetchFile(client: ServiceClient, fullpath: string, headers: Record<string, string> = {}, extra: Record<string, string> = {}) {
  const { urls } = await client.file.downloadUrl({ fullpath, ...extra });
  const res = await request(urls[0]!, { headers });
  const body = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, headers: res.headers, body, url: urls[0]! };
}

/** Every present entry of the library, by recursive ls: fullpath → "d" or filehash. */
export async function treeOf(client: ServiceClient, folder = ''): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (let start = 0; ; start += 100) {
    const page = await client.file.ls({ fullpath: folder, start, size: 100 });
    for (const r of page.list) {
      out.set(r.fullpath, r.dir ? 'd' : r.filehash);
      if (r.dir) for (const [k, v] of await treeOf(client, r.fullpath)) out.set(k, v);
    }
    if (page.list.length < 100) return out;
  }
}

/**
 * The error_code (0 on success) of a request signed by `client` with exactly these parameters, past the
 * client's own checks (for the service's answer to a missing required parameter).
 */
export async function uncheckedCode(client: ServiceClient, family: Family, name: string, params: Record<string, string>): Promise<number> {
  const def = (ENDPOINTS as unknown as Record<string, Record<string, EndpointDef>>)[family]![name]!;
  const wire = new URLSearchParams(client.signedParams(def, params)).toString();
  const res = def.method === 'GET'
    ? await request(`${client.baseUrl}${def.path}?${wire}`)
    : await request(`${client.baseUrl}${def.path}`, { method: def.method, headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: wire });
  const text = await res.body.text();
  return res.statusCode < 400 ? 0 : ((JSON.parse(text) as { error_code?: number }).error_code ?? res.statusCode);
}

/** The store's counters spent by `fn` (nothing else runs meanwhile). */
export async function storeCost(stats: StoreStats, fn: () => Promise<unknown>): Promise<StoreStats> {
  const before = { ...stats };
  await fn();
  return Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, v - before[k as keyof StoreStats]])) as unknown as StoreStats;
}

