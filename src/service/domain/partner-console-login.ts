/**
 * AdminConsoleLogin: the one-time admin console login links of `partner/ent_sso_url`.
 *
 * `issue` stores a random ticket (valid 5 minutes) and returns `{base_url}/sso/<ticket>`. Opening it
 * consumes the ticket (a second use, an expired or unknown ticket answers 404/40411), sets an HttpOnly
 * session cookie for the enterprise (HMAC-signed, 8 hours) and redirects to `/console/`, which shows the
 * enterprise's overview (name, subscription, members, libraries) to that session only (401 otherwise).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { MetadataStore } from '../store/metadata-store.js';
import { FaultCode, ServiceFault } from './fault.js';

/** Lifetime of a login link (ms). */
const TICKET_TTL_MS = 5 * 60_000;
/** Lifetime of a console session (ms). */
const SESSION_TTL_MS = 8 * 3_600_000;
const COOKIE = 'svc_console';

export class AdminConsoleLogin {
  constructor(private readonly db: MetadataStore, private readonly key: string, private readonly baseUrl: string, private readonly clock: () => number) {}

  /** A new one-time login link for an enterprise. */
  async issue(entId: number): Promise<string> {
    const now = this.clock();
    await this.db.run('DELETE FROM sso_tickets WHERE expires_ms <= ?', [now]);
    const ticket = randomBytes(24).toString('base64url');
    await this.db.run('INSERT INTO sso_tickets (ticket, ent_id, expires_ms) VALUES (?, ?, ?)', [ticket, entId, now + TICKET_TTL_MS]);
    return `${this.baseUrl}/sso/${ticket}`;
  }

  /** Whether this listener path is the console's (`/sso/…`, `/console/…`). */
  owns(path: string): boolean {
    return path.startsWith('/sso/') || path === '/console' || path.startsWith('/console/');
  }

  /** Answers `/sso/<ticket>` and `/console/`. Throws ServiceFault for refusals. */
  async handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    req.resume();
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path.startsWith('/sso/')) return this.login(res, path.slice('/sso/'.length));
    const entId = this.session(req);
    if (entId === undefined) throw new ServiceFault(FaultCode.TokenInvalid, 'not signed in to the admin console: open a login link from ent_sso_url');
    await this.overview(res, entId);
  }

  private async login(res: ServerResponse, ticket: string): Promise<void> {
    const row = await this.db.get('DELETE FROM sso_tickets WHERE ticket = ? RETURNING ent_id, expires_ms', [ticket]) as { ent_id: number; expires_ms: number } | undefined;
    if (!row || row.expires_ms <= this.clock()) throw new ServiceFault(FaultCode.LoginLinkInvalid, 'login link unknown, already used or expired');
    const expires = this.clock() + SESSION_TTL_MS;
    const value = `${row.ent_id}.${expires}`;
    res.writeHead(303, {
      location: '/console/',
      'set-cookie': `${COOKIE}=${value}.${this.mac(value)}; Path=/console; HttpOnly; SameSite=Lax; Max-Age=${SESSION_TTL_MS / 1000}`,
      'cache-control': 'no-store',
    }).end();
  }

  private session(req: IncomingMessage): number | undefined {
    const cookie = (req.headers.cookie ?? '').split(';').map((c) => c.trim()).find((c) => c.startsWith(`${COOKIE}=`));
    const m = cookie && /^(\d+)\.(\d+)\.([\w-]+)$/.exec(cookie.slice(COOKIE.length + 1));
    if (!m) return undefined;
    const expected = Buffer.from(this.mac(`${m[1]}.${m[2]}`));
    const given = Buffer.from(m[3]!);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    if (Number(m[2]) <= this.clock()) return undefined;
    return Number(m[1]);
  }

  private async overview(res: ServerResponse, entId: number): Promise<void> {
    const ent = await this.db.get('SELECT name, trial, end_dateline, member_limit, space FROM enterprises WHERE id = ?', [entId]) as
      { name: string; trial: number; end_dateline: number; member_limit: number; space: number } | undefined;
    if (!ent) throw new ServiceFault(FaultCode.EnterpriseMissing, 'enterprise no longer exists');
    const members = (await this.db.get('SELECT COUNT(*) AS n FROM members WHERE ent_id = ?', [entId]) as { n: number }).n;
    const libs = await this.db.all('SELECT name, size_used, capacity FROM libraries WHERE ent_id = ? AND deleted = 0 ORDER BY id', [entId]) as { name: string; size_used: number; capacity: number }[];
    const rows = libs.map((l) => `<tr><td>${esc(l.name)}</td><td>${l.size_used}</td><td>${l.capacity < 0 ? 'unlimited' : l.capacity}</td></tr>`).join('');
    const body = `<!doctype html><html><head><meta charset="utf-8"><title>${esc(ent.name)} — admin console</title></head><body>
<h1>${esc(ent.name)}</h1>
<p>${ent.trial ? 'Trial' : 'Subscription'} until ${new Date(ent.end_dateline * 1000).toISOString().slice(0, 10)}; members ${members} of ${ent.member_limit}; space ${ent.space} bytes.</p>
<table><thead><tr><th>Library</th><th>Used (bytes)</th><th>Capacity</th></tr></thead><tbody>${rows}</tbody></table>
</body></html>`;
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8', 'content-length': String(Buffer.byteLength(body)), 'cache-control': 'no-store',
      'content-security-policy': "default-src 'none'",
    }).end(body);
  }

  private mac(value: string): string {
    return createHmac('sha256', this.key).update(value).digest('base64url');
  }
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
