/**
 * Directory: partners, enterprises, members, applications and access tokens, libraries and library
 * authorizations — who exists and which secret identifies whom. The first start creates one of each
 * (`bootstrap`). The rest of the enterprise/partner/user API builds on these tables.
 */
import { randomBytes } from 'node:crypto';
import type { Db } from '../store/database.js';
import { FaultCode, ServiceFault } from './fault.js';

export interface LibraryRow {
  id: number; mount_id: number; ent_id: number; name: string; logo_url: string; out_id: string | null; type: number;
  owner_id: number; capacity: number; size_used: number; size_recycle: number; file_count: number; dir_count: number;
  last_op_ms: number; deleted: number; created_ms: number;
}
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
  member: { member_id: number; account: string; token: string; client_secret: string };
}

/** Lifetime of the demo member's access token written to credentials.json: 10 years (ms). */
const BOOTSTRAP_TOKEN_TTL_MS = 10 * 365 * 86_400_000;

export const newId = (prefix: string, bytes = 8): string => `${prefix}${randomBytes(bytes).toString('hex')}`;
export const newSecret = (): string => randomBytes(24).toString('base64url');

export class Directory {
  constructor(private readonly db: Db, private readonly clock: () => number) {}

  /** Creates the partner, enterprise, library, authorization, member, application and token on an empty database. */
  bootstrap(): BootstrapCredentials {
    return this.db.transaction((): BootstrapCredentials => {
      const existing = this.db.prepare("SELECT value FROM settings WHERE name = 'bootstrap'").get() as { value: string } | undefined;
      if (existing) return JSON.parse(existing.value) as BootstrapCredentials;
      const now = this.clock();
      const partner = { client_id: newId('pt_'), client_secret: newSecret() };
      const partnerId = Number(this.db.prepare('INSERT INTO partners (name, client_id, client_secret) VALUES (?, ?, ?)').run('Partner', partner.client_id, partner.client_secret).lastInsertRowid);
      const ent = { client_id: newId('ent_'), client_secret: newSecret() };
      // The demo enterprise has directory synchronisation on, so the ent/*sync* calls work on a fresh
      // service (an enterprise made through the partner API keeps its own `__setting_sync`).
      const entId = Number(this.db.prepare('INSERT INTO enterprises (partner_id, out_id, name, client_id, client_secret, trial, end_dateline, created_ms, sync_enabled) VALUES (?, ?, ?, ?, ?, 0, 0, ?, 1)')
        .run(partnerId, 'default', 'Enterprise', ent.client_id, ent.client_secret, now).lastInsertRowid);
      const memberId = Number(this.db.prepare('INSERT INTO members (ent_id, account, name, email, state, created_ms) VALUES (?, ?, ?, ?, 1, ?)')
        .run(entId, 'demo@example.com', 'Demo', 'demo@example.com', now).lastInsertRowid);
      const app = { client_id: newId('app_'), client_secret: newSecret() };
      this.db.prepare('INSERT INTO applications (client_id, client_secret, title) VALUES (?, ?, ?)').run(app.client_id, app.client_secret, 'cloudlib');
      const token = newId('tk_', 20);
      this.db.prepare('INSERT INTO access_tokens (token, member_id, client_id, refresh_token, expires_ms) VALUES (?, ?, ?, ?, ?)')
        .run(token, memberId, app.client_id, newId('rt_', 20), now + BOOTSTRAP_TOKEN_TTL_MS);
      const lib = this.createLibrary(entId, { name: 'Library', capacity: -1, ownerId: memberId });
      this.db.prepare('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, 0)').run(lib.id, memberId);
      const auth = this.bind(ent.client_id, lib.id, 'cloudlib');
      const creds: BootstrapCredentials = {
        partner,
        enterprise: { ent_id: entId, ...ent },
        library: { org_id: lib.id, mount_id: lib.mount_id, org_client_id: auth.org_client_id, org_client_secret: auth.org_client_secret },
        member: { member_id: memberId, account: 'demo@example.com', token, client_secret: app.client_secret },
      };
      this.db.prepare("INSERT INTO settings (name, value) VALUES ('bootstrap', ?)").run(JSON.stringify(creds));
      return creds;
    })();
  }

  /** A named secret of the service itself (created on first use), e.g. the download link key. */
  secret(name: string): string {
    const row = this.db.prepare('SELECT value FROM settings WHERE name = ?').get(`secret:${name}`) as { value: string } | undefined;
    if (row) return row.value;
    const value = randomBytes(32).toString('base64url');
    this.db.prepare('INSERT OR IGNORE INTO settings (name, value) VALUES (?, ?)').run(`secret:${name}`, value);
    return this.secret(name);
  }

  createLibrary(entId: number, opts: { name: string; capacity: number; logoUrl?: string; outId?: string; ownerId?: number; type?: number }): LibraryRow {
    const maxMount = (this.db.prepare('SELECT COALESCE(MAX(mount_id), 0) AS m FROM libraries').get() as { m: number }).m;
    const id = Number(this.db.prepare('INSERT INTO libraries (mount_id, ent_id, name, logo_url, out_id, type, owner_id, capacity, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
      .run(maxMount + 1, entId, opts.name, opts.logoUrl ?? '', opts.outId ?? null, opts.type ?? 1, opts.ownerId ?? 0, opts.capacity, this.clock()).lastInsertRowid);
    return this.library(id)!;
  }

  library(id: number): LibraryRow | undefined {
    return this.db.prepare('SELECT * FROM libraries WHERE id = ? AND deleted = 0').get(id) as LibraryRow | undefined;
  }

  libraryBy(field: 'id' | 'mount_id' | 'out_id', value: string | number, entId: number): LibraryRow | undefined {
    return this.db.prepare(`SELECT * FROM libraries WHERE ${field} = ? AND ent_id = ? AND deleted = 0`).get(value, entId) as LibraryRow | undefined;
  }

  requireLibrary(id: number): LibraryRow {
    const lib = this.library(id);
    if (!lib) throw new ServiceFault(FaultCode.LibraryMissing, `library ${id} not found or deleted`);
    return lib;
  }

  librariesOf(entId: number, opts: { type?: number } = {}): LibraryRow[] {
    const where = ['ent_id = ?', 'deleted = 0'];
    if (opts.type === 1) where.push('type <> 20');
    if (opts.type === 2) where.push('type = 20');
    return this.db.prepare(`SELECT * FROM libraries WHERE ${where.join(' AND ')} ORDER BY id`).all(entId) as LibraryRow[];
  }

  /** The library authorization of `entClientId` for a library; a repeated call returns the earlier one. */
  bind(entClientId: string, libraryId: number, title: string): LibraryAuthRow {
    const found = this.db.prepare('SELECT * FROM library_auths WHERE library_id = ? AND ent_client_id = ?').get(libraryId, entClientId) as LibraryAuthRow | undefined;
    if (found) return found;
    const row: LibraryAuthRow = { org_client_id: newId('oc_'), org_client_secret: newSecret(), library_id: libraryId, ent_client_id: entClientId, title };
    this.db.prepare('INSERT INTO library_auths (org_client_id, org_client_secret, library_id, ent_client_id, title, created_ms) VALUES (?, ?, ?, ?, ?, ?)')
      .run(row.org_client_id, row.org_client_secret, row.library_id, row.ent_client_id, row.title, this.clock());
    return row;
  }

  /** Removes an authorization of `entClientId`; false when it has none with this id. */
  unbind(entClientId: string, orgClientId: string): boolean {
    return this.db.prepare('DELETE FROM library_auths WHERE org_client_id = ? AND ent_client_id = ?').run(orgClientId, entClientId).changes > 0;
  }

  libraryAuth(orgClientId: string): LibraryAuthRow | undefined {
    return this.db.prepare('SELECT a.* FROM library_auths a JOIN libraries l ON l.id = a.library_id WHERE a.org_client_id = ? AND l.deleted = 0').get(orgClientId) as LibraryAuthRow | undefined;
  }

  /** The enterprise a member administers (enabled account with an administrator type), if any. */
  enterpriseOfAdministrator(memberId: number): EnterpriseRow | undefined {
    return this.db.prepare('SELECT e.* FROM enterprises e JOIN members m ON m.ent_id = e.id WHERE m.id = ? AND m.admin_type IS NOT NULL AND m.state = 1')
      .get(memberId) as EnterpriseRow | undefined;
  }

  enterpriseByClientId(clientId: string): EnterpriseRow | undefined {
    return this.db.prepare('SELECT * FROM enterprises WHERE client_id = ?').get(clientId) as EnterpriseRow | undefined;
  }

  partnerByClientId(clientId: string): PartnerRow | undefined {
    return this.db.prepare('SELECT * FROM partners WHERE client_id = ?').get(clientId) as PartnerRow | undefined;
  }

  application(clientId: string): ApplicationRow | undefined {
    return this.db.prepare('SELECT * FROM applications WHERE client_id = ?').get(clientId) as ApplicationRow | undefined;
  }

  accessToken(token: string): TokenRow | undefined {
    return this.db.prepare('SELECT * FROM access_tokens WHERE token = ?').get(token) as TokenRow | undefined;
  }

  member(id: number): MemberRow | undefined {
    return this.db.prepare('SELECT * FROM members WHERE id = ?').get(id) as MemberRow | undefined;
  }

  /** Whether a member may act in a library (owner or member of it). */
  memberInLibrary(memberId: number, libraryId: number): boolean {
    const lib = this.library(libraryId);
    if (!lib) return false;
    if (lib.owner_id === memberId) return true;
    return !!this.db.prepare('SELECT 1 FROM library_members WHERE library_id = ? AND member_id = ?').get(libraryId, memberId);
  }
}
