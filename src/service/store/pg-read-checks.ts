/**
 * Read checks: how a library's transaction whose lock is taken at commit (TransactionOptions.lockAtCommit)
 * proves, once it holds the lock, that what its body read before still holds. A read goes out with the
 * fingerprint of its result (an MD5 of its rows as text, in a fixed order) as one more column; at commit,
 * in the round trip that takes the lock, the same read runs again inside a statement that fails when its
 * fingerprint differs, and the operation times the body reserved are checked (last, before COMMIT) to
 * be above every time handed out since. A failed check fails with READ_CHANGED in its message, and the transaction starts
 * over (store/pg-metadata-store.ts).
 *
 * The failure is a cast of a text to an integer that depends on the row (so it is never folded into a
 * constant and raised at planning): statements sent together take no function of their own.
 */

/** What the message of a failed check contains. */
export const READ_CHANGED = 'cloudlib: read changed before the lock';

/** The column a fingerprinted read adds to each of its rows. */
export const FINGERPRINT_COLUMN = 'read$fingerprint';

const fingerprintOf = (row: string) => `coalesce(md5(string_agg(${row}::text, ',' ORDER BY ${row}::text)), '')`;

/** `sql` (a SELECT) with its result's fingerprint as FINGERPRINT_COLUMN of each row (none: no row). */
export function fingerprinted(sql: string): string {
  return `WITH r AS MATERIALIZED (${sql}) SELECT r.*, (SELECT ${fingerprintOf('x')} FROM r x) AS "${FINGERPRINT_COLUMN}" FROM r`;
}

/** The fingerprint of a fingerprinted read's rows, removed from them. */
export function takeFingerprint(rows: Record<string, unknown>[]): string {
  const fingerprint = rows.length === 0 ? '' : String(rows[0]![FINGERPRINT_COLUMN]);
  for (const row of rows) delete row[FINGERPRINT_COLUMN];
  return fingerprint;
}

/** A statement that fails unless `sql` (values inlined) still has `fingerprint`. */
export function stillReads(sql: string, fingerprint: string): string {
  if (!/^[0-9a-f]*$/.test(fingerprint)) throw new Error(`not a fingerprint: ${JSON.stringify(fingerprint)}`);
  return `SELECT CASE WHEN f.fp = '${fingerprint}' THEN 0 ELSE CAST('${READ_CHANGED}: ' || f.fp AS integer) END FROM (SELECT ${fingerprintOf('x')} AS fp FROM (${sql}) x) f`;
}

/** The read of a library's clock before its lock (no row: no such library). */
export const clockRead = (library: number) => `SELECT last_op_ms FROM libraries WHERE id = ${library}`;

/**
 * A statement that fails unless every operation time of the library handed out so far is below `first`
 * (run under the library's lock): the times reserved from the clock read before are then still the
 * next ones in commit order.
 */
export const clockBelow = (library: number, first: number) =>
  `SELECT CASE WHEN last_op_ms < ${first} THEN 0 ELSE CAST('${READ_CHANGED}: clock at ' || last_op_ms AS integer) END FROM libraries WHERE id = ${library}`;

/** The clock a failed clock check found (the reads were checked before it and held), else undefined. */
export function clockWhenChanged(err: unknown): number | undefined {
  if (!isReadChanged(err)) return undefined;
  const m = /: clock at (\d+)"?$/.exec((err as { message?: string }).message ?? '');
  return m ? Number(m[1]) : undefined;
}

/** True for the failure of a read check. */
export function isReadChanged(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e.code === '22P02' && (e.message ?? '').includes(READ_CHANGED);
}
