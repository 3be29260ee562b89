/**
 * UnsyncedMarks: the journal's records of spools sealed by their mark (spool-verification.ts) whose bytes
 * are not durable yet. A power loss may keep a spool's size and times without its bytes (a write over
 * blocks the file already had is not ordered before its inode's times), and a record put without sync may
 * reach the disk before the group commit fsyncs its spool. Such a record therefore says the boot it was
 * written in (`boot` in its mark): replay in that boot (a crash of the gateway: the page cache kept the
 * bytes) checks the mark; in another it cannot tell, and sets the spool aside. Once the group commit (or
 * an fsync) made the spool durable, the record is written again without `boot`.
 */
import type { JournalEntry } from './journal-entry.js';

export class UnsyncedMarks {
  /** By id: the entry as its record with `boot` was written. */
  private readonly waiting = new Map<string, JournalEntry>();

  constructor(private readonly bootId: string) {}

  /**
   * The entry as its record is to be written: a mark says this boot while the spool is not durable
   * (`spoolDurable` false), and is followed until it is; any other entry as it is.
   */
  recordOf(entry: JournalEntry, spoolDurable: boolean): JournalEntry {
    if (!entry.spoolMark) {
      this.waiting.delete(entry.id);
      return entry;
    }
    const { boot: _boot, ...mark } = entry.spoolMark;
    if (spoolDurable) {
      this.waiting.delete(entry.id);
      return { ...entry, spoolMark: mark };
    }
    const written = { ...entry, spoolMark: { ...mark, boot: this.bootId } };
    this.waiting.set(entry.id, written);
    return written;
  }

  /**
   * The spools of `ids` are durable now: the entries to write again without `boot` (those whose last
   * record, `last(id)`, is still the one written with it), forgotten here.
   */
  durable(ids: Iterable<string>, last: (id: string) => JournalEntry | undefined): JournalEntry[] {
    const out: JournalEntry[] = [];
    for (const id of ids) {
      const e = this.waiting.get(id);
      if (!e) continue;
      this.waiting.delete(id);
      if (last(id) !== e) continue;
      const { boot: _boot, ...mark } = e.spoolMark!;
      out.push({ ...e, spoolMark: mark });
    }
    return out;
  }

  /** A record read back at start-up: followed when it was written in this boot before its spool was durable. */
  follow(entry: JournalEntry): boolean {
    if (entry.spoolMark?.boot !== this.bootId) return false;
    this.waiting.set(entry.id, entry);
    return true;
  }

  /** The entry went (uploaded, superseded): nothing to write again. */
  forget(id: string): void {
    this.waiting.delete(id);
  }
}
