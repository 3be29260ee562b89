/**
 * Endpoints the vendor's official clients call that spec/service-api.md does not list. They are not in
 * the EndpointTable (this project's client never calls them); the router serves them beside it
 * (`Router.registerVendor`). What each answers is what the SDKs' sources expect back
 * (docs/service-decisions.md, "Endpoints the official clients call"):
 * - `/m-open/1/file/servers` (library): the service's servers of a kind, as host items;
 * - `/m-api/1/thirdparty/get_token` (partner): an access token of the enterprise's administrator;
 * - `/m-api/1/thirdparty/get_sso_url` (partner): an admin console login link, like `ent_sso_url`;
 * - `/m-api/oauth2/token` (application): the token endpoint under its other name;
 * - `/m-open/1/ent/get_member_file_link` (enterprise): share links of a member's personal library.
 */
import type { EndpointDef } from '../../shared/endpoints.js';
import { FaultCode, ServiceFault } from '../domain/fault.js';
import type { AdminConsoleLogin } from '../domain/partner-console-login.js';
import { PartnerEnterprises } from '../domain/partner.js';
import { AccessTokens } from '../domain/tokens.js';
import type { RequestContext, Router } from '../http/router.js';
import type { ServiceParts } from './context.js';
import { tokenGrant } from './user.js';

const S = { required: true, type: 'string' } as const;
const s = { required: false, type: 'string' } as const;
const res = <T>(): T => undefined as unknown as T;

/** One server as the SDKs read it (GKHostItem): host, ports, path. */
export interface ServerHostItem {
  type: string;
  hostname: string;
  'hostname-in': string;
  /** HTTP port ("80" when default). */
  port: string;
  /** HTTPS port, 0 when the server is not served over HTTPS. */
  https: number;
  path: string;
  /** Key the client signs requests to that server with; our servers need none. */
  sign: string;
}

export const VENDOR_ENDPOINTS = {
  servers: { method: 'POST', path: '/m-open/1/file/servers', credential: 'library', idempotent: true, unmarked: true, params: { type: s }, result: res<ServerHostItem[]>() },
  get_token: { method: 'POST', path: '/m-api/1/thirdparty/get_token', credential: 'partner', idempotent: false, issuesCredential: true, unmarked: true, params: { out_id: S }, result: res<unknown>() },
  get_sso_url: { method: 'POST', path: '/m-api/1/thirdparty/get_sso_url', credential: 'partner', idempotent: false, issuesCredential: true, unmarked: true, params: { out_id: S, ticket: S }, result: res<{ url: string }>() },
  get_member_file_link: { method: 'POST', path: '/m-open/1/ent/get_member_file_link', credential: 'enterprise', idempotent: true, unmarked: true, params: { member_id: S, file: s }, result: res<unknown[]>() },
  token: { method: 'POST', path: '/m-api/oauth2/token', credential: 'application', idempotent: false, issuesCredential: true, unmarked: true, params: { grant_type: S, username: s, password: s, refresh_token: s, token: s }, result: res<unknown>() },
} as const satisfies Record<string, EndpointDef>;

/** The servers `/m-open/1/file/servers` knows: the upload server (`m-upload`). */
export function serverItems(uploadServerUrl: string, type: string): ServerHostItem[] {
  const u = new URL(uploadServerUrl);
  const tls = u.protocol === 'https:';
  const port = u.port || (tls ? '443' : '80');
  const all: ServerHostItem[] = [{
    type: 'm-upload', hostname: u.hostname, 'hostname-in': u.hostname,
    port: tls ? '0' : port, https: tls ? Number(port) : 0, path: u.pathname.replace(/\/+$/, ''), sign: '',
  }];
  return type === '' ? all : all.filter((item) => item.type === type);
}

export function registerVendorRoutes(router: Router, parts: ServiceParts, consoleLogin: AdminConsoleLogin): void {
  const db = parts.tree.db;
  const enterprises = new PartnerEnterprises(db, parts.clock);
  const tokens = new AccessTokens(db, parts.clock);
  const entOf = async (ctx: RequestContext) => {
    const partner = ctx.caller.partner;
    if (!partner) throw new ServiceFault(FaultCode.NoPermission, 'this call needs the partner client_id');
    return { partner, ent: await enterprises.require(partner, ctx.params.required('out_id')) };
  };

  router.registerVendor('file', 'servers', VENDOR_ENDPOINTS.servers, (ctx) => serverItems(parts.uploadServerUrl, ctx.params.str('type') ?? ''));

  router.registerVendor('partner', 'get_token', VENDOR_ENDPOINTS.get_token, async (ctx) => {
    const { partner, ent } = await entOf(ctx);
    const admin = await db.get('SELECT id FROM members WHERE ent_id = ? AND admin_type = 1 AND state = 1 ORDER BY id LIMIT 1', [ent.id]) as { id: number } | undefined;
    if (!admin) throw new ServiceFault(FaultCode.MemberMissing, `enterprise ${JSON.stringify(ent.out_id)} has no enabled administrator account (create_ent with account)`);
    // The token belongs to the partner as an application: the SDK signs the calls made with it with the
    // partner's client_secret.
    await db.run('INSERT INTO applications (client_id, client_secret, title) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [partner.client_id, partner.client_secret, `partner ${partner.name}`]);
    return tokens.issue(admin.id, partner.client_id);
  });

  router.registerVendor('partner', 'get_sso_url', VENDOR_ENDPOINTS.get_sso_url, async (ctx) => {
    const { ent } = await entOf(ctx);
    ctx.params.required('ticket');
    return { url: await consoleLogin.issue(ent.id) };
  });

  router.registerVendor('user', 'token_v1', VENDOR_ENDPOINTS.token, async (ctx) => tokenGrant(ctx, tokens));

  // The share links of a member's personal library (EntManager.getMemberFileLink), as file/links lists them.
  router.registerVendor('ent', 'get_member_file_link', VENDOR_ENDPOINTS.get_member_file_link, async (ctx) => {
    const ent = ctx.caller.enterprise;
    if (!ent) throw new ServiceFault(FaultCode.NoPermission, 'this call needs the enterprise client_id');
    const memberId = ctx.params.int('member_id', 0, { min: 1 });
    const member = await parts.directory.member(memberId);
    if (!member || member.ent_id !== ent.id) throw new ServiceFault(FaultCode.MemberMissing, `member ${memberId} not found in this enterprise`);
    const personal = await db.get('SELECT id FROM libraries WHERE ent_id = ? AND type = 20 AND owner_id = ? AND deleted = 0 ORDER BY id LIMIT 1', [ent.id, memberId]) as { id: number } | undefined;
    return personal ? parts.links.listLinks(personal.id, ctx.params.raw) : [];
  });
}
