/**
 * EnterpriseLog: the administration log of an enterprise (`ent/log`), one row per change made through
 * the enterprise and library management APIs. Type codes of the spec: 1 sub-administrator, 2 member
 * information, 3 enterprise settings, 4 organisation structure, 5 role, 6 member device, 7 storage point,
 * 8 library, 9 development authorization.
 */
import type { EntLogItem } from '../../shared/records.js';
import type { MetadataStore } from '../store/metadata-store.js';

export const EntLogType = {
  SubAdmin: 1, Member: 2, Settings: 3, Structure: 4, Role: 5, Device: 6, StoragePoint: 7, Library: 8, Authorization: 9,
} as const;

/** Who appears as `admin` for changes made through the API with the enterprise's client_id. */
export const API_ADMIN = 'API';

export interface EntLogQuery {
  types?: number[]; order: 'asc' | 'desc'; startS?: number; endS?: number; start: number; size: number;
}

export class EnterpriseLog {
  constructor(private readonly db: MetadataStore, private readonly clock: () => number) {}

  async record(entId: number, type: number, content: string, ip = '', admin = API_ADMIN): Promise<void> {
    await this.db.run('INSERT INTO ent_log (ent_id, type, admin, content, ip, ms) VALUES (?, ?, ?, ?, ?, ?)', [entId, type, admin, content, ip, this.clock()]);
  }

  async query(entId: number, q: EntLogQuery): Promise<{ total: number; list: EntLogItem[] }> {
    const where = ['ent_id = ?'];
    const args: number[] = [entId];
    if (q.types && q.types.length > 0) { where.push(`type IN (${q.types.map(() => '?').join(',')})`); args.push(...q.types); }
    if (q.startS !== undefined) { where.push('ms >= ?'); args.push(q.startS * 1000); }
    if (q.endS !== undefined) { where.push('ms < ?'); args.push(q.endS * 1000); }
    const w = where.join(' AND ');
    const total = (await this.db.get(`SELECT COUNT(*) AS n FROM ent_log WHERE ${w}`, [...args]) as { n: number }).n;
    const rows = await this.db.all(`SELECT type, admin, content, ip, ms FROM ent_log WHERE ${w} ORDER BY ms ${q.order}, id ${q.order} LIMIT ? OFFSET ?`, [...args, q.size, q.start]) as { type: number; admin: string; content: string; ip: string; ms: number }[];
    return { total, list: rows.map((r) => ({ type: r.type, admin: r.admin, content: r.content, ip: r.ip, dateline: Math.floor(r.ms / 1000) })) };
  }
}
