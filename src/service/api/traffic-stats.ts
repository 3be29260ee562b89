/**
 * `partner/ent_daily_stats` (/m-api/1/thirdparty/, partner credential): bytes served per day for one of
 * the partner's enterprises, by download links, share-link downloads and preview pages. As the spec
 * says, a day is queryable from the next day on: today is never answered; at most 366 days per query.
 */
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { dayOf } from '../domain/daily-traffic.js';
import type { Router } from '../http/router.js';
import type { ServiceParts } from './context.js';

const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 86_400_000;
const MAX_DAYS = 366;

function parseDate(name: string, v: string | undefined): string {
  if (v === undefined || !DATE_RE.test(v) || Number.isNaN(Date.parse(`${v}T00:00:00Z`)) || dayOf(Date.parse(`${v}T00:00:00Z`)) !== v) {
    throw badParam(name, 'a date YYYY-MM-DD', v ?? null);
  }
  return v;
}

export function registerTrafficStats(router: Router, parts: ServiceParts): void {
  router.register('partner', 'ent_daily_stats', async (ctx) => {
    const partner = ctx.caller.partner;
    if (!partner) throw new ServiceFault(FaultCode.NoPermission, 'this call needs the partner client_id');
    const p = ctx.params;
    const type = p.required('type');
    if (type !== 'flow') throw badParam('type', "'flow'", type);
    const outId = p.required('out_id');
    const ent = await parts.tree.db.get('SELECT id FROM enterprises WHERE partner_id = ? AND out_id = ?', [partner.id, outId]) as { id: number } | undefined;
    if (!ent) throw new ServiceFault(FaultCode.EnterpriseMissing, `no enterprise with out_id ${JSON.stringify(outId)} for this partner`);
    const start = parseDate('start_date', p.required('start_date'));
    const latest = dayOf(parts.clock() - DAY_MS);
    const endRaw = p.str('end_date');
    const end = endRaw === undefined || endRaw === '' ? latest : parseDate('end_date', endRaw);
    if (end < start) throw badParam('end_date', `a date on or after start_date ${start}`, end);
    if ((Date.parse(`${end}T00:00:00Z`) - Date.parse(`${start}T00:00:00Z`)) / DAY_MS + 1 > MAX_DAYS) throw badParam('end_date', `at most ${MAX_DAYS} days after start_date`, end);
    const last = end < latest ? end : latest;
    return { list: last < start ? [] : await parts.traffic.days(ent.id, start, last) };
  });
}
