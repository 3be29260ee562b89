/**
 * Authenticator: who sent a request and whether its signature is right (spec/signature.md). The
 * credential of the endpoint names the client id and secret; any signature variant of
 * `signatureVariants` is accepted; `dateline` must be within 15 minutes of the service's clock; what
 * happens to a signature already used for another endpoint within that window is the replay policy's
 * (ReplayPolicy, SignatureLedger).
 */
import { timingSafeEqual } from 'node:crypto';
import type { Credential } from '../../shared/endpoints.js';
import { signatureVariants } from '../../shared/sign.js';
import type { ApplicationRow, Directory, EnterpriseRow, EnterpriseTermRow, LibraryAuthRow, LibraryRow, MemberRow, PartnerRow } from '../domain/directory.js';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { SignatureLedger, StoredSignatureLedger, type SignatureUses } from './signature-ledger.js';
import type { MetadataStore } from '../store/metadata-store.js';
import { EnterpriseTerm } from '../domain/enterprise-term.js';
import { AuthorizationCache, type LibraryAuthorization } from './authorization-cache.js';

/** Largest accepted distance between `dateline` and the service's clock (ms): 15 minutes. */
export const DATELINE_WINDOW_MS = 15 * 60_000;

/** What the replay guard does with a signature already used for another endpoint (see authenticate). */
export type ReplayGuard = 'read' | 'change' | 'credential';

/**
 * What the service does with a signature already used for another endpoint within the window (the
 * signature covers parameter values only, so honest calls of two endpoints with equal values in one second
 * sign alike; docs/service.md, "Signatures and TLS"):
 * - `address` (default): such a call passes from the client address that first used the signature and
 *   is refused (401043) from any other, whether it changes state or hands out a credential;
 * - `strict`: a call that changes state is refused from every address (clients must sign each call anew,
 *   a second later when the values repeat); a credential call as with `address`;
 * - `off`: signatures are not remembered; every valid signature passes.
 * A read (an idempotent endpoint) passes under every policy.
 */
export type ReplayPolicy = 'address' | 'strict' | 'off';
export const REPLAY_POLICIES: readonly ReplayPolicy[] = ['address', 'strict', 'off'];

/** The guard an endpoint gets from its definition. */
export function replayGuardOf(def: { idempotent: boolean; issuesCredential?: boolean }): ReplayGuard {
  if (def.issuesCredential) return 'credential';
  return def.idempotent ? 'read' : 'change';
}

export interface Caller {
  credential: Credential;
  /**
   * A library caller's library: only what stays true while its authorization does (on PostgreSQL it may
   * come from the authorization cache; its counters would be stale).
   */
  library?: Pick<LibraryRow, 'id' | 'ent_id'>;
  libraryAuth?: LibraryAuthRow;
  /** A library caller's enterprise term, read with its library (null: no enterprise row). */
  libraryTerm?: EnterpriseTermRow | null;
  enterprise?: EnterpriseRow;
  partner?: PartnerRow;
  member?: MemberRow;
  application?: ApplicationRow;
}

export class Authenticator {
  private readonly ledger: SignatureUses | undefined;
  /**
   * Library authorizations read before, on PostgreSQL with the replay guard on: a cached one is checked
   * by the epoch the guard's record reads (AuthorizationCache), so it costs no round trip of its own.
   */
  private readonly authorizations: AuthorizationCache | undefined;
  private readonly term: EnterpriseTerm | undefined;

  /**
   * `db`: where the replay guard keeps the signatures when several processes share the metadata
   * (PostgreSQL); on SQLite the service is one process and keeps them in memory.
   */
  constructor(private readonly directory: Directory, private readonly clock: () => number, private readonly db?: MetadataStore, private readonly policy: ReplayPolicy = 'address') {
    // A signature is remembered while its dateline is accepted: up to the window after it.
    this.ledger = policy === 'off' ? undefined : db?.engine === 'postgresql'
      ? new StoredSignatureLedger(db, { windowMs: DATELINE_WINDOW_MS, clock })
      : new SignatureLedger({ windowMs: DATELINE_WINDOW_MS, clock });
    if (this.ledger instanceof StoredSignatureLedger && db) {
      this.authorizations = new AuthorizationCache();
      this.term = new EnterpriseTerm(db, clock);
    }
  }

  /**
   * `guard` says what the replay guard does when the call's exact signature was already used for another
   * endpoint within the window: `read` lets it through (a read with the same values as an earlier call of
   * another endpoint; two parameterless reads in one second sign alike); `credential` (a call that hands
   * out a credential) lets it through only from the address (`peer`) that made the first call; `change`
   * (a call that changes state) likewise under the `address` policy, never under `strict`. The official
   * clients make such sequences (create_folder then del, info then get_token, in one second), while a
   * signature captured on the wire and sent from elsewhere is refused.
   */
  /**
   * The caller once the signature is verified, and `guarded`: the replay guard's verdict, which settles
   * once the signature is recorded (and rejects with 401043 when the call is refused). A call may not act
   * before `guarded` settles unless it is a read (`guard` 'read' is never refused: its work may go beside
   * the record, which must be made before its answer).
   *
   * `ahead` (a change or a read whose work is all in the metadata store, run inside
   * `MetadataStore.request`): on PostgreSQL the record goes in the round trip of the request's first
   * transaction or, in one statement with it, of its first plain read (store/pg-combined-read.ts), and
   * every transaction of the request commits only once `guarded` has settled, rolling
   * back when it refuses: the call may act before `guarded` settles, as its changes are held. `ahead`
   * answers whether that is so; the caller then sends what is still queued (`MetadataStore.sendAhead`)
   * before awaiting `guarded`.
   */
  async authenticate(credential: Credential, path: string, params: Record<string, string>, guard: ReplayGuard = 'change', peer = '', opts: { ahead?: boolean } = {}): Promise<{ caller: Caller; guarded: Promise<void>; ahead: boolean }> {
    // The official SDKs call the enterprise and library management APIs either with client_id or, once
    // they hold an enterprise token (partner get_token, exchanged), with `token` + `token_type=ent`.
    const entToken = credential === 'enterprise' && !params.client_id && !!params.token;
    let identified: { caller: Caller; secret: string; cached?: LibraryAuthorization } = entToken ? await this.identifyEnterpriseToken(params.token!) : await this.identify(credential, params);
    const given = params.sign;
    if (identified.cached && !this.cachedLetsThrough(identified.cached, params, path, guard)) {
      // A cached authorization only lets calls through: a refusal it would make is the fresh row's.
      identified = await this.identify(credential, params, { fresh: true });
    }
    const { caller, secret, cached } = identified;
    const dateline = params.dateline;
    // The user API, the token endpoint and token calls may omit dateline (the official SDKs' refresh_token
    // grant and token calls send none); when given, it must be in the window.
    if ((credential !== 'token' && credential !== 'application' && !entToken) || dateline !== undefined) {
      if (dateline === undefined || dateline === '') throw badParam('dateline', 'unix time in seconds', dateline ?? null);
      if (!/^\d+$/.test(dateline)) throw badParam('dateline', 'unix time in seconds', dateline);
      if (Math.abs(Number(dateline) * 1000 - this.clock()) > DATELINE_WINDOW_MS) {
        throw new ServiceFault(FaultCode.DatelineOutOfWindow, `dateline ${dateline} is more than 15 minutes away from the service's time ${Math.floor(this.clock() / 1000)}`);
      }
    }
    if (given === undefined || given === '') throw badParam('sign', 'the request signature', given ?? null);
    const ok = signatureVariants(secret, params, path).some((v) => safeEqual(v, given));
    if (!ok) throw new ServiceFault(FaultCode.SignatureFailed, 'signature verification failed');
    const ahead = opts.ahead === true && guard !== 'credential' && this.ledger instanceof StoredSignatureLedger && this.db?.ahead !== undefined && this.db.gate !== undefined;
    const recheck = cached ? { found: cached, params, path } : undefined;
    const guarded = this.guard(given, path, dateline ? Number(dateline) * 1000 : undefined, guard, peer, ahead, recheck);
    if (ahead) this.db!.gate!(guarded);
    return { caller, guarded, ahead };
  }

  /** Records a verified signature's use; refuses (401043) a call the replay policy does not let through. */
  private async guard(sign: string, path: string, datelineMs: number | undefined, guard: ReplayGuard, peer: string, ahead = false,
    recheck?: { found: LibraryAuthorization; params: Record<string, string>; path: string }): Promise<void> {
    let epoch: number | undefined;
    const other = await this.ledger?.use(sign, path, datelineMs, peer, { ahead, ...(recheck ? { onEpoch: (n: number) => { epoch = n; } } : {}) });
    if (recheck && epoch !== recheck.found.epoch) await this.recheckLibrary(recheck.found, recheck.params, recheck.path, guard, epoch);
    if (other === undefined || guard === 'read') return;
    const sameAddress = other.peer === peer;
    if (!sameAddress || (guard === 'change' && this.policy === 'strict')) {
      const where = sameAddress ? '' : ' from another address';
      throw new ServiceFault(FaultCode.SignatureReplayed, `this signature was already used for ${other.path}${where}; sign each call anew (the signature covers parameter values only)`);
    }
  }

  /** Whether a cached authorization verifies the call's signature and, for a change, has an open term. */
  private cachedLetsThrough(found: LibraryAuthorization, params: Record<string, string>, path: string, guard: ReplayGuard): boolean {
    const given = params.sign;
    if (given === undefined || given === '' || !signatureVariants(found.auth.org_client_secret, params, path).some((v) => safeEqual(v, given))) return false;
    if (guard === 'read') return true;
    try {
      this.term!.requireOpenAt(found.term);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * A cached library authorization used by a call whose guard read another epoch: something it carries
   * may have changed before the call arrived. The call stands only if a fresh read lets it through as
   * the cached one did (the same library, its signature good under the current secret, an open term for
   * a change); otherwise it is refused as a fresh authentication would refuse it.
   */
  private async recheckLibrary(used: LibraryAuthorization, params: Record<string, string>, path: string, guard: ReplayGuard, epoch: number | undefined): Promise<void> {
    if (epoch !== undefined) this.authorizations!.observe(epoch);
    const orgClientId = used.auth.org_client_id;
    const fresh = await this.directory.libraryAuthWithLibrary(orgClientId, { withEpoch: true });
    if (!fresh) throw new ServiceFault(FaultCode.ClientNotFound, 'org_client_id not found');
    this.authorizations!.put(orgClientId, fresh);
    if (fresh.library.id !== used.library.id || fresh.library.ent_id !== used.library.ent_id) {
      throw new ServiceFault(FaultCode.ClientNotFound, 'org_client_id not found (its library changed)');
    }
    if (fresh.auth.org_client_secret !== used.auth.org_client_secret && !signatureVariants(fresh.auth.org_client_secret, params, path).some((v) => safeEqual(v, params.sign ?? ''))) {
      throw new ServiceFault(FaultCode.SignatureFailed, 'signature verification failed');
    }
    if (guard !== 'read') this.term!.requireOpenAt(fresh.term);
  }

  /** The application and member an access token was issued to (refused when unknown or expired). */
  private async tokenHolder(token: string): Promise<{ application: ApplicationRow; member: MemberRow }> {
    const holder = await this.directory.tokenHolder(token);
    if (!holder) throw new ServiceFault(FaultCode.TokenInvalid, 'access token invalid');
    if (holder.token.expires_ms <= this.clock()) throw new ServiceFault(FaultCode.TokenExpired, 'access token expired');
    return holder;
  }

  /**
   * An access token of an enterprise administrator, used on the enterprise API: the caller is that
   * enterprise, the secret the application's the token was issued to.
   */
  private async identifyEnterpriseToken(token: string): Promise<{ caller: Caller; secret: string }> {
    const { application, member } = await this.tokenHolder(token);
    const enterprise = await this.directory.enterpriseOfAdministrator(member.id);
    if (!enterprise) throw new ServiceFault(FaultCode.NoPermission, 'the enterprise API needs the token of an enterprise administrator');
    return { caller: { credential: 'enterprise', enterprise, member, application }, secret: application.client_secret };
  }

  /** `cached`: the library authorization came from the cache, to be checked by the guard's epoch. */
  private async identify(credential: Credential, params: Record<string, string>, opts: { fresh?: boolean } = {}): Promise<{ caller: Caller; secret: string; cached?: LibraryAuthorization }> {
    const need = (name: string): string => {
      const v = params[name];
      if (v === undefined || v === '') throw badParam(name, 'a client id', v ?? null);
      return v;
    };
    const unknown = (name: string) => new ServiceFault(FaultCode.ClientNotFound, `${name} not found`);
    switch (credential) {
      case 'library': {
        // Its library comes with it (not deleted): an authorization of a deleted library is not found.
        const orgClientId = need('org_client_id');
        const cached = opts.fresh ? undefined : this.authorizations?.get(orgClientId);
        const found = cached ?? await this.directory.libraryAuthWithLibrary(orgClientId, { withEpoch: this.authorizations !== undefined });
        if (!found) throw unknown('org_client_id');
        if (!cached) this.authorizations?.put(orgClientId, found);
        return { caller: { credential, library: found.library, libraryAuth: found.auth, libraryTerm: found.term }, secret: found.auth.org_client_secret, ...(cached ? { cached } : {}) };
      }
      case 'enterprise': {
        const enterprise = await this.directory.enterpriseByClientId(need('client_id'));
        if (!enterprise) throw unknown('client_id');
        return { caller: { credential, enterprise }, secret: enterprise.client_secret };
      }
      case 'partner': {
        const partner = await this.directory.partnerByClientId(need('client_id'));
        if (!partner) throw unknown('client_id');
        return { caller: { credential, partner }, secret: partner.client_secret };
      }
      case 'application': {
        const application = await this.directory.application(need('client_id'));
        if (!application) throw unknown('client_id');
        return { caller: { credential, application }, secret: application.client_secret };
      }
      case 'token': {
        const token = params.token;
        if (token === undefined || token === '') throw badParam('token', 'an access token', token ?? null);
        const { application, member } = await this.tokenHolder(token);
        return { caller: { credential, application, member }, secret: application.client_secret };
      }
      default:
        throw new ServiceFault(FaultCode.NotSupported, `credential ${credential} is not a signed JSON credential`);
    }
  }
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
