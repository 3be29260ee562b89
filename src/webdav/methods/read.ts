/** OPTIONS, GET and HEAD (files with Range and If-Range, folders as an HTML page). */
import type { Readable } from 'node:stream';
import { DavRequest, etagOf } from '../context.js';
import { DavError } from '../errors.js';
import { parseRange } from '../byte-range.js';
import { contentTypeOf } from '../content-type.js';
import { folderPage } from '../html-listing.js';
import { sendStatus } from '../reply.js';
import { sendBatched } from '../batched-body.js';

export const ALLOW = 'OPTIONS, GET, HEAD, PROPFIND, PROPPATCH, PUT, DELETE, MKCOL, COPY, MOVE, LOCK, UNLOCK';

export function options(r: DavRequest): void {
  sendStatus(r.res, 200, { dav: '1, 2', allow: ALLOW, 'ms-author-via': 'DAV', 'accept-ranges': 'bytes' });
}

/** True when `If-None-Match` / `If-Modified-Since` say the client's copy is current. */
function notModified(r: DavRequest, etag: string, mtimeMs: number): boolean {
  const inm = r.req.headers['if-none-match'];
  if (inm !== undefined) return inm.trim() === '*' || inm.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
  const ims = r.req.headers['if-modified-since'];
  if (ims !== undefined) {
    const t = Date.parse(ims);
    return Number.isFinite(t) && Math.floor(mtimeMs / 1000) <= Math.floor(t / 1000);
  }
  return false;
}

export async function get(r: DavRequest, head: boolean): Promise<void> {
  const a = await r.stat(r.path);
  if (!a) throw new DavError(404, `no such file or folder: ${r.path}`);
  if (a.isDir) {
    const entries = await r.vfs.readdir(r.path, r.call);
    if (r.shared.keepJunkLocal && r.path !== '/') {
      const names = new Set(entries.map((e) => e.name));
      for (const j of await r.shared.junk.list(r.path)) if (!names.has(j.name)) entries.push(j);
    }
    const body = Buffer.from(folderPage(r.path, entries), 'utf8');
    r.res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': String(body.length), 'cache-control': 'no-cache' });
    r.res.end(head ? undefined : body);
    return;
  }
  const etag = etagOf(a);
  const headers: Record<string, string> = {
    etag,
    'last-modified': new Date(a.mtimeMs).toUTCString(),
    'accept-ranges': 'bytes',
    'content-type': contentTypeOf(a.name),
  };
  const im = r.req.headers['if-match'];
  if (im !== undefined && im.trim() !== '*' && !im.split(',').some((t) => t.trim() === etag)) throw new DavError(412, 'If-Match does not match the current entity tag');
  if (notModified(r, etag, a.mtimeMs)) {
    sendStatus(r.res, 304, headers);
    return;
  }
  let range = parseRange(r.req.headers.range, a.size);
  const ifRange = r.req.headers['if-range'] === undefined ? undefined : String(r.req.headers['if-range']);
  if (range.kind !== 'whole' && ifRange !== undefined) {
    const matches = ifRange.trim().startsWith('"') ? ifRange.trim() === etag : Date.parse(ifRange) >= Math.floor(a.mtimeMs / 1000) * 1000;
    if (!matches) range = { kind: 'whole' };
  }
  if (range.kind === 'unsatisfiable') {
    sendStatus(r.res, 416, { ...headers, 'content-range': `bytes */${a.size}` });
    return;
  }
  const start = range.kind === 'partial' ? range.start : 0;
  const end = range.kind === 'partial' ? range.end : a.size - 1;
  const length = Math.max(0, end - start + 1);
  headers['content-length'] = String(length);
  if (range.kind === 'partial') headers['content-range'] = `bytes ${start}-${end}/${a.size}`;
  const status = range.kind === 'partial' ? 206 : 200;
  if (head || length === 0) {
    r.res.writeHead(status, headers);
    r.res.end();
    return;
  }
  const source: Readable = r.isJunk(r.path) ? r.shared.junk.read(r.path, { start, end }) : await r.vfs.createReadStream(r.path, { start, end }, r.call);
  r.res.writeHead(status, headers);
  await sendBatched(source, r.res);
}
