/**
 * What a library call's authentication read (its authorization, library and enterprise term), kept in
 * the process so that a call on PostgreSQL needs no round trip of its own to authenticate. Each entry
 * carries the authorization epoch it was read at: the counter of table `authorization_epoch`, which a
 * trigger moves in the transaction of every change of what the entry holds (an authorization updated or
 * deleted, a library removed or moved to another enterprise, an enterprise's term changed or the
 * enterprise deleted). An entry is only good for a call whose replay guard's record, sent after the call
 * arrived, reads the same epoch (StoredSignatureLedger returns it with the record): a change committed
 * by any process before the call arrived moves the epoch, and the call is checked again against a fresh
 * read before it answers or commits. Bounded: at most `maxEntries`, the oldest filled dropped first.
 */
import type { EnterpriseTermRow, LibraryAuthRow, LibraryRow } from '../domain/directory.js';

export interface LibraryAuthorization {
  auth: LibraryAuthRow;
  library: LibraryRow;
  term: EnterpriseTermRow | null;
  /** The authorization epoch the row was read at. */
  epoch: number;
}

export class AuthorizationCache {
  private readonly entries = new Map<string, LibraryAuthorization>();
  /** The latest epoch seen: entries read before it are dropped when it moves. */
  private latest = -1;

  constructor(private readonly maxEntries = 10_000) {}

  get size(): number {
    return this.entries.size;
  }

  /** The entry of `orgClientId`, if one was read at the latest epoch seen. */
  get(orgClientId: string): LibraryAuthorization | undefined {
    const found = this.entries.get(orgClientId);
    return found && found.epoch === this.latest ? found : undefined;
  }

  /** Keeps what a fresh read found (not kept when a later epoch was seen meanwhile). */
  put(orgClientId: string, found: LibraryAuthorization): void {
    this.observe(found.epoch);
    if (found.epoch !== this.latest) return;
    this.entries.delete(orgClientId);
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(orgClientId, found);
  }

  /** An epoch read from the store: a later one than seen drops every entry. */
  observe(epoch: number): void {
    if (epoch <= this.latest) return;
    this.latest = epoch;
    this.entries.clear();
  }
}
