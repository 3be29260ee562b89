/**
 * HTTP authentication of WebDAV requests: Basic and Digest (RFC 7616, MD5, qop=auth) against the users of
 * the gateway's configuration, each mapped to an operator. Anonymous access only when configured.
 * Passwords are compared in constant time and never logged.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Operator } from '../vfs/types.js';

export interface WebdavUser {
  name: string;
  password: string;
  /** Operator id passed to the service (op_id). */
  opId?: string;
  /** Operator name passed to the service (op_name). Default: the user name. */
  opName?: string;
  /** Refuse every change (403). Default false. */
  readOnly?: boolean;
}

/** Who a request acts as. */
export interface Principal {
  /** User name; null for anonymous. */
  user: string | null;
  operator?: Operator;
  readOnly: boolean;
}

export interface AuthOptions {
  users: WebdavUser[];
  /** Anonymous access: false (default) or `{ readOnly }`. */
  anonymous: false | { readOnly: boolean };
  /** Realm shown by clients. Default `cloudlib`. */
  realm?: string;
  /** Digest nonce lifetime, ms. Default 300 000. */
  nonceTtlMs?: number;
  /** Clock, ms. Default Date.now. */
  clock?: () => number;
}

const md5 = (s: string): string => createHash('md5').update(s).digest('hex');

function sameText(a: string, b: string): boolean {
  const x = createHash('sha256').update(a).digest();
  const y = createHash('sha256').update(b).digest();
  return timingSafeEqual(x, y);
}

/** Parses `key=value, key="quoted value"` (the Digest parameter list). */
export function parseAuthParams(s: string): Map<string, string> {
  const out = new Map<string, string>();
  const re = /([a-zA-Z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))/g;
  for (let m = re.exec(s); m; m = re.exec(s)) out.set(m[1]!.toLowerCase(), m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]!);
  return out;
}

export class Authenticator {
  private readonly users: Map<string, WebdavUser>;
  private readonly realm: string;
  private readonly secret = randomBytes(32);
  private readonly nonceTtlMs: number;
  private readonly clock: () => number;

  constructor(private readonly opts: AuthOptions) {
    this.users = new Map(opts.users.map((u) => [u.name, u]));
    this.realm = opts.realm ?? 'cloudlib';
    this.nonceTtlMs = opts.nonceTtlMs ?? 300_000;
    this.clock = opts.clock ?? Date.now;
  }

  /** The principal of a request, or null when it must be challenged (401). */
  authenticate(req: IncomingMessage): Principal | null {
    const header = req.headers.authorization;
    if (header) {
      const space = header.indexOf(' ');
      const scheme = (space > 0 ? header.slice(0, space) : header).toLowerCase();
      const rest = space > 0 ? header.slice(space + 1).trim() : '';
      const user = scheme === 'basic' ? this.basic(rest) : scheme === 'digest' ? this.digest(rest, req.method ?? 'GET') : undefined;
      if (user) return { user: user.name, operator: { opId: user.opId, opName: user.opName ?? user.name }, readOnly: !!user.readOnly };
      return null;
    }
    if (this.opts.anonymous) return { user: null, readOnly: this.opts.anonymous.readOnly };
    return null;
  }

  /** `WWW-Authenticate` challenges (Basic and Digest). */
  challenges(stale = false): string[] {
    const nonce = this.nonce();
    return [`Digest realm="${this.realm}", qop="auth", algorithm=MD5, nonce="${nonce}"${stale ? ', stale=true' : ''}`, `Basic realm="${this.realm}", charset="UTF-8"`];
  }

  private basic(b64: string): WebdavUser | undefined {
    const text = Buffer.from(b64, 'base64').toString('utf8');
    const colon = text.indexOf(':');
    if (colon < 0) return undefined;
    const u = this.users.get(text.slice(0, colon));
    return u && sameText(u.password, text.slice(colon + 1)) ? u : undefined;
  }

  private nonce(): string {
    const t = this.clock().toString(36);
    return `${t}.${createHmac('sha256', this.secret).update(t).digest('base64url').slice(0, 22)}`;
  }

  private nonceValid(nonce: string): boolean {
    const [t, mac] = nonce.split('.');
    if (!t || !mac) return false;
    const want = createHmac('sha256', this.secret).update(t).digest('base64url').slice(0, 22);
    if (!sameText(want, mac)) return false;
    const age = this.clock() - Number.parseInt(t, 36);
    return age >= 0 && age <= this.nonceTtlMs;
  }

  private digest(params: string, method: string): WebdavUser | undefined {
    const p = parseAuthParams(params);
    const u = this.users.get(p.get('username') ?? '');
    const nonce = p.get('nonce') ?? '';
    const uri = p.get('uri') ?? '';
    const response = p.get('response') ?? '';
    if (!u || !this.nonceValid(nonce) || p.get('realm') !== this.realm) return undefined;
    const algorithm = (p.get('algorithm') ?? 'MD5').toUpperCase();
    if (algorithm !== 'MD5') return undefined;
    const ha1 = md5(`${u.name}:${this.realm}:${u.password}`);
    const ha2 = md5(`${method}:${uri}`);
    const qop = p.get('qop');
    const expected = qop === 'auth' ? md5(`${ha1}:${nonce}:${p.get('nc') ?? ''}:${p.get('cnonce') ?? ''}:auth:${ha2}`) : qop === undefined ? md5(`${ha1}:${nonce}:${ha2}`) : '';
    return expected !== '' && sameText(expected, response.toLowerCase()) ? u : undefined;
  }
}
