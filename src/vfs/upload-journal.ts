/**
 * UploadJournal: the durable record of data an application was told is written but the service has not
 * confirmed yet. An entry is a spool file (the bytes) plus a small metadata file; an entry is removed only
 * after the service confirmed the upload. On start-up `entries()` lists what a previous run (or a crash,
 * or kill -9) left, to be uploaded again.
 *
 * Two strengths of `put()`, as a local disk has them:
 * - `sync: true` (fsync, and every put with `durability = "close"`): spool, metadata and folders fsynced
 *   before it resolves — safe against power loss.
 * - `sync: false` (close): written to the page cache — safe against a crash of the gateway (kill -9) — and
 *   fsynced by the next group commit, at most `groupCommitMs` later, together with every other put of that
 *   window: a `cp -r` of many files pays one fsync round, not two fsyncs a file. A power loss inside the
 *   window can lose those entries or their bytes; an entry carries its content's SHA-1, and replay drops an
 *   entry whose spool does not match it (never a corrupt version).
 *
 * Layout under `dir`: `spool/<id>` (content) and `entries/<id>.json` (metadata).
 */
import { mkdir, open, readdir, readFile, rm, type FileHandle } from 'node:fs/promises';
import { writeFileAtomic } from '../shared/atomic-file.js';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Operator } from './types.js';

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
}

const ID_RE = /^[0-9a-f]{16}$/;

export class UploadJournal {
  readonly spoolDir: string;
  private readonly entriesDir: string;
  /** The two folders, kept open for their fsyncs (each file's close would otherwise open them again). */
  private readonly folders = new Map<string, Promise<FileHandle>>();
  private closed = false;
  /** Files written since their last fsync (spools and entries), fsynced by the next group commit. */
  private readonly unsynced = new Map<string, 'spool' | 'entry'>();
  private groupTimer: NodeJS.Timeout | undefined;
  /** The group commit under way (a sync waits for it, then runs its own). */
  private committing: Promise<void> = Promise.resolve();

  /** `groupCommitMs`: the longest a put without sync waits for its fsync. */
  constructor(readonly dir: string, private readonly groupCommitMs = 1000) {
    this.spoolDir = join(dir, 'spool');
    this.entriesDir = join(dir, 'entries');
  }

  async init(): Promise<void> {
    await mkdir(this.spoolDir, { recursive: true });
    await mkdir(this.entriesDir, { recursive: true });
  }

  /** A fresh id for a spool file (not journaled until `put`). */
  newId(): string {
    return randomBytes(8).toString('hex');
  }

  spoolPath(id: string): string {
    if (!ID_RE.test(id)) throw new TypeError(`journal id: expected 16 hex digits, got '${id}'`);
    return join(this.spoolDir, id);
  }

  /**
   * Writes the entry. With `sync` (the default) the spool's data, the metadata and the folder entries are
   * all fsynced before it resolves; `spoolSynced`: the caller has just fsynced the spool with nothing
   * written since (it is not done again). Without, they are left to the next group commit.
   */
  async put(entry: JournalEntry, opts: { spoolSynced?: boolean; sync?: boolean } = {}): Promise<void> {
    if (opts.sync === false) {
      await this.writeEntry(entry, false);
      this.unsynced.set(this.spoolPath(entry.id), 'spool');
      this.unsynced.set(this.entryPath(entry.id), 'entry');
      this.scheduleGroupCommit();
      return;
    }
    if (!opts.spoolSynced) await fsyncFile(this.spoolPath(entry.id));
    this.unsynced.delete(this.spoolPath(entry.id));
    // The spool's folder entry and the metadata file are independent: both made durable at once.
    await Promise.all([this.syncFolder(this.spoolDir), this.writeEntry(entry, true)]);
  }

  /** Writes an entry without a spool (a folder made offline, a deferred delete), fsynced. */
  async putRecord(entry: JournalEntry & { kind: 'folder' | 'delete' }): Promise<void> {
    await this.writeEntry(entry, true);
  }

  /** Makes one entry durable now if a group commit still owes it (an fsync of a file closed before). */
  async sync(id: string): Promise<void> {
    const spool = this.spoolPath(id);
    const entry = this.entryPath(id);
    if (!this.unsynced.has(spool) && !this.unsynced.has(entry)) return;
    this.unsynced.delete(spool);
    this.unsynced.delete(entry);
    await fsyncFile(spool).catch(ignoreMissing);
    await fsyncFile(entry).catch(ignoreMissing);
    await Promise.all([this.syncFolder(this.spoolDir), this.syncFolder(this.entriesDir)]);
  }

  /** Runs the group commit now: everything put without sync is durable when this resolves. */
  async syncAll(): Promise<void> {
    if (this.groupTimer) clearTimeout(this.groupTimer);
    this.groupTimer = undefined;
    const run = this.committing.then(() => this.groupCommit());
    this.committing = run.catch(() => undefined);
    await run;
  }

  /** Files written since their last fsync (what a power loss now could take): for status and tests. */
  unsyncedFiles(): string[] {
    return [...this.unsynced.keys()];
  }

  /** Rewrites an entry's metadata (a rename, a new time) of a spool already journaled. */
  async rewrite(entry: JournalEntry): Promise<void> {
    await this.writeEntry(entry, !this.unsynced.has(this.entryPath(entry.id)));
  }

  private entryPath(id: string): string {
    return join(this.entriesDir, `${id}.json`);
  }

  private scheduleGroupCommit(): void {
    if (this.groupTimer || this.closed) return;
    this.groupTimer = setTimeout(() => {
      this.groupTimer = undefined;
      const run = this.committing.then(() => this.groupCommit());
      this.committing = run.catch(() => undefined);
    }, this.groupCommitMs);
    this.groupTimer.unref();
  }

  /** fsyncs every file written since the last group commit, then both folders. */
  private async groupCommit(): Promise<void> {
    const files = [...this.unsynced.keys()];
    if (files.length === 0) return;
    for (const f of files) this.unsynced.delete(f);
    // A file removed since (its upload confirmed) needs nothing.
    await Promise.all(files.map((f) => fsyncFile(f).catch(ignoreMissing)));
    await Promise.all([this.syncFolder(this.spoolDir), this.syncFolder(this.entriesDir)]);
  }

  /** The metadata file, written beside and renamed into place; with `sync`, fsynced and its folder too. */
  private async writeEntry(entry: JournalEntry, sync: boolean): Promise<void> {
    const file = this.entryPath(entry.id);
    // The temp file has a name of its own per write: two writes of one entry at once (a rename while its
    // put is under way) never rename each other's. The folder is synced here, not by writeFileAtomic: the
    // journal keeps its folders open for the group commit.
    await writeFileAtomic(file, JSON.stringify(entry), { durability: sync ? 'fsync-file' : 'rename', mode: 0o600 });
    if (sync) await this.syncFolder(this.entriesDir);
  }

  /** Runs the last group commit and closes the folders kept open; later calls open them each time. */
  async close(): Promise<void> {
    await this.syncAll().catch(() => undefined);
    this.closed = true;
    const handles = [...this.folders.values()];
    this.folders.clear();
    for (const h of handles) await h.then((fh) => fh.close(), () => undefined);
  }

  private async syncFolder(path: string): Promise<void> {
    if (this.closed) return fsyncDir(path);
    let handle = this.folders.get(path);
    if (!handle) {
      handle = open(path, 'r');
      this.folders.set(path, handle);
      handle.catch(() => this.folders.delete(path));
    }
    const fh = await handle;
    try { await fh.sync(); } catch { /* some file systems refuse fsync on folders */ }
  }

  /** Forgets the entry (the service has the data); the spool is removed unless `keepSpool`. */
  async remove(id: string, opts: { keepSpool?: boolean } = {}): Promise<void> {
    this.unsynced.delete(this.entryPath(id));
    if (!opts.keepSpool) this.unsynced.delete(this.spoolPath(id));
    await rm(this.entryPath(id), { force: true });
    await this.syncFolder(this.entriesDir);
    if (!opts.keepSpool) await rm(this.spoolPath(id), { force: true });
  }

  /** Removes a spool file that was never journaled (or whose entry is gone). */
  async discardSpool(id: string): Promise<void> {
    this.unsynced.delete(this.spoolPath(id));
    await rm(this.spoolPath(id), { force: true });
  }

  /** Entries left on disk, oldest first; spool files without an entry are removed. */
  async entries(): Promise<JournalEntry[]> {
    const out: JournalEntry[] = [];
    for (const name of await readdir(this.entriesDir)) {
      if (!name.endsWith('.json')) {
        if (name.endsWith('.tmp')) await rm(join(this.entriesDir, name), { force: true });
        continue;
      }
      try {
        const e = JSON.parse(await readFile(join(this.entriesDir, name), 'utf8')) as JournalEntry;
        if (ID_RE.test(e.id) && typeof e.library === 'string' && typeof e.fullpath === 'string') out.push(e);
      } catch { /* written with fsync then renamed: a torn file cannot be an acknowledged one */ }
    }
    const known = new Set(out.map((e) => e.id));
    for (const name of await readdir(this.spoolDir)) {
      if (ID_RE.test(name) && !known.has(name)) await rm(join(this.spoolDir, name), { force: true });
    }
    return out.sort((a, b) => orderOf(a) - orderOf(b));
  }
}

/** Acknowledgement order of an entry (see JournalEntry.seq). */
export function orderOf(e: JournalEntry): number {
  return e.seq ?? e.createdMs * 1000;
}

function ignoreMissing(err: unknown): void {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
}

async function fsyncFile(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try { await fh.sync(); } finally { await fh.close(); }
}

async function fsyncDir(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try { await fh.sync(); } catch { /* some file systems refuse fsync on folders */ } finally { await fh.close(); }
}
