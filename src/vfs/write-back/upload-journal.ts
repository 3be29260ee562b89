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
 *   replay sets aside an entry whose spool does not match it (never a corrupt version; see setAside).
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
 * Side logs (`closes.<id>.log`): the FUSE engine appends records of its own format (engine-close-record.ts,
 * the one codec of them) to logs of its own: it answers a small file's close once the file's record is
 * in such a log, before the Vfs has the file (see SideJournal). The journal never copies those bytes: it
 * writes put lines of its own from what it decodes. Replay reads side logs before the journal's own log,
 * so the journal's own lines about an id (its own put of the same version, a rename, the removal after
 * the upload) supersede the side record. Once every record of a side log is settled (the journal has its
 * own lines for it, or a removal), the side log goes, at a compaction.
 */
import { mkdir, open, readdir, rename, rm, writeFile, type FileHandle } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { SideJournal, SideLogWriter } from '../engine-lease.js';
import { closeRecordEntry, decodeCloseRecord } from './engine-close-record.js';
import { INLINE_MAX_BYTES, JOURNAL_ID_RE, orderOf, type JournalEntry } from './journal-entry.js';
import { lineOf, putLineOf } from './journal-lines.js';
import { LEGACY_ENTRIES, LOG, keepsCarrierLine, readJournalFolder, restoreSpool, sideLogsIn, type LiveEntry } from './journal-recovery.js';
import { JournalLog } from './journal-log.js';
import { SpoolPool } from './spool-pool.js';
import { currentBootId } from './spool-verification.js';
import { UnsyncedMarks } from './unsynced-marks.js';
import { fsyncFile, fsyncFolderIfSupported, removeFileIfPresent } from '../../shared/atomic-file.js';
import { systemClock, type Clock, type ClockTimer } from '../clock.js';

const ID_POOL_BYTES = 4096;
/** Spools replay found different from their records (see setAside). */
const UNVERIFIED = 'unverified';
/** The log is rewritten once it holds this many records more than live entries, and twice as many (compactionDue). */
const COMPACT_DEAD_RECORDS = 2000;

export class UploadJournal implements SideJournal {
  readonly spoolDir: string;
  private readonly entriesDir: string;
  private readonly logPath: string;
  /** Random bytes that new ids are cut from (one call to the random source for 512 ids). */
  private idPool = Buffer.alloc(0);
  private idPoolAt = ID_POOL_BYTES;
  /** Emptied spools kept for reuse. */
  private readonly pool: SpoolPool;
  /** The append-only log file. */
  private readonly log: JournalLog;
  /** The spool folder, kept open for its fsyncs. */
  private spoolFolder: Promise<FileHandle> | undefined;
  private closed = false;
  /** Entries whose last record is in the log (for `sync`, the spool fsyncs and compaction). */
  private readonly live = new Map<string, LiveEntry>();
  /** Spool files not in their record, written since their last fsync; fsynced by the next group commit. */
  private readonly unsyncedSpools = new Set<string>();
  /** Records naming a spool by its mark while its bytes are not durable yet. */
  private readonly marks: UnsyncedMarks;
  private groupTimer: ClockTimer | undefined;
  /** The time of the group commit's wait (and of the log's and the pool's). */
  private readonly clock: Clock;
  /** The writer of side logs, and the side log it writes now. */
  private sideWriter: SideLogWriter | undefined;
  private sideLog: string | undefined;
  /** Ids of side records settled since the writer's last switch (their side log stays until the next one). */
  private readonly settledSinceSwitch = new Set<string>();
  /** Checks of side records kept in the log as they are (lines a rewrite keeps). */
  private readonly keptLines = new Set<string>();
  /**
   * Versions applied from a side record whose own put line the journal could not write (a full disk):
   * the side record stays their record, and its side log stays, until the line is written (holdSideRecord).
   */
  private readonly heldBySide = new Map<string, { entry: JournalEntry; data: Buffer }>();
  /** A compaction that first switches the side writer to a new log is under way. */
  private sideCompaction: Promise<void> | undefined;
  /** The group commit under way (a sync waits for it, then runs its own). */
  private committing: Promise<void> = Promise.resolve();

  /**
   * `groupCommitMs`: the longest a put without sync waits for its fsync. `slowAppendMs`: an append on the
   * calling thread slower than this sends the next ones through the thread pool for a while (journal-log.ts).
   * `clock`: the time of the group commit's wait. Default the real one.
   */
  constructor(readonly dir: string, private readonly groupCommitMs = 1000, opts: { slowAppendMs?: number; bootId?: string; clock?: Clock } = {}) {
    this.clock = opts.clock ?? systemClock;
    this.marks = new UnsyncedMarks(opts.bootId ?? currentBootId());
    this.spoolDir = join(dir, 'spool');
    this.pool = new SpoolPool(this.spoolDir, this.clock);
    this.entriesDir = join(dir, LEGACY_ENTRIES);
    this.logPath = join(dir, LOG);
    this.log = new JournalLog(this.logPath, { slowAppendMs: opts.slowAppendMs, afterAppends: () => this.afterAppends(), clock: this.clock });
  }

  async init(): Promise<void> {
    await mkdir(this.spoolDir, { recursive: true, mode: 0o700 });
  }

  /**
   * From now on spools nobody needs are kept, emptied, in a pool (`poolDir`, spool-pool.ts) filled in the
   * background: for a front end that makes spools itself, many a second (the FUSE engine with passthrough).
   */
  startSpoolPool(): Promise<void> {
    return this.pool.start();
  }

  /**
   * The folder of empty spool files kept for reuse: a front end that makes spools itself takes one from
   * there (a rename into the spool folder) before it makes a new file.
   */
  get poolDir(): string {
    return this.pool.dir;
  }

  /** A fresh id for a spool file (not journaled until `put`): 8 random bytes, taken from a pool. */
  newId(): string {
    if (this.idPoolAt >= ID_POOL_BYTES) {
      this.idPool = randomBytes(ID_POOL_BYTES);
      this.idPoolAt = 0;
    }
    const id = this.idPool.toString('hex', this.idPoolAt, this.idPoolAt + 8);
    this.idPoolAt += 8;
    return id;
  }

  /** Whether `id` may name a new entry: 16 hex digits, no entry of it in the log. */
  freshId(id: string): boolean {
    return JOURNAL_ID_RE.test(id) && !this.live.has(id);
  }

  spoolPath(id: string): string {
    if (!JOURNAL_ID_RE.test(id)) throw new TypeError(`journal id: expected 16 hex digits, got '${id}'`);
    return join(this.spoolDir, id);
  }

  /**
   * Writes the entry. With `sync` (the default) the spool's data (unless `inline` carries it), the record
   * and the folder entry are all durable before it resolves; `spoolSynced`: the caller has just fsynced the
   * spool with nothing written since (it is not done again). Without, they are left to the next group
   * commit. `inline`: the spool's whole content (at most INLINE_MAX_BYTES), written into the record.
   */
  async put(entry: JournalEntry, opts: { spoolSynced?: boolean; sync?: boolean; inline?: Buffer } = {}): Promise<void> {
    const inline = opts.inline !== undefined && opts.inline.length === entry.size && entry.size <= INLINE_MAX_BYTES ? opts.inline : undefined;
    const spool = this.spoolPath(entry.id);
    if (opts.sync === false) {
      if (!inline && !opts.spoolSynced) this.unsyncedSpools.add(spool);
      await this.appendPut(this.marks.recordOf(entry, !this.unsyncedSpools.has(spool)), inline);
      this.scheduleGroupCommit();
      return;
    }
    if (!inline) {
      if (!opts.spoolSynced) await fsyncFile(spool);
      this.unsyncedSpools.delete(spool);
      await this.syncSpoolFolder();
    }
    await this.appendPut(this.marks.recordOf(entry, true), inline);
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
      await this.markedDurable([id]);
    }
    const live = this.live.get(id);
    if (live && live.record > this.log.synced) await this.syncLog();
    if (this.heldBySide.has(id)) await this.syncSideLogs();
  }

  /** Runs the group commit now: everything put without sync is durable when this resolves. */
  async syncAll(): Promise<void> {
    this.groupTimer?.cancel();
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
    if (this.log.written > this.log.synced) out.push(this.logPath);
    return out;
  }

  /** The log file, and how many of its bytes are durable (a power loss now keeps at least those). */
  durableLog(): { path: string; bytes: number } {
    return { path: this.logPath, bytes: this.log.durableBytes };
  }

  /** Rewrites an entry's metadata (a rename, a new time) of a spool already journaled. */
  async rewrite(entry: JournalEntry): Promise<void> {
    const held = this.heldBySide.get(entry.id);
    if (held) {
      // Its bytes are only in its side record, which names the old place: the new line carries them.
      await this.appendPut(this.marks.recordOf(entry, true), held.data);
      this.heldBySide.delete(entry.id);
      await this.syncLog();
      return;
    }
    const before = this.live.get(entry.id);
    const wasDurable = !before || before.record <= this.log.synced;
    // The content is the same (a journaled version is immutable): its bytes stay where they were safe.
    await this.appendPut(this.marks.recordOf(entry, !this.unsyncedSpools.has(this.spoolPath(entry.id))), undefined, before);
    if (wasDurable) await this.syncLog();
  }

  /**
   * Forgets the entry (the service has the data, or a newer version replaced it); the spool is removed
   * unless `keepSpool`. Durable before it resolves unless `durable: false` (a superseded version: replay
   * keeps the newest version of a path anyway).
   */
  async remove(id: string, opts: { keepSpool?: boolean; durable?: boolean } = {}): Promise<void> {
    if (!opts.keepSpool) this.unsyncedSpools.delete(this.spoolPath(id));
    // Held by its side record: the removal line below supersedes that record at replay.
    this.heldBySide.delete(id);
    this.marks.forget(id);
    if (this.live.has(id)) {
      this.live.delete(id);
      await this.append(Buffer.from(lineOf({ rm: id }).text));
      if (opts.durable !== false) await this.syncLog();
      else this.scheduleGroupCommit();
    }
    if (!opts.keepSpool) await this.pool.recycle(this.spoolPath(id));
  }

  /**
   * A version replay found different from its record (another size or SHA-1): never uploaded as that
   * version. Its spool moves to `unverified/<id>`, its record beside it (`<id>.json`), for a person to
   * look at; its entry goes. Answers where its bytes are.
   */
  async setAside(entry: JournalEntry): Promise<string> {
    const dir = join(this.dir, UNVERIFIED);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const kept = join(dir, entry.id);
    await writeFile(`${kept}.json`, `${JSON.stringify(entry)}\n`, { mode: 0o600 });
    await rename(this.spoolPath(entry.id), kept);
    await fsyncFolderIfSupported(dir);
    await this.remove(entry.id, { keepSpool: true });
    return kept;
  }

  dropSpool(id: string): Promise<void> {
    return removeFileIfPresent(this.spoolPath(id));
  }

  /** Removes a spool file that was never journaled (or whose entry is gone). */
  async discardSpool(id: string): Promise<void> {
    this.unsyncedSpools.delete(this.spoolPath(id));
    await this.pool.recycle(this.spoolPath(id));
  }

  /** Runs the last group commit and closes the log and the folder; later calls open them each time. */
  async close(): Promise<void> {
    await this.syncAll().catch(() => undefined);
    this.closed = true;
    // A version still held by its side record keeps it (and its side log) for the next start.
    this.groupTimer?.cancel();
    this.groupTimer = undefined;
    await this.pool.close();
    await this.log.close();
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
    const { found, legacy, sides, sources, carried } = await readJournalFolder(this.dir);
    // A small file's spool lost to a power loss is written again from its record.
    for (const [id, data] of carried) await restoreSpool(this.spoolPath(id), data, found.get(id)!.entry.size);
    for (const name of await readdir(this.spoolDir).catch(() => [] as string[])) {
      if (JOURNAL_ID_RE.test(name) && !found.has(name)) await rm(join(this.spoolDir, name), { force: true });
    }
    // A rewrite of the log cut off by a crash.
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      if (name.startsWith(`${LOG}.`) && name.endsWith('.tmp')) await rm(join(this.dir, name), { force: true });
    }
    await this.onLog(async () => {
      this.live.clear();
      for (const [id, l] of found) {
        this.live.set(id, l);
        // Marked in this boot before its spool was durable (a crash of the gateway): made durable by the next group commit.
        if (l.entry.spoolMark?.boot !== undefined && this.marks.follow(l.entry)) {
          this.unsyncedSpools.add(this.spoolPath(id));
          this.scheduleGroupCommit();
        }
      }
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

  // ---- the log -----------------------------------------------------------------------------------------

  /** `before`: the entry's live record this one rewrites (its bytes stay in the line that carried them). */
  private async appendPut(entry: JournalEntry, inline: Buffer | undefined, before?: LiveEntry): Promise<void> {
    const { line, check } = putLineOf(entry, inline);
    const record = await this.append(line);
    const lines = new Set([check]);
    const carries = !!inline;
    const keeps = keepsCarrierLine(entry, carries, before);
    if (keeps && before) for (const c of before.lines) lines.add(c);
    this.live.set(entry.id, { entry, inline: carries || keeps, record, lines });
  }

  /** Appends one line; resolves with the count of records written once it is in the log (page cache). */
  private append(line: Buffer): Promise<number> {
    return this.log.append(line);
  }

  /** After each batch of appends, on the log's chain: a compaction when the log holds mostly dead records. */
  private async afterAppends(): Promise<void> {
    if (this.compactionDue() && !this.closed) {
      // With a side writer, it first moves to a new side log (outside this chain: the records it waits
      // for are settled by appends that queue behind it).
      if (this.sideWriter) this.sideCompaction ??= this.compactWithSideWriter().finally(() => { this.sideCompaction = undefined; });
      else await this.compactDroppingSideLogs().catch(() => undefined);
    }
  }

  // ---- side logs -------------------------------------------------------------------------------------

  async attachSideWriter(writer: SideLogWriter): Promise<void> {
    if (this.sideWriter) throw new Error('the journal has a side writer already');
    if (this.closed) throw new Error('the journal is closed');
    const path = this.newSideLogPath();
    this.sideWriter = writer;
    this.settledSinceSwitch.clear();
    try {
      await writer.switchTo(path);
    } catch (err) {
      this.sideWriter = undefined;
      throw err;
    }
    this.sideLog = path;
  }

  spoolFolderPath(): string {
    return this.spoolDir;
  }

  detachSideWriter(writer: SideLogWriter): void {
    if (this.sideWriter !== writer) return;
    // Its logs stay until the next compaction (or start): every record in them is settled.
    this.sideWriter = undefined;
    this.sideLog = undefined;
  }

  /** Resolves once every record the side writer wrote so far is settled (flushAll: what was closed is flushed). */
  async sideSettled(): Promise<void> {
    await this.sideWriter?.settle();
  }

  async sideRecordSettled(id: string): Promise<void> {
    // Held by its side record: settled once the journal writes its own line (writeHeld).
    if (this.heldBySide.has(id)) return;
    this.settledSinceSwitch.add(id);
    if (this.live.has(id) || !JOURNAL_ID_RE.test(id)) return;
    // The version went without a line of the journal's own (deleted, superseded, refused): one says so.
    await this.append(Buffer.from(lineOf({ rm: id }).text));
    this.scheduleGroupCommit();
  }

  /** Rewrites of the log (compactions) so far (for tests and figures). */
  get logRewrites(): number {
    return this.log.rewrites;
  }

  /** Appends written on the calling thread, and those sent to the thread pool (for tests and figures). */
  get appendCounts(): { inline: number; pooled: number } {
    return this.log.appendCounts;
  }

  /**
   * The log holds COMPACT_DEAD_RECORDS records more than live entries, and twice as many; and since its
   * last rewrite, as many records came as that rewrite kept (at least COMPACT_DEAD_RECORDS). The last
   * keeps each rewrite's cost (every line kept is read and written again) within twice the records
   * appended since the one before, whatever the entries keep: a file renamed after its close keeps two
   * lines (its bytes and its path), and with only the first two conditions a journal of 2,000 such files
   * would be rewritten at every append.
   */
  private compactionDue(): boolean {
    const { records, keptRecords } = this.log;
    return records > this.live.size + COMPACT_DEAD_RECORDS && records > 2 * this.live.size &&
      records - keptRecords > Math.max(COMPACT_DEAD_RECORDS, keptRecords);
  }

  /**
   * Keeps an engine's close record that was not applied for the next start: the journal's own put line of
   * what it says (its bytes in the line), kept by every rewrite until replay. A record that does not
   * decode (never the case for one the engine handed over) keeps nothing.
   */
  async keepSideRecord(record: Buffer): Promise<void> {
    const r = decodeCloseRecord(record);
    if (!r) return;
    const { line, check } = putLineOf(closeRecordEntry(r), r.data);
    await this.append(line);
    this.keptLines.add(check);
    this.scheduleGroupCommit();
  }

  /**
   * A version applied from a side writer's close record (in a side log of the writer's now) whose put
   * line the journal could not write (a full disk): the record stays the version's record, its side log
   * kept, and the journal writes the line at a later group commit, when the disk has room again; until
   * then each group commit (and a sync of it) fsyncs the side logs instead. Needs no disk space: what the
   * front end answered stays saved, and shown, even on a full disk.
   */
  holdSideRecord(entry: JournalEntry, data: Buffer): void {
    this.heldBySide.set(entry.id, { entry, data });
    this.live.set(entry.id, { entry, inline: true, record: 0, lines: new Set() });
    this.scheduleGroupCommit();
  }

  /** Versions held by their side records (holdSideRecord), for tests and status. */
  get heldBySideRecords(): number {
    return this.heldBySide.size;
  }

  /** fsyncs the side logs (the records of versions held by them): an fsync needs no new disk space. */
  private async syncSideLogs(): Promise<void> {
    await Promise.all((await sideLogsIn(this.dir)).map((p) => fsyncFile(p).catch(ignoreMissing)));
  }

  /** Writes the put lines of the versions held by their side records; answers whether none is held any more. */
  private async writeHeld(): Promise<boolean> {
    for (const [id, held] of [...this.heldBySide]) {
      const { line, check } = putLineOf(this.marks.recordOf(held.entry, true), held.data);
      let record: number;
      try {
        record = await this.append(line);
      } catch {
        continue;
      }
      // Removed or rewritten meanwhile: that line came after this one and decides.
      if (this.heldBySide.get(id) !== held) continue;
      this.heldBySide.delete(id);
      this.live.set(id, { entry: held.entry, inline: true, record, lines: new Set([check]) });
      this.settledSinceSwitch.add(id);
    }
    return this.heldBySide.size === 0;
  }

  /**
   * What an engine's close record put, for a front end that must apply it itself (the file it closed was
   * refused): the file's place and bytes; undefined for bytes that are not one whole close record.
   */
  sideRecordContent(record: Buffer): { library: string; fullpath: string; data: Buffer } | undefined {
    const r = decodeCloseRecord(record);
    return r && { library: r.library, fullpath: r.fullpath, data: r.data };
  }

  private newSideLogPath(): string {
    return join(this.dir, `closes.${this.newId()}.log`);
  }

  /** Moves the side writer to a new log, then compacts, the earlier side logs dropped (all settled). */
  private async compactWithSideWriter(): Promise<void> {
    const writer = this.sideWriter;
    if (writer) {
      const path = this.newSideLogPath();
      this.settledSinceSwitch.clear();
      try {
        await writer.switchTo(path);
      } catch {
        return; // the writer is going (unmount): the next compaction does it
      }
      if (this.sideWriter === writer) this.sideLog = path;
    }
    await this.onLog(() => this.compactDroppingSideLogs()).catch(() => undefined);
  }

  /**
   * Compacts with the side logs other than the one being written removed first: their records are all
   * settled, so the journal's own log has all that replay needs of them. Removed before the new log is in
   * place, so that no state ever has a side record without the journal's lines that supersede it.
   */
  private async compactDroppingSideLogs(): Promise<void> {
    // A version held by its side record: its side log stays, so no rewrite until its line is written.
    if (this.heldBySide.size > 0) return;
    const old = (await sideLogsIn(this.dir)).filter((p) => p !== this.sideLog);
    for (const side of old) await removeFileIfPresent(side);
    if (old.length > 0) await fsyncFolderIfSupported(this.dir);
    // Records of the side log being written that were settled and are gone keep their removal lines.
    const gone = [...this.settledSinceSwitch].filter((id) => !this.live.has(id));
    await this.compact([], [this.logPath], this.sideLog ? gone : []);
  }

  private onLog<T>(fn: () => Promise<T>): Promise<T> {
    return this.log.exclusive(fn);
  }

  private drained(): Promise<void> {
    return this.log.drained();
  }

  private syncLog(): Promise<void> {
    return this.log.sync();
  }

  /**
   * Rewrites the log (on its chain) with only the lines live entries need (each one's last line, and the
   * one carrying its bytes) and the side records kept. `extra`: entries with no line yet (of the earlier
   * layout), written as new lines; `removed`: ids whose removal lines must stay.
   */
  private async compact(extra: JournalEntry[] = [], sources: string[] = [this.logPath], removed: string[] = []): Promise<void> {
    const more: string[] = [];
    for (const e of extra) {
      const { text, check } = lineOf({ put: e });
      more.push(text);
      const l = this.live.get(e.id);
      if (l) l.lines = new Set([check]);
    }
    for (const id of removed) more.push(lineOf({ rm: id }).text);
    await this.log.rewrite(sources, (rec, check) => !!rec.put && (!!this.live.get(rec.put.id)?.lines.has(check) || this.keptLines.has(check)), more);
    for (const l of this.live.values()) l.record = this.log.written;
  }

  // ---- group commit --------------------------------------------------------------------------------------

  private scheduleGroupCommit(): void {
    if (this.groupTimer || this.closed) return;
    this.groupTimer = this.clock.after(this.groupCommitMs, () => {
      this.groupTimer = undefined;
      const run = this.committing.then(() => this.groupCommit());
      this.committing = run.catch(() => undefined);
    });
  }

  /** fsyncs the spools written since the last group commit (not those carried in records), then the log. */
  private async groupCommit(): Promise<void> {
    // Still held: their side records made durable instead, and tried again at the next group commit.
    if (this.heldBySide.size > 0 && !(await this.writeHeld())) {
      await this.syncSideLogs();
      this.scheduleGroupCommit();
    }
    const spools = [...this.unsyncedSpools];
    this.unsyncedSpools.clear();
    if (spools.length > 0) {
      // A spool removed since (its upload confirmed) needs nothing.
      await Promise.all(spools.map((f) => fsyncFile(f).catch(ignoreMissing)));
      await this.syncSpoolFolder();
      await this.markedDurable(spools.map((f) => basename(f)));
    }
    await this.drained();
    await this.syncLog();
  }

  /** Records that named a spool of `ids` by its mark before it was durable: written again, as durable. */
  private async markedDurable(ids: string[]): Promise<void> {
    const again = this.marks.durable(ids, (id) => this.live.get(id)?.entry);
    await Promise.all(again.map((e) => this.appendPut(e, undefined, this.live.get(e.id))));
  }

  private async syncSpoolFolder(): Promise<void> {
    if (this.closed) return fsyncFolderIfSupported(this.spoolDir);
    if (!this.spoolFolder) {
      const opening = open(this.spoolDir, 'r');
      this.spoolFolder = opening;
      opening.catch(() => { if (this.spoolFolder === opening) this.spoolFolder = undefined; });
    }
    const fh = await this.spoolFolder;
    try { await fh.sync(); } catch { /* some file systems refuse fsync on folders */ }
  }
}

function ignoreMissing(err: unknown): void {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
}


