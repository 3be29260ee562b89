/**
 * Directory: partners, enterprises, members, applications and access tokens, libraries and library
 * authorizations — who exists and which secret identifies whom. The first start creates one of each
 * (`bootstrap`). The rest of the enterprise/partner/user API builds on these tables.
 */
import { randomBytes } from 'node:crypto';
import type { MetadataStore } from '../store/metadata-store.js';
import { FaultCode, ServiceFault } from './fault.js';

export interface LibraryRow {
  id: number; mount_id: number; ent_id: number; name: string; logo_url: string; out_id: string | null; type: number;
  owner_id: number; capacity: number; size_used: number; size_recycle: number; file_count: number; dir_count: number;
  last_op_ms: number; deleted: number; created_ms: number;
}

/** What a capacity check reads of a library (Directory.requireCapacity). */
export type LibraryCapacity = Pick<LibraryRow, 'capacity' | 'size_used'>;
/** The term of an enterprise: a trial or a subscription, ending at `end_dateline` (s; 0 or less: no end). */
export interface EnterpriseTermRow { trial: number; end_dateline: number }
export interface LibraryAuthRow { org_client_id: string; org_client_secret: string; library_id: number; ent_client_id: string; title: string }
export interface EnterpriseRow { id: number; partner_id: number | null; out_id: string | null; name: string; client_id: string; client_secret: string }
export interface PartnerRow { id: number; name: string; client_id: string; client_secret: string }
export interface MemberRow { id: number; ent_id: number; out_id: string | null; account: string; name: string; email: string; state: number; expire: number | null }
export interface ApplicationRow { client_id: string; client_secret: string; title: string }
export interface TokenRow { token: string; member_id: number; client_id: string; refresh_token: string | null; expires_ms: number }

/** The content of `credentials.json` (without the URLs). */
export interface BootstrapCredentials {
  partner: { client_id: string; client_secret: string };
  enterprise: { ent_id: number; client_id: string; client_secret: string };
  library: { org_id: number; mount_id: number; org_client_id: string; org_client_secret: string };
  /** The demo member's access token and the application it was issued to (`client_id`, `client_secret`). */
  member: { member_id: number; account: string; token: string; client_id: string; client_secret: string };
}

/** Lifetime of the demo member's access token written to credentials.json: 10 years (ms). */
const BOOTSTRAP_TOKEN_TTL_MS = 10 * 365 * 86_400_000;

export const newId = (prefix: string, bytes = 8): string => `${prefix}${randomBytes(bytes).toString('hex')}`;
export const newSecret = (): string => randomBytes(24).toString('base64url');

export class Directory {
  constructor(private readonly db: MetadataStore, private readonly clock: () => number) {}

  /** Creates the partner, enterprise, library, authorization, member, application and token on an empty database. */
  async bootstrap(): Promise<BootstrapCredentials> {
    return this.db.tx(async (): Promise<BootstrapCredentials> => {
      const existing = await this.db.get("SELECT value FROM settings WHERE name = 'bootstrap'") as { value: string } | undefined;
      if (existing) {
        const creds = JSON.parse(existing.value) as BootstrapCredentials;
        // Data made before the application's client_id was part of the credentials: found by its token.
        if (!creds.member.client_id) {
          const row = await this.db.get('SELECT client_id FROM access_tokens WHERE token = ?', [creds.member.token]) as { client_id: string } | undefined;
          if (row) creds.member.client_id = row.client_id;
        }
        return creds;
      }
      const now = this.clock();
      const partner = { client_id: newId('pt_'), client_secret: newSecret() };
      const partnerId = await this.db.insert('INSERT INTO partners (name, client_id, client_secret) VALUES (?, ?, ?)', ['Partner', partner.client_id, partner.client_secret]);
      const ent = { client_id: newId('ent_'), client_secret: newSecret() };
      // The demo enterprise has directory synchronisation on, so the ent/*sync* calls work on a fresh
      // service (an enterprise made through the partner API keeps its own `__setting_sync`).
      const entId = await this.db.insert('INSERT INTO enterprises (partner_id, out_id, name, client_id, client_secret, trial, end_dateline, created_ms, sync_enabled) VALUES (?, ?, ?, ?, ?, 0, 0, ?, 1)', [partnerId, 'default', 'Enterprise', ent.client_id, ent.client_secret, now]);
      const memberId = await this.db.insert('INSERT INTO members (ent_id, account, name, email, state, created_ms) VALUES (?, ?, ?, ?, 1, ?)', [entId, 'demo@example.com', 'Demo', 'demo@example.com', now]);
      const app = { client_id: newId('app_'), client_secret: newSecret() };
      await this.db.run('INSERT INTO applications (client_id, client_secret, title) VALUES (?, ?, ?)', [app.client_id, app.client_secret, 'cloudlib']);
      const token = newId('tk_', 20);
      await this.db.run('INSERT INTO access_tokens (token, member_id, client_id, refresh_token, expires_ms) VALUES (?, ?, ?, ?, ?)', [token, memberId, app.client_id, newId('rt_', 20), now + BOOTSTRAP_TOKEN_TTL_MS]);
      const lib = await this.createLibrary(entId, { name: 'Library', capacity: -1, ownerId: memberId });
      await this.db.run('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, 0)', [lib.id, memberId]);
      const auth = await this.bind(ent.client_id, lib.id, 'cloudlib');
      const creds: BootstrapCredentials = {
        partner,
        enterprise: { ent_id: entId, ...ent },
        library: { org_id: lib.id, mount_id: lib.mount_id, org_client_id: auth.org_client_id, org_client_secret: auth.org_client_secret },
        member: { member_id: memberId, account: 'demo@example.com', token, client_id: app.client_id, client_secret: app.client_secret },
      };
      await this.db.run("INSERT INTO settings (name, value) VALUES ('bootstrap', ?)", [JSON.stringify(creds)]);
      return creds;
    });
  }

  /** A named secret of the service itself (created on first use), e.g. the download link key. */
  async secret(name: string): Promise<string> {
    const row = await this.db.get('SELECT value FROM settings WHERE name = ?', [`secret:${name}`]) as { value: string } | undefined;
    if (row) return row.value;
    const value = randomBytes(32).toString('base64url');
    await this.db.run('INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT DO NOTHING', [`secret:${name}`, value]);
    return this.secret(name);
  }

  async createLibrary(entId: number, opts: { name: string; capacity: number; logoUrl?: string; outId?: string; ownerId?: number; type?: number }): Promise<LibraryRow> {
    const maxMount = (await this.db.get('SELECT COALESCE(MAX(mount_id), 0) AS m FROM libraries') as { m: number }).m;
    const id = await this.db.insert('INSERT INTO libraries (mount_id, ent_id, name, logo_url, out_id, type, owner_id, capacity, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)', [maxMount + 1, entId, opts.name, opts.logoUrl ?? '', opts.outId ?? null, opts.type ?? 1, opts.ownerId ?? 0, opts.capacity, this.clock()]);
    return (await this.library(id))!;
  }

  async library(id: number): Promise<LibraryRow | undefined> {
    return await this.db.get('SELECT * FROM libraries WHERE id = ? AND deleted = 0', [id]) as LibraryRow | undefined;
  }

  async libraryBy(field: 'id' | 'mount_id' | 'out_id', value: string | number, entId: number): Promise<LibraryRow | undefined> {
    return await this.db.get(`SELECT * FROM libraries WHERE ${field} = ? AND ent_id = ? AND deleted = 0`, [value, entId]) as LibraryRow | undefined;
  }

  async requireLibrary(id: number): Promise<LibraryRow> {
    const lib = await this.library(id);
    if (!lib) throw libraryMissing(id);
    return lib;
  }

  /**
   * A library's capacity and, when it is limited, the bytes it uses (when unlimited, 0: what is read
   * stays the same while the library changes, so a change that read it does not collide with others).
   */
  async requireCapacity(id: number): Promise<LibraryCapacity> {
    const lib = await this.db.get<LibraryCapacity>('SELECT capacity, CASE WHEN capacity < 0 THEN 0 ELSE size_used END AS size_used FROM libraries WHERE id = ? AND deleted = 0', [id]);
    if (!lib) throw libraryMissing(id);
    return lib;
  }

  async librariesOf(entId: number, opts: { type?: number } = {}): Promise<LibraryRow[]> {
    const where = ['ent_id = ?', 'deleted = 0'];
    if (opts.type === 1) where.push('type <> 20');
    if (opts.type === 2) where.push('type = 20');
    return await this.db.all(`SELECT * FROM libraries WHERE ${where.join(' AND ')} ORDER BY id`, [entId]) as LibraryRow[];
  }

  /** The library authorization of `entClientId` for a library; a repeated call returns the earlier one. */
  async bind(entClientId: string, libraryId: number, title: string): Promise<LibraryAuthRow> {
    const found = await this.db.get('SELECT * FROM library_auths WHERE library_id = ? AND ent_client_id = ?', [libraryId, entClientId]) as LibraryAuthRow | undefined;
    if (found) return found;
    const row: LibraryAuthRow = { org_client_id: newId('oc_'), org_client_secret: newSecret(), library_id: libraryId, ent_client_id: entClientId, title };
    await this.db.run('INSERT INTO library_auths (org_client_id, org_client_secret, library_id, ent_client_id, title, created_ms) VALUES (?, ?, ?, ?, ?, ?)', [row.org_client_id, row.org_client_secret, row.library_id, row.ent_client_id, row.title, this.clock()]);
    return row;
  }

  /** Removes an authorization of `entClientId`; false when it has none with this id. */
  async unbind(entClientId: string, orgClientId: string): Promise<boolean> {
    return (await this.db.run('DELETE FROM library_auths WHERE org_client_id = ? AND ent_client_id = ?', [orgClientId, entClientId])).changes > 0;
  }

  async libraryAuth(orgClientId: string): Promise<LibraryAuthRow | undefined> {
    return await this.db.get('SELECT a.* FROM library_auths a JOIN libraries l ON l.id = a.library_id WHERE a.org_client_id = ? AND l.deleted = 0', [orgClientId]) as LibraryAuthRow | undefined;
  }

  /** The enterprise a member administers (enabled account with an administrator type), if any. */
  async enterpriseOfAdministrator(memberId: number): Promise<EnterpriseRow | undefined> {
    return await this.db.get('SELECT e.* FROM enterprises e JOIN members m ON m.ent_id = e.id WHERE m.id = ? AND m.admin_type IS NOT NULL AND m.state = 1', [memberId]) as EnterpriseRow | undefined;
  }

  async enterpriseByClientId(clientId: string): Promise<EnterpriseRow | undefined> {
    return await this.db.get('SELECT * FROM enterprises WHERE client_id = ?', [clientId]) as EnterpriseRow | undefined;
  }

  async partnerByClientId(clientId: string): Promise<PartnerRow | undefined> {
    return await this.db.get('SELECT * FROM partners WHERE client_id = ?', [clientId]) as PartnerRow | undefined;
  }

  /** A library's authorization and its library (not deleted), in one statement: what a library call's authentication reads. */
  /**
   * `withEpoch`: the authorization epoch (table `authorization_epoch`) comes with the row, read in the
   * same statement (AuthorizationCache); -1 without it.
   */
  async libraryAuthWithLibrary(orgClientId: string, opts: { withEpoch?: boolean } = {}): Promise<{ auth: LibraryAuthRow; library: LibraryRow; term: EnterpriseTermRow | null; epoch: number } | undefined> {
    const row = await this.db.get(
      'SELECT l.*, a.org_client_id AS auth_org_client_id, a.org_client_secret AS auth_org_client_secret, a.library_id AS auth_library_id, ' +
      'a.ent_client_id AS auth_ent_client_id, a.title AS auth_title, e.trial AS term_trial, e.end_dateline AS term_end_dateline' +
      (opts.withEpoch ? ', (SELECT n FROM authorization_epoch WHERE id = 1) AS epoch_n ' : ' ') +
      'FROM library_auths a JOIN libraries l ON l.id = a.library_id LEFT JOIN enterprises e ON e.id = l.ent_id WHERE a.org_client_id = ? AND l.deleted = 0',
      [orgClientId],
    ) as Record<string, unknown> | undefined;
    if (!row) return undefined;
    const term = prefixed(row, 'term_') as unknown as EnterpriseTermRow;
    const epoch = opts.withEpoch ? Number(row.epoch_n) : -1;
    delete row.epoch_n;
    return {
      auth: prefixed(row, 'auth_') as unknown as LibraryAuthRow,
      library: unprefixed(unprefixed(row, 'auth_'), 'term_') as unknown as LibraryRow,
      term: term.end_dateline === null ? null : term,
      epoch,
    };
  }

  /** The access token, the application it was issued to and its member, in one statement (an authentication's read). */
  async tokenHolder(token: string): Promise<{ token: TokenRow; application: ApplicationRow; member: MemberRow } | undefined> {
    const row = await this.db.get(
      'SELECT m.*, t.token AS token_token, t.member_id AS token_member_id, t.client_id AS token_client_id, t.refresh_token AS token_refresh_token, ' +
      't.expires_ms AS token_expires_ms, a.client_id AS app_client_id, a.client_secret AS app_client_secret, a.title AS app_title ' +
      'FROM access_tokens t JOIN applications a ON a.client_id = t.client_id JOIN members m ON m.id = t.member_id WHERE t.token = ?',
      [token],
    ) as Record<string, unknown> | undefined;
    if (!row) return undefined;
    return {
      token: prefixed(row, 'token_') as unknown as TokenRow,
      application: prefixed(row, 'app_') as unknown as ApplicationRow,
      member: unprefixed(unprefixed(row, 'token_'), 'app_') as unknown as MemberRow,
    };
  }

  async application(clientId: string): Promise<ApplicationRow | undefined> {
    return await this.db.get('SELECT * FROM applications WHERE client_id = ?', [clientId]) as ApplicationRow | undefined;
  }

  async accessToken(token: string): Promise<TokenRow | undefined> {
    return await this.db.get('SELECT * FROM access_tokens WHERE token = ?', [token]) as TokenRow | undefined;
  }

  async member(id: number): Promise<MemberRow | undefined> {
    return await this.db.get('SELECT * FROM members WHERE id = ?', [id]) as MemberRow | undefined;
  }

  /** Whether a member may act in a library (owner or member of it). */
  async memberInLibrary(memberId: number, libraryId: number): Promise<boolean> {
    const lib = await this.library(libraryId);
    if (!lib) return false;
    if (lib.owner_id === memberId) return true;
    return !!await this.db.get('SELECT 1 FROM library_members WHERE library_id = ? AND member_id = ?', [libraryId, memberId]);
  }
}

/** The columns of `row` named with `prefix`, without it. */
function prefixed(row: Record<string, unknown>, prefix: string): Record<string, unknown> {
  return Object.fromEntries(Object.entries(row).filter(([k]) => k.startsWith(prefix)).map(([k, v]) => [k.slice(prefix.length), v]));
}

/** The columns of `row` not named with `prefix`. */
function unprefixed(row: Record<string, unknown>, prefix: string): Record<string, unknown> {
  return Object.fromEntries(Object.entries(row).filter(([k]) => !k.startsWith(prefix)));
}

function libraryMissing(id: number): ServiceFault {
  return new ServiceFault(FaultCode.LibraryMissing, `library ${id} not found or deleted`);
}
