/** Members, tokens and user clients for the user-API and permission tests. */
import type { ServiceClient } from '../../../src/api/client.js';
import { AccessTokens } from '../../../src/service/domain/tokens.js';
import type { TestService } from '../../support/service.js';

export interface TestMember { id: number; account: string; client: ServiceClient; token: string; refresh_token: string }

/** The application of the bootstrap member (its client_id is not in credentials.json). */
export async function bootstrapApp(t: TestService): Promise<{ client_id: string; client_secret: string }> {
  const secret = t.service.credentials.member.client_secret;
  const row = await t.service.parts.tree.db.get('SELECT client_id FROM applications WHERE client_secret = ?', [secret]) as { client_id: string };
  return { client_id: row.client_id, client_secret: secret };
}

/** A new member of the bootstrap enterprise (optionally a library member with a role), with a token and a client. */
export async function addMember(t: TestService, name: string, opts: { libraryRole?: number; password?: string } = {}): Promise<TestMember> {
  const db = t.service.parts.tree.db;
  const account = `${name}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  const clock = t.service.parts.clock;
  const id = await db.insert('INSERT INTO members (ent_id, account, name, email, state, created_ms) VALUES (?, ?, ?, ?, 1, ?)', [t.service.credentials.enterprise.ent_id, account, name, account, clock()]);
  if (opts.libraryRole !== undefined) {
    await db.run('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, ?)', [t.service.credentials.library.org_id, id, opts.libraryRole]);
  }
  if (opts.password) await new AccessTokens(db, clock).setPassword(id, opts.password);
  return { id, account, ...await memberClient(t, id) };
}

/** A token (of the bootstrap application) and a user client for an existing member. */
export async function memberClient(t: TestService, memberId: number): Promise<Omit<TestMember, 'id' | 'account'>> {
  const app = await bootstrapApp(t);
  const grant = await new AccessTokens(t.service.parts.tree.db, t.service.parts.clock).issue(memberId, app.client_id);
  const client = t.client.withCredentials({ user: { token: grant.access_token, client_secret: app.client_secret, client_id: app.client_id, refresh_token: grant.refresh_token } });
  return { client, token: grant.access_token, refresh_token: grant.refresh_token };
}
