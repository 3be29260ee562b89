/**
 * MemberSessions: members of the enterprise acting as themselves. A member logs in with their account and
 * password; the gateway asks the service's token endpoint for that member's access token (password
 * grant) and opens a session: a Vfs of its own (metadata cache, feeds, block cache, write-back journal in
 * `<data>/members/<key>/`) over UserTokenRemotes, so that every request is the member's own on the
 * service and nothing cached for one member is served to another.
 *
 * - The password is never kept. To recognise a repeated Basic login without asking the service each
 *   request, a session holds a salted SHA-256 verifier of it (in memory only); a login whose verifier
 *   does not match asks the token endpoint again.
 * - Sessions are bounded (`maxSessions`, the least recently used closed first) and expire after
 *   `idleMs` without a request; closing one flushes its uploads (bounded), and what is left stays in the
 *   member's journal until their next session.
 * - The token is refreshed before it expires (at 80 % of its lifetime; on a 40102 the client also
 *   refreshes and replays). Every `checkIntervalMs` the session asks the service whether the member
 *   still takes part (`account/mount`): a refusal (disabled account, withdrawn token) ends the session.
 * - A wrong password is refused; after each refusal that account waits before the service is asked
 *   again (1 s, doubling to 60 s, answered as refused meanwhile); after 10 refusals in a row from one
 *   client address, that address waits too. The wait holds whether or not the member has a session:
 *   while it runs, even the password the session's verifier knows is refused.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import { ServiceClient, type ClientSecretPair } from '../api/client.js';
import { ServiceError } from '../api/errors.js';
import type { Logger } from '../shared/log.js';
import type { BandwidthLimit } from '../shared/bandwidth-limit.js';
import type { GatewayVfs } from '../vfs/gateway-vfs.js';
import { createVfs, type CreateVfsOptions } from '../vfs/index.js';
import { VfsError } from '../vfs/types.js';
import type { Remote } from '../vfs/remote.js';
import { UserTokenRemote } from '../remote/user-token-remote.js';
import { peekJournal, type JournalEntry } from '../vfs/write-back/index.js';
import { LibraryRemote } from '../remote/library-remote.js';

/** A library the gateway serves: its folder name, id on the service, its feed and its library authorization. */
export interface ServedLibraryFeed {
  name: string;
  id: string;
  feed: Pick<Remote, 'changes' | 'headCursor'>;
  /** A client holding the library authorization: asks the service for a member's permission before a write is journaled. */
  client?: ServiceClient;
}

export interface MemberSessionsOptions {
  baseUrl: string;
  uploadHeaderPrefix?: string;
  /** The application the gateway asks the token endpoint as (client_id and its secret). */
  application: ClientSecretPair;
  /** The libraries the gateway serves (a member's Vfs serves those of them the member takes part in). */
  libraries: () => ServedLibraryFeed[] | Promise<ServedLibraryFeed[]>;
  /** `<data>/members`: one folder per member (journal, feed cursors). */
  dataDir: string;
  /** Options of each member's Vfs (feed interval, durability, cache sizes). */
  vfs?: Omit<CreateVfsOptions, 'libraries' | 'dataDir' | 'logger' | 'onClose'>;
  /** Sessions open at once. Default 100. */
  maxSessions?: number;
  /** A session with no request for this long is closed, ms. Default 900 000 (15 min). */
  idleMs?: number;
  /** How often a session checks that the member may still act, ms. Default: the Vfs's feed interval (2000). */
  checkIntervalMs?: number;
  /** Uploads a closing session waits for, ms (what is left stays in the member's journal). Default 10 000. */
  closeFlushMs?: number;
  onExchange?: (e: { endpoint: string; status: number; ms: number }) => void;
  /** The gateway's bandwidth limit (`bwlimit`): the members' transfers share it with the gateway's. Default none. */
  bandwidth?: BandwidthLimit;
  logger: Logger;
  /** Clock, ms: session idleness, refusal waits and the datelines of the service calls. Default Date.now. */
  clock?: () => number;
}

export interface MemberSession {
  account: string;
  vfs: GatewayVfs;
  client: ServiceClient;
}

interface Session extends MemberSession {
  key: string;
  salt: Buffer;
  verifier: Buffer | null;
  lastUseMs: number;
  /** Not closed for idleness or to make room (a mount acting as the member). */
  pinned: boolean;
  refreshTimer?: NodeJS.Timeout;
  checkTimer?: NodeJS.Timeout;
  closing?: Promise<void>;
}

/** An upload waiting in a member's journal. */
export type MemberUpload = ReturnType<GatewayVfs['status']>['uploads'][number] & { member: string };

/** Outcome of a login: the session, or refused (wrong account or password, or waiting after refusals). */
export type LoginOutcome = { session: MemberSession } | { refused: string };

/** The path whose folder get_member_permission evaluates: the file itself when it exists, else its folder. */
function writeTarget(fullpath: string, code: 'w' | 'ul'): string {
  if (code === 'w') return fullpath;
  const i = fullpath.lastIndexOf('/');
  return i < 0 ? '' : fullpath.slice(0, i);
}

/** Refusals in a row from one client address before that address waits too. */
const ADDRESS_REFUSALS = 10;

const md5Hex = (text: string): string => createHash('md5').update(text, 'utf8').digest('hex');
const verifierOf = (salt: Buffer, password: string): Buffer => createHash('sha256').update(salt).update(password, 'utf8').digest();

/** The folder of a member's data (journal, cursors): a digest of the account as given, stable across restarts. */
export function memberKey(account: string): string {
  return createHash('sha256').update(account, 'utf8').digest('hex').slice(0, 32);
}

export class MemberSessions {
  private readonly sessions = new Map<string, Session>();
  /** Logins under way, by account: concurrent requests of one member share one token grant. */
  private readonly pending = new Map<string, Promise<LoginOutcome>>();
  /** Sessions being closed, by member key: a new session of that member waits (one journal, one owner). */
  private readonly closing = new Map<string, Promise<void>>();
  /** Refusals per account and per client address: how many in a row and until when the next waits. */
  private readonly refusals = new LRUCache<string, { count: number; untilMs: number }>({ max: 10_000 });
  private readonly appClient: ServiceClient;
  /** Salt of the keys of logins under way (one grant for concurrent requests with the same password). */
  private readonly pendingSalt = randomBytes(16);
  private readonly maxSessions: number;
  private readonly idleMs: number;
  private readonly checkIntervalMs: number;
  private readonly clock: () => number;
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;
  /**
   * The journals of members without a session that still hold uploads, by member key: the gateway keeps
   * no password, so they go up at the member's next login; status lists them, flush names them.
   */
  private readonly idleJournals = new Map<string, { account: string; entries: JournalEntry[] }>();
  /** The members' folders read once at start (journals left by the last run). */
  readonly ready: Promise<void>;
  readonly counters = { grants: 0, verified: 0, refused: 0, throttled: 0, ended: 0 };

  constructor(private readonly opts: MemberSessionsOptions) {
    this.appClient = new ServiceClient({ baseUrl: opts.baseUrl, credentials: { application: opts.application }, uploadHeaderPrefix: opts.uploadHeaderPrefix, retries: 0, onExchange: opts.onExchange, clock: opts.clock });
    this.maxSessions = opts.maxSessions ?? 100;
    this.idleMs = opts.idleMs ?? 900_000;
    this.checkIntervalMs = opts.checkIntervalMs ?? (opts.vfs?.feedIntervalMs || 2000);
    this.clock = opts.clock ?? Date.now;
    this.sweeper = setInterval(() => this.sweep(), Math.min(60_000, Math.max(1000, Math.floor(this.idleMs / 4))));
    this.sweeper.unref();
    this.ready = this.readIdleJournals().catch((err: Error) => opts.logger.warn({ err: err.message }, 'members: the journals of the last run could not be read'));
  }

  /** Every member's folder without a session: what its journal still holds. */
  private async readIdleJournals(): Promise<void> {
    const keys = await readdir(this.opts.dataDir).catch(() => [] as string[]);
    for (const key of keys) {
      if (this.sessions.has(key) || this.closing.has(key)) continue;
      const member = await readFile(join(this.opts.dataDir, key, 'member.json'), 'utf8').then((t) => JSON.parse(t) as { account?: unknown }, () => undefined);
      if (typeof member?.account === 'string') await this.noteIdleJournal(key, member.account);
    }
  }

  /** Reads the journal of a member without a session: kept in `idleJournals` while it holds uploads. */
  private async noteIdleJournal(key: string, account: string): Promise<void> {
    const entries = (await peekJournal(join(this.opts.dataDir, key, 'journal'))).filter((e) => (e.kind ?? 'file') === 'file');
    // A session opened meanwhile owns the journal now.
    if (this.sessions.has(key)) return;
    if (entries.length > 0) this.idleJournals.set(key, { account, entries });
    else this.idleJournals.delete(key);
  }

  /** Sessions open now (status). */
  list(): { account: string; idleMs: number; pendingUploads: number }[] {
    const now = this.clock();
    return [...this.sessions.values()].map((s) => ({ account: s.account, idleMs: now - s.lastUseMs, pendingUploads: s.vfs.status().uploads.length }));
  }

  /**
   * The uploads waiting in the members' journals, each naming its member: those of the open sessions, and
   * those of members without one (queued until the member's next login).
   */
  uploads(): MemberUpload[] {
    const open = [...this.sessions.values()].filter((s) => !s.closing).flatMap((s) => s.vfs.status().uploads.map((u) => ({ ...u, member: s.account })));
    const waiting = [...this.idleJournals.values()].flatMap(({ account, entries }) => entries.map((e): MemberUpload => ({
      id: e.id, library: e.library, fullpath: e.fullpath, state: 'queued', failures: 0, queuedMs: e.createdMs, size: e.size, member: account,
      lastError: `waits for ${account} to log in again (the gateway keeps no member's password)`,
    })));
    return [...open, ...waiting];
  }

  /**
   * Waits until the uploads of every open session are on the service (or `timeoutMs` has passed: the first
   * failure is thrown). Uploads in the journals of members without a session cannot go before their next
   * login: an error names them.
   */
  async flushAll(opts: { timeoutMs?: number } = {}): Promise<void> {
    const results = await Promise.allSettled([...this.sessions.values()].filter((s) => !s.closing).map((s) => s.vfs.flushAll(opts)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    await this.ready;
    if (this.idleJournals.size > 0) {
      const who = [...this.idleJournals.values()].map((w) => `${w.account} (${w.entries.length})`).join(', ');
      throw new VfsError('EAGAIN', `uploads wait in the journals of members without a session: ${who}; they go up at each one's next login`);
    }
  }

  /**
   * The session of `account` when `password` is theirs: the open session when its verifier matches,
   * else a new token from the service. `client` is the caller's address (refusals are counted per
   * account and per address).
   */
  async login(account: string, password: string, client = ''): Promise<LoginOutcome> {
    if (this.closed) throw new VfsError('EAGAIN', 'the gateway is stopping');
    if (account === '' || password === '') return { refused: 'account and password are required' };
    const key = memberKey(account);
    // The wait comes first: an open session's verifier must not answer a guess the service would not be asked.
    const wait = this.waiting(key, client);
    if (wait) {
      this.counters.throttled++;
      return { refused: wait };
    }
    const open = this.sessions.get(key);
    if (open && !open.closing && open.verifier && timingSafeEqual(open.verifier, verifierOf(open.salt, password))) {
      open.lastUseMs = this.clock();
      this.counters.verified++;
      return { session: open };
    }
    const pendingKey = `${key}\0${verifierOf(this.pendingSalt, password).toString('hex')}`;
    let p = this.pending.get(pendingKey);
    if (!p) {
      p = this.grant(account, key, password, client).finally(() => this.pending.delete(pendingKey));
      this.pending.set(pendingKey, p);
    }
    return p;
  }

  /**
   * A session that is not ended by idleness (a mount acting as a member for as long as it runs); the
   * password is used once for the grant and not kept.
   */
  async pinned(account: string, password: string): Promise<MemberSession> {
    const out = await this.login(account, password);
    if ('refused' in out) throw new VfsError('EACCES', `member '${account}': ${out.refused}`);
    (out.session as Session).pinned = true;
    return out.session;
  }

  /** Runs every session's check now (the timer runs it each `checkIntervalMs`). */
  async checkAll(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((s) => this.check(s)));
  }

  /** Ends a member's session (the next request logs in again). */
  async end(account: string, why: string): Promise<void> {
    const s = this.sessions.get(memberKey(account));
    if (s) await this.closeSession(s, why);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    await Promise.all([...this.sessions.values()].map((s) => this.closeSession(s, 'the gateway stops')));
    await this.appClient.close();
  }

  private waiting(key: string, client: string): string | undefined {
    const now = this.clock();
    for (const k of [`a:${key}`, ...(client ? [`c:${client}`] : [])]) {
      const r = this.refusals.get(k);
      // An address (many people behind one proxy) waits only after ADDRESS_REFUSALS refusals in a row.
      if (r && r.untilMs > now && (k.startsWith('a:') || r.count >= ADDRESS_REFUSALS)) return `too many wrong passwords: wait ${Math.ceil((r.untilMs - now) / 1000)} s`;
    }
    return undefined;
  }

  private refuse(key: string, client: string): void {
    const now = this.clock();
    for (const k of [`a:${key}`, ...(client ? [`c:${client}`] : [])]) {
      const count = (this.refusals.get(k)?.count ?? 0) + 1;
      const step = k.startsWith('a:') ? count : count - ADDRESS_REFUSALS + 1;
      this.refusals.set(k, { count, untilMs: now + Math.min(60_000, 1000 * 2 ** Math.max(0, step - 1)) });
    }
  }

  private async grant(account: string, key: string, password: string, client: string): Promise<LoginOutcome> {
    let grant: { access_token: string; refresh_token?: string; expires_in?: number };
    try {
      this.counters.grants++;
      grant = await this.appClient.user.token({ grant_type: 'password', username: account, password: md5Hex(password) });
    } catch (err) {
      if (err instanceof ServiceError && !err.transport && err.status >= 400 && err.status < 500) {
        this.counters.refused++;
        this.refuse(key, client);
        this.opts.logger.info({ account, client }, 'member login refused');
        return { refused: 'account or password is wrong' };
      }
      throw new VfsError('EAGAIN', `member login: the service's token endpoint did not answer (${(err as Error).message})`, { cause: err });
    }
    this.refusals.delete(`a:${key}`);
    if (client) this.refusals.delete(`c:${client}`);
    const open = this.sessions.get(key);
    if (open && !open.closing) {
      // The same member with a new password (changed on the service): the session stays, its token and verifier are renewed.
      open.client.credentials.user!.token = grant.access_token;
      open.client.credentials.user!.refresh_token = grant.refresh_token;
      open.verifier = verifierOf(open.salt, password);
      open.lastUseMs = this.clock();
      this.scheduleRefresh(open, grant.expires_in);
      return { session: open };
    }
    await this.closing.get(key);
    const session = await this.open(account, key, grant, password);
    return { session };
  }

  private async open(account: string, key: string, grant: { access_token: string; refresh_token?: string; expires_in?: number }, password: string): Promise<Session> {
    const { opts } = this;
    const client = new ServiceClient({
      baseUrl: opts.baseUrl, uploadHeaderPrefix: opts.uploadHeaderPrefix, onExchange: opts.onExchange, clock: opts.clock,
      credentials: { user: { token: grant.access_token, refresh_token: grant.refresh_token, client_id: opts.application.client_id, client_secret: opts.application.client_secret } },
    });
    let vfs: GatewayVfs;
    try {
      const { list } = await client.user.mount({});
      const takesPart = new Map((list ?? []).map((l) => [String(l.org_id), Number(l.mount_id)]));
      const libraries = (await opts.libraries()).filter((l) => takesPart.has(l.id));
      if (libraries.length === 0) {
        await client.close();
        throw new VfsError('EACCES', `member '${account}' takes part in none of the libraries this gateway serves`);
      }
      const dir = join(opts.dataDir, key);
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await writeFile(join(dir, 'member.json'), JSON.stringify({ account }) + '\n', { mode: 0o600 });
      vfs = await createVfs({
        ...opts.vfs,
        libraries: libraries.map((l) => ({
          name: l.name,
          remote: new UserTokenRemote({
            client, bandwidth: opts.bandwidth, mountId: takesPart.get(l.id)!, library: { id: l.id, name: l.name }, feed: l.feed,
            mayWrite: l.client ? async (fullpath, code, call) => {
              const states = await l.client!.file2.getMemberPermission({ fullpath: writeTarget(fullpath, code), account }, { signal: call?.signal });
              return Number(states[code]) === 1;
            } : undefined,
            // Locks and tags through the library authorization, the member named as operator.
            asMember: l.client ? {
              remote: new LibraryRemote({ client: l.client, bandwidth: opts.bandwidth }),
              operator: { opName: account },
              may: async (fullpath, code, call) => {
                const states = await l.client!.file2.getMemberPermission({ fullpath, account }, { signal: call?.signal });
                return Number(states[code]) === 1;
              },
            } : undefined,
          }),
        })),
        dataDir: dir,
        logger: opts.logger.child({ member: account }),
        onClose: () => client.close(),
      });
    } catch (err) {
      await client.close().catch(() => undefined);
      throw err instanceof VfsError ? err : new VfsError('EAGAIN', `member '${account}': session not opened (${(err as Error).message})`, { cause: err });
    }
    const salt = randomBytes(16);
    const session: Session = { account, key, vfs, client, salt, verifier: verifierOf(salt, password), lastUseMs: this.clock(), pinned: false };
    this.sessions.set(key, session);
    this.idleJournals.delete(key);
    this.scheduleRefresh(session, grant.expires_in);
    session.checkTimer = setInterval(() => void this.check(session), this.checkIntervalMs);
    session.checkTimer.unref();
    opts.logger.info({ account, libraries: vfs.libraryNames() }, 'member session opened');
    this.evict();
    return session;
  }

  /** Refreshes the token at 80 % of its lifetime (and again after each refresh). */
  private scheduleRefresh(s: Session, expiresInS: number | undefined): void {
    if (s.refreshTimer) clearTimeout(s.refreshTimer);
    if (!expiresInS || !Number.isFinite(expiresInS) || expiresInS <= 0) return;
    const ms = Math.max(1000, Math.min(expiresInS * 800, 2 ** 31 - 1));
    s.refreshTimer = setTimeout(() => {
      s.client.refreshToken().then(
        () => this.scheduleRefresh(s, expiresInS),
        (err: Error) => void this.closeSession(s, `token refresh refused: ${err.message}`),
      );
    }, ms);
    s.refreshTimer.unref();
  }

  /** Ends the session when the service refuses the member (disabled account, withdrawn token); an unreachable service changes nothing. */
  private async check(s: Session): Promise<void> {
    if (s.closing) return;
    try {
      await s.client.user.mount({});
    } catch (err) {
      if (err instanceof ServiceError && !err.transport && (err.status === 401 || err.status === 403)) {
        await this.closeSession(s, `the service refuses the member: ${err.serviceMessage}`);
      }
    }
  }

  /**
   * Closes the sessions idle for longer than `idleMs` (the sweeper runs it every quarter of that, at most
   * a minute), but not one holding Office lock files: its close would release the locks of documents
   * still open in an editor.
   */
  async closeIdle(): Promise<void> {
    const now = this.clock();
    const idle = (s: Session): boolean => !s.pinned && now - s.lastUseMs > this.idleMs && s.vfs.lockFilesHeld() === 0;
    await Promise.all([...this.sessions.values()].filter(idle).map((s) => this.closeSession(s, 'idle')));
  }

  private sweep(): void {
    void this.closeIdle();
  }

  /** Closes the least recently used sessions beyond `maxSessions` (pinned ones are not counted). */
  private evict(): void {
    const oldest = [...this.sessions.values()].filter((s) => !s.closing && !s.pinned).sort((a, b) => a.lastUseMs - b.lastUseMs);
    for (const s of oldest.slice(0, Math.max(0, oldest.length - this.maxSessions))) void this.closeSession(s, 'too many sessions: least recently used');
  }

  private closeSession(s: Session, why: string): Promise<void> {
    if (s.closing) return s.closing;
    s.closing = (async () => {
      // From now on the verifier recognises nothing: the next request asks the service.
      s.verifier = null;
      if (s.refreshTimer) clearTimeout(s.refreshTimer);
      if (s.checkTimer) clearInterval(s.checkTimer);
      if (this.sessions.get(s.key) === s) this.sessions.delete(s.key);
      this.counters.ended++;
      this.opts.logger.info({ account: s.account, why }, 'member session ended');
      try {
        await s.vfs.flushAll({ timeoutMs: this.opts.closeFlushMs ?? 10_000 });
      } catch (err) {
        this.opts.logger.warn({ account: s.account, err: (err as Error).message }, 'member session: uploads left in the member\'s journal');
      }
      await s.vfs.close().catch((err: Error) => this.opts.logger.warn({ account: s.account, err: err.message }, 'member session: close failed'));
      await this.noteIdleJournal(s.key, s.account).catch((err: Error) => this.opts.logger.warn({ account: s.account, err: err.message }, 'member session: its journal could not be read'));
    })().finally(() => { if (this.closing.get(s.key) === s.closing) this.closing.delete(s.key); });
    this.closing.set(s.key, s.closing);
    return s.closing;
  }
}
