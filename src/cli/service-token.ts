/**
 * `cloudlib service token` and `cloudlib service metadata`: administration of an embedded service's data
 * folder (the service may be running: SQLite in WAL mode takes a second writer).
 * - token: mints an access token for a member (by account) and an application, prints the grant as JSON;
 *   `--password` sets the member's password first (for the password grant of the token endpoint).
 * - metadata: defines a metadata template of the enterprise (`--template JSON`) and links it to a library.
 */
import { join } from 'node:path';
import { access } from 'node:fs/promises';

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
  'Usage: cloudlib service token --data DIR [--metadata URL] --account ACCOUNT',
  '                              [--client-id ID] [--ttl SECONDS] [--password PW]',
  '  mints an access token for the member ACCOUNT (application: --client-id,',
  '  default the first one); prints {"access_token","refresh_token","expires_in",',
  '  "member_id","client_id","client_secret"}',
  '  --ttl SECONDS       token lifetime (default 7200)',
  '  --password PW       also sets the member\'s password (token endpoint,',
  '                      grant_type=password)',
  '',
  'Usage: cloudlib service metadata --data DIR [--metadata URL] --template JSON',
  '                                 [--org-id ID]',
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
  const metadata = typeof values.metadata === 'string' && values.metadata !== '' ? values.metadata : undefined;
  if (metadata === undefined) {
    try {
      await access(join(data, 'service.db'));
    } catch {
      return fail(`no service data in ${data} (start \`cloudlib service --data DIR\` once first)`);
    }
  }
  if (action !== 'token' && action !== 'metadata') return fail(`unknown action '${action}' (expected token or metadata)`);
  const { ServiceAdmin } = await import('../service/index.js');
  let admin;
  try {
    admin = await ServiceAdmin.open({ dataDir: data, metadata });
  } catch (err) {
    return fail((err as Error).message);
  }
  try {
    const out = action === 'token' ? await mintToken(admin, values) : await defineTemplate(admin, values);
    if (typeof out === 'number') return out;
    process.stdout.write(`${JSON.stringify(out)}\n`);
    return 0;
  } catch (err) {
    return fail((err as Error).message);
  } finally {
    await admin.close();
  }
}

type Admin = Awaited<ReturnType<typeof import('../service/index.js').ServiceAdmin.open>>;

async function mintToken(admin: Admin, values: Record<string, unknown>): Promise<number | object> {
  const account = values.account;
  if (typeof account !== 'string' || account === '') return fail('token: --account ACCOUNT is required');
  const ttlText = typeof values.ttl === 'string' ? values.ttl : '7200';
  if (!/^\d+$/.test(ttlText) || Number(ttlText) < 1) return fail(`token: --ttl expected a number of seconds ≥ 1, got ${JSON.stringify(ttlText)}`);
  const clientId = typeof values['client-id'] === 'string' ? values['client-id'] : undefined;
  return admin.mintToken({ account, clientId, ttlMs: Number(ttlText) * 1000, password: typeof values.password === 'string' ? values.password : undefined });
}

async function defineTemplate(admin: Admin, values: Record<string, unknown>): Promise<number | object> {
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
  return admin.defineTemplate(orgText === undefined ? undefined : Number(orgText), template);
}
