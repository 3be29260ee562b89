/**
 * Read checks: how a library's transaction whose lock is taken at commit (TransactionOptions.lockAtCommit)
 * proves, once it holds the lock, that what its body read before still holds. A read goes out with the
 * fingerprint of its result (an MD5 of its rows as text, in a fixed order) as one more column; in the
 * round trip that takes the lock, right after the lock, the same read runs again inside a statement that
 * fails when its fingerprint differs. A failed check fails with READ_CHANGED in its message, and the
 * transaction starts over with the lock taken first (store/pg-metadata-store.ts).
 *
 * The failure is a cast of a text to an integer that depends on the row (so it is never folded into a
 * constant and raised at planning): the checks need no function of their own in the schema.
 *
 * Operation times reserved before the lock are moved up under it (shiftEntries, shiftedClock) when
 * another change took the library's next times meanwhile, so a change never starts over for the clock.
 */

/** What the message of a failed check contains. */
export const READ_CHANGED = 'cloudlib: read changed before the lock';

/** The column a fingerprinted read adds to each of its rows. */
export const FINGERPRINT_COLUMN = 'read$fingerprint';

const fingerprintOf = (row: string) => `coalesce(md5(string_agg(${row}::text, ',' ORDER BY ${row}::text)), '')`;

/** `sql` (a SELECT, `$n` placeholders) with its result's fingerprint as FINGERPRINT_COLUMN of each row. */
export function fingerprinted(sql: string): string {
  return `WITH r AS MATERIALIZED (${sql}) SELECT r.*, (SELECT ${fingerprintOf('x')} FROM r x) AS "${FINGERPRINT_COLUMN}" FROM r`;
}

/** The fingerprint of a fingerprinted read's rows, removed from them ('' for no row). */
export function takeFingerprint(rows: Record<string, unknown>[]): string {
  const fingerprint = rows.length === 0 ? '' : String(rows[0]![FINGERPRINT_COLUMN]);
  for (const row of rows) delete row[FINGERPRINT_COLUMN];
  return fingerprint;
}

/** A statement that fails unless `sql` (its `values` values first) still has the fingerprint given last. */
export function stillReads(sql: string, values: number): string {
  return `SELECT CASE WHEN f.fp = $${values + 1}::text THEN 0 ELSE CAST('${READ_CHANGED}: ' || f.fp AS integer) END `
    + `FROM (SELECT ${fingerprintOf('x')} AS fp FROM (${sql}) x) f`;
}

/** True for the failure of a read check. */
export function isReadChanged(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e.code === '22P02' && (e.message ?? '').includes(READ_CHANGED);
}

/** How far times from `$2` on must move up to follow the library's clock (0 when they already do). */
const SHIFT = 'GREATEST(0, last_op_ms + 1 - $2::bigint)';

/**
 * Moves this transaction's entries with operation times `$2`…`$3` of library `$1` (reserved before its
 * lock) above the library's clock, when another change took those times meanwhile. Runs under the lock,
 * after the transaction's writes and before the clock's write; the rows are this transaction's by their
 * xmin (another change's rows may carry the same times).
 */
export const SHIFT_ENTRIES_SQL = `UPDATE entries e SET op_ms = e.op_ms + s.shift FROM (SELECT ${SHIFT} AS shift FROM libraries WHERE id = $1) s `
  + 'WHERE s.shift > 0 AND e.library_id = $1 AND e.op_ms BETWEEN $2 AND $3 AND e.xmin = pg_current_xact_id()::xid';

/** The clock's write for times `$2`…`$3` reserved before the lock, moved up as SHIFT_ENTRIES_SQL moved them. */
export const SHIFTED_CLOCK_SQL = `UPDATE libraries SET last_op_ms = $3::bigint + ${SHIFT} WHERE id = $1 RETURNING last_op_ms`;
