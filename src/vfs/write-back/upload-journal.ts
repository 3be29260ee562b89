/**
 * UploadJournal: the durable record of data an application was told is written but the service has not
 * confirmed yet. An entry is a spool file (the bytes) plus a record in one append-only log; an entry is
 * removed (a removal record) only after the service confirmed the upload. On start-up `entries()` folds
 * the log into what a previous run (or a crash, or kill -9) left, to be uploaded again.
 *
 * Two strengths of `put()`, as a local disk has them:
 * - `sync: true` (fsync, and every put with `durability = "close"`): spool, record and folder durable
 *   before it resolves — safe against power loss.
 * - `sync: false` (close): written to the page cache — safe against a crash of the gateway (kill -9) — and
 *   made durable by the next group commit, at most `groupCommitMs` later, together with every other put of
 *   that window: a `cp -r` of many files pays one fdatasync of the log, not two fsyncs a file. A power loss
 *   inside the window can lose those entries or their bytes; an entry carries its content's SHA-1, and
 *   replay drops an entry whose spool does not match it (never a corrupt version).
 *
 * A close costs one append: the records of everything journaled meanwhile go to the log in one write. A
 * small file's bytes (up to `INLINE_MAX_BYTES`) travel in its record, so its spool never needs an fsync
 * of its own: replay writes the spool again from the record when a power loss took it.
 *
 * Layout under `dir`: `spool/<id>` (content) and `journal.log` (records, one a line: a check of the line,
 * a space, the JSON). A line that does not match its check (torn by a power loss or a failed write) is
 * skipped. The log is rewritten with only the live entries at start-up and whenever it holds mostly
 * removed ones. `entries/<id>.json` (one file an entry, the layout of earlier versions) is read at start-up
 * and moved into the log.
 *
 * Side logs (`closes.<id>.log`): another writer may append put records, in this format, to logs of its
 * own (the FUSE engine answers a small file's close once the file's record is in such a log, before the
 * Vfs has the file; see SideJournal). Replay reads them before the journal's own log, so the journal's
 * own lines about an id (its own put of the same version, a rename, the removal after the upload)
 * supersede the side record. Once every record of a side log is settled (the journal has its own lines
 * for it, or a removal), the side log goes, at a compaction.
 *
 * Its layers, each extending the one before: journal-spools.ts (the state, spools, ids, the pool),
 * journal-log.ts (the log, group commits, compaction), side-logs.ts (other writers' logs), this file
 * (puts, removals, replay's entries); journal-records.ts is the one codec of the records.
 */
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { SideJournal } from '../engine-lease.js';

import { fsyncFile, fsyncFolderIfSupported, removeFileIfPresent } from '../../shared/atomic-file.js';
import { ID_RE, INLINE_MAX_BYTES, lineOf, orderOf, type JournalEntry } from './journal-records.js';
import { LOG, ignoreMissing, restoreSpool, type LiveEntry } from './journal-spools.js';
import { JournalSideLogs } from './side-logs.js';
export { INLINE_MAX_BYTES, orderOf, type JournalEntry } from './journal-records.js';

export class UploadJournal extends JournalSideLogs implements SideJournal {
  async init(): Promise<void> {
    await mkdir(this.spoolDir, { recursive: true, mode: 0o700 });
  }

  /**
   * Writes the entry. With `sync` (the default) the spool's data (unless `inline` carries it), the record
   * and the folder entry are all durable before it resolves; `spoolSynced`: the caller has just fsynced the
   * spool with nothing written since (it is not done again). Without, they are left to the next group
   * commit. `inline`: the spool's whole content (at most INLINE_MAX_BYTES), written into the record.
   */
  async put(entry: JournalEntry, opts: { spoolSynced?: boolean; sync?: boolean; inline?: Buffer; line?: Buffer } = {}): Promise<void> {
    if (opts.line) {
      // A side record taken as the journal's own (see sideRecordEntry): its bytes are in the line.
      await this.appendPut(entry, undefined, undefined, opts.line);
      if (opts.sync === false) this.scheduleGroupCommit();
      else await this.syncLog();
      return;
    }
    const inline = opts.inline !== undefined && opts.inline.length === entry.size && entry.size <= INLINE_MAX_BYTES ? opts.inline : undefined;
    const spool = this.spoolPath(entry.id);
    if (opts.sync === false) {
      await this.appendPut(entry, inline);
      if (!inline && !opts.spoolSynced) this.unsyncedSpools.add(spool);
      this.scheduleGroupCommit();
      return;
    }
    if (!inline) {
      if (!opts.spoolSynced) await fsyncFile(spool);
      this.unsyncedSpools.delete(spool);
      await this.syncSpoolFolder();
    }
    await this.appendPut(entry, inline);
    await this.syncLog();
  }

  /** Writes an entry without a spool (a folder made offline, a deferred delete), durably. */
  async putRecord(entry: JournalEntry & { kind: 'folder' | 'delete' }): Promise<void> {
    await this.appendPut(entry, undefined);
    await this.syncLog();
  }

  /** Makes one entry durable now if a group commit still owes it (an fsync of a file closed before). */
  async sync(id: string): Promise<void> {
    const spool = this.spoolPath(id);
    if (this.unsyncedSpools.delete(spool)) {
      await fsyncFile(spool).catch(ignoreMissing);
      await this.syncSpoolFolder();
    }
    const live = this.live.get(id);
    if (live && live.record > this.synced) await this.syncLog();
  }

  /** Runs the group commit now: everything put without sync is durable when this resolves. */
  async syncAll(): Promise<void> {
    if (this.groupTimer) clearTimeout(this.groupTimer);
    this.groupTimer = undefined;
    const run = this.committing.then(() => this.groupCommit());
    this.committing = run.catch(() => undefined);
    await run;
  }

  /**
   * Files holding something written since its last fsync (what a power loss now could take): spools not
   * carried in their records, and the log while its tail is not durable. For status and tests.
   */
  unsyncedFiles(): string[] {
    const out = [...this.unsyncedSpools];
    if (this.written > this.synced) out.push(this.logPath);
    return out;
  }

  /** The log file, and how many of its bytes are durable (a power loss now keeps at least those). */
  durableLog(): { path: string; bytes: number } {
    return { path: this.logPath, bytes: this.syncedBytes };
  }

  /**
   * Forgets the entry (the service has the data, or a newer version replaced it); the spool is removed
   * unless `keepSpool`. Durable before it resolves unless `durable: false` (a superseded version: replay
   * keeps the newest version of a path anyway).
   */
  async remove(id: string, opts: { keepSpool?: boolean; durable?: boolean } = {}): Promise<void> {
    if (!opts.keepSpool) this.unsyncedSpools.delete(this.spoolPath(id));
    if (this.live.has(id)) {
      this.live.delete(id);
      await this.append(Buffer.from(lineOf({ rm: id }).text));
      if (opts.durable !== false) await this.syncLog();
      else this.scheduleGroupCommit();
    }
    if (!opts.keepSpool) await this.recycle(this.spoolPath(id));
  }

  /** Runs the last group commit and closes the log and the folder; later calls open them each time. */
  async close(): Promise<void> {
    await this.syncAll().catch(() => undefined);
    this.closed = true;
    await this.poolFilling;
    await this.drained();
    const log = this.log;
    this.log = undefined;
    await log?.close().catch(() => undefined);
    const folder = this.spoolFolder;
    this.spoolFolder = undefined;
    await folder?.then((fh) => fh.close(), () => undefined);
  }

  /**
   * Entries left on disk, oldest first; spool files without an entry are removed, a small file's spool
   * lost to a power loss is written again from its record. The log is rewritten with only these.
   */
  async entries(): Promise<JournalEntry[]> {
    await this.drained();
    const found = new Map<string, LiveEntry>();
    const legacy = await this.legacyEntries();
    for (const e of legacy) found.set(e.id, { entry: e, inline: false, record: 0, lines: new Set() });
    // Side logs first: the journal's own lines about an id are newer than its side record.
    const sides = await this.sideLogs();
    const sources = [...sides, this.logPath];
    // The bytes the newest record about an id carries (a later record of an open file without them: none).
    const carried = new Map<string, Buffer>();
    await this.eachLine(sources, async (rec, check) => {
      if (rec.rm !== undefined) {
        found.delete(rec.rm);
        carried.delete(rec.rm);
        return;
      }
      const e = rec.put!;
      const before = found.get(e.id);
      const inline = rec.data !== undefined;
      if (inline) carried.set(e.id, Buffer.from(rec.data!, 'base64'));
      else if (e.open) carried.delete(e.id);
      // A later record of the same entry (a rename, a time) keeps the line that carried its bytes; one of
      // a file still open (an fsync) says its bytes are the spool's now.
      const keeps = !inline && !e.open && !!before?.inline;
      const lines = new Set([check]);
      if (keeps) for (const c of before.lines) lines.add(c);
      found.set(e.id, { entry: e, inline: inline || keeps, record: 0, lines });
    });
    // A small file's spool lost to a power loss is written again from its record.
    for (const [id, data] of carried) await restoreSpool(this.spoolPath(id), data, found.get(id)!.entry.size);
    for (const name of await readdir(this.spoolDir).catch(() => [] as string[])) {
      if (ID_RE.test(name) && !found.has(name)) await rm(join(this.spoolDir, name), { force: true });
    }
    // A rewrite of the log cut off by a crash.
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      if (name.startsWith(`${LOG}.`) && name.endsWith('.tmp')) await rm(join(this.dir, name), { force: true });
    }
    await this.onLog(async () => {
      this.live.clear();
      for (const [id, l] of found) this.live.set(id, l);
      await this.compact(legacy.filter((e) => found.get(e.id)?.lines.size === 0), sources);
      // The new log has every side record still needed: the side logs go after it is in place.
      for (const side of sides) await removeFileIfPresent(side);
      if (sides.length > 0) await fsyncFolderIfSupported(this.dir);
    });
    if (legacy.length > 0 || (await readdir(this.entriesDir).catch(() => undefined))) {
      await rm(this.entriesDir, { recursive: true, force: true });
    }
    return [...found.values()].map((f) => f.entry).sort((a, b) => orderOf(a) - orderOf(b));
  }
}
