/**
 * EnterpriseMembers: the members of an enterprise — lookup by member_id / out_id / account / e-mail,
 * the account limit (enabled accounts beyond `member_limit` are forced to disabled), temporary accounts
 * (`expire`: the date is kept, the account stops at the end of that UTC day), removal, and the
 * enterprise member record of the spec.
 */
import type { EntMember } from '../../shared/records.js';
import type { MetadataStore } from '../store/metadata-store.js';
import { FaultCode, ServiceFault, badParam } from './fault.js';
import { mapInOrder } from './in-order.js';

export interface MemberDbRow {
  id: number; ent_id: number; out_id: string | null; account: string; name: string; email: string; phone: string; title: string;
  state: number; expire: number | null; leader_id: number | null; listed: number; admin_type: number | null; personal_capacity: number | null;
}

export type MemberKey = 'member_id' | 'out_id' | 'account' | 'email';

const DAY_S = 86_400;

/** An expiry in unix seconds reduced to its date (00:00 UTC of that day). */
export const expiryDate = (seconds: number): number => Math.floor(seconds / DAY_S) * DAY_S;

/**
 * Why a member may not act now: disabled, or a temporary account whose day of expiry has ended (also
 * before the sweep of expireDue has disabled it). Undefined when the account may act.
 */
export function accountRefusal(member: { state: number; expire?: number | null }, nowMs: number): string | undefined {
  if (member.state !== 1) return 'the account is disabled';
  if (member.expire != null && member.expire + DAY_S <= Math.floor(nowMs / 1000)) {
    return `the temporary account expired at the end of ${new Date(member.expire * 1000).toISOString().slice(0, 10)}`;
  }
  return undefined;
}

export class EnterpriseMembers {
  constructor(private readonly db: MetadataStore, private readonly clock: () => number) {}

  async byId(entId: number, id: number): Promise<MemberDbRow | undefined> {
    return await this.db.get('SELECT * FROM members WHERE id = ? AND ent_id = ?', [id, entId]) as MemberDbRow | undefined;
  }

  /** The member named by one key; undefined when none. A member_id that is not an integer is refused. */
  async find(entId: number, key: MemberKey, value: string): Promise<MemberDbRow | undefined> {
    if (key === 'member_id') {
      if (!/^\d+$/.test(value)) throw badParam('member_id', 'an integer id', value);
      return this.byId(entId, Number(value));
    }
    const column = key === 'email' ? 'email' : key;
    return await this.db.get(`SELECT * FROM members WHERE ent_id = ? AND ${column} = ? ORDER BY id LIMIT 1`, [entId, value]) as MemberDbRow | undefined;
  }

  async require(entId: number, key: MemberKey, value: string): Promise<MemberDbRow> {
    const m = await this.find(entId, key, value);
    if (!m) throw new ServiceFault(FaultCode.MemberMissing, `no member with ${key} ${JSON.stringify(value)} in this enterprise`);
    return m;
  }

  /** Members named by a comma-separated list (all must exist; nothing is changed otherwise). */
  async requireList(entId: number, key: MemberKey, list: string, param: string): Promise<MemberDbRow[]> {
    const values = splitList(list);
    if (values.length === 0) throw badParam(param, `a comma-separated list of ${key} values`, list);
    return mapInOrder(values, async (v) => this.require(entId, key, v));
  }

  /**
   * The state an account may have: 0 stays 0; 1 only while the enabled accounts (other than `exceptId`)
   * stay below the enterprise's limit.
   */
  async allowedState(entId: number, wanted: number, exceptId = 0): Promise<number> {
    if (wanted !== 1) return 0;
    const limit = (await this.db.get('SELECT member_limit FROM enterprises WHERE id = ?', [entId]) as { member_limit: number }).member_limit;
    const enabled = (await this.db.get('SELECT COUNT(*) AS n FROM members WHERE ent_id = ? AND state = 1 AND id != ?', [entId, exceptId]) as { n: number }).n;
    return limit < 0 || enabled < limit ? 1 : 0;
  }

  /** Sets a member's state; a disabled account's access tokens end at once. */
  async setState(memberId: number, state: number): Promise<void> {
    await this.db.run('UPDATE members SET state = ? WHERE id = ?', [state, memberId]);
    if (state === 0) await this.db.run('DELETE FROM access_tokens WHERE member_id = ?', [memberId]);
  }

  /** Disables temporary accounts whose day of expiry has ended. Returns how many. */
  async expireDue(): Promise<number> {
    const nowS = Math.floor(this.clock() / 1000);
    const due = await this.db.all('SELECT id FROM members WHERE state = 1 AND expire IS NOT NULL AND expire + ? <= ?', [DAY_S, nowS]) as { id: number }[];
    if (due.length === 0) return 0;
    await this.db.tx(async () => { for (const d of due) await this.setState(d.id, 0); });
    return due.length;
  }

  /**
   * Removes members for good: memberships, tokens, favorites go with them; libraries they owned keep
   * their files and get no owner (owner_id 0).
   */
  async remove(members: MemberDbRow[]): Promise<void> {
    await this.db.tx(async () => {
      for (const m of members) {
        await this.db.run('UPDATE libraries SET owner_id = 0 WHERE owner_id = ?', [m.id]);
        await this.db.run('UPDATE members SET leader_id = NULL WHERE leader_id = ?', [m.id]);
        await this.db.run("DELETE FROM folder_permissions WHERE subject_kind = 'm' AND subject_id = ?", [m.id]);
        await this.db.run('DELETE FROM members WHERE id = ?', [m.id]);
      }
    });
  }

  /** The enterprise member record (without groups/orgs). */
  record(r: MemberDbRow): EntMember {
    const out: EntMember = {
      member_id: r.id, out_id: r.out_id ?? '', account: r.account, member_name: r.name, member_email: r.email,
      member_phone: r.phone, member_title: r.title, state: r.state,
    };
    if (r.expire !== null) out.expire = r.expire;
    return out;
  }

  /** Members of the enterprise listed in the admin console, ordered by id. */
  async page(entId: number, start: number, size: number, where = '1 = 1', args: (string | number)[] = []): Promise<{ list: MemberDbRow[]; count: number }> {
    const count = (await this.db.get(`SELECT COUNT(*) AS n FROM members WHERE ent_id = ? AND ${where}`, [entId, ...args]) as { n: number }).n;
    const list = await this.db.all(`SELECT * FROM members WHERE ent_id = ? AND ${where} ORDER BY id LIMIT ? OFFSET ?`, [entId, ...args, size, start]) as MemberDbRow[];
    return { list, count };
  }
}

/** Items of a comma-separated list, trimmed, empty ones dropped, repeats removed. */
export function splitList(list: string): string[] {
  return [...new Set(list.split(',').map((s) => s.trim()).filter((s) => s !== ''))];
}
