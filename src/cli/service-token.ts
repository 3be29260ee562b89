/**
 * `cloudlib service token` and `cloudlib service metadata`: administration of an embedded service's data
 * folder (the service may be running: SQLite in WAL mode takes a second writer).
 * - token: mints an access token for a member (by account) and an application, prints the grant as JSON;
 *   `--password` sets the member's password first (for the password grant of the token endpoint).
 * - metadata: defines a metadata template of the enterprise (`--template JSON`) and links it to a library.
 */
import { join } from 'node:path';
import { access } from 'node:fs/promises';
import type { Db } from '../service/store/database.js';

/** Options of the admin actions, merged into `cloudlib service`'s options. */
export const SERVICE_ADMIN_OPTIONS = {
  account: { type: 'string' },
  'client-id': { type: 'string' },
  ttl: { type: 'string' },
  password: { type: 'string' },
  template: { type: 'string' },
  'org-id': { type: 'string' },
} as const;

export const SERVICE_ADMIN_USAGE = [
  '',
  'Usage: cloudlib service token --data DIR --account ACCOUNT [--client-id ID]',
  '                              [--ttl SECONDS] [--password PW]',
  '  mints an access token for the member ACCOUNT (application: --client-id,',
  '  default the first one); prints {"access_token","refresh_token","expires_in",',
  '  "member_id","client_id","client_secret"}',
  '  --ttl SECONDS       token lifetime (default 7200)',
  '  --password PW       also sets the member\'s password (token endpoint,',
  '                      grant_type=password)',
  '',
  'Usage: cloudlib service metadata --data DIR --template JSON [--org-id ID]',
  '  defines (or replaces) a metadata template of the enterprise of --org-id',
  '  (default the first library) and links it to that library; JSON:',
  '  {"key","name","attributes":[{"key","name","type","options"}]}',
  '  with type string | number | date | time | single | multiple',
].join('\n');

function fail(message: string): number {
  process.stderr.write(`cloudlib service: ${message}\n`);
  return 2;
}

/** Runs `token` or `metadata`; returns the exit code. */
export async function runServiceAdmin(action: string, values: Record<string, unknown>): Promise<number> {
  const data = values.data;
  if (typeof data !== 'string' || data === '') return fail('--data DIR is required');
  const file = join(data, 'service.db');
  try {
    await access(file);
  } catch {
    return fail(`no service data in ${data} (start \`cloudlib service --data DIR\` once first)`);
  }
  const { openDatabase } = await import('../service/store/database.js');
  const db = openDatabase(file);
  try {
    if (action === 'token') return await mintToken(db, values);
    if (action === 'metadata') return await defineTemplate(db, values);
    return fail(`unknown action '${action}' (expected token or metadata)`);
  } catch (err) {
    return fail((err as Error).message);
  } finally {
    db.close();
  }
}

async function mintToken(db: Db, values: Record<string, unknown>): Promise<number> {
  const account = values.account;
  if (typeof account !== 'string' || account === '') return fail('token: --account ACCOUNT is required');
  const ttlText = typeof values.ttl === 'string' ? values.ttl : '7200';
  if (!/^\d+$/.test(ttlText) || Number(ttlText) < 1) return fail(`token: --ttl expected a number of seconds ≥ 1, got ${JSON.stringify(ttlText)}`);
  const member = db.prepare('SELECT id, state FROM members WHERE account = ?').get(account) as { id: number; state: number } | undefined;
  if (!member) return fail(`token: no member with account ${JSON.stringify(account)}`);
  if (member.state !== 1) return fail(`token: the account ${JSON.stringify(account)} is disabled`);
  const clientId = typeof values['client-id'] === 'string' ? values['client-id'] : undefined;
  const app = (clientId
    ? db.prepare('SELECT client_id, client_secret FROM applications WHERE client_id = ?').get(clientId)
    : db.prepare('SELECT client_id, client_secret FROM applications ORDER BY rowid LIMIT 1').get()) as { client_id: string; client_secret: string } | undefined;
  if (!app) return fail(clientId ? `token: no application ${JSON.stringify(clientId)}` : 'token: the service has no application');
  return issue(db, member.id, app, Number(ttlText) * 1000, typeof values.password === 'string' ? values.password : undefined);
}

async function issue(db: Db, memberId: number, app: { client_id: string; client_secret: string }, ttlMs: number, password?: string): Promise<number> {
  const { AccessTokens } = await import('../service/domain/tokens.js');
  const tokens = new AccessTokens(db, Date.now);
  if (password !== undefined) tokens.setPassword(memberId, password);
  const grant = tokens.issue(memberId, app.client_id, ttlMs);
  process.stdout.write(`${JSON.stringify({ ...grant, member_id: memberId, client_id: app.client_id, client_secret: app.client_secret })}\n`);
  return 0;
}

async function defineTemplate(db: Db, values: Record<string, unknown>): Promise<number> {
  const raw = values.template;
  if (typeof raw !== 'string' || raw === '') return fail('metadata: --template JSON is required');
  let template: unknown;
  try {
    template = JSON.parse(raw);
  } catch {
    return fail(`metadata: --template expected JSON, got ${JSON.stringify(raw.slice(0, 80))}`);
  }
  const orgText = typeof values['org-id'] === 'string' ? values['org-id'] : undefined;
  if (orgText !== undefined && !/^\d+$/.test(orgText)) return fail(`metadata: --org-id expected a library id, got ${JSON.stringify(orgText)}`);
  const lib = (orgText
    ? db.prepare('SELECT id, ent_id FROM libraries WHERE id = ? AND deleted = 0').get(Number(orgText))
    : db.prepare('SELECT id, ent_id FROM libraries WHERE deleted = 0 ORDER BY id LIMIT 1').get()) as { id: number; ent_id: number } | undefined;
  if (!lib) return fail(orgText ? `metadata: no library ${orgText}` : 'metadata: the service has no library');
  const { MetadataTemplates } = await import('../service/domain/metadata.js');
  const templates = new MetadataTemplates(db);
  const t = db.transaction(() => {
    const defined = templates.define(lib.ent_id, template);
    templates.link(lib.id, defined.key);
    return defined;
  })();
  process.stdout.write(`${JSON.stringify({ ent_id: lib.ent_id, org_id: lib.id, template: t })}\n`);
  return 0;
}
