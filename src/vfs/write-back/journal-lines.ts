/**
 * The lines of the upload journal's log, and their one codec: a line is a check (the first 12 hex digits
 * of the SHA-1 of its JSON), a space, then the JSON of one record: `{"put": entry, "data"?: base64}` or
 * `{"rm": id}`. A line that does not match its check (torn by a power loss or a failed write) is skipped
 * by every reader. An engine's side log (`closes.<id>.log`, engine-close-record.ts) is read here as the
 * put lines the journal writes for its records, so the rest of the journal sees one format.
 */
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { basename } from 'node:path';
import { hash } from 'node:crypto';
import { closeRecordEntry, readCloseRecords } from './engine-close-record.js';
import { validEntry, type JournalEntry } from './journal-entry.js';

/** One line of the log. */
export interface LogRecord {
  put?: JournalEntry;
  /** With `put`: the spool's content, base64 (small files). */
  data?: string;
  rm?: string;
}

/** Side logs: `closes.<16 hex digits>.log`. */
export const SIDE_LOG_RE = /^closes\.[0-9a-f]{16}\.log$/;

/** Called with each record read, its check and its line as written (without the newline). */
export type LineReader = (rec: LogRecord, check: string, text: string) => Promise<void>;

/** Calls `fn` with each record of the logs `paths`, in order, as it is read; lines that do not match their check are skipped. */
export async function readLogs(paths: string[], fn: LineReader): Promise<void> {
  for (const path of paths) await readLogLines(path, fn);
}

/** Calls `fn` with each record of the log (or side log) at `path`; nothing for a log that is not there. */
export async function readLogLines(path: string, fn: LineReader): Promise<void> {
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

/** Hex digits of a line's check (the start of the SHA-1 of its JSON). */
const CHECK_CHARS = 12;
const SPACE = 0x20;
export const NEWLINE = Buffer.from('\n');

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
