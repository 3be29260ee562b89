/** A raw HTTP client for WebDAV tests: any method, exact headers, chunked bodies when asked. */
import { request } from 'node:http';

export interface DavResponse { status: number; headers: Record<string, string | string[] | undefined>; body: string }

export function basicAuth(user = 'alice', password = 'secret'): string {
  return 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
}

export function dav(
  base: string,
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: string | Buffer; chunked?: Buffer[]; auth?: string | null } = {},
): Promise<DavResponse> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.auth !== null) headers.authorization = opts.auth ?? basicAuth();
    if (opts.body !== undefined) headers['content-length'] = String(Buffer.byteLength(opts.body));
    const req = request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (opts.chunked) {
      for (const c of opts.chunked) req.write(c);
      req.end();
    } else {
      req.end(opts.body);
    }
  });
}

export const LOCK_BODY = (scope: 'exclusive' | 'shared' = 'exclusive', owner = 'tester'): string =>
  `<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:${scope}/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner><D:href>${owner}</D:href></D:owner></D:lockinfo>`;

export function lockTokenOf(r: DavResponse): string {
  const h = r.headers['lock-token'];
  const m = /^<(.+)>$/.exec(String(h ?? ''));
  if (!m) throw new Error(`expected a Lock-Token header, got ${String(h)}`);
  return m[1]!;
}
