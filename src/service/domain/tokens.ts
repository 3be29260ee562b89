/**
 * AccessTokens: user access tokens of the user file API (`/m-api/*`). A token belongs to one member and
 * one application; it expires, and its refresh token (one use) gives a new pair. Grants follow
 * spec/decisions.md "User access tokens": `password` (account + lowercase hex MD5 of the password) and
 * `refresh_token`.
 */
import { createHash } from 'node:crypto';
import type { MetadataStore } from '../store/metadata-store.js';
import { newId, type ApplicationRow, type MemberRow } from './directory.js';
import { FaultCode, ServiceFault } from './fault.js';
import { accountRefusal } from './members.js';

export interface AccessTokensOptions {
  /** Lifetime of an access token (ms). Default 2 hours. */
  accessTtlMs?: number;
  /** Lifetime of a refresh token (ms). Default 30 days. */
  refreshTtlMs?: number;
}

export interface TokenGrant { access_token: string; expires_in: number; refresh_token: string }

/** The OAuth error kinds of the token endpoint. */
export type OAuthError = 'invalid_request' | 'invalid_client' | 'invalid_grant' | 'unsupported_grant_type';

/**
 * A refusal of the token endpoint: OAuth shape (`error`, `error_description`) besides the usual
 * `error_code` / `error_msg` (400/40003 for a bad request, 400/40004 for a bad grant, 401/40103 client).
 */
export class OAuthFault extends ServiceFault {
  readonly extra: Record<string, unknown>;

  constructor(readonly error: OAuthError, description: string) {
    super(error === 'invalid_client' ? FaultCode.ClientNotFound : error === 'invalid_grant' ? FaultCode.GrantInvalid : FaultCode.BadParam, description);
    this.extra = { error, error_description: description };
  }
}

export const md5Hex = (text: string): string => createHash('md5').update(text, 'utf8').digest('hex');

const MD5_RE = /^[0-9a-f]{32}$/;

export class AccessTokens {
  readonly accessTtlMs: number;
  readonly refreshTtlMs: number;

  constructor(private readonly db: MetadataStore, private readonly clock: () => number, opts: AccessTokensOptions = {}) {
    this.accessTtlMs = opts.accessTtlMs ?? 2 * 3_600_000;
    this.refreshTtlMs = opts.refreshTtlMs ?? 30 * 86_400_000;
  }

  /** `grant_type=password`: the member's account and the MD5 (lowercase hex) of their password. */
  async grantPassword(app: ApplicationRow, account: string | undefined, passwordMd5: string | undefined): Promise<TokenGrant> {
    if (!account) throw new OAuthFault('invalid_request', "parameter 'username': expected the member's account, got nothing");
    if (!passwordMd5) throw new OAuthFault('invalid_request', "parameter 'password': expected the lowercase hex MD5 of the password, got nothing");
    if (!MD5_RE.test(passwordMd5)) throw new OAuthFault('invalid_request', "parameter 'password': expected 32 lowercase hex characters (MD5 of the password)");
    const member = await this.db.get('SELECT * FROM members WHERE account = ?', [account]) as (MemberRow & { password_md5: string | null }) | undefined;
    // One answer for an unknown account, a wrong password and an account without password: no account probing.
    if (!member || !member.password_md5 || member.password_md5 !== passwordMd5) throw new OAuthFault('invalid_grant', 'account or password is wrong');
    const refusal = accountRefusal(member, this.clock());
    if (refusal) throw new OAuthFault('invalid_grant', refusal);
    return this.issue(member.id, app.client_id);
  }

  /** `grant_type=refresh_token`: a refresh token of this application, used once. */
  async grantRefresh(app: ApplicationRow, refreshToken: string | undefined): Promise<TokenGrant> {
    if (!refreshToken) throw new OAuthFault('invalid_request', "parameter 'refresh_token': expected a refresh token, got nothing");
    return this.db.tx(async () => {
      const row = await this.db.get('SELECT * FROM access_tokens WHERE refresh_token = ?', [refreshToken]) as
        { token: string; member_id: number; client_id: string; refresh_expires_ms: number | null } | undefined;
      if (!row || row.client_id !== app.client_id) throw new OAuthFault('invalid_grant', 'refresh token invalid');
      if (row.refresh_expires_ms !== null && row.refresh_expires_ms <= this.clock()) throw new OAuthFault('invalid_grant', 'refresh token expired');
      const member = await this.db.get('SELECT state, expire FROM members WHERE id = ?', [row.member_id]) as { state: number; expire: number | null } | undefined;
      const refusal = member ? accountRefusal(member, this.clock()) : 'the account is gone';
      if (refusal) throw new OAuthFault('invalid_grant', refusal);
      await this.db.run('DELETE FROM access_tokens WHERE token = ?', [row.token]);
      return this.issue(row.member_id, app.client_id);
    });
  }

  /**
   * `grant_type=exchange_token`: a valid access token issued to another application (for instance by the
   * partner's `get_token`) is exchanged for one of this application, for the same member. The given token
   * stays valid until it expires.
   */
  async grantExchange(app: ApplicationRow, token: string | undefined): Promise<TokenGrant> {
    if (!token) throw new OAuthFault('invalid_request', "parameter 'token': expected the access token to exchange, got nothing");
    const row = await this.db.get('SELECT member_id, expires_ms FROM access_tokens WHERE token = ?', [token]) as { member_id: number; expires_ms: number } | undefined;
    if (!row) throw new OAuthFault('invalid_grant', 'access token invalid');
    if (row.expires_ms <= this.clock()) throw new OAuthFault('invalid_grant', 'access token expired');
    const member = await this.db.get('SELECT state, expire FROM members WHERE id = ?', [row.member_id]) as { state: number; expire: number | null } | undefined;
    const refusal = member ? accountRefusal(member, this.clock()) : 'the account is gone';
    if (refusal) throw new OAuthFault('invalid_grant', refusal);
    return this.issue(row.member_id, app.client_id);
  }

  /** A new access token (and refresh token) for a member and application; `ttlMs` overrides the lifetime. */
  async issue(memberId: number, clientId: string, ttlMs = this.accessTtlMs): Promise<TokenGrant> {
    const now = this.clock();
    const grant: TokenGrant = { access_token: newId('tk_', 20), refresh_token: newId('rt_', 20), expires_in: Math.floor(ttlMs / 1000) };
    await this.db.run('INSERT INTO access_tokens (token, member_id, client_id, refresh_token, expires_ms, refresh_expires_ms) VALUES (?, ?, ?, ?, ?, ?)', [grant.access_token, memberId, clientId, grant.refresh_token, now + ttlMs, now + Math.max(ttlMs, this.refreshTtlMs)]);
    return grant;
  }

  /** Sets (or, with null, removes) a member's password. */
  async setPassword(memberId: number, password: string | null): Promise<void> {
    await this.db.run('UPDATE members SET password_md5 = ? WHERE id = ?', [password === null ? null : md5Hex(password), memberId]);
  }

  /** Removes expired tokens whose refresh token expired too; returns how many. */
  async expire(): Promise<number> {
    const now = this.clock();
    return (await this.db.run('DELETE FROM access_tokens WHERE expires_ms <= ? AND refresh_expires_ms IS NOT NULL AND refresh_expires_ms <= ?', [now, now])).changes;
  }
}
