/** Writing responses: status with an empty body, XML bodies, and errors (RFC 4918 §16 error bodies). */
import type { ServerResponse } from 'node:http';
import { DavError, publicMessage, statusOf } from './errors.js';
import { escapeXml, XML_HEAD } from './xml.js';

export function sendStatus(res: ServerResponse, status: number, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...headers, 'content-length': '0' });
  res.end();
}

export function sendXml(res: ServerResponse, status: number, xml: string, headers: Record<string, string> = {}): void {
  const body = Buffer.from(xml, 'utf8');
  res.writeHead(status, { ...headers, 'content-type': 'application/xml; charset=utf-8', 'content-length': String(body.length) });
  res.end(body);
}

/** Answers an error: RFC 4918 condition elements as an XML body, else a short text. */
export function sendError(res: ServerResponse, err: unknown, method: string): void {
  const status = statusOf(err);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const headers: Record<string, string> = {};
  if (status === 405) headers.allow = 'OPTIONS, GET, HEAD, PROPFIND, PROPPATCH, PUT, DELETE, MKCOL, COPY, MOVE, LOCK, UNLOCK';
  if (err instanceof DavError && err.condition) {
    const hrefs = err.hrefs.map((h) => `<D:href>${escapeXml(h)}</D:href>`).join('');
    sendXml(res, status, `${XML_HEAD}<D:error xmlns:D="DAV:"><D:${err.condition}${hrefs ? `>${hrefs}</D:${err.condition}>` : '/>'}</D:error>`, headers);
    return;
  }
  const text = method === 'HEAD' ? '' : `${status} ${publicMessage(err)}\n`;
  const body = Buffer.from(text, 'utf8');
  res.writeHead(status, { ...headers, 'content-type': 'text/plain; charset=utf-8', 'content-length': String(body.length) });
  res.end(method === 'HEAD' ? undefined : body);
}
