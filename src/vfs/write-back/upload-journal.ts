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
import { createReadStream, writeSync } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, truncate, writeFile, type FileHandle } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { basename, join } from 'node:path';
import { hash, randomBytes } from 'node:crypto';
import type { Operator } from '../types.js';
import type { SideJournal, SideLogWriter } from '../engine-lease.js';
import { closeRecordEntry, decodeCloseRecord, readCloseRecords } from './engine-close-record.js';
import { currentBootId, type SpoolMark } from './spool-verification.js';
import { UnsyncedMarks } from './unsynced-marks.js';

import { fsyncFile, fsyncFolderIfSupported, removeFileIfPresent } from '../../shared/atomic-file.js';
export interface JournalEntry {
  id: string;
  /** Library folder name the file belongs to. */
  library: string;
  /** Library-relative path to commit to. */
  fullpath: string;
  /** Bytes in the spool when journaled. */
  size: number;
  /** Local modification time, ms. */
  mtimeMs: number;
  /** When the entry was first written, ms. */
  createdMs: number;
  /** SHA-1 of the spool's content (checked at replay: a power loss may have kept the entry but not its bytes). */
  sha1?: string;
  /**
   * Without `sha1`: the spool's mtime, ctime and inode at the seal of a file the kernel wrote itself
   * (passthrough; hashed at its upload), checked at replay with `size` (spool-verification.ts).
   */
  spoolMark?: SpoolMark;
  /**
   * Written by an fsync while the file was still open for writing: no hash, and the spool may hold more
   * than `size` says (writes after the fsync); replay takes it as it is.
   */
  open?: boolean;
  /**
   * `folder`: a folder made while the library was offline, to be made on the service (no spool).
   * `delete`: a file unlinked while handles still read it, to be removed on the service once they are
   * closed (no spool; `objectId` names the object). Default a file.
   */
  kind?: 'file' | 'folder' | 'delete';
  /** With `delete`: the service's id of the object to remove (a new file at the path is not it). */
  objectId?: string;
  /**
   * Order of acknowledgement across every entry (higher is newer). Of two entries for one path, the higher
   * wins at replay; entries of older runs without it count by `createdMs`.
   */
  seq?: number;
  operator?: Operator;
  /**
   * Content hashes the service may hold at the path for this version to replace it without a conflict
   * (conflicts.ts, ConflictBase): [] for a new file; absent in entries written before bases were recorded.
   */
  replaces?: string[];
}

/** Largest content carried in its record (a small file's spool then needs no fsync of its own). */
export const INLINE_MAX_BYTES = 64 * 1024;

/** One line of the log. */
interface LogRecord {
  put?: JournalEntry;
  /** With `put`: the spool's content, base64 (small files). */
  data?: string;
  rm?: string;
}

/** Where an entry's bytes are safe: in a record (`inline`), or in its spool file. */
interface LiveEntry {
  entry: JournalEntry;
  inline: boolean;
  /** Log records written when its last record was (durable once the log is synced that far). */
  record: number;
  /** The checks of its last line and of its last line carrying its bytes: the lines a rewrite keeps. */
  lines: Set<string>;
}

const ID_RE = /^[0-9a-f]{16}$/;
/** Side logs: `closes.<16 hex digits>.log`. */
const SIDE_LOG_RE = /^closes\.[0-9a-f]{16}\.log$/;

const ID_POOL_BYTES = 4096;
/** The pool of emptied spools (see UploadJournal.recycle): its folder in the spool folder, its files' prefix, its size. */
const POOL = '.pool';
const POOL_PREFIX = 'p';
const POOL_MAX = 4096;
/** A pool that looks full is counted again at most this often (a front end takes from it silently). */
const POOL_RECOUNT_MS = 1000;
const LOG = 'journal.log';
/** Spools replay found different from their records (see setAside). */
const UNVERIFIED = 'unverified';
/** The log is rewritten once it holds this many records more than live entries, and twice as many (compactionDue). */
const COMPACT_DEAD_RECORDS = 2000;
/**
 * Appends of up to this many bytes are written on the calling thread (a write into the page cache, a few
 * microseconds) rather than handed to the thread pool and back, two thread hand-offs on the path of every
 * close. One that takes longer than SLOW_APPEND_MS (the kernel throttling writers of a busy disk) sends the
 * appends of the next APPENDS_OFF_THREAD_MS through the thread pool, so a throttled disk holds the event
 * loop once, not at every close.
 */
const SYNC_APPEND_MAX_BYTES = 64 * 1024;
const SLOW_APPEND_MS = 5;
const APPENDS_OFF_THREAD_MS = 10_000;

export class UploadJournal implements SideJournal {
  readonly spoolDir: string;
  private readonly entriesDir: string;
  private readonly logPath: string;
  /** Random bytes that new ids are cut from (one call to the random source for 512 ids). */
  private idPool = Buffer.alloc(0);
  private idPoolAt = ID_POOL_BYTES;
  /** Files in the pool as last counted or added (a front end takes some meanwhile), and names given so far. */
  private poolOn = false;
  private pooled = 0;
  private poolCountedMs = 0;
  private poolFilling: Promise<void> = Promise.resolve();
  private poolSerial = 0;
  /** The log, open for appending (closed after close(): each later append opens it). */
  private log: FileHandle | undefined;
  /** The spool folder, kept open for its fsyncs. */
  private spoolFolder: Promise<FileHandle> | undefined;
  private closed = false;
  /** Entries whose last record is in the log (for `sync`, the spool fsyncs and compaction). */
  private readonly live = new Map<string, LiveEntry>();
  /** Spool files not in their record, written since their last fsync; fsynced by the next group commit. */
  private readonly unsyncedSpools = new Set<string>();
  /** Records naming a spool by its mark while its bytes are not durable yet. */
  private readonly marks: UnsyncedMarks;
  /** Lines waiting for the writer (one write for all of them). */
  private queue: { line: Buffer; done: (err: Error | undefined, record: number) => void }[] = [];
  /** A write of the queue is on the log's chain. */
  private flushQueued = false;
  /** Every change of the log file runs on this chain, one at a time. */
  private chain: Promise<void> = Promise.resolve();
  /** Records written to the log (page cache), and how many of them are durable. */
  private written = 0;
  private synced = 0;
  /** Bytes of the log file (undefined until first opened), and how many of them are durable. */
  private logBytes: number | undefined;
  private syncedBytes = 0;
  /** Records in the log file (live and dead), for compaction, and how many its last rewrite kept. */
  private logRecords = 0;
  private keptRecords = 0;
  private rewrites = 0;
  /** The fdatasync under way, and how far it reaches. */
  private syncing: Promise<void> | undefined;
  /** A write failed part way and could not be undone: the next write starts on a line of its own. */
  private tornTail = false;
  /** Until then appends go through the thread pool (an append on the calling thread was slow). */
  private appendsOffThreadUntil = 0;
  /** Appends written on the calling thread, and those sent to the thread pool (for tests and figures). */
  readonly appendCounts = { inline: 0, pooled: 0 };
  private groupTimer: NodeJS.Timeout | undefined;
  /** The writer of side logs, and the side log it writes now. */
  private sideWriter: SideLogWriter | undefined;
  private sideLog: string | undefined;
  /** Ids of side records settled since the writer's last switch (their side log stays until the next one). */
  private readonly settledSinceSwitch = new Set<string>();
  /** Checks of side records kept in the log as they are (lines a rewrite keeps). */
  private readonly keptLines = new Set<string>();
  /** A compaction that first switches the side writer to a new log is under way. */
  private sideCompaction: Promise<void> | undefined;
  /** The group commit under way (a sync waits for it, then runs its own). */
  private committing: Promise<void> = Promise.resolve();

  private readonly slowAppendMs: number;

  /**
   * `groupCommitMs`: the longest a put without sync waits for its fsync. `slowAppendMs`: an append on the
   * calling thread slower than this sends the next ones through the thread pool for a while (default
   * SLOW_APPEND_MS).
   */
  constructor(readonly dir: string, private readonly groupCommitMs = 1000, opts: { slowAppendMs?: number; bootId?: string } = {}) {
    this.slowAppendMs = opts.slowAppendMs ?? SLOW_APPEND_MS;
    this.marks = new UnsyncedMarks(opts.bootId ?? currentBootId());
    this.spoolDir = join(dir, 'spool');
    this.entriesDir = join(dir, 'entries');
    this.logPath = join(dir, LOG);
  }

  async init(): Promise<void> {
    await mkdir(this.spoolDir, { recursive: true, mode: 0o700 });
  }

  /**
   * From now on spools nobody needs are kept, emptied, in a pool (`poolDir`, see `recycle`), filled in the
   * background with empty files up to POOL_MAX: for a front end that makes spools itself, many a second
   * (the FUSE engine with passthrough).
   */
  async startSpoolPool(): Promise<void> {
    if (this.poolOn) return;
    await mkdir(this.poolDir, { recursive: true, mode: 0o700 });
    this.pooled = (await readdir(this.poolDir).catch(() => [] as string[])).length;
    this.poolOn = true;
    // In the background: a spool is made anew meanwhile (close waits for it).
    this.poolFilling = this.fillPool().catch(() => undefined);
  }

  /** Makes empty files in the pool up to POOL_MAX (before anything waits for a spool). */
  private async fillPool(): Promise<void> {
    for (; this.pooled < POOL_MAX && !this.closed; this.pooled++) {
      const fh = await open(join(this.poolDir, this.poolName()), 'wx', 0o600).catch(() => undefined);
      if (!fh) return;
      await fh.close();
    }
  }

  private poolName(): string {
    return `${POOL_PREFIX}${process.pid.toString(36)}-${Date.now().toString(36)}-${(this.poolSerial++).toString(36)}`;
  }

  /**
   * The folder of empty spool files kept for reuse (see `recycle`): a front end that makes spools itself
   * takes one from there (a rename into the spool folder) before it makes a new file.
   */
  get poolDir(): string {
    return join(this.spoolDir, POOL);
  }

  /**
   * A spool nobody needs any more: removed; once the pool is started (startSpoolPool), emptied and kept in the pool for a later spool, up to POOL_MAX files
   * (else removed). Making a file costs more than reusing one: on ext4, the inodes of files removed in the
   * last seconds are skipped one by one by the next allocations in their group, and the spool folder's
   * group is where every spool comes and goes (measured: creates in a busy spool folder took a third of a
   * small-file copy's CPU). A spool someone still has open must not come here: it is emptied.
   */
  private async recycle(path: string): Promise<void> {
    if (!this.poolOn) return removeFileIfPresent(path);
    if (this.pooled >= POOL_MAX && Date.now() - this.poolCountedMs >= POOL_RECOUNT_MS) {
      // Taken from meanwhile by a front end (which says nothing): counted again, at most once a second.
      this.poolCountedMs = Date.now();
      this.pooled = (await readdir(this.poolDir).catch(() => [] as string[])).length;
    }
    if (this.pooled >= POOL_MAX) return removeFileIfPresent(path);
    // Renamed into the pool, then emptied (a front end takes only an empty one).
    const pooled = join(this.poolDir, this.poolName());
    try {
      await rename(path, pooled);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') await removeFileIfPresent(path);
      return;
    }
    this.pooled++;
    await truncate(pooled, 0).catch(() => removeFileIfPresent(pooled).catch(() => undefined));
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
    return ID_RE.test(id) && !this.live.has(id);
  }

  spoolPath(id: string): string {
    if (!ID_RE.test(id)) throw new TypeError(`journal id: expected 16 hex digits, got '${id}'`);
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

  /** Rewrites an entry's metadata (a rename, a new time) of a spool already journaled. */
  async rewrite(entry: JournalEntry): Promise<void> {
    const before = this.live.get(entry.id);
    const wasDurable = !before || before.record <= this.synced;
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
    this.marks.forget(id);
    if (this.live.has(id)) {
      this.live.delete(id);
      await this.append(Buffer.from(lineOf({ rm: id }).text));
      if (opts.durable !== false) await this.syncLog();
      else this.scheduleGroupCommit();
    }
    if (!opts.keepSpool) await this.recycle(this.spoolPath(id));
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
    await this.recycle(this.spoolPath(id));
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

  /**
   * The entries on disk as `entries()` would find them, oldest first, with nothing changed (no rewrite, no
   * spool removed): for a journal no Vfs has open, such as a member's between sessions.
   */
  async peek(): Promise<JournalEntry[]> {
    const found = new Map<string, JournalEntry>();
    for (const e of await this.legacyEntries()) found.set(e.id, e);
    await this.eachLine([...(await this.sideLogs()), this.logPath], async (rec) => {
      if (rec.rm !== undefined) found.delete(rec.rm);
      else found.set(rec.put!.id, rec.put!);
    });
    return [...found.values()].sort((a, b) => orderOf(a) - orderOf(b));
  }

  // ---- the log -----------------------------------------------------------------------------------------

  /** `before`: the entry's live record this one rewrites (its bytes stay in the line that carried them). */
  private async appendPut(entry: JournalEntry, inline: Buffer | undefined, before?: LiveEntry): Promise<void> {
    const { line, check } = putLineOf(entry, inline);
    const record = await this.append(line);
    const lines = new Set([check]);
    const carries = !!inline;
    // A record of a file still open (an fsync) that carries no bytes: its bytes are the spool's now.
    const keeps = !carries && !entry.open && !!before?.inline;
    if (keeps) for (const c of before.lines) lines.add(c);
    this.live.set(entry.id, { entry, inline: carries || keeps, record, lines });
  }

  /** Appends one line; resolves with the count of records written once it is in the log (page cache). */
  private append(line: Buffer): Promise<number> {
    return new Promise((resolve, reject) => {
      this.queue.push({ line, done: (err, record) => (err ? reject(err) : resolve(record)) });
      if (this.flushQueued) return;
      this.flushQueued = true;
      void this.onLog(() => this.writeQueue());
    });
  }

  /** Everything queued goes out in one write; what is queued meanwhile goes in the next. */
  private async writeQueue(): Promise<void> {
    this.flushQueued = false;
    const batch = this.queue.splice(0);
    if (batch.length === 0) return;
    const lines = batch.map((b) => b.line);
    if (this.tornTail) lines.unshift(NEWLINE);
    try {
      await this.writeLog(lines.length === 1 ? lines[0]! : Buffer.concat(lines));
      this.tornTail = false;
      this.written += batch.length;
      this.logRecords += batch.length;
      for (const b of batch) b.done(undefined, this.written);
    } catch (err) {
      for (const b of batch) b.done(err as Error, 0);
      return;
    }
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
    this.settledSinceSwitch.add(id);
    if (this.live.has(id) || !ID_RE.test(id)) return;
    // The version went without a line of the journal's own (deleted, superseded, refused): one says so.
    await this.append(Buffer.from(lineOf({ rm: id }).text));
    this.scheduleGroupCommit();
  }

  /** Rewrites of the log (compactions) so far (for tests and figures). */
  get logRewrites(): number {
    return this.rewrites;
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
    return this.logRecords > this.live.size + COMPACT_DEAD_RECORDS && this.logRecords > 2 * this.live.size &&
      this.logRecords - this.keptRecords > Math.max(COMPACT_DEAD_RECORDS, this.keptRecords);
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

  /** Side logs in the folder. */
  private async sideLogs(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    return names.filter((n) => SIDE_LOG_RE.test(n)).sort().map((n) => join(this.dir, n));
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
    const old = (await this.sideLogs()).filter((p) => p !== this.sideLog);
    for (const side of old) await removeFileIfPresent(side);
    if (old.length > 0) await fsyncFolderIfSupported(this.dir);
    // Records of the side log being written that were settled and are gone keep their removal lines.
    const gone = [...this.settledSinceSwitch].filter((id) => !this.live.has(id));
    await this.compact([], [this.logPath], this.sideLog ? gone : []);
  }

  /** Runs `fn` with the log to itself (no other write or rewrite in between). */
  private onLog<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn);
    this.chain = run.then(() => undefined, () => undefined);
    return run;
  }

  /** Resolves once every change of the log started so far is done. */
  private async drained(): Promise<void> {
    let last: Promise<void> | undefined;
    while (last !== this.chain) {
      last = this.chain;
      await last;
    }
  }

  private async writeLog(buf: Buffer): Promise<void> {
    const fh = this.log ?? (await open(this.logPath, 'a', 0o600));
    let done = 0;
    try {
      this.logBytes ??= (await fh.stat()).size;
      if (buf.length <= SYNC_APPEND_MAX_BYTES && Date.now() >= this.appendsOffThreadUntil) {
        const started = performance.now();
        while (done < buf.length) done += writeSync(fh.fd, buf, done, buf.length - done);
        this.appendCounts.inline++;
        if (performance.now() - started > this.slowAppendMs) this.appendsOffThreadUntil = Date.now() + APPENDS_OFF_THREAD_MS;
      } else {
        while (done < buf.length) done += (await fh.write(buf, done, buf.length - done)).bytesWritten;
        this.appendCounts.pooled++;
      }
      this.logBytes += done;
    } catch (err) {
      // Undo a part-written batch; if that fails too, the next batch starts on a fresh line.
      if (done > 0 && !(this.logBytes !== undefined && (await fh.truncate(this.logBytes).then(() => true, () => false)))) {
        this.tornTail = true;
        this.logBytes = undefined;
      }
      throw err;
    } finally {
      if (this.closed) await fh.close();
      else this.log = fh;
    }
  }

  /** Makes every record written so far durable (one fdatasync serves everyone waiting meanwhile). */
  private async syncLog(): Promise<void> {
    const target = this.written;
    while (this.synced < target) {
      if (this.syncing) {
        await this.syncing;
        continue;
      }
      const upTo = this.written;
      const upToBytes = this.logBytes ?? 0;
      this.syncing = (async () => {
        const fh = this.log ?? (await open(this.logPath, 'a', 0o600));
        try {
          await fh.datasync();
        } finally {
          if (fh !== this.log) await fh.close();
        }
        this.synced = Math.max(this.synced, upTo);
        this.syncedBytes = Math.max(this.syncedBytes, upToBytes);
      })().finally(() => { this.syncing = undefined; });
      await this.syncing;
    }
  }

  /**
   * Rewrites the log with only the lines live entries need (each one's last line, and the one carrying
   * its bytes), copied as they are: streamed, nothing fsynced but the new log. `extra`: entries with no
   * line yet (of the earlier layout), written as new lines.
   */
  private async compact(extra: JournalEntry[] = [], sources: string[] = [this.logPath], removed: string[] = []): Promise<void> {
    const tmp = `${this.logPath}.${randomBytes(4).toString('hex')}.tmp`;
    const out = await open(tmp, 'w', 0o600);
    let bytes = 0;
    let kept = 0;
    try {
      let pending: string[] = [];
      let pendingBytes = 0;
      const flush = async (): Promise<void> => {
        const buf = Buffer.from(pending.join(''));
        pending = [];
        pendingBytes = 0;
        let done = 0;
        while (done < buf.length) done += (await out.write(buf, done, buf.length - done)).bytesWritten;
        bytes += buf.length;
      };
      const keep = async (text: string): Promise<void> => {
        pending.push(text);
        pendingBytes += text.length;
        kept++;
        if (pendingBytes >= 1024 * 1024) await flush();
      };
      await this.eachLine(sources, async (rec, check, text) => {
        if (rec.put && (this.live.get(rec.put.id)?.lines.has(check) || this.keptLines.has(check))) await keep(`${text}\n`);
      });
      for (const e of extra) {
        const { text, check } = lineOf({ put: e });
        await keep(text);
        const l = this.live.get(e.id);
        if (l) l.lines = new Set([check]);
      }
      for (const id of removed) await keep(lineOf({ rm: id }).text);
      await flush();
      await out.sync();
    } catch (err) {
      await out.close().catch(() => undefined);
      await rm(tmp, { force: true });
      throw err;
    }
    await out.close();
    await rename(tmp, this.logPath);
    await fsyncFolderIfSupported(this.dir);
    const old = this.log;
    this.log = undefined;
    await old?.close().catch(() => undefined);
    this.tornTail = false;
    this.logBytes = bytes;
    this.syncedBytes = bytes;
    this.logRecords = kept;
    this.keptRecords = kept;
    this.rewrites++;
    this.synced = this.written;
    for (const l of this.live.values()) l.record = this.written;
  }

  /** Calls `fn` with each record of the logs `paths`, in order, as it is read; lines that do not match their check are skipped. */
  private async eachLine(paths: string[], fn: (rec: LogRecord, check: string, text: string) => Promise<void>): Promise<void> {
    for (const path of paths) await this.eachLineOf(path, fn);
  }

  private async eachLineOf(path: string, fn: (rec: LogRecord, check: string, text: string) => Promise<void>): Promise<void> {
    // An engine's side log: each record read as the put line the journal writes for it. One written by an
    // earlier version of the engine (the journal's own lines, left by a crash before an upgrade) is read
    // as the journal's log is.
    if (SIDE_LOG_RE.test(basename(path)) && !(await isLegacySideLog(path))) {
      for await (const r of readCloseRecords(path)) {
        const rec: LogRecord = { put: closeRecordEntry(r), data: r.data.toString('base64') };
        const { text, check } = lineOf(rec);
        await fn(rec, check, text.slice(0, -1));
      }
      return;
    }
    const input = createReadStream(path, { encoding: 'utf8' });
    const opened = await new Promise<boolean>((resolve, reject) => {
      input.once('open', () => resolve(true));
      input.once('error', (err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? resolve(false) : reject(err)));
    });
    if (!opened) return;
    for await (const text of createInterface({ input, crlfDelay: Infinity })) {
      const parsed = parseLine(text);
      if (parsed) await fn(parsed.rec, parsed.check, text);
    }
  }

  /** Entries of the earlier layout (one JSON file each), if any are left. */
  private async legacyEntries(): Promise<JournalEntry[]> {
    const names = await readdir(this.entriesDir).catch(() => [] as string[]);
    const out: JournalEntry[] = [];
    for (const name of names) {
      if (!name.endsWith('.json')) continue;
      try {
        const e = JSON.parse(await readFile(join(this.entriesDir, name), 'utf8')) as JournalEntry;
        if (validEntry(e)) out.push(e);
      } catch { /* written with fsync then renamed: a torn file cannot be an acknowledged one */ }
    }
    return out;
  }

  // ---- group commit --------------------------------------------------------------------------------------

  private scheduleGroupCommit(): void {
    if (this.groupTimer || this.closed) return;
    this.groupTimer = setTimeout(() => {
      this.groupTimer = undefined;
      const run = this.committing.then(() => this.groupCommit());
      this.committing = run.catch(() => undefined);
    }, this.groupCommitMs);
    this.groupTimer.unref();
  }

  /** fsyncs the spools written since the last group commit (not those carried in records), then the log. */
  private async groupCommit(): Promise<void> {
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

/** Acknowledgement order of an entry (see JournalEntry.seq). */
export function orderOf(e: JournalEntry): number {
  return e.seq ?? e.createdMs * 1000;
}

function validEntry(e: JournalEntry): boolean {
  return typeof e === 'object' && e !== null && ID_RE.test(e.id) && typeof e.library === 'string' && typeof e.fullpath === 'string';
}

/** Hex digits of a line's check (the start of the SHA-1 of its JSON). */
const CHECK_CHARS = 12;
const SPACE = 0x20;
const NEWLINE = Buffer.from('\n');

/** A line of a log (without its newline) when it matches its check and holds a valid record. */
function parseLine(text: string): { rec: LogRecord; check: string } | undefined {
  const space = text.indexOf(' ');
  if (space <= 0) return undefined;
  const check = text.slice(0, space);
  const json = text.slice(space + 1);
  if (check !== checkOf(json)) return undefined; // torn: never acknowledged as durable
  let rec: LogRecord;
  try {
    rec = JSON.parse(json) as LogRecord;
  } catch {
    return undefined; // matched its check: cannot happen, but a bad line is never an entry
  }
  if (typeof rec.rm === 'string') return { rec: { rm: rec.rm }, check };
  if (rec.put && validEntry(rec.put) && (rec.data === undefined || typeof rec.data === 'string')) return { rec, check };
  return undefined;
}

function checkOf(json: string | Buffer): string {
  return hash('sha1', json, 'hex').slice(0, CHECK_CHARS);
}

/**
 * The line of a put record, built straight into the Buffer that is written: the same bytes as
 * `lineOf({ put: entry, data: inline?.toString('base64') })` without the copies of the whole line that
 * building it as strings makes (a small file's line is mostly its bytes).
 */
function putLineOf(entry: JournalEntry, inline: Buffer | undefined): { line: Buffer; check: string } {
  const head = `{"put":${JSON.stringify(entry)}${inline ? ',"data":"' : '}'}`;
  const data = inline ? inline.toString('base64') : '';
  const tail = inline ? '"}' : '';
  const start = CHECK_CHARS + 1;
  const line = Buffer.allocUnsafe(start + Buffer.byteLength(head) + data.length + tail.length + 1);
  let at = start + line.write(head, start, 'utf8');
  at += line.write(data, at, 'latin1');
  at += line.write(tail, at, 'latin1');
  const check = checkOf(line.subarray(start, at));
  line.write(check, 0, 'latin1');
  line[CHECK_CHARS] = SPACE;
  line[at] = NEWLINE[0]!;
  return { line, check };
}

function lineOf(rec: LogRecord): { text: string; check: string } {
  const json = JSON.stringify(rec);
  const check = checkOf(json);
  return { text: `${check} ${json}\n`, check };
}

/** A side log of the engine's earlier format: the journal's own lines (it starts with a line's check, never with a close record). */
async function isLegacySideLog(path: string): Promise<boolean> {
  const fh = await open(path, 'r').catch(() => undefined);
  if (!fh) return false;
  try {
    const head = Buffer.alloc(CHECK_CHARS + 1);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    return bytesRead === head.length && /^[0-9a-f]{12} $/.test(head.toString('latin1'));
  } finally {
    await fh.close();
  }
}

/** Writes a small file's spool from its record when the file is missing or differs (lost to a power loss). */
async function restoreSpool(path: string, data: Buffer, size: number): Promise<void> {
  if (data.length !== size) return;
  const now = await readFile(path).catch(() => undefined);
  if (now && now.equals(data)) return;
  await writeFile(path, data, { mode: 0o600 });
}

function ignoreMissing(err: unknown): void {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
}


