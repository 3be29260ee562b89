/**
 * WriteBackReplay: the journal of a previous run replayed at start — each path's newest acknowledged
 * version queued again, the entries of libraries not served kept until one is.
 */
import { LocalVersion } from './local-version.js';
import { orderOf, type JournalEntry } from './journal-entry.js';
import { spoolMatches, validSpoolMark, verifiableBy } from './spool-verification.js';
import { folderEntry, keyOf } from './slots.js';
import { WriteBackLease } from './write-back-lease.js';

export abstract class WriteBackReplay extends WriteBackLease {
  /** Deletes and folders of a library waiting for the service (WriteBackFolders). */
  protected abstract performDeletes(library: string): Promise<void>;
  protected abstract makeFolders(library: string): Promise<void>;

  /**
   * Journal entries of a previous run, queued again: of several for one path, the newest acknowledged
   * wins and the others go. Entries of libraries not served are kept (stranded) until one is added.
   */
  async replay(served: (library: string) => boolean): Promise<void> {
    const entries = await this.journal.entries();
    let queued = 0;
    const newest = new Map<string, JournalEntry>();
    for (const e of entries) {
      this.lastSeq = Math.max(this.lastSeq, orderOf(e));
      newest.set(keyOf(e.library, e.fullpath), e); // sorted oldest first: the last one stays
    }
    for (const e of entries) {
      // A gateway-only file's bytes in the journal (a close answered just before a crash): never the service's.
      if (e.kind !== 'folder' && e.kind !== 'delete' && this.opts.host.gatewayOnly?.(e.library, e.fullpath)) {
        this.opts.logger.info({ library: e.library, path: e.fullpath }, 'journal replay: a file kept on the gateway only (an Office lock file): dropped');
        await this.journal.remove(e.id);
        continue;
      }
      if (newest.get(keyOf(e.library, e.fullpath)) !== e) {
        this.opts.logger.info({ library: e.library, path: e.fullpath }, 'journal replay: an older acknowledged version superseded by a newer one, dropped');
        await this.journal.remove(e.id);
        continue;
      }
      if (!served(e.library)) {
        this.opts.logger.error({ library: e.library, path: e.fullpath }, 'journal entry for a library that is not configured: kept, not uploaded');
        this.stranded.push(e);
        continue;
      }
      if (await this.resume(e)) queued++;
    }
    // One line for a person, however many: each file's is at debug level.
    if (queued > 0) this.opts.logger.info({ files: queued }, `journal replay: ${queued} file(s) from the last run queued for upload again`);
  }

  /** Uploads what was kept for a library that is now served. */
  async resumeLibrary(library: string): Promise<number> {
    const kept = this.stranded.filter((e) => e.library === library);
    this.stranded.splice(0, this.stranded.length, ...this.stranded.filter((e) => e.library !== library));
    for (const e of kept) await this.resume(e);
    return kept.length;
  }

  /** Takes entry `e` up again; true when a file's upload was queued. */
  protected async resume(e: JournalEntry): Promise<boolean> {
    if (e.kind === 'delete') {
      // Its readers went with the previous run: the delete happens now (or when the service is back).
      this.pendingDeletes.set(keyOf(e.library, e.fullpath), { id: e.id, library: e.library, fullpath: e.fullpath, objectId: e.objectId ?? '', ready: true, contentHash: typeof e.replaces?.[0] === 'string' ? e.replaces[0] : undefined });
      void this.performDeletes(e.library);
      return false;
    }
    if (e.kind === 'folder') {
      this.pendingFolders.set(keyOf(e.library, e.fullpath), { id: e.id, library: e.library, entry: folderEntry(e.id, e.fullpath, e.mtimeMs) });
      void this.makeFolders(e.library);
      return false;
    }
    const v = new LocalVersion(e.id, this.journal.spoolPath(e.id), e.library, e.fullpath, undefined, { baseSize: 0, mtimeMs: e.mtimeMs, clock: this.clock });
    try {
      await v.loadSize();
    } catch {
      this.opts.logger.error({ library: e.library, path: e.fullpath }, 'journal entry without its spool file: dropped');
      await this.journal.remove(e.id);
      return false;
    }
    const by = verifiableBy(e);
    if (by !== undefined && !(await spoolMatches(this.opts.hasher, v.spoolPath, e))) {
      // Not the version its record names: its bytes never reached the disk (a power loss inside the group
      // commit's window), or they changed since its record (the kernel writing a spool in place). Never
      // uploaded as that version; its bytes are set aside for a person, not lost.
      const kept = await this.journal.setAside(e).catch(() => undefined);
      const what = by === 'sha1' ? 'size or SHA-1' : 'size or mark, or its bytes were not durable when the machine restarted';
      this.opts.logger.error({ library: e.library, path: e.fullpath, journaled: e.size, kept }, `journal replay: the spool differs from its record (${what}): not uploaded; its bytes are kept aside`);
      return false;
    } else if (v.size !== e.size && !e.open) {
      this.opts.logger.warn({ library: e.library, path: e.fullpath, size: v.size, journaled: e.size }, 'journal replay: spool size differs from its entry');
    }
    v.operator = e.operator;
    v.replaces = Array.isArray(e.replaces) && e.replaces.every((h) => typeof h === 'string') ? e.replaces : undefined;
    v.generation = 1;
    // The last run may have sent it before it stopped (its answer lost with it): a new file looks first.
    v.commitSent = true;
    // Sealed by its spool's mark (a file the kernel wrote): a record written of it again names the same.
    const mark = by === 'mark' ? validSpoolMark(e.spoolMark) : undefined;
    if (mark) v.sealedByMark(mark);
    v.sealed = true;
    v.state = 'journaled';
    v.seq = orderOf(e);
    const slot = this.slotFor(e.library, e.fullpath);
    slot.acked = v;
    slot.current = v;
    this.opts.logger.debug({ library: e.library, path: e.fullpath, size: v.size }, 'journal replay: upload queued again');
    this.schedule(slot);
    return true;
  }
}
