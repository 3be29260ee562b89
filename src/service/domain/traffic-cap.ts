/**
 * LinkTrafficCap: the daily share-link traffic cap of an enterprise (`partner/set_ent_setting`
 * `max_link_flow`, bytes per UTC day, -1 unlimited). Checked before a share-link download starts: once
 * the day's link bytes reached the cap, downloads are refused until the next day. A download under way
 * when the cap is crossed is finished. As the spec says, the cap has no effect for trial enterprises.
 */
import type { MetadataStore } from '../store/metadata-store.js';
import type { DailyTraffic } from './daily-traffic.js';
import { FaultCode, ServiceFault } from './fault.js';

export class LinkTrafficCap {
  constructor(private readonly db: MetadataStore, private readonly traffic: DailyTraffic) {}

  /** Throws 403/40333 when the enterprise of the library reached its cap today. */
  async check(libraryId: number): Promise<void> {
    const row = await this.db.get('SELECT e.id, e.trial, e.max_link_flow FROM libraries l JOIN enterprises e ON e.id = l.ent_id WHERE l.id = ?', [libraryId]) as { id: number; trial: number; max_link_flow: number } | undefined;
    if (!row || row.trial === 1 || row.max_link_flow < 0) return;
    if (await this.traffic.today(row.id, 'link') >= row.max_link_flow) {
      throw new ServiceFault(FaultCode.LinkTrafficCapReached, 'the daily share-link traffic of this enterprise is used up; try again tomorrow');
    }
  }
}
