/**
 * EnterpriseTerm: what the end of an enterprise's trial or subscription (`end_dateline`, set by the
 * partner's `create_ent` and `order`) does. The spec leaves it open; here an ended enterprise keeps its
 * data readable and changes nothing: every call that changes state in it (its libraries, its directory,
 * its members' user API) is refused with 403/40334 until the partner renews or subscribes (`order`),
 * which applies at once. An `end_dateline` of 0 has no end (the bootstrap enterprise).
 */
import type { MetadataStore } from '../store/metadata-store.js';
import type { EnterpriseTermRow } from './directory.js';
import { FaultCode, ServiceFault } from './fault.js';

export class EnterpriseTerm {
  constructor(private readonly db: MetadataStore, private readonly clock: () => number) {}

  /** Refuses (403/40334) when the trial or subscription of enterprise `entId` has ended. */
  async requireOpen(entId: number): Promise<void> {
    this.requireOpenAt(await this.db.get<EnterpriseTermRow>('SELECT trial, end_dateline FROM enterprises WHERE id = ?', [entId]) ?? null);
  }

  /** The same for a term already read (null: no such enterprise, nothing to refuse). */
  requireOpenAt(row: EnterpriseTermRow | null): void {
    if (!row || row.end_dateline <= 0 || row.end_dateline * 1000 > this.clock()) return;
    const at = new Date(row.end_dateline * 1000).toISOString().replace('.000Z', 'Z');
    throw new ServiceFault(FaultCode.EnterpriseEnded, `the enterprise's ${row.trial ? 'trial' : 'subscription'} ended at ${at}: its data can be read, nothing changed until the partner renews it`);
  }
}
