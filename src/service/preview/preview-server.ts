/**
 * PreviewServer: the preview pages of the embedded service, everything below `/preview` on its
 * listener (the service strips that prefix before calling `handle`).
 *
 * Routes:
 * - GET `/v/<token>`: the page (10-minute link from `issue`): PDF, image, text, Markdown, video,
 *   audio, or a details page with a download button for anything else.
 * - GET `/c/<token>`: the bytes the page's viewer shows (Range, 206, 416), counted as preview traffic.
 * - GET `/d/<token>`: the file as a download (not offered on watermarked previews), download traffic.
 * - GET `/t/<token>[?size=64|128|256|512]`: a WebP thumbnail of an image, preview traffic.
 * - GET `/assets/<name>`: the viewers' scripts, stylesheet and pdf.js.
 *
 * The page link is valid 10 minutes; opening it hands the page a content token valid for a viewing
 * session (4 hours), so that a long video keeps streaming after the link itself expired.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from '../../shared/log.js';
import { requestedRange } from './byte-ranges.js';
import { CONTENT_CSP, PAGE_CSP, renderMessage, renderPage } from './preview-html.js';
import { PreviewAssets } from './preview-assets.js';
import { contentType, previewKind, thumbnailable } from './preview-kind.js';
import { PreviewTokenSigner, type PreviewClaims, type TokenUse } from './preview-token.js';
import { DEFAULT_THUMBNAIL_SIZE, THUMBNAIL_SIZES, ThumbnailStore, type ThumbnailSize } from './thumbnails.js';
import type { ByteRange, IssuedPreview, PreviewHost, PreviewTarget, TrafficKind } from './types.js';

export interface PreviewServerOptions {
  host: PreviewHost;
  logger: Logger;
  /** Clock in milliseconds. Default Date.now. */
  clock?: () => number;
  /** Validity of a page link (and a thumbnail link), in milliseconds. Default 600 000 (10 minutes, as the spec says). */
  linkTtlMs?: number;
  /** Validity of the content access a page hands its viewer, in milliseconds. Default 14 400 000 (4 hours). */
  sessionTtlMs?: number;
  /** Bytes of a text or Markdown file shown on its page (the rest is cut off, with a note). Default 524 288 (512 KiB). */
  textLimitBytes?: number;
}

const ROUTE = /^\/(v|c|d|t)\/([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$/;
const USE_OF: Record<string, TokenUse> = { v: 'page', c: 'content', d: 'content', t: 'thumb' };

export class PreviewServer {
  private readonly host: PreviewHost;
  private readonly log: Logger;
  private readonly clock: () => number;
  private readonly linkTtlMs: number;
  private readonly sessionTtlMs: number;
  private readonly textLimit: number;
  private readonly tokens: PreviewTokenSigner;
  private readonly assets = new PreviewAssets();
  readonly thumbnails: ThumbnailStore;

  constructor(opts: PreviewServerOptions) {
    this.host = opts.host;
    this.log = opts.logger;
    this.clock = opts.clock ?? Date.now;
    this.linkTtlMs = opts.linkTtlMs ?? 600_000;
    this.sessionTtlMs = opts.sessionTtlMs ?? 14_400_000;
    this.textLimit = opts.textLimitBytes ?? 524_288;
    this.tokens = new PreviewTokenSigner(opts.host.signingKey);
    this.thumbnails = new ThumbnailStore(opts.host.cacheDir);
  }

  /** The signed links of a file's preview page (and thumbnail, for images when asked for). */
  issue(opts: PreviewTarget): IssuedPreview {
    const base = `${opts.baseUrl.replace(/\/+$/, '')}/preview`;
    const claims: Omit<PreviewClaims, 'use'> = {
      libraryId: opts.libraryId, fullpath: opts.fullpath, filehash: opts.filehash.toLowerCase(), filename: opts.filename,
      filesize: opts.filesize, watermark: opts.watermark?.text ?? '', memberName: opts.watermark ? opts.memberName ?? '' : '',
      expires: this.clock() + this.linkTtlMs,
    };
    const out: IssuedPreview = { url: `${base}/v/${this.tokens.sign({ ...claims, use: 'page' })}` };
    if (opts.thumbnail && thumbnailable(opts.filename)) {
      out.thumbnail = `${base}/t/${this.tokens.sign({ ...claims, watermark: '', memberName: '', use: 'thumb' })}`;
    }
    return out;
  }

  async handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    try {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { allow: 'GET, HEAD' }).end();
        return;
      }
      if (path.startsWith('/assets/')) return await this.assets.handle(req, res, path.slice('/assets/'.length));
      const m = ROUTE.exec(path);
      if (!m) return page(res, 404, renderMessage('Not found', 'There is no preview at this address.'));
      const [, route, token] = m as unknown as [string, string, string];
      const claims = this.tokens.verify(token, USE_OF[route]!, this.clock());
      if (claims === 'invalid') return page(res, 403, renderMessage('Link not valid', 'This preview link is not valid.'));
      if (claims === 'expired') return page(res, 410, renderMessage('Link expired', 'This preview link has expired. Ask for a new one.'));
      if (route === 'v') return await this.page(req, res, claims);
      if (route === 'c') return await this.content(req, res, claims, 'preview');
      if (route === 'd') return await this.content(req, res, claims, 'download');
      return await this.thumbnail(req, res, claims);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT' && !res.headersSent) {
        return page(res, 404, renderMessage('Not found', 'The content of this file is no longer available.'));
      }
      if (res.destroyed && (e as NodeJS.ErrnoException).code === 'ERR_STREAM_PREMATURE_CLOSE') {
        // the viewer went away mid-stream (a player seeking, a closed tab): nothing failed
        this.log.debug({ path: path.slice(0, 3) }, 'preview client closed the connection');
        return;
      }
      this.log.error({ err: e, path: path.slice(0, 3) }, 'preview request failed');
      if (!res.headersSent) page(res, 500, renderMessage('Error', 'Something went wrong. Try again later.'));
      else res.destroy();
    }
  }

  private async page(req: IncomingMessage, res: ServerResponse, c: PreviewClaims): Promise<void> {
    const kind = previewKind(c.filename);
    const access = this.tokens.sign({ ...c, use: 'content', expires: this.clock() + this.sessionTtlMs });
    let text: string | undefined;
    let truncated = false;
    if ((kind === 'text' || kind === 'markdown') && req.method === 'GET') {
      const n = Math.min(c.filesize, this.textLimit);
      text = n > 0 ? await this.readText(c, n) : '';
      truncated = n < c.filesize;
    }
    page(res, 200, renderPage({
      kind, filename: c.filename, filesize: c.filesize, contentUrl: `../c/${access}`,
      downloadUrl: c.watermark ? undefined : `../d/${access}`,
      watermark: c.watermark ? [c.watermark, c.memberName].filter((s) => s !== '') : [],
      text, truncated,
    }), req.method === 'HEAD');
  }

  /** The first `n` bytes of the file as text (UTF-8; a character cut at the end shows as U+FFFD). */
  private async readText(c: PreviewClaims, n: number): Promise<string> {
    const chunks: Buffer[] = [];
    const body = await this.host.openBlob(c.filehash, { start: 0, end: n - 1 });
    await this.counted(c.libraryId, 'preview', body, async (counted) => {
      for await (const chunk of counted) chunks.push(chunk as Buffer);
    });
    return new TextDecoder('utf-8').decode(Buffer.concat(chunks));
  }

  private async content(req: IncomingMessage, res: ServerResponse, c: PreviewClaims, kind: 'preview' | 'download'): Promise<void> {
    if (kind === 'download' && c.watermark) return page(res, 403, renderMessage('Not allowed', 'This preview does not allow downloads.'));
    const range = requestedRange(req.headers.range, c.filesize);
    const headers: Record<string, string> = {
      'content-type': contentType(c.filename),
      'accept-ranges': 'bytes',
      'cache-control': 'private, max-age=3600',
      'content-security-policy': CONTENT_CSP,
      'x-content-type-options': 'nosniff',
      'cross-origin-resource-policy': 'same-origin',
      'content-disposition': `${kind === 'download' ? 'attachment' : 'inline'}; filename*=UTF-8''${encodeURIComponent(c.filename)}`,
    };
    if (range === 'unsatisfiable') {
      res.writeHead(416, { ...headers, 'content-range': `bytes */${c.filesize}`, 'content-length': '0' }).end();
      return;
    }
    const r: ByteRange | undefined = range ?? (c.filesize > 0 ? { start: 0, end: c.filesize - 1 } : undefined);
    const length = r ? r.end - r.start + 1 : 0;
    headers['content-length'] = String(length);
    if (range) headers['content-range'] = `bytes ${range.start}-${range.end}/${c.filesize}`;
    if (req.method === 'HEAD' || !r) {
      res.writeHead(range ? 206 : 200, headers).end();
      return;
    }
    const body = await this.host.openBlob(c.filehash, r);
    res.writeHead(range ? 206 : 200, headers);
    await this.counted(c.libraryId, kind, body, (counted) => pipeline(counted, res));
  }

  private async thumbnail(req: IncomingMessage, res: ServerResponse, c: PreviewClaims): Promise<void> {
    const asked = new URL(req.url ?? '/', 'http://preview').searchParams.get('size');
    const size = asked === null ? DEFAULT_THUMBNAIL_SIZE : Number(asked);
    if (!THUMBNAIL_SIZES.includes(size as ThumbnailSize)) {
      return page(res, 400, renderMessage('Bad request', `size: expected one of ${THUMBNAIL_SIZES.join(', ')}, got ${asked}`));
    }
    if (!thumbnailable(c.filename)) return page(res, 404, renderMessage('Not found', 'There is no thumbnail for this kind of file.'));
    let file: string;
    try {
      file = await this.thumbnails.path(c.filehash, size as ThumbnailSize, async () => this.host.openBlob(c.filehash));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw e;
      this.log.warn({ err: e, filehash: c.filehash }, 'thumbnail not rendered');
      return page(res, 415, renderMessage('No thumbnail', 'This image cannot be turned into a thumbnail.'));
    }
    const info = await stat(file);
    res.writeHead(200, {
      'content-type': 'image/webp', 'content-length': String(info.size), 'cache-control': 'private, max-age=600',
      'x-content-type-options': 'nosniff', 'content-security-policy': CONTENT_CSP,
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    await this.counted(c.libraryId, 'preview', createReadStream(file), (counted) => pipeline(counted, res));
  }

  /** Runs `use` on `body`, then adds the bytes that went through to the library's traffic of `kind`. */
  private async counted(libraryId: number, kind: TrafficKind, body: Readable, use: (body: Readable) => Promise<void>): Promise<void> {
    let bytes = 0;
    body.on('data', (chunk: Buffer) => { bytes += chunk.length; });
    try {
      await use(body);
    } finally {
      body.destroy();
      if (bytes > 0) this.host.countTraffic(libraryId, kind, bytes);
    }
  }
}

function page(res: ServerResponse, status: number, html: string, headOnly = false): void {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': String(Buffer.byteLength(html)),
    'cache-control': 'no-store',
    'content-security-policy': PAGE_CSP,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
  });
  res.end(headOnly ? undefined : html);
}
