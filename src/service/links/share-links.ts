/**
 * ShareLinks: the library file API's `link`, `links` and `link_close`, and the rules that decide whether
 * a link may be used now (closed, deadline, startline, visit limit, password). The pages served at the
 * link URL are in link-pages.ts.
 */
import { createHmac, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import type { LinkItem, LinkResult } from '../../shared/records.js';
import { silentLogger, type Logger } from '../../shared/log.js';
import { ErrorCode } from '../../shared/error-codes.js';
import type { MetadataStore } from '../store/metadata-store.js';
import { LinkStore, type LinkAuth, type LinkRecord } from './link-store.js';
import { PasswordAttempts, StoredPasswordAttempts, type PasswordAttemptLimits, type PasswordGuard } from './password-attempts.js';
import { LinkLogAct, type LinkEntry, type LinkHost } from './types.js';

const scryptAsync = promisify(scrypt) as (password: string, salt: Buffer, keylen: number) => Promise<Buffer>;

/** A refusal with its HTTP status and `error_code` (the service answers it as its JSON error). */
export class LinkError extends Error {
  constructor(readonly status: number, readonly code: number, message: string) {
    super(message);
    this.name = 'LinkError';
  }
}

export interface ShareLinksOptions {
  /** The metadata store that holds the links (table `share_links`). */
  db: MetadataStore;
  /** The service's data folder (a `links.json` of an earlier version there is imported once). */
  dataDir: string;
  /** Public address of the service; link URLs are `${baseUrl}/link/<code>`. */
  baseUrl: string;
  /** Default validity of a link without `deadline`, in seconds. Default 172 800 (48 h). */
  defaultTtlSec?: number;
  /** Clock in milliseconds. Default Date.now. */
  clock?: () => number;
  logger?: Logger;
  /** How many wrong link passwords are taken per link and client (password-attempts.ts). */
  passwordAttempts?: Partial<PasswordAttemptLimits>;
}

export interface Operator { opId?: string; opName?: string }

/** Why a link cannot be used now: HTTP status and the sentence shown to the visitor. */
export interface LinkRefusal { status: number; reason: 'closed' | 'expired' | 'not-started' | 'limit' | 'missing'; message: string }

type ParamBag = Record<string, string | number | undefined>;

const AUTHS: readonly LinkAuth[] = ['preview', 'download', 'upload'];

export class ShareLinks {
  readonly store: LinkStore;
  readonly baseUrl: string;
  private readonly defaultTtlSec: number;
  private readonly clock: () => number;
  readonly log: Logger;
  /** Wrong password attempts, per link and client (in the store when the service's processes share it). */
  readonly attempts: PasswordGuard;

  constructor(readonly host: LinkHost, opts: ShareLinksOptions) {
    this.store = new LinkStore(opts.db, opts.dataDir);
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.defaultTtlSec = opts.defaultTtlSec ?? 172_800;
    this.clock = opts.clock ?? Date.now;
    this.log = (opts.logger ?? silentLogger).child({ component: 'share-links' });
    this.attempts = opts.db.engine === 'postgresql'
      ? new StoredPasswordAttempts(opts.db, this.clock, opts.passwordAttempts)
      : new PasswordAttempts(this.clock, opts.passwordAttempts);
  }

  async open(): Promise<void> {
    await this.store.open();
  }

  nowSec(): number {
    return Math.floor(this.clock() / 1000);
  }

  url(code: string): string {
    return `${this.baseUrl}/link/${code}`;
  }

  /** `link`: creates a share link for `fullpath`. */
  async createLink(libraryId: number, p: ParamBag, op: Operator = {}): Promise<LinkResult> {
    const fullpath = text(p.fullpath);
    const entry = await this.host.entryByPath(libraryId, fullpath);
    if (!entry) throw new LinkError(404, ErrorCode.FileMissing, `no file or folder at ${JSON.stringify(fullpath)}`);
    const now = this.nowSec();
    const dir = optInt(p, 'dir', entry.dir ? 1 : 0);
    if (dir !== (entry.dir ? 1 : 0)) throw bad(`parameter 'dir' expected ${entry.dir ? 1 : 0} (${fullpath ? JSON.stringify(fullpath) : 'the root'} is a ${entry.dir ? 'folder' : 'file'}), got ${dir}`);
    const auth = (text(p.auth) || 'preview') as LinkAuth;
    if (!AUTHS.includes(auth)) throw bad(`parameter 'auth' expected one of ${AUTHS.join(', ')}, got ${JSON.stringify(p.auth)}`);
    if (auth === 'upload' && !entry.dir) throw bad(`parameter 'auth' expected preview or download for a file link, got "upload"`);
    const deadline = optInt(p, 'deadline', now + this.defaultTtlSec);
    if (deadline !== -1 && deadline <= now) throw bad(`parameter 'deadline' expected a future unix time (seconds) or -1, got ${deadline}`);
    const startline = optInt(p, 'startline', 0);
    if (startline < 0) throw bad(`parameter 'startline' expected a unix time (seconds), got ${startline}`);
    if (deadline !== -1 && startline >= deadline) throw bad(`parameter 'startline' expected a time before the deadline ${deadline}, got ${startline}`);
    const keep = optInt(p, 'keep', 0);
    if (keep !== 0 && keep !== 1) throw bad(`parameter 'keep' expected 0 or 1, got ${keep}`);
    if (keep === 1 && entry.dir) throw bad(`parameter 'keep' applies to file links only, got keep=1 on a folder`);
    const accessLimit = optInt(p, 'access_limit', 0);
    if (accessLimit < 0) throw bad(`parameter 'access_limit' expected a non-negative integer, got ${accessLimit}`);
    const password = text(p.password);
    const link: LinkRecord = {
      code: LinkStore.newCode(), libraryId, hash: entry.hash, dir: entry.dir, fullpath: entry.fullpath,
      keepFilehash: keep === 1 ? entry.filehash : '', auth, deadline, startline,
      password: password ? await hashPassword(password) : '', accessLimit, visits: 0, wmContent: text(p.wm_content),
      closed: false, createdAt: now, opName: op.opName ?? op.opId ?? '',
    };
    await this.store.put(link);
    await this.host.log(libraryId, LinkLogAct.Created, entry.fullpath, op);
    this.log.info({ code: link.code, fullpath: entry.fullpath, auth, dir: entry.dir }, 'link created');
    return { link: this.url(link.code), code: link.code };
  }

  /** `links`: the library's open links (`file=1`: file links only). */
  async listLinks(libraryId: number, p: ParamBag = {}): Promise<LinkItem[]> {
    const filesOnly = optInt(p, 'file', 0) === 1;
    const out: LinkItem[] = [];
    for (const l of await this.store.list(libraryId)) {
      if (l.closed || (filesOnly && l.dir)) continue;
      const entry = await this.host.entryByHash(libraryId, l.hash);
      const fullpath = entry?.fullpath ?? l.fullpath;
      out.push({
        filename: fullpath.split('/').pop() ?? '', filesize: entry && !entry.dir ? entry.filesize : 0,
        link: this.url(l.code), deadline: l.deadline, password: l.password ? 1 : 0, code: l.code, fullpath,
      });
    }
    return out;
  }

  /** `link_close`: closes the link `code`, or every link of `fullpath`. */
  async closeLinks(libraryId: number, p: ParamBag, op: Operator = {}): Promise<void> {
    const code = text(p.code);
    let targets: LinkRecord[];
    if (code) {
      const l = await this.store.get(code);
      if (!l || l.libraryId !== libraryId) throw new LinkError(404, ErrorCode.LinkMissing, `no link with code ${JSON.stringify(code)} in this library`);
      targets = [l];
    } else {
      const fullpath = text(p.fullpath);
      const entry = await this.host.entryByPath(libraryId, fullpath);
      targets = (await this.store.list(libraryId)).filter((l) => (entry ? l.hash === entry.hash : l.fullpath === fullpath));
      if (!entry && targets.length === 0) throw new LinkError(404, ErrorCode.FileMissing, `no file or folder at ${JSON.stringify(fullpath)}`);
    }
    await this.store.close(targets.map((l) => l.code));
    for (const l of targets) l.closed = true;
    this.log.info({ codes: targets.map((l) => l.code), by: op.opName ?? op.opId }, 'links closed');
  }

  /** Whether the link may be used now, and the entry it designates. */
  async resolve(code: string): Promise<{ link: LinkRecord; entry: LinkEntry } | LinkRefusal> {
    const link = await this.store.get(code);
    const now = this.nowSec();
    if (!link) return { status: 404, reason: 'missing', message: 'This link does not exist.' };
    if (link.closed) return { status: 410, reason: 'closed', message: 'This link has been closed by its owner.' };
    if (link.deadline !== -1 && now >= link.deadline) return { status: 410, reason: 'expired', message: 'This link has expired.' };
    if (link.startline > now) {
      return { status: 403, reason: 'not-started', message: `This link is not valid yet; it opens at ${new Date(link.startline * 1000).toISOString().replace('.000Z', 'Z')}.` };
    }
    const entry = await this.host.entryByHash(link.libraryId, link.hash);
    if (!entry) return { status: 404, reason: 'missing', message: 'The shared file or folder no longer exists.' };
    return { link, entry };
  }

  /** Counts a visit (1015); false when the visit limit is already reached. */
  async visit(link: LinkRecord, entry: LinkEntry, ip: string): Promise<boolean> {
    if (!await this.store.countVisit(link)) return false;
    await this.host.log(link.libraryId, LinkLogAct.Visited, entry.fullpath, { opName: 'link visitor', ip });
    return true;
  }

  limitReached(link: LinkRecord): boolean {
    return link.accessLimit > 0 && link.visits >= link.accessLimit;
  }

  async checkPassword(link: LinkRecord, attempt: string): Promise<boolean> {
    if (!link.password) return true;
    const [saltHex, hashHex] = link.password.split(':');
    const actual = await scryptAsync(attempt, Buffer.from(saltHex!, 'hex'), 32);
    return timingSafeEqual(actual, Buffer.from(hashHex!, 'hex'));
  }

  /**
   * The cookie value that proves a counted visit (`visit`): a random visit id and its MAC under the
   * link's secret. Downloads, sub-folder pages and uploads of that visit are not counted again.
   */
  newVisitCookie(link: LinkRecord): string {
    const id = randomBytes(12).toString('base64url');
    return `${id}.${this.visitMac(link, id)}`;
  }

  /** True when `value` is a cookie made by `newVisitCookie` for this link. */
  isVisitCookie(link: LinkRecord, value: string | undefined): boolean {
    const [id, mac, ...rest] = (value ?? '').split('.');
    if (!id || !mac || rest.length) return false;
    const want = Buffer.from(this.visitMac(link, id));
    const got = Buffer.from(mac);
    return want.length === got.length && timingSafeEqual(want, got);
  }

  private visitMac(link: LinkRecord, id: string): string {
    return createHmac('sha256', this.store.secret).update(`visit:${link.code}:${id}`).digest('base64url');
  }

  /** The cookie value that proves the visitor gave the password (changes when the password does). */
  passCookie(link: LinkRecord): string {
    return createHmac('sha256', this.store.secret).update(`${link.code}:${link.password}`).digest('base64url');
  }
}

async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  return `${salt.toString('hex')}:${(await scryptAsync(password, salt, 32)).toString('hex')}`;
}

function text(v: string | number | undefined): string {
  return v === undefined ? '' : String(v);
}

function optInt(p: ParamBag, name: string, dflt: number): number {
  const v = p[name];
  if (v === undefined || v === '') return dflt;
  const t = String(v).trim();
  if (!/^-?\d+$/.test(t)) throw bad(`parameter '${name}' expected an integer, got ${JSON.stringify(v)}`);
  return Number(t);
}

function bad(message: string): LinkError {
  return new LinkError(400, ErrorCode.BadParam, message);
}
