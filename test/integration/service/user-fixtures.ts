/** Members, tokens and user clients for the user-API and permission tests. */
import type { ServiceClient } from '../../../src/api/client.js';
import { AccessTokens } from '../../../src/service/domain/tokens.js';
import type { TestService } from '../../support/service.js';

export interface TestMember { id: number; account: string; client: ServiceClient; token: string; refresh_token: string }

/** The application of the bootstrap member (its client_id is not in credentials.json). */
export function bootstrapApp(t: TestService): { client_id: string; client_secret: string } {
  const secret = t.service.credentials.member.client_secret;
  const row = t.service.parts.tree.db.prepare('SELECT client_id FROM applications WHERE client_secret = ?').get(secret) as { client_id: string };
  return { client_id: row.client_id, client_secret: secret };
}

/** A new member of the bootstrap enterprise (optionally a library member with a role), with a token and a client. */
export function addMember(t: TestService, name: string, opts: { libraryRole?: number; password?: string } = {}): TestMember {
  const db = t.service.parts.tree.db;
  const account = `${name}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  const clock = t.service.parts.clock;
  const id = Number(db.prepare('INSERT INTO members (ent_id, account, name, email, state, created_ms) VALUES (?, ?, ?, ?, 1, ?)')
    .run(t.service.credentials.enterprise.ent_id, account, name, account, clock()).lastInsertRowid);
  if (opts.libraryRole !== undefined) {
    db.prepare('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, ?)').run(t.service.credentials.library.org_id, id, opts.libraryRole);
  }
  if (opts.password) new AccessTokens(db, clock).setPassword(id, opts.password);
  return { id, account, ...memberClient(t, id) };
}

/** A token (of the bootstrap application) and a user client for an existing member. */
export function memberClient(t: TestService, memberId: number): Omit<TestMember, 'id' | 'account'> {
  const app = bootstrapApp(t);
  const grant = new AccessTokens(t.service.parts.tree.db, t.service.parts.clock).issue(memberId, app.client_id);
  const client = t.client.withCredentials({ user: { token: grant.access_token, client_secret: app.client_secret, client_id: app.client_id, refresh_token: grant.refresh_token } });
  return { client, token: grant.access_token, refresh_token: grant.refresh_token };
}
