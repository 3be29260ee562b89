/**
 * EnterpriseMembers: the members of an enterprise — lookup by member_id / out_id / account / e-mail,
 * the account limit (enabled accounts beyond `member_limit` are forced to disabled), temporary accounts
 * (`expire`: the date is kept, the account stops at the end of that UTC day), removal, and the
 * enterprise member record of the spec.
 */
import type { EntMember } from '../../shared/records.js';
import type { Db } from '../store/database.js';
import { FaultCode, ServiceFault, badParam } from './fault.js';

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
  constructor(private readonly db: Db, private readonly clock: () => number) {}

  byId(entId: number, id: number): MemberDbRow | undefined {
    return this.db.prepare('SELECT * FROM members WHERE id = ? AND ent_id = ?').get(id, entId) as MemberDbRow | undefined;
  }

  /** The member named by one key; undefined when none. A member_id that is not an integer is refused. */
  find(entId: number, key: MemberKey, value: string): MemberDbRow | undefined {
    if (key === 'member_id') {
      if (!/^\d+$/.test(value)) throw badParam('member_id', 'an integer id', value);
      return this.byId(entId, Number(value));
    }
    const column = key === 'email' ? 'email' : key;
    return this.db.prepare(`SELECT * FROM members WHERE ent_id = ? AND ${column} = ? ORDER BY id LIMIT 1`).get(entId, value) as MemberDbRow | undefined;
  }

  require(entId: number, key: MemberKey, value: string): MemberDbRow {
    const m = this.find(entId, key, value);
    if (!m) throw new ServiceFault(FaultCode.MemberMissing, `no member with ${key} ${JSON.stringify(value)} in this enterprise`);
    return m;
  }

  /** Members named by a comma-separated list (all must exist; nothing is changed otherwise). */
  requireList(entId: number, key: MemberKey, list: string, param: string): MemberDbRow[] {
    const values = splitList(list);
    if (values.length === 0) throw badParam(param, `a comma-separated list of ${key} values`, list);
    return values.map((v) => this.require(entId, key, v));
  }

  /**
   * The state an account may have: 0 stays 0; 1 only while the enabled accounts (other than `exceptId`)
   * stay below the enterprise's limit.
   */
  allowedState(entId: number, wanted: number, exceptId = 0): number {
    if (wanted !== 1) return 0;
    const limit = (this.db.prepare('SELECT member_limit FROM enterprises WHERE id = ?').get(entId) as { member_limit: number }).member_limit;
    const enabled = (this.db.prepare('SELECT COUNT(*) AS n FROM members WHERE ent_id = ? AND state = 1 AND id != ?').get(entId, exceptId) as { n: number }).n;
    return limit < 0 || enabled < limit ? 1 : 0;
  }

  /** Sets a member's state; a disabled account's access tokens end at once. */
  setState(memberId: number, state: number): void {
    this.db.prepare('UPDATE members SET state = ? WHERE id = ?').run(state, memberId);
    if (state === 0) this.db.prepare('DELETE FROM access_tokens WHERE member_id = ?').run(memberId);
  }

  /** Disables temporary accounts whose day of expiry has ended. Returns how many. */
  expireDue(): number {
    const nowS = Math.floor(this.clock() / 1000);
    const due = this.db.prepare('SELECT id FROM members WHERE state = 1 AND expire IS NOT NULL AND expire + ? <= ?').all(DAY_S, nowS) as { id: number }[];
    if (due.length === 0) return 0;
    this.db.transaction(() => { for (const d of due) this.setState(d.id, 0); })();
    return due.length;
  }

  /**
   * Removes members for good: memberships, tokens, favorites go with them; libraries they owned keep
   * their files and get no owner (owner_id 0).
   */
  remove(members: MemberDbRow[]): void {
    this.db.transaction(() => {
      for (const m of members) {
        this.db.prepare('UPDATE libraries SET owner_id = 0 WHERE owner_id = ?').run(m.id);
        this.db.prepare('UPDATE members SET leader_id = NULL WHERE leader_id = ?').run(m.id);
        this.db.prepare("DELETE FROM folder_permissions WHERE subject_kind = 'm' AND subject_id = ?").run(m.id);
        this.db.prepare('DELETE FROM members WHERE id = ?').run(m.id);
      }
    })();
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
  page(entId: number, start: number, size: number, where = '1 = 1', args: (string | number)[] = []): { list: MemberDbRow[]; count: number } {
    const count = (this.db.prepare(`SELECT COUNT(*) AS n FROM members WHERE ent_id = ? AND ${where}`).get(entId, ...args) as { n: number }).n;
    const list = this.db.prepare(`SELECT * FROM members WHERE ent_id = ? AND ${where} ORDER BY id LIMIT ? OFFSET ?`).all(entId, ...args, size, start) as MemberDbRow[];
    return { list, count };
  }
}

/** Items of a comma-separated list, trimmed, empty ones dropped, repeats removed. */
export function splitList(list: string): string[] {
  return [...new Set(list.split(',').map((s) => s.trim()).filter((s) => s !== ''))];
}
