/**
 * UploadJournal: the durable record of data an application was told is written but the service has not
 * confirmed yet. An entry is a spool file (the bytes) plus a small metadata file; `put()` fsyncs both and
 * the folder before it resolves, and an entry is removed only after the service confirmed the upload.
 * On start-up `entries()` lists what a previous run (or a crash, or kill -9) left, to be uploaded again.
 *
 * Layout under `dir`: `spool/<id>` (content) and `entries/<id>.json` (metadata).
 */
import { mkdir, open, readdir, readFile, rename, rm, type FileHandle } from 'node:fs/promises';
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

  constructor(readonly dir: string) {
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
   * Makes the entry durable: the spool's data, the metadata, and the folder entries, all fsynced.
   * `spoolSynced`: the caller has just fsynced the spool with nothing written since (it is not done again).
   */
  async put(entry: JournalEntry, opts: { spoolSynced?: boolean } = {}): Promise<void> {
    if (!opts.spoolSynced) await fsyncFile(this.spoolPath(entry.id));
    // The spool's folder entry and the metadata file are independent: both made durable at once.
    await Promise.all([this.syncFolder(this.spoolDir), this.writeEntry(entry)]);
  }

  /** Rewrites an entry's metadata (a rename, a new time) of a spool already journaled. */
  async rewrite(entry: JournalEntry): Promise<void> {
    await this.writeEntry(entry);
  }

  /** The metadata file, written beside, fsynced, renamed into place, and its folder fsynced. */
  private async writeEntry(entry: JournalEntry): Promise<void> {
    const file = join(this.entriesDir, `${entry.id}.json`);
    const tmp = `${file}.tmp`;
    const fh = await open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(JSON.stringify(entry));
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
    await this.syncFolder(this.entriesDir);
  }

  /** Closes the folders kept open; later calls open them each time. */
  async close(): Promise<void> {
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
    await rm(join(this.entriesDir, `${id}.json`), { force: true });
    await this.syncFolder(this.entriesDir);
    if (!opts.keepSpool) await rm(this.spoolPath(id), { force: true });
  }

  /** Removes a spool file that was never journaled (or whose entry is gone). */
  async discardSpool(id: string): Promise<void> {
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

async function fsyncFile(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try { await fh.sync(); } finally { await fh.close(); }
}

async function fsyncDir(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try { await fh.sync(); } catch { /* some file systems refuse fsync on folders */ } finally { await fh.close(); }
}
