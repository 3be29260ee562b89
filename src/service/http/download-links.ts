/**
 * DownloadLinks: the links of `download_url` and the requests on them. A link names a blob, a download
 * name and an expiry, signed with a key of the service (HMAC-SHA256), so serving it needs no lookup but
 * the blob. Served with Range / If-Range (206, 416), ETag = the content's SHA-1, Content-Disposition
 * from the name; bytes stream from the blob file, never buffered whole.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { Logger } from '../../shared/log.js';
import { FaultCode, ServiceFault } from '../domain/fault.js';
import type { BlobStore } from '../store/blob-store.js';
import { sendFault } from './reply.js';

/** Validity of a download link (ms): 10 minutes. */
export const DOWNLOAD_LINK_TTL_MS = 10 * 60_000;

interface LinkPayload {
  /** Blob SHA-1. */
  h: string;
  /** Size in bytes. */
  s: number;
  /** Download name. */
  n: string;
  /** Expiry, ms. */
  e: number;
  /** 1: inline (open in a browser). */
  o: number;
  /** Last modification of the file, ms. */
  m: number;
  /** Library the content was read from (traffic statistics). */
  l?: number;
}

export interface DownloadLinksOptions {
  baseUrl: string;
  /** Key signing the links. */
  key: string;
  blobs: BlobStore;
  clock: () => number;
  logger: Logger;
  /** Link validity (ms). Default 600 000. */
  ttlMs?: number;
  /** Counts the bytes served in the traffic statistics. */
  countTraffic?: (libraryId: number, kind: 'download', bytes: number) => void;
}

export class DownloadLinks {
  private readonly ttlMs: number;

  constructor(private readonly opts: DownloadLinksOptions) {
    this.ttlMs = opts.ttlMs ?? DOWNLOAD_LINK_TTL_MS;
  }

  /** A signed link to blob `sha1` under the name `filename`. */
  url(args: { sha1: string; size: number; filename: string; open?: boolean; modifiedMs: number; libraryId?: number }): string {
    const payload: LinkPayload = { h: args.sha1, s: args.size, n: args.filename, e: this.opts.clock() + this.ttlMs, o: args.open ? 1 : 0, m: args.modifiedMs, ...(args.libraryId !== undefined ? { l: args.libraryId } : {}) };
    const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return `${this.opts.baseUrl}/download/${body}.${this.mac(body)}/${encodeURIComponent(args.filename)}`;
  }

  /** Serves `/download/<token>/<name>` (path after `/download`). */
  async handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    try {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { allow: 'GET, HEAD' }).end();
        return;
      }
      const link = this.verify(path.split('/')[1] ?? '');
      await this.serve(req, res, link);
    } catch (err) {
      sendFault(res, err, this.opts.logger, { path: '/download' });
    }
  }

  private verify(token: string): LinkPayload {
    const invalid = () => new ServiceFault(FaultCode.DownloadLinkInvalid, 'download link invalid or expired; ask download_url for a new one');
    const dot = token.lastIndexOf('.');
    if (dot < 0) throw invalid();
    const body = token.slice(0, dot);
    const mac = Buffer.from(token.slice(dot + 1));
    const expected = Buffer.from(this.mac(body));
    if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) throw invalid();
    const link = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as LinkPayload;
    if (link.e < this.opts.clock()) throw invalid();
    return link;
  }

  private async serve(req: IncomingMessage, res: ServerResponse, link: LinkPayload): Promise<void> {
    const size = await this.opts.blobs.sizeOf(link.h);
    if (size === undefined) throw new ServiceFault(FaultCode.FileMissing, 'the content of this link is no longer stored');
    const etag = `"${link.h}"`;
    const lastModified = new Date(link.m).toUTCString();
    const headers: Record<string, string | number> = {
      'accept-ranges': 'bytes',
      etag,
      'last-modified': lastModified,
      'content-type': 'application/octet-stream',
      'content-disposition': `${link.o ? 'inline' : 'attachment'}; filename="${asciiName(link.n)}"; filename*=UTF-8''${encodeRfc5987(link.n)}`,
      'cache-control': 'private, max-age=600',
    };
    let range = parseRange(String(req.headers.range ?? ''), size);
    const ifRange = req.headers['if-range'];
    if (range && ifRange !== undefined && ifRange !== etag && ifRange !== lastModified) range = undefined;
    if (range === 'unsatisfiable') {
      res.writeHead(416, { ...headers, 'content-range': `bytes */${size}`, 'content-length': 0 });
      res.end();
      return;
    }
    const start = range ? range.start : 0;
    const end = range ? range.end : size - 1;
    if (range) headers['content-range'] = `bytes ${start}-${end}/${size}`;
    headers['content-length'] = size === 0 ? 0 : end - start + 1;
    res.writeHead(range ? 206 : 200, headers);
    if (req.method === 'HEAD' || size === 0) {
      res.end();
      return;
    }
    const body = this.opts.blobs.read(link.h, { start, end });
    const count = this.opts.countTraffic;
    if (count && link.l !== undefined) body.on('data', (chunk: string | Buffer) => count(link.l!, 'download', chunk.length));
    await pipeline(body, res).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ERR_STREAM_PREMATURE_CLOSE') this.opts.logger.warn({ err }, 'download stream failed');
    });
  }

  private mac(body: string): string {
    return createHmac('sha256', this.opts.key).update(body).digest('base64url');
  }
}

/** One `bytes=` range of the Range header; several ranges or a malformed header are ignored (whole content). */
export function parseRange(header: string, size: number): { start: number; end: number } | 'unsatisfiable' | undefined {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return 'unsatisfiable';
  return { start, end };
}

function asciiName(name: string): string {
  return name.replace(/[^\x20-\x7e]|["\\]/g, '_');
}

function encodeRfc5987(name: string): string {
  return encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}
