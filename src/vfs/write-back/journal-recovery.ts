/**
 * Reading a journal folder back: what a previous run (or a crash, or kill -9) left, folded from its
 * files — the entries of the earlier layout (`entries/<id>.json`), the engine's side logs, then the log —
 * into the entries still owed to the service and the lines that keep each one. UploadJournal.entries()
 * takes the result up at start (and then rewrites the log); `peekJournal` reads a folder no journal has
 * open, such as a member's between sessions, and changes nothing.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { orderOf, validEntry, type JournalEntry } from './journal-entry.js';
import { readLogs, SIDE_LOG_RE } from './journal-lines.js';

/** The log's name in the journal folder, and the folder of the earlier layout. */
export const LOG = 'journal.log';
export const LEGACY_ENTRIES = 'entries';

/** Where an entry's bytes are safe: in a record (`inline`), or in its spool file. */
export interface LiveEntry {
  entry: JournalEntry;
  inline: boolean;
  /** Log records written when its last record was (durable once the log is synced that far). */
  record: number;
  /** The checks of its last line and of its last line carrying its bytes: the lines a rewrite keeps. */
  lines: Set<string>;
}

/** What a journal folder holds, as `readJournalFolder` found it. */
export interface RecoveredJournal {
  /** The live entries by id (`record` 0: nothing of this run written yet). */
  found: Map<string, LiveEntry>;
  /** Entries of the earlier layout (those with no line in a log have none in `found.lines`). */
  legacy: JournalEntry[];
  /** The side logs read, and every log read, in the order read. */
  sides: string[];
  sources: string[];
  /** The bytes the newest record about an id carries (a later record of an open file without them: none). */
  carried: Map<string, Buffer>;
}

/** Side logs in the journal folder `dir`, in the order they are read. */
export async function sideLogsIn(dir: string): Promise<string[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  return names.filter((n) => SIDE_LOG_RE.test(n)).sort().map((n) => join(dir, n));
}

/** Folds the files of journal folder `dir` into its live entries; changes nothing. */
export async function readJournalFolder(dir: string): Promise<RecoveredJournal> {
  const found = new Map<string, LiveEntry>();
  const legacy = await legacyEntries(dir);
  for (const e of legacy) found.set(e.id, { entry: e, inline: false, record: 0, lines: new Set() });
  // Side logs first: the journal's own lines about an id are newer than its side record.
  const sides = await sideLogsIn(dir);
  const sources = [...sides, join(dir, LOG)];
  const carried = new Map<string, Buffer>();
  await readLogs(sources, async (rec, check) => {
    if (rec.rm !== undefined) {
      found.delete(rec.rm);
      carried.delete(rec.rm);
      return;
    }
    const e = rec.put!;
    const before = found.get(e.id);
    const inline = rec.data !== undefined;
    const keeps = keepsCarrierLine(e, inline, before);
    if (inline) carried.set(e.id, Buffer.from(rec.data!, 'base64'));
    else if (!keeps) carried.delete(e.id);
    const lines = new Set([check]);
    if (keeps && before) for (const c of before.lines) lines.add(c);
    found.set(e.id, { entry: e, inline: inline || keeps, record: 0, lines });
  });
  return { found, legacy, sides, sources, carried };
}

/**
 * Whether a record of an entry that carries no bytes (`inline` false) keeps the line before it that
 * carried them: a later record of the same sealed content does (a rename, a time). One of a file still
 * open (an fsync) says its bytes are the spool's now; so does the seal that follows an fsync's record,
 * since what was written after the fsync is in the spool, not in that record (regression: replay wrote
 * the fsync's bytes over the spool, and the sealed version, differing from its record, was set aside).
 */
export function keepsCarrierLine(e: JournalEntry, inline: boolean, before: Pick<LiveEntry, 'entry' | 'inline'> | undefined): boolean {
  return !inline && !e.open && !!before?.inline && !before.entry.open;
}

/**
 * The entries in journal folder `dir` as UploadJournal.entries() would find them, oldest first, with
 * nothing changed (no rewrite, no spool removed): for a journal no Vfs has open, such as a member's
 * between sessions.
 */
export async function peekJournal(dir: string): Promise<JournalEntry[]> {
  const found = new Map<string, JournalEntry>();
  for (const e of await legacyEntries(dir)) found.set(e.id, e);
  await readLogs([...(await sideLogsIn(dir)), join(dir, LOG)], async (rec) => {
    if (rec.rm !== undefined) found.delete(rec.rm);
    else found.set(rec.put!.id, rec.put!);
  });
  return [...found.values()].sort((a, b) => orderOf(a) - orderOf(b));
}

/** Entries of the earlier layout (one JSON file each), if any are left. */
async function legacyEntries(dir: string): Promise<JournalEntry[]> {
  const entriesDir = join(dir, LEGACY_ENTRIES);
  const names = await readdir(entriesDir).catch(() => [] as string[]);
  const out: JournalEntry[] = [];
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    try {
      const e = JSON.parse(await readFile(join(entriesDir, name), 'utf8')) as JournalEntry;
      if (validEntry(e)) out.push(e);
    } catch { /* written with fsync then renamed: a torn file cannot be an acknowledged one */ }
  }
  return out;
}

/** Writes a small file's spool from its record when the file is missing or differs (lost to a power loss). */
export async function restoreSpool(path: string, data: Buffer, size: number): Promise<void> {
  if (data.length !== size) return;
  const now = await readFile(path).catch(() => undefined);
  if (now && now.equals(data)) return;
  await writeFile(path, data, { mode: 0o600 });
}
