/**
 * UploadSessions: the state of chunked upload sessions, shared by every process of a service. The
 * session records live in the metadata store (table `upload_sessions`): what upload_init declared, the
 * create_file step the session serves, which request holds its temporary file (`busy`, a lease), and,
 * once finished, the result (or the refusal answered once). The bytes received live in the blob store's
 * StagedUploads (store/staged-uploads.ts: a `<id>.part` file beside a folder store, objects of the bucket
 * of an S3 store), which also give the committed byte count, so the bytes and their count cannot
 * disagree. Processes that share the metadata and the blob store reach the same bytes, so a part may
 * reach any of them.
 */
import { randomBytes } from 'node:crypto';
import type { MetadataStore } from '../store/metadata-store.js';
import type { StagedUploads } from '../store/staged-uploads.js';
import type { UploadedFile } from './types.js';

/** Which request holds a session's temporary file. */
export type SessionBusy = 'part' | 'finish';

/** A refused or failed finish, answered once to the next finish call. */
export interface StoredFailure { status: number; code: number; message: string; extra?: Record<string, unknown> }

export interface SessionRecord {
  /** 32 lowercase hex characters; the session's only credential after upload_init. */
  id: string;
  pathhash: string;
  libraryId: number;
  fullpath: string;
  filename: string;
  filehash: string;
  filesize: number;
  /** Unix milliseconds. */
  createdAt: number;
  /** Last request, unix milliseconds (expiry). */
  touchedAt: number;
  /** The request holding the temporary file, while its lease (`busyUntil`) lasts. */
  busy: SessionBusy | null;
  /** End of the lease (unix ms); 0 when free. */
  busyUntil: number;
  /**
   * Free, and the last to hold it was a part that stored its block (or it is new): `writingFrom` holds
   * the bytes received, and the next part takes that count with its claim (see `claimPart`).
   */
  receivedKnown: boolean;
  /** Start of the block being written while `busy` is 'part' (what upload_req reports meanwhile); -1 before writing. */
  writingFrom: number;
  /** Set once upload_finish committed the file: repeated finish calls answer it. */
  result?: UploadedFile;
  failure?: StoredFailure;
}

interface SessionRow {
  id: string; pathhash: string; library_id: number; fullpath: string; filename: string; filehash: string; filesize: number;
  created_ms: number; touched_ms: number; busy: SessionBusy | null; busy_until_ms: number; writing_from: number; received_known: number;
  result: string | null; failure: string | null;
}

const ID_RE = /^[0-9a-f]{32}$/;

export class UploadSessions {
  /**
   * @param db where the records live
   * @param staging where the sessions' bytes live (the blob store's StagedUploads)
   */
  constructor(private readonly db: MetadataStore, readonly staging: StagedUploads) {}

  static newId(): string {
    return randomBytes(16).toString('hex');
  }

  static isId(text: string): boolean {
    return ID_RE.test(text);
  }

  async open(): Promise<void> {
    await this.staging.open();
  }

  async create(r: SessionRecord): Promise<void> {
    await this.db.run(
      'INSERT INTO upload_sessions (id, pathhash, library_id, fullpath, filename, filehash, filesize, created_ms, touched_ms, busy_until_ms, received_known, writing_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      [r.id, r.pathhash, r.libraryId, r.fullpath, r.filename, r.filehash, r.filesize, r.createdAt, r.touchedAt, r.busyUntil, r.receivedKnown ? 1 : 0, r.writingFrom],
    );
  }

  async load(id: string): Promise<SessionRecord | undefined> {
    if (!UploadSessions.isId(id)) return undefined;
    const row = await this.db.get<SessionRow>('SELECT * FROM upload_sessions WHERE id = ?', [id]);
    return row && fromRow(row);
  }

  /**
   * The session's record, touched (its last request now) by the same statement: what `load` then `touch`
   * did in two.
   */
  async loadTouched(id: string, now: number): Promise<SessionRecord | undefined> {
    if (!UploadSessions.isId(id)) return undefined;
    const row = await this.db.get<SessionRow>('UPDATE upload_sessions SET touched_ms = ? WHERE id = ? RETURNING *', [now, id]);
    return row && fromRow(row);
  }

  /**
   * What upload_init of create_file step `pathhash` looks for, in one statement: the unfinished session
   * serving that step for this content (the first opened), to resume; and the unfinished sessions for
   * the same library, path and content that no request holds and no failure waits in, which a repeated
   * create_file may take over (oldest first).
   */
  async forStep(pathhash: string, libraryId: number, fullpath: string, filehash: string, filesize: number, now: number): Promise<{ resumed?: SessionRecord; idle: SessionRecord[] }> {
    const rows = (await this.db.all<SessionRow>(
      'SELECT * FROM upload_sessions WHERE result IS NULL AND ((pathhash = ? AND filehash = ?) OR ' +
      '(library_id = ? AND fullpath = ? AND filehash = ? AND filesize = ? AND failure IS NULL AND (busy IS NULL OR busy_until_ms <= ?))) ORDER BY created_ms',
      [pathhash, filehash, libraryId, fullpath, filehash, filesize, now],
    )).map(fromRow);
    const resumed = rows.find((r) => r.pathhash === pathhash && r.filehash === filehash);
    const idle = rows.filter((r) => r.libraryId === libraryId && r.fullpath === fullpath && r.filehash === filehash && r.filesize === filesize &&
      r.failure === undefined && (r.busy === null || r.busyUntil <= now));
    return { ...(resumed ? { resumed } : {}), idle };
  }

  /** Moves the session from step `from` to step `to`, unless another request changed it meanwhile. */
  async movePathhash(id: string, from: string, to: string, now: number): Promise<boolean> {
    return (await this.db.run('UPDATE upload_sessions SET pathhash = ?, touched_ms = ? WHERE id = ? AND pathhash = ? AND result IS NULL', [to, now, id, from])).changes > 0;
  }

  async touch(id: string, now: number): Promise<void> {
    await this.db.run('UPDATE upload_sessions SET touched_ms = ? WHERE id = ?', [now, id]);
  }

  /**
   * Takes the temporary file for one request (a part or the finish) until `now + leaseMs`, when no other
   * request holds it; false otherwise. One statement, so two processes never both hold it.
   */
  async claim(id: string, busy: SessionBusy, now: number, leaseMs: number): Promise<boolean> {
    return (await this.db.run(
      'UPDATE upload_sessions SET busy = ?, busy_until_ms = ?, writing_from = -1, received_known = 0, touched_ms = ? WHERE id = ? AND result IS NULL AND (busy IS NULL OR busy_until_ms <= ?)',
      [busy, now + leaseMs, now, id, now],
    )).changes > 0;
  }

  /**
   * Takes the temporary file for a part whose last byte is `end` (as `claim`), in the statement that
   * reads the record: the record once taken, undefined when the session is unknown, finished, held or
   * shorter than the block (nothing changed then). Its `writingFrom` is the count of bytes received
   * when the last part left it (`receivedKnown`), else -1 (unknown, as `claim` leaves it).
   */
  async claimPart(id: string, end: number, now: number, leaseMs: number): Promise<SessionRecord | undefined> {
    if (!UploadSessions.isId(id)) return undefined;
    const row = await this.db.get<SessionRow>(
      'UPDATE upload_sessions SET busy = ?, busy_until_ms = ?, writing_from = (CASE WHEN busy IS NULL AND received_known = 1 THEN writing_from ELSE -1 END), ' +
      'received_known = 0, touched_ms = ? WHERE id = ? AND result IS NULL AND (busy IS NULL OR busy_until_ms <= ?) AND filesize > ? RETURNING *',
      ['part', now + leaseMs, now, id, now, end],
    );
    return row && fromRow(row);
  }

  async setWritingFrom(id: string, offset: number): Promise<void> {
    await this.db.run('UPDATE upload_sessions SET writing_from = ? WHERE id = ?', [offset, id]);
  }

  /** Gives the temporary file back. */
  async release(id: string, busy: SessionBusy, now: number): Promise<void> {
    await this.db.run('UPDATE upload_sessions SET busy = NULL, busy_until_ms = 0, received_known = 0, touched_ms = ? WHERE id = ? AND busy = ?', [now, id, busy]);
  }

  /** Gives the temporary file back after a part that leaves `received` bytes staged (`receivedKnown`). */
  async releasePart(id: string, received: number, now: number): Promise<void> {
    await this.db.run('UPDATE upload_sessions SET busy = NULL, busy_until_ms = 0, received_known = 1, writing_from = ?, touched_ms = ? WHERE id = ? AND busy = ?', [received, now, id, 'part']);
  }

  /** Gives back every temporary file held (at start, when no other process shares the store). */
  async releaseAll(): Promise<void> {
    await this.db.run('UPDATE upload_sessions SET busy = NULL, busy_until_ms = 0, received_known = 0 WHERE busy IS NOT NULL');
  }

  /** Records the result; inside a transaction it goes with the next statement or COMMIT. */
  async finished(id: string, result: UploadedFile, now: number): Promise<void> {
    await this.db.runLater('UPDATE upload_sessions SET result = ?, busy = NULL, busy_until_ms = 0, received_known = 0, touched_ms = ? WHERE id = ?', [JSON.stringify(result), now, id]);
  }

  async failed(id: string, failure: StoredFailure, now: number): Promise<void> {
    await this.db.run('UPDATE upload_sessions SET failure = ?, busy = NULL, busy_until_ms = 0, received_known = 0, touched_ms = ? WHERE id = ?', [JSON.stringify(failure), now, id]);
  }

  /** Takes the failure waiting in the session (one caller gets it). */
  async takeFailure(id: string, failure: StoredFailure): Promise<boolean> {
    return (await this.db.run('UPDATE upload_sessions SET failure = NULL WHERE id = ? AND failure = ?', [id, JSON.stringify(failure)])).changes > 0;
  }

  /** Removes a session's staged bytes, then its record (missing ones are fine). */
  async remove(id: string): Promise<void> {
    await this.staging.remove(id);
    await this.db.run('DELETE FROM upload_sessions WHERE id = ?', [id]);
  }

  /** Removes only the staged bytes (after the host ingested or copied them). */
  async removePart(id: string): Promise<void> {
    await this.staging.remove(id);
  }

  /** Committed byte count: the bytes staged; undefined when they are gone. */
  async committedBytes(id: string): Promise<number | undefined> {
    return this.staging.receivedBytes(id);
  }

  /** Sessions past their time (open ones untouched for `openTtlMs`, finished ones for `finishedTtlMs`) that no request holds. */
  async expired(now: number, openTtlMs: number, finishedTtlMs: number): Promise<SessionRecord[]> {
    const rows = await this.db.all<SessionRow>(
      'SELECT * FROM upload_sessions WHERE (busy IS NULL OR busy_until_ms <= ?) AND ((result IS NULL AND touched_ms <= ?) OR (result IS NOT NULL AND touched_ms <= ?))',
      [now, now - openTtlMs, now - finishedTtlMs],
    );
    return rows.map(fromRow);
  }

  async count(): Promise<{ open: number; all: number }> {
    const row = await this.db.get<{ open: number; all_: number }>('SELECT COUNT(*) - COUNT(result) AS open, COUNT(*) AS all_ FROM upload_sessions');
    return { open: Number(row?.open ?? 0), all: Number(row?.all_ ?? 0) };
  }

  /** Whether a session's record exists. */
  async exists(id: string): Promise<boolean> {
    return (await this.db.get('SELECT id FROM upload_sessions WHERE id = ?', [id])) !== undefined;
  }

  /**
   * Takes the lease `name` (a row of `service_leases`) for `holder` until `now + leaseMs`, when it is
   * free, expired or already this holder's: one process of a service runs a sweep at a time.
   */
  async takeLease(name: string, holder: string, now: number, leaseMs: number): Promise<boolean> {
    const row = await this.db.get<{ holder: string }>(
      'INSERT INTO service_leases (name, holder, until_ms) VALUES (?, ?, ?) ' +
      'ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms ' +
      'WHERE service_leases.until_ms <= ? OR service_leases.holder = excluded.holder RETURNING holder',
      [name, holder, now + leaseMs, now],
    );
    return row?.holder === holder;
  }

  /** Gives the lease `name` back when `holder` has it (a process that stops). */
  async releaseLease(name: string, holder: string): Promise<void> {
    await this.db.run('UPDATE service_leases SET until_ms = 0 WHERE name = ? AND holder = ?', [name, holder]);
  }
}

function fromRow(r: SessionRow): SessionRecord {
  return {
    id: r.id, pathhash: r.pathhash, libraryId: Number(r.library_id), fullpath: r.fullpath, filename: r.filename, filehash: r.filehash,
    filesize: Number(r.filesize), createdAt: Number(r.created_ms), touchedAt: Number(r.touched_ms), busy: r.busy,
    busyUntil: Number(r.busy_until_ms), receivedKnown: Number(r.received_known) === 1, writingFrom: Number(r.writing_from),
    ...(r.result !== null ? { result: JSON.parse(r.result) as UploadedFile } : {}),
    ...(r.failure !== null ? { failure: JSON.parse(r.failure) as StoredFailure } : {}),
  };
}
