/**
 * HTTP authentication of WebDAV requests: Basic and Digest (RFC 7616, MD5, qop=auth) against the users of
 * the gateway's configuration, each mapped to an operator. Anonymous access only when configured.
 * Passwords are compared in constant time and never logged.
 *
 * A Digest answer is bound to its request: its `uri` must name the request's target, its nonce must be
 * one this server issued and not expired (an expired one is challenged again with `stale=true`), and its
 * nonce count must not have been used before with that nonce (a repeated count is a replay and is
 * refused; counts may arrive a little out of order, as over parallel connections).
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { pathFromUrl } from './paths.js';
import type { Operator, Vfs } from '../vfs/types.js';

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
  /** The Vfs this principal acts through (a member's own); default the server's. */
  vfs?: Vfs;
}

/**
 * Logins of the service's members (`webdav.member_logins`): a Basic login whose user is not a configured
 * one is handed to this; it answers the member's own Vfs, or a refusal (401).
 */
export interface MemberLogins {
  /** Members log in (the 401 then offers Basic alone: the gateway keeps no password to check a Digest answer against). */
  loginsOn: boolean;
  login(account: string, password: string, client: string): Promise<{ vfs: Vfs } | { refused: string }>;
  /** The Vfs of a configured user who acts as a member (`webdav.users[].member`); undefined for the others. */
  forUser?(name: string): Promise<Vfs | undefined>;
}

export interface AuthOptions {
  users: WebdavUser[];
  /** Anonymous access: false (default) or `{ readOnly }`. */
  anonymous: false | { readOnly: boolean };
  /** Realm shown by clients. Default `cloudlib`. */
  realm?: string;
  /** Digest nonce lifetime, ms. Default 300 000. */
  nonceTtlMs?: number;
  /** Nonces whose counts are remembered at most (the oldest are forgotten, and then answered stale). Default 10 000. */
  maxTrackedNonces?: number;
  /** Clock, ms. Default Date.now. */
  clock?: () => number;
}

const md5 = (s: string): string => createHash('md5').update(s).digest('hex');

function sameText(a: string, b: string): boolean {
  const x = createHash('sha256').update(a).digest();
  const y = createHash('sha256').update(b).digest();
  return timingSafeEqual(x, y);
}

/** User and password of a Basic `Authorization` header, or undefined. */
export function basicCredentials(header: string | undefined): { user: string; password: string } | undefined {
  if (!header || !/^basic\s/i.test(header)) return undefined;
  const text = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
  const colon = text.indexOf(':');
  return colon < 0 ? undefined : { user: text.slice(0, colon), password: text.slice(colon + 1) };
}

/** Parses `key=value, key="quoted value"` (the Digest parameter list). */
export function parseAuthParams(s: string): Map<string, string> {
  const out = new Map<string, string>();
  const re = /([a-zA-Z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))/g;
  for (let m = re.exec(s); m; m = re.exec(s)) out.set(m[1]!.toLowerCase(), m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]!);
  return out;
}

/** How far behind the highest count of a nonce a count may arrive (parallel connections), and is still accepted once. */
const NC_WINDOW = 64;
const NC_MASK = (1n << BigInt(NC_WINDOW)) - 1n;

/** The counts used with one nonce: the highest, and which of the NC_WINDOW below it (bit i = high - i). */
interface NonceCounts { high: number; mask: bigint }

/** The outcome of checking a request's credentials. */
export type AuthOutcome = { principal: Principal } | { principal: null; stale: boolean };

/** The path and query of a request target or a Digest `uri` (absolute or not), for comparing the two. */
function targetOf(uri: string): string | undefined {
  try {
    const q = uri.search(/[?#]/);
    const query = q >= 0 && uri[q] === '?' ? uri.slice(q).split('#')[0]! : '';
    return pathFromUrl(uri) + query;
  } catch {
    return undefined;
  }
}

export class Authenticator {
  private readonly users: Map<string, WebdavUser>;
  private readonly realm: string;
  private readonly secret = randomBytes(32);
  private readonly nonceTtlMs: number;
  private readonly clock: () => number;
  private readonly maxTrackedNonces: number;
  /** Highest nonce count seen per nonce (insertion order = first use, oldest first). */
  private readonly counts = new Map<string, NonceCounts>();
  /** Nonces issued so far (each nonce carries its number). */
  private issued = 0;
  /** Number of the newest nonce forgotten to keep `counts` bounded: unknown nonces up to it are stale. */
  private forgottenUpTo = 0;

  constructor(private readonly opts: AuthOptions) {
    this.users = new Map(opts.users.map((u) => [u.name, u]));
    this.realm = opts.realm ?? 'cloudlib';
    this.nonceTtlMs = opts.nonceTtlMs ?? 300_000;
    this.clock = opts.clock ?? Date.now;
    this.maxTrackedNonces = opts.maxTrackedNonces ?? 10_000;
  }

  /** The principal of a request, or null when it must be challenged (401). */
  authenticate(req: IncomingMessage): Principal | null {
    return this.check(req).principal;
  }

  /** The principal of a request, or why it must be challenged: `stale` when only the nonce is too old. */
  check(req: IncomingMessage): AuthOutcome {
    const header = req.headers.authorization;
    if (header) {
      const space = header.indexOf(' ');
      const scheme = (space > 0 ? header.slice(0, space) : header).toLowerCase();
      const rest = space > 0 ? header.slice(space + 1).trim() : '';
      let user: WebdavUser | undefined;
      if (scheme === 'basic') user = this.basic(rest);
      else if (scheme === 'digest') {
        const d = this.digest(rest, req.method ?? 'GET', req.url ?? '/');
        if (d === 'stale') return { principal: null, stale: true };
        user = d;
      }
      if (user) return { principal: { user: user.name, operator: { opId: user.opId, opName: user.opName ?? user.name }, readOnly: !!user.readOnly } };
      return { principal: null, stale: false };
    }
    if (this.opts.anonymous) return { principal: { user: null, readOnly: this.opts.anonymous.readOnly } };
    return { principal: null, stale: false };
  }

  /** True when `name` is a configured user (member logins do not take over configured names). */
  hasUser(name: string): boolean {
    return this.users.has(name);
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

  /** A new nonce: issue time, issue number, a random part and a MAC of them. */
  private nonce(): string {
    const body = `${this.clock().toString(36)}.${(++this.issued).toString(36)}.${randomBytes(6).toString('base64url')}`;
    return `${body}.${createHmac('sha256', this.secret).update(body).digest('base64url').slice(0, 22)}`;
  }

  /** Issue time and number of a nonce this server made, else undefined. */
  private issuedAt(nonce: string): { t: number; n: number } | undefined {
    const parts = nonce.split('.');
    if (parts.length !== 4 || parts.some((x) => x === '')) return undefined;
    const body = parts.slice(0, 3).join('.');
    const want = createHmac('sha256', this.secret).update(body).digest('base64url').slice(0, 22);
    if (!sameText(want, parts[3]!)) return undefined;
    const t = Number.parseInt(parts[0]!, 36);
    const n = Number.parseInt(parts[1]!, 36);
    return Number.isFinite(t) && Number.isFinite(n) ? { t, n } : undefined;
  }

  /**
   * Records a use of a nonce with count `nc`; false when that count was used before (a replay). Counts
   * may arrive out of order by up to NC_WINDOW (a client sharing a nonce over parallel connections); one
   * further behind than that is refused too.
   */
  private countUse(nonce: string, issued: { t: number; n: number }, nc: number): boolean | 'stale' {
    const seen = this.counts.get(nonce);
    if (seen === undefined && issued.n <= this.forgottenUpTo) return 'stale';
    let next: NonceCounts;
    if (seen === undefined) next = { high: nc, mask: 1n };
    else if (nc > seen.high) {
      const shift = BigInt(Math.min(nc - seen.high, NC_WINDOW));
      next = { high: nc, mask: ((seen.mask << shift) | 1n) & NC_MASK };
    } else {
      const back = seen.high - nc;
      if (back >= NC_WINDOW) return false;
      const bit = 1n << BigInt(back);
      if ((seen.mask & bit) !== 0n) return false;
      next = { high: seen.high, mask: seen.mask | bit };
    }
    if (seen === undefined && this.counts.size >= this.maxTrackedNonces) {
      const now = this.clock();
      for (const [n] of this.counts) {
        const at = this.issuedAt(n);
        if (this.counts.size < this.maxTrackedNonces && at && now - at.t <= this.nonceTtlMs) break;
        this.counts.delete(n);
        this.forgottenUpTo = Math.max(this.forgottenUpTo, at?.n ?? 0);
      }
    }
    this.counts.delete(nonce);
    this.counts.set(nonce, next);
    return true;
  }

  private digest(params: string, method: string, target: string): WebdavUser | 'stale' | undefined {
    const p = parseAuthParams(params);
    const u = this.users.get(p.get('username') ?? '');
    const nonce = p.get('nonce') ?? '';
    const uri = p.get('uri') ?? '';
    const response = p.get('response') ?? '';
    const issued = this.issuedAt(nonce);
    if (!u || p.get('realm') !== this.realm) return undefined;
    const algorithm = (p.get('algorithm') ?? 'MD5').toUpperCase();
    if (algorithm !== 'MD5') return undefined;
    // The answer covers the uri it names: that must be the target of this request.
    if (uri !== target) {
      const a = targetOf(uri);
      if (a === undefined || a !== targetOf(target)) return undefined;
    }
    // qop=auth only: without a nonce count and a client nonce a captured answer could be replayed.
    if (p.get('qop') !== 'auth') return undefined;
    const ncText = p.get('nc') ?? '';
    if (!/^[0-9a-fA-F]{8}$/.test(ncText)) return undefined;
    const ha1 = md5(`${u.name}:${this.realm}:${u.password}`);
    const ha2 = md5(`${method}:${uri}`);
    const expected = md5(`${ha1}:${nonce}:${ncText}:${p.get('cnonce') ?? ''}:auth:${ha2}`);
    if (!sameText(expected, response.toLowerCase())) return undefined;
    // Right password on a nonce this server did not issue (issued before a restart) or that has expired:
    // answered stale, so the client retries with a new nonce without asking for the password again.
    if (issued === undefined) return 'stale';
    const age = this.clock() - issued.t;
    if (age < 0 || age > this.nonceTtlMs) return 'stale';
    const use = this.countUse(nonce, issued, Number.parseInt(ncText, 16));
    if (use === 'stale') return 'stale';
    return use ? u : undefined;
  }
}
