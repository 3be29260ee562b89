/**
 * PartnerEnterprises: the enterprises a partner opens and sells (`/m-api/1/thirdparty/`): creation with
 * its limits (trial days ≤ 90, space ≤ 51200 GB, a globally unique administrator account whose generated
 * password is returned once), the partner enterprise record, the list, orders (trial.extend, subscribe,
 * renew, upgrade, unsubscribe), the enterprise's own client_id/secret, and its settings.
 */
import { randomBytes } from 'node:crypto';
import type { PartnerEnt } from '../../shared/records.js';
import type { MetadataStore } from '../store/metadata-store.js';
import { newId, newSecret, type PartnerRow } from './directory.js';
import { EnterpriseLog, EntLogType } from './enterprise-log.js';
import { FaultCode, ServiceFault, badParam } from './fault.js';
import { md5Hex } from './tokens.js';
import { mapInOrder } from './in-order.js';

export const GB = 1024 ** 3;
const DAY_S = 86_400;
/** Limits of `create_ent` (spec "Limits"). */
export const ENT_LIMITS = { maxTrialDays: 90, defaultTrialDays: 90, maxSpaceGb: 51_200, defaultSpaceGb: 500, defaultMembers: 1000 } as const;

export interface EnterpriseDbRow {
  id: number; partner_id: number | null; out_id: string | null; name: string; client_id: string; client_secret: string; trial: number;
  end_dateline: number; member_limit: number; space: number; created_ms: number; sync_enabled: number; max_link_flow: number; settings: string;
}

export interface NewEnterprise {
  outId: string; name: string; memberCount: number; days: number; spaceGb: number; account?: string;
  /** `__setting_<name>` values given at creation (`sync` = 1 turns the synchronisation endpoints on). */
  settings: Record<string, string>;
}

/**
 * `__setting_<name>` flags (0/1) the service acts on: `sync` turns the synchronisation endpoints on;
 * `member_create_org=0` reserves the user API's library/create to the enterprise's administrators.
 */
export const FLAG_SETTINGS = ['sync', 'member_create_org'] as const;

/** Whether a member may create libraries through the user API (see FLAG_SETTINGS). */
export async function mayCreateLibraries(db: MetadataStore, memberId: number): Promise<boolean> {
  const row = await db.get('SELECT m.admin_type, e.settings FROM members m JOIN enterprises e ON e.id = m.ent_id WHERE m.id = ?', [memberId]) as
    { admin_type: number | null; settings: string } | undefined;
  if (!row) return false;
  return (JSON.parse(row.settings) as Record<string, string>).member_create_org !== '0' || row.admin_type !== null;
}

export type OrderType = 'trial.extend' | 'subscribe' | 'renew' | 'upgrade' | 'unsubscribe';
export const ORDER_TYPES: readonly OrderType[] = ['trial.extend', 'subscribe', 'renew', 'upgrade', 'unsubscribe'];

/** `seconds` plus `months` calendar months (UTC; the 31st becomes the last day of a shorter month). */
export function addMonths(seconds: number, months: number): number {
  const d = new Date(seconds * 1000);
  const day = d.getUTCDate();
  d.setUTCDate(1);
  d.setUTCMonth(d.getUTCMonth() + months);
  const last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
  d.setUTCDate(Math.min(day, last));
  return Math.floor(d.getTime() / 1000);
}

export class PartnerEnterprises {
  private readonly entLog: EnterpriseLog;

  constructor(private readonly db: MetadataStore, private readonly clock: () => number) {
    this.entLog = new EnterpriseLog(db, clock);
  }

  private nowS(): number {
    return Math.floor(this.clock() / 1000);
  }

  async require(partner: PartnerRow, outId: string): Promise<EnterpriseDbRow> {
    const row = await this.db.get('SELECT * FROM enterprises WHERE partner_id = ? AND out_id = ?', [partner.id, outId]) as EnterpriseDbRow | undefined;
    if (!row) throw new ServiceFault(FaultCode.EnterpriseMissing, `no enterprise with out_id ${JSON.stringify(outId)} for this partner`);
    return row;
  }

  /** Creates a trial enterprise; the administrator's password is in the answer and nowhere else. */
  async create(partner: PartnerRow, e: NewEnterprise): Promise<{ id: number; end_dateline: number; account?: string; password?: string }> {
    if (await this.db.get('SELECT 1 FROM enterprises WHERE partner_id = ? AND out_id = ?', [partner.id, e.outId])) {
      throw new ServiceFault(FaultCode.NameExists, `an enterprise with out_id ${JSON.stringify(e.outId)} exists`);
    }
    if (e.account !== undefined && await this.db.get('SELECT 1 FROM members WHERE account = ?', [e.account])) {
      throw new ServiceFault(FaultCode.NameExists, `account ${JSON.stringify(e.account)} exists`);
    }
    for (const name of FLAG_SETTINGS) {
      const v = e.settings[name];
      if (v !== undefined && v !== '0' && v !== '1') throw badParam(`__setting_${name}`, '0 or 1', v);
    }
    const sync = e.settings.sync;
    return this.db.tx(async () => {
      const now = this.clock();
      const end = this.nowS() + e.days * DAY_S;
      const id = await this.db.insert(`INSERT INTO enterprises (partner_id, out_id, name, client_id, client_secret, trial, end_dateline, member_limit, space, created_ms, sync_enabled, settings)
        VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)`, [partner.id, e.outId, e.name, newId('ent_'), newSecret(), end, e.memberCount, e.spaceGb * GB, now, sync === '1' ? 1 : 0, JSON.stringify(e.settings)]);
      await this.entLog.record(id, EntLogType.Settings, `enterprise opened by partner: ${e.name}`);
      if (e.account === undefined) return { id, end_dateline: end };
      const password = randomBytes(9).toString('base64url');
      await this.db.run('INSERT INTO members (ent_id, account, name, email, state, password_md5, admin_type, created_ms) VALUES (?, ?, ?, ?, 1, ?, 1, ?)', [id, e.account, e.account.split('@')[0]!, e.account, md5Hex(password), now]);
      await this.entLog.record(id, EntLogType.SubAdmin, `super administrator: ${e.account}`);
      return { id, end_dateline: end, account: e.account, password };
    });
  }

  async record(row: EnterpriseDbRow, withListFields: boolean): Promise<PartnerEnt> {
    const members = (await this.db.get('SELECT COUNT(*) AS n FROM members WHERE ent_id = ?', [row.id]) as { n: number }).n;
    const size = (await this.db.get('SELECT CAST(COALESCE(SUM(size_used), 0) AS BIGINT) AS n FROM libraries WHERE ent_id = ? AND deleted = 0', [row.id]) as { n: number }).n;
    const out: PartnerEnt = { id: row.id, name: row.name, trial: row.trial, end_dateline: row.end_dateline, member_limit: row.member_limit, member_count: members, space: row.space, size };
    if (withListFields) {
      const admin = await this.db.get('SELECT account FROM members WHERE ent_id = ? AND admin_type = 1 ORDER BY id LIMIT 1', [row.id]) as { account: string } | undefined;
      return { ...out, out_id: row.out_id ?? '', account: admin?.account ?? '' };
    }
    return out;
  }

  /** Enterprises opened in [begin, end) (UTC dates), in opening order or reversed. */
  async list(partner: PartnerRow, q: { begin?: string; end?: string; start: number; size: number; order: 'asc' | 'desc' }): Promise<PartnerEnt[]> {
    const where = ['partner_id = ?'];
    const args: number[] = [partner.id];
    if (q.begin) { where.push('created_ms >= ?'); args.push(Date.parse(`${q.begin}T00:00:00Z`)); }
    if (q.end) { where.push('created_ms < ?'); args.push(Date.parse(`${q.end}T00:00:00Z`)); }
    const rows = await this.db.all(`SELECT * FROM enterprises WHERE ${where.join(' AND ')} ORDER BY id ${q.order} LIMIT ? OFFSET ?`, [...args, q.size, q.start]) as EnterpriseDbRow[];
    return mapInOrder(rows, async (r) => this.record(r, true));
  }

  /**
   * Applies an order at once. Amounts are validated by the caller (integers; member_count may be -1 for
   * no limit, space and member_count 0 on upgrade add nothing).
   */
  async order(row: EnterpriseDbRow, type: OrderType, o: { days?: number; memberCount?: number; spaceGb?: number; months?: number }): Promise<void> {
    const now = this.nowS();
    const need = (v: number | undefined, name: string): number => {
      if (v === undefined) throw badParam(name, `a positive integer for ${type}`, null);
      return v;
    };
    const paid = (): void => {
      if (row.trial === 1) throw new ServiceFault(FaultCode.BadParam, `order ${type}: the enterprise has no subscription (it is a trial)`);
    };
    let change: Partial<Pick<EnterpriseDbRow, 'trial' | 'end_dateline' | 'member_limit' | 'space'>>;
    switch (type) {
      case 'trial.extend': {
        if (row.trial !== 1) throw new ServiceFault(FaultCode.BadParam, 'order trial.extend: the enterprise is not a trial');
        change = { end_dateline: Math.max(now, row.end_dateline) + need(o.days, 'days') * DAY_S };
        break;
      }
      case 'subscribe': {
        const members = need(o.memberCount, 'member_count');
        if (members === 0) throw badParam('member_count', 'a positive integer, or -1 for no limit', 0);
        const space = need(o.spaceGb, 'space');
        if (space === 0) throw badParam('space', 'a positive integer (GB)', 0);
        const months = need(o.months, 'month');
        // From a trial the subscription starts now; an active subscription is replaced from its end.
        const from = row.trial === 1 ? now : Math.max(now, row.end_dateline);
        change = { trial: 0, member_limit: members, space: space * GB, end_dateline: addMonths(from, months) };
        break;
      }
      case 'renew':
        paid();
        change = { end_dateline: addMonths(Math.max(now, row.end_dateline), need(o.months, 'month')) };
        break;
      case 'upgrade': {
        paid();
        const members = o.memberCount ?? 0;
        const space = o.spaceGb ?? 0;
        if (members === 0 && space === 0) throw badParam('member_count', 'member_count and/or space to add for upgrade', null);
        // -1 = no member limit from now on; a limit of -1 stays without limit
        const limit = members === -1 || row.member_limit === -1 ? -1 : row.member_limit + members;
        change = { member_limit: limit, space: row.space + space * GB };
        break;
      }
      case 'unsubscribe':
        paid();
        change = { end_dateline: Math.min(row.end_dateline, now) };
        break;
    }
    const next = { ...row, ...change };
    await this.db.run('UPDATE enterprises SET trial = ?, end_dateline = ?, member_limit = ?, space = ? WHERE id = ?', [next.trial, next.end_dateline, next.member_limit, next.space, row.id]);
    await this.entLog.record(row.id, EntLogType.Settings, `order ${type} applied`);
  }

  async setMaxLinkFlow(row: EnterpriseDbRow, bytes: number): Promise<void> {
    await this.db.run('UPDATE enterprises SET max_link_flow = ? WHERE id = ?', [bytes, row.id]);
    await this.entLog.record(row.id, EntLogType.Settings, `daily share-link traffic cap: ${bytes < 0 ? 'unlimited' : `${bytes} bytes`}`);
  }
}
