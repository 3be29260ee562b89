/**
 * WriteBackLease: the write-back's side of the engine lease (engine-lease.ts; the namespace's side is
 * namespace-lease.ts): what the write-back hands the FUSE engine (the lessee): the journal it writes its
 * answered closes' records to, files it created and closed before the Vfs saw them, and versions whose
 * spool the kernel writes itself (passthrough).
 */
import { statSync } from 'node:fs';
import { LocalVersion } from './local-version.js';
import type { JournalEntry } from './journal-entry.js';
import { closeRecordEntry, decodeCloseRecord } from './engine-close-record.js';
import type { EngineClose, PassthroughSpool, SideJournal } from '../engine-lease.js';
import { installedSince, keyOf, type WriteSession } from './slots.js';
import { WriteBackSeals } from './seals.js';


export abstract class WriteBackLease extends WriteBackSeals {
  /**
   * The journal, for a front end that answers a new small file's close once it has written the file's
   * record itself (EngineLease.sideJournal); undefined with durability "close" (every close waits for its fsync).
   */
  sideJournal(): SideJournal | undefined {
    return this.syncOnClose || this.closed ? undefined : this.journal;
  }

  /**
   * New files a front end created, had written and closed by itself (EngineLease.createClosed): each version is
   * installed closed at its path, sealed as its record says, journaled with a put line written from the
   * record (see `journalVersion` with `closed`), and queued for upload after the write-back delay. The records
   * of all of them go to the log in one write. For each, true once made; false, with nothing changed for
   * it, when its path has a local version or session, its record is not a put of its id at its path, or
   * its spool does not show the size and time the record was made from. A record the journal cannot
   * write a line of (a full disk) stays the version's record in its side log (journalPut).
   */
  async createClosed(files: readonly { library: string; fullpath: string; id: string; closed: EngineClose }[]): Promise<boolean[]> {
    const made = files.map((f) => this.closedVersionOf(f.library, f.fullpath, f.id, f.closed));
    // Issued together, the appends go out in one write. One the journal cannot write (a full disk) leaves
    // the version held by its record, in the side log already (journalPut).
    await Promise.all(made.map((m) => m && this.journalPut(m.entry, { spoolSynced: false, sync: false, inline: m.data }, () => m.data)));
    const delayMs = this.opts.upload?.delayMs ?? 0;
    const out: boolean[] = [];
    const superseded: LocalVersion[] = [];
    // Nothing awaited from here to the end of the installs: each slot changes in one step.
    for (const m of made) {
      if (!m) {
        out.push(false);
        continue;
      }
      const v = m.v;
      const slot = this.slotForNew(v.library, v.fullpath);
      if (slot.current || slot.acked || slot.session) {
        // Made meanwhile through another front end: that one is newer; this record is superseded at once.
        superseded.push(v);
        out.push(false);
        continue;
      }
      v.state = 'journaled';
      if (delayMs > 0) v.holdUntilMs = this.clock.now() + delayMs;
      slot.acked = v;
      slot.current = v;
      this.overtake(slot, v);
      this.index(slot);
      this.schedule(slot);
      out.push(true);
    }
    for (const v of superseded) await this.journal.remove(v.id, { keepSpool: true, durable: false });
    return out;
  }

  /**
   * The closed version `closed` makes of a new file (createClosed), sealed as its record says, with the
   * record's entry and bytes (the journal writes its own line from them); undefined when it cannot be made.
   */
  protected closedVersionOf(library: string, fullpath: string, id: string, closed: EngineClose): { v: LocalVersion; entry: JournalEntry; data: Buffer } | undefined {
    const record = decodeCloseRecord(closed.record);
    const entry = record && closeRecordEntry(record);
    if (!record || !entry || entry.id !== id || entry.library !== library || entry.fullpath !== fullpath || !this.journal.freshId(id)) return undefined;
    const existing = this.slots.get(keyOf(library, fullpath));
    if (existing && (existing.current || existing.acked || existing.session)) return undefined;
    const spool = this.journal.spoolPath(id);
    // A spool just written, on local disk: looked at on the spot, as a live spool's fstat is.
    let st;
    try {
      st = statSync(spool, { bigint: true });
    } catch {
      return undefined;
    }
    if (st.size !== BigInt(entry.size) || st.mtimeNs !== closed.spoolMtimeNs) return undefined;
    const v = LocalVersion.closedSpool(id, spool, library, fullpath, { size: entry.size, mtimeMs: entry.mtimeMs, sha1: entry.sha1! }, this.clock);
    v.seq = this.seqOf(entry);
    return { v, entry, data: record.data };
  }

  /** The kernel is done with `v`'s spool (LeasedHandle.passthrough): a change it made after the last close is journaled, then the upload may go. */
  protected passthroughEnded(s: WriteSession, v: LocalVersion): void {
    v.passthroughEnd();
    // Replaced since its seal: the writers' release acknowledges the kernel's bytes after the replace
    // (persist); a line written here would carry the older place in the order.
    const due = v.liveChanged && v.state !== 'writing' && !v.superseded && !v.deleted && !installedSince(s.slot, v);
    const written = due ? this.rejournal(v, { sync: this.syncOnClose }) : Promise.resolve();
    const settled = written.then(() => this.schedule(s.slot), (err: unknown) => this.opts.logger.error({ path: v.fullpath, err: String(err) }, 'write-back: journaling a file the kernel changed after its close failed'));
    if (due) s.handOverEnded = settled;
  }

  /** See LeasedHandle.passthrough (`adopt`: LeasedHandle.adoptSpool): `s`'s version handed to the kernel. */
  async passthrough(s: WriteSession, opts: { adopt?: boolean } = {}): Promise<PassthroughSpool | undefined> {
    const v = s.version;
    const fd = !v.mutable || s.writers !== 1 || s.deleted || s.cloning ? undefined : await (opts.adopt ? v.adoptSpool() : v.passthroughBegin());
    if (fd === undefined) {
      if (opts.adopt) await this.disownLentSpool(s);
      return undefined;
    }
    if (s.version !== v || s.deleted) {
      v.passthroughEnd();
      return undefined;
    }
    // What the kernel writes from here is the writers' and unflushed (persist); what the spool holds now
    // is not, unless adopted (a change: no generation matches) or written before and never flushed
    // (s.unflushed).
    if (s.flushedLive?.version !== v) s.flushedLive = { version: v, generation: opts.adopt ? -1 : v.generation };
    // The path shows what the kernel writes, as it shows the writers' own changes: this version from now
    // on (the service's bytes until the kernel writes), unless a replace came since their last change.
    if (!s.replaced && s.slot.current !== v) {
      s.slot.current = v;
      this.index(s.slot);
    }
    let ended = false;
    return {
      fd,
      end: () => {
        if (ended) return;
        ended = true;
        this.passthroughEnded(s, v);
      },
    };
  }

  /**
   * `s`'s version was made under the id of a spool a front end made (LeaseOpenFlags.journalId) and will not
   * take that spool over: another writer joined the new file first, or the takeover was refused. The
   * session moves to an empty version of an id of its own, so the front end's spool keeps one writer (the
   * kernel) and the file's bytes have a spool of their own (the front end writes its spool's bytes into
   * the file, see LeasedHandle.adoptSpool).
   */
  async disownLentSpool(s: WriteSession): Promise<void> {
    const lentStill = (v: LocalVersion): boolean => v.lent && v.mutable && v.size === 0;
    const from = s.version;
    if (!lentStill(from)) return;
    const next = this.newVersion(from.library, from.fullpath, from.base);
    next.unsent = from.unsent;
    next.operator = from.operator;
    next.replaces = from.replaces;
    next.ctimeMs = from.ctimeMs;
    await next.startEmpty();
    next.touch();
    // No await from the check to the swap: the session moves to its own version in one step.
    if (s.version !== from || !lentStill(from)) {
      await this.dropIfUnused(next);
      return;
    }
    next.pins++;
    s.version = next;
    if (!s.deleted) {
      s.slot.current = next;
      this.index(s.slot);
    }
    await this.unpin(from);
  }
}
