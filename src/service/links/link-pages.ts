/**
 * LinkPages: what a visitor of a share link sees at `{base_url}/link/<code>`. A small HTML page for the
 * file (details, download button with auth download/upload) or the folder (listing with sub-folder
 * navigation, download buttons, upload form with auth upload), a password prompt, and a refusal page
 * (closed, expired, not yet valid, visit limit reached, gone). Downloads stream the blob; uploads
 * stream the form's file part to disk.
 *
 * Routes below the mount point: GET `/<code>[?path=sub/folder]`, POST `/<code>` (password form),
 * GET `/<code>/download[?path=rel/file]`, POST `/<code>/upload` (multipart: optional `path`, `file`).
 * Every route obeys the link's closing, deadline, start time and password (`ShareLinks.resolve`, the
 * password cookie) and its visit limit: a view of the link's page counts a visit and hands out a visit
 * cookie; a download, sub-folder page or upload that carries it belongs to that visit, any other counts
 * a visit of its own (refused, 410, once the limit is reached).
 */
import busboy from 'busboy';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { streamFilePart } from '../upload/web-upload.js';
import type { VerifiedContent } from '../upload/types.js';
import type { LinkRecord } from './link-store.js';
import { renderFile, renderFolder, renderMessage, renderPassword } from './link-html.js';
import type { LinkRefusal, ShareLinks } from './share-links.js';
import { LinkLogAct, type LinkEntry } from './types.js';
import { ServiceFault } from '../domain/fault.js';

const FORM_LIMIT = 16 * 1024;

export class LinkPages {
  constructor(private readonly links: ShareLinks) {}

  async handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const m = /^\/([A-Za-z0-9_-]{1,64})(?:\/(download|upload))?\/?$/.exec(path);
    if (!m) return html(res, 404, renderMessage('Not found', 'There is no link at this address.'));
    const [, code, action] = m as unknown as [string, string, string | undefined];
    try {
      const found = await this.links.resolve(code);
      if ('reason' in found) return refuse(res, found);
      const { link, entry } = found;
      const url = new URL(req.url ?? '/', 'http://link');
      if (!action && req.method === 'POST') return await this.password(req, res, link);
      if (link.password && readCookie(req, cookieName(link)) !== this.links.passCookie(link)) {
        return html(res, 401, renderPassword(this.links.url(code), false));
      }
      if (!action && req.method === 'GET') return await this.page(req, res, link, entry, url.searchParams.get('path') ?? '');
      if (action === 'download' && req.method === 'GET') return await this.download(req, res, link, entry, url.searchParams.get('path') ?? '');
      if (action === 'upload' && req.method === 'POST') return await this.upload(req, res, link, entry);
      res.writeHead(405, { allow: action === 'upload' ? 'POST' : 'GET, POST' }).end();
    } catch (e) {
      if (e instanceof ServiceFault && e.status < 500 && !res.headersSent) return html(res, e.status, renderMessage('Not available', e.message));
      this.links.log.error({ err: e, code }, 'link request failed');
      if (!res.headersSent) html(res, 500, renderMessage('Error', 'Something went wrong. Try again later.'));
      else res.destroy();
    }
  }

  private async password(req: IncomingMessage, res: ServerResponse, link: LinkRecord): Promise<void> {
    const client = ip(req);
    // Too many wrong passwords: refused without looking at this one (it tells a guesser nothing).
    const waitMs = await this.links.attempts.retryAfterMs(link.code, client);
    if (waitMs > 0) {
      req.resume();
      const retryS = Math.ceil(waitMs / 1000);
      this.links.log.warn({ code: link.code, client, retry_s: retryS }, 'link password: too many wrong attempts; refused');
      const body = renderMessage('Too many attempts', `Too many wrong passwords. Try again in ${retryS} s.`);
      res.writeHead(429, { 'content-type': 'text/html; charset=utf-8', 'content-length': String(Buffer.byteLength(body)), 'cache-control': 'no-store', 'retry-after': String(retryS) });
      res.end(body);
      return;
    }
    const body = await readSmallBody(req, FORM_LIMIT);
    const attempt = new URLSearchParams(body).get('password') ?? '';
    if (!(await this.links.checkPassword(link, attempt))) {
      await this.links.attempts.failed(link.code, client);
      return html(res, 401, renderPassword(this.links.url(link.code), true));
    }
    await this.links.attempts.succeeded(link.code, client);
    res.writeHead(303, {
      location: this.links.url(link.code),
      'set-cookie': `${cookieName(link)}=${this.links.passCookie(link)}; Path=/link/${link.code}; HttpOnly; SameSite=Lax`,
    }).end();
  }

  /**
   * Whether the request belongs to a counted visit: one that carries the visit cookie of this link
   * (unless `fresh`: a view of the link's page is a new visit), or else counts a visit now (false when the
   * limit is reached) and gets the cookie.
   */
  private async admit(req: IncomingMessage, res: ServerResponse, link: LinkRecord, entry: LinkEntry, fresh = false): Promise<boolean> {
    const name = `${cookieName(link)}_visit`;
    if (!fresh && this.links.isVisitCookie(link, readCookie(req, name))) return true;
    if (!(await this.links.visit(link, entry, ip(req)))) return false;
    res.setHeader('set-cookie', `${name}=${this.links.newVisitCookie(link)}; Path=/link/${link.code}; HttpOnly; SameSite=Lax`);
    return true;
  }

  private async page(req: IncomingMessage, res: ServerResponse, link: LinkRecord, entry: LinkEntry, sub: string): Promise<void> {
    // a visit is a view of the link's page; navigation inside a folder link is part of it
    if (!(await this.admit(req, res, link, entry, !sub))) return refuse(res, limitRefusal());
    const base = this.links.url(link.code);
    if (!entry.dir) return html(res, 200, renderFile(entry, base, link.auth !== 'preview', link.wmContent));
    const folder = await this.inside(link, entry, sub);
    if (!folder || !folder.dir) return html(res, 404, renderMessage('Not found', 'This folder does not exist in the shared folder.'));
    const children = await this.links.host.listFolder(link.libraryId, folder.fullpath);
    html(res, 200, renderFolder({ root: entry, folder, sub: relPath(sub) ?? '', children, base, canDownload: link.auth !== 'preview', canUpload: link.auth === 'upload' }));
  }

  private async download(req: IncomingMessage, res: ServerResponse, link: LinkRecord, entry: LinkEntry, sub: string): Promise<void> {
    if (link.auth === 'preview') return html(res, 403, renderMessage('Not allowed', 'This link allows viewing only.'));
    const target = entry.dir ? await this.inside(link, entry, sub) : entry;
    if (!target || target.dir) return html(res, 404, renderMessage('Not found', 'This file does not exist in the shared folder.'));
    if (!(await this.admit(req, res, link, entry))) return refuse(res, limitRefusal());
    const filehash = link.keepFilehash || target.filehash;
    const body = await this.links.host.openContent(link.libraryId, filehash);
    await this.links.host.log(link.libraryId, LinkLogAct.Downloaded, target.fullpath, { opName: 'link visitor', ip: ip(req) });
    res.writeHead(200, {
      'content-type': 'application/octet-stream',
      ...(link.keepFilehash ? {} : { 'content-length': String(target.filesize) }),
      'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(target.filename)}`,
    });
    await pipeline(body, res);
  }

  private async upload(req: IncomingMessage, res: ServerResponse, link: LinkRecord, entry: LinkEntry): Promise<void> {
    if (link.auth !== 'upload' || !entry.dir) return html(res, 403, renderMessage('Not allowed', 'This link does not allow uploads.'));
    if (!(await this.admit(req, res, link, entry))) {
      req.resume();
      return refuse(res, limitRefusal());
    }
    const tempPath = join(this.links.host.tempDir, `${randomBytes(16).toString('hex')}.link-upload`);
    const fields: Record<string, string> = {};
    let stored: Promise<VerifiedContent> | undefined;
    let fileName = '';
    try {
      const form = busboy({ headers: req.headers, limits: { fields: 8, fieldSize: FORM_LIMIT, files: 1, parts: 10 } });
      await new Promise<void>((resolve, reject) => {
        form.on('field', (name, value) => { fields[name] = value; });
        form.on('file', (_name, stream, info) => {
          fileName = info.filename ?? '';
          stored = streamFilePart(stream, tempPath, this.links.host.remainingCapacity(link.libraryId));
          stored.catch((e) => { req.unpipe(form); stream.resume(); reject(e); });
        });
        form.on('close', resolve);
        form.on('error', reject);
        req.pipe(form);
      });
      const name = fileName.split(/[\\/]/).pop() ?? '';
      if (!stored || !name || name === '.' || name === '..') return html(res, 400, renderMessage('Upload failed', 'Choose a file to upload.'));
      const content = await stored;
      const folder = await this.inside(link, entry, fields.path ?? '');
      if (!folder || !folder.dir) return html(res, 404, renderMessage('Upload failed', 'This folder does not exist in the shared folder.'));
      const remaining = await this.links.host.remainingCapacity(link.libraryId);
      if (content.size > remaining) return html(res, 403, renderMessage('Upload failed', 'The library is full.'));
      const result = await this.links.host.storeUpload(link.libraryId, folder.fullpath, name, content, 'link visitor');
      await this.links.host.log(link.libraryId, LinkLogAct.Uploaded, result.fullpath, { opName: 'link visitor', ip: ip(req) });
      const back = fields.path ? `${this.links.url(link.code)}?path=${encodeURIComponent(relPath(fields.path) ?? '')}` : this.links.url(link.code);
      res.writeHead(303, { location: back }).end();
    } catch (e) {
      if ((e as { code?: number }).code === 40321) return html(res, 403, renderMessage('Upload failed', 'The library is full.'));
      if (e instanceof Error && /multipart|boundary|Unsupported content type/i.test(e.message)) {
        return html(res, 400, renderMessage('Upload failed', 'Expected a multipart form.'));
      }
      throw e;
    } finally {
      if (stored) await stored.catch(() => undefined);
      await rm(tempPath, { force: true });
    }
  }

  /** The entry at `sub` inside the linked folder; undefined for a path that leaves it or does not exist. */
  private async inside(link: LinkRecord, root: LinkEntry, sub: string): Promise<LinkEntry | undefined> {
    const rel = relPath(sub);
    if (rel === undefined) return undefined;
    if (!rel) return root;
    return this.links.host.entryByPath(link.libraryId, root.fullpath ? `${root.fullpath}/${rel}` : rel);
  }
}

/** A relative path inside a folder link, normalised; '' for the folder itself; undefined when unsafe. */
function relPath(sub: string): string | undefined {
  const parts = sub.split('/').filter((s) => s !== '');
  if (parts.some((s) => s === '.' || s === '..' || s.includes('\\'))) return undefined;
  return parts.join('/');
}

function limitRefusal(): LinkRefusal {
  return { status: 410, reason: 'limit', message: 'This link has reached its visit limit.' };
}

function refuse(res: ServerResponse, r: LinkRefusal): void {
  const titles: Record<LinkRefusal['reason'], string> = {
    closed: 'Link closed', expired: 'Link expired', 'not-started': 'Link not valid yet', limit: 'Visit limit reached', missing: 'Not found',
  };
  html(res, r.status, renderMessage(titles[r.reason], r.message));
}

function html(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'content-length': String(Buffer.byteLength(body)), 'cache-control': 'no-store' });
  res.end(body);
}

function cookieName(link: LinkRecord): string {
  return `cl_link_${link.code.replace(/[^A-Za-z0-9]/g, '')}`;
}

function readCookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return undefined;
}

function ip(req: IncomingMessage): string {
  return req.socket.remoteAddress ?? '';
}

async function readSmallBody(req: IncomingMessage, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req) {
    n += (c as Buffer).length;
    if (n > limit) throw new Error(`form body expected at most ${limit} bytes`);
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
