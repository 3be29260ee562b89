/**
 * The journal's records and their one codec: a line of a log is a check (the start of the SHA-1 of its
 * JSON), a space, and the JSON of a put (an entry, a small file's bytes with it) or a removal. The journal's
 * own log and the side logs another writer keeps (upload-journal.ts) are read and written only through it.
 */
import { hash } from 'node:crypto';
import type { Operator } from '../types.js';


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
}

/** Largest content carried in its record (a small file's spool then needs no fsync of its own). */
export const INLINE_MAX_BYTES = 64 * 1024;

/** One line of the log. */
export interface LogRecord {
  put?: JournalEntry;
  /** With `put`: the spool's content, base64 (small files). */
  data?: string;
  rm?: string;
}


/** A journal id (a version's): 16 hex digits. */
export const ID_RE = /^[0-9a-f]{16}$/;

/** Acknowledgement order of an entry (see JournalEntry.seq). */
export function orderOf(e: JournalEntry): number {
  return e.seq ?? e.createdMs * 1000;
}

export function validEntry(e: JournalEntry): boolean {
  return typeof e === 'object' && e !== null && ID_RE.test(e.id) && typeof e.library === 'string' && typeof e.fullpath === 'string';
}

/** Hex digits of a line's check (the start of the SHA-1 of its JSON). */
const CHECK_CHARS = 12;
const SPACE = 0x20;
export const NEWLINE = Buffer.from('\n');
/** Where a put line's bytes start (after its entry). */
const DATA_KEY = ',"data":"';

/** A line of a log (without its newline) when it matches its check and holds a valid record. */
export function parseLine(text: string): { rec: LogRecord; check: string } | undefined {
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

/** A line another writer wrote (a side record), to append as it is: ending in its newline, and its check. */
export function lineAsWritten(written: Buffer): { line: Buffer; check: string } {
  return { line: written[written.length - 1] === NEWLINE[0] ? written : Buffer.concat([written, NEWLINE]), check: written.toString('latin1', 0, CHECK_CHARS) };
}

/**
 * The line of a put record, built straight into the Buffer that is written: the same bytes as
 * `lineOf({ put: entry, data: inline?.toString('base64') })` without the copies of the whole line that
 * building it as strings makes (a small file's line is mostly its bytes).
 */
export function putLineOf(entry: JournalEntry, inline: Buffer | undefined): { line: Buffer; check: string } {
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

export function lineOf(rec: LogRecord): { text: string; check: string } {
  const json = JSON.stringify(rec);
  const check = checkOf(json);
  return { text: `${check} ${json}\n`, check };
}

/** The entry a put line of a side log carries, read without its bytes; undefined when the line is not a whole, valid put with a hash. */
export function putEntryOfLine(line: Buffer): JournalEntry | undefined {
  const end = line[line.length - 1] === NEWLINE[0] ? line.length - 1 : line.length;
  const start = CHECK_CHARS + 1;
  if (end <= start || line[CHECK_CHARS] !== SPACE) return undefined;
  if (checkOf(line.subarray(start, end)) !== line.toString('latin1', 0, CHECK_CHARS)) return undefined;
  const data = line.indexOf(DATA_KEY, start);
  if (data < 0) return undefined;
  let rec: LogRecord;
  try {
    rec = JSON.parse(`${line.toString('utf8', start, data)}}`) as LogRecord;
  } catch {
    return undefined;
  }
  return rec.put && validEntry(rec.put) && rec.put.sha1 !== undefined ? rec.put : undefined;
}

/** The place and bytes a put line carries; undefined for a line that is not a put of a small file's bytes. */
export function putContentOfLine(line: Buffer): { library: string; fullpath: string; data: Buffer } | undefined {
  const rec = parseLine(line.toString('utf8').replace(/\n$/, ''))?.rec;
  if (!rec?.put || rec.data === undefined) return undefined;
  return { library: rec.put.library, fullpath: rec.put.fullpath, data: Buffer.from(rec.data, 'base64') };
}
