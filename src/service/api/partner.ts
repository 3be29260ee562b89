/**
 * The partner API (/m-api/1/thirdparty/, partner credential): create_ent, ent_info, ent_list, order,
 * get_client_id, ent_sso_url, set_ent_setting. (`ent_daily_stats` is in traffic-stats.ts.)
 * Returns the AdminConsoleLogin the listener serves below `/sso/` and `/console/`.
 */
import type { PartnerRow } from '../domain/directory.js';
import { EnterpriseLog, EntLogType } from '../domain/enterprise-log.js';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { AdminConsoleLogin } from '../domain/partner-console-login.js';
import { ENT_LIMITS, ORDER_TYPES, PartnerEnterprises, type OrderType } from '../domain/partner.js';
import type { RequestContext, Router } from '../http/router.js';
import type { ServiceParts } from './context.js';
import { EMAIL_RE } from './ent-members.js';

const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
const SETTING_PREFIX = '__setting_';
/** Order type names of the official SDKs (ThirdPartyManager) → the spec's. */
const SDK_ORDER_TYPES: Record<string, OrderType> = {
  orderSubscribe: 'subscribe', orderUpgrade: 'upgrade', orderRenew: 'renew', orderUnsubscribe: 'unsubscribe',
};

export async function registerPartnerApi(router: Router, parts: ServiceParts): Promise<AdminConsoleLogin> {
  const db = parts.tree.db;
  const enterprises = new PartnerEnterprises(db, parts.clock);
  const entLog = new EnterpriseLog(db, parts.clock);
  const consoleLogin = new AdminConsoleLogin(db, await parts.directory.secret('admin-console'), parts.baseUrl, parts.clock);

  const partnerOf = (ctx: RequestContext): PartnerRow => {
    if (!ctx.caller.partner) throw new ServiceFault(FaultCode.NoPermission, 'this call needs the partner client_id');
    return ctx.caller.partner;
  };
  const entOf = async (ctx: RequestContext) => enterprises.require(partnerOf(ctx), ctx.params.required('out_id'));
  /** An optional positive integer (undefined when omitted). */
  const positive = (ctx: RequestContext, name: string, max?: number): number | undefined => {
    const v = ctx.params.str(name);
    return v === undefined || v === '' ? undefined : ctx.params.int(name, 1, { min: 1, max });
  };
  const date = (ctx: RequestContext, name: string): string | undefined => {
    const v = ctx.params.str(name);
    if (v === undefined || v === '') return undefined;
    if (!DATE_RE.test(v) || Number.isNaN(Date.parse(`${v}T00:00:00Z`))) throw badParam(name, 'a date YYYY-MM-DD', v);
    return v;
  };

  router.register('partner', 'create_ent', async (ctx) => {
    const partner = partnerOf(ctx);
    const p = ctx.params;
    const outId = p.required('out_id');
    const name = p.required('ent_name');
    const memberCount = p.int('member_count', ENT_LIMITS.defaultMembers, { min: 1 });
    const days = p.int('days', ENT_LIMITS.defaultTrialDays, { min: 1, max: ENT_LIMITS.maxTrialDays });
    const spaceGb = p.int('space', ENT_LIMITS.defaultSpaceGb, { min: 1, max: ENT_LIMITS.maxSpaceGb });
    const accountRaw = p.str('account');
    const account = accountRaw === undefined || accountRaw === '' ? undefined : accountRaw.trim();
    if (account !== undefined && !EMAIL_RE.test(account)) throw badParam('account', 'an e-mail address', account);
    const settings: Record<string, string> = {};
    for (const [k, v] of Object.entries(p.raw)) if (k.startsWith(SETTING_PREFIX)) settings[k.slice(SETTING_PREFIX.length)] = v;
    return enterprises.create(partner, { outId, name, memberCount, days, spaceGb, account, settings });
  });

  router.register('partner', 'ent_info', async (ctx) => enterprises.record(await entOf(ctx), false));

  router.register('partner', 'ent_list', async (ctx) => {
    const partner = partnerOf(ctx);
    const order = ctx.params.str('order') || 'asc';
    if (order !== 'asc' && order !== 'desc') throw badParam('order', "'asc' or 'desc'", order);
    const { start, size } = ctx.params.page(100, 1000); // the spec: at most 1000
    return { list: await enterprises.list(partner, { begin: date(ctx, 'begin_date'), end: date(ctx, 'end_date'), start, size, order }) };
  });

  router.register('partner', 'order', async (ctx) => {
    const ent = await entOf(ctx);
    const given = ctx.params.required('type');
    // The official SDKs name the types orderSubscribe, orderUpgrade, orderRenew, orderUnsubscribe.
    const type = SDK_ORDER_TYPES[given] ?? given;
    if (!(ORDER_TYPES as readonly string[]).includes(type)) throw badParam('type', [...ORDER_TYPES, ...Object.keys(SDK_ORDER_TYPES)].join(', '), given);
    const optional = (name: string, min: number): number | undefined =>
      ctx.params.str(name) === undefined || ctx.params.str(name) === '' ? undefined : ctx.params.int(name, 0, { min });
    await enterprises.order(ent, type as OrderType, {
      // member_count -1 = no limit (the SDKs' documented value); 0 adds nothing on upgrade
      days: positive(ctx, 'days', ENT_LIMITS.maxTrialDays), memberCount: optional('member_count', -1),
      spaceGb: optional('space', 0), months: positive(ctx, 'month', 120),
    });
  });

  router.register('partner', 'get_client_id', async (ctx) => {
    const ent = await entOf(ctx);
    const title = ctx.params.required('title');
    await entLog.record(ent.id, EntLogType.Authorization, `client_id handed to ${title}`, ctx.ip);
    return { client_id: ent.client_id, client_secret: ent.client_secret };
  });

  router.register('partner', 'ent_sso_url', async (ctx) => ({ url: await consoleLogin.issue((await entOf(ctx)).id) }));

  router.register('partner', 'set_ent_setting', async (ctx) => {
    const ent = await entOf(ctx);
    await enterprises.setMaxLinkFlow(ent, ctx.params.requiredInt('max_link_flow', { min: -1 }));
  });

  return consoleLogin;
}
