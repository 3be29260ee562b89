/**
 * A request's statement ahead (store/pg-request-ahead.ts: the replay guard's record, an `INSERT …
 * RETURNING` of one row) and the request's first plain read as ONE statement with values, so that a
 * read costs one round trip and is still prepared (planned once per connection, store/pg-prepared.ts):
 *
 *   WITH ahead AS (<ahead>)
 *   SELECT (SELECT row_to_json(ahead) FROM ahead) AS "_ahead_row", w.*
 *   FROM (SELECT 1) one LEFT JOIN (SELECT row_number() OVER () AS "_ahead_n", w0.* FROM (<read>) w0) w ON true
 *   ORDER BY w."_ahead_n"
 *
 * The data-modifying CTE runs exactly once whatever the read returns; the statement ahead runs in the
 * statement's own (autocommitted) transaction, as it would alone, and the read sees the snapshot taken
 * at the statement's start, as a statement sent alone after the call arrived does. The read's rows keep
 * their order (numbered as the read returns them); with no row the ahead's row comes alone. The ahead's
 * row comes through JSON: its numbers as numbers (a BIGINT too, which the driver gives alone as a
 * string), so an ahead statement's reader takes Number() of what it reads.
 */
import type pg from 'pg';
import { replacePlaceholders } from './pg-placeholders.js';

const AHEAD_ROW = '_ahead_row';
const AHEAD_N = '_ahead_n';

/** Whether `sql` can be the ahead part: one INSERT/UPDATE/DELETE … RETURNING or SELECT, no WITH of its own. */
export function combinableAhead(sql: string): boolean {
  return /^\s*(INSERT|UPDATE|DELETE)\b[\s\S]*\bRETURNING\b/i.test(sql) && !sql.includes(';');
}

/** Whether `sql` is a plain read that can stand as a subquery (no locking clause, one statement). */
export function combinableRead(sql: string): boolean {
  return /^\s*SELECT\b/i.test(sql) && !/\bFOR\s+(UPDATE|SHARE|NO\s+KEY|KEY)\b/i.test(sql) && !sql.includes(';');
}

/** The combined statement (`$n` placeholders: the ahead's first, then the read's, shifted). */
export function combinedRead(ahead: { sql: string; params: readonly unknown[] }, read: { sql: string; params: readonly unknown[] }): { sql: string; params: unknown[] } {
  const sql = `WITH ahead AS (${ahead.sql}) SELECT (SELECT row_to_json(ahead) FROM ahead) AS "${AHEAD_ROW}", w.* `
    + `FROM (SELECT 1) one LEFT JOIN (SELECT row_number() OVER () AS "${AHEAD_N}", w0.* FROM (${shifted(read.sql, ahead.params.length)}) w0) w ON true `
    + `ORDER BY w."${AHEAD_N}"`;
  return { sql, params: [...ahead.params, ...read.params] };
}

/** The combined statement's answer split: the ahead's rows (none or one) and the read's result. */
export function splitCombined(result: pg.QueryResult): { aheadRows: unknown[]; read: pg.QueryResult } {
  const rows = result.rows as Record<string, unknown>[];
  const first = rows[0];
  const aheadRow = first?.[AHEAD_ROW];
  const readRows = first?.[AHEAD_N] === null || first?.[AHEAD_N] === undefined ? [] : rows.map((r) => {
    const { [AHEAD_ROW]: _a, [AHEAD_N]: _n, ...rest } = r;
    return rest;
  });
  const fields = result.fields.filter((f) => f.name !== AHEAD_ROW && f.name !== AHEAD_N);
  return {
    aheadRows: aheadRow === null || aheadRow === undefined ? [] : [aheadRow],
    read: { ...result, rows: readRows, rowCount: readRows.length, fields },
  };
}

/** `$n` placeholders of `sql` (outside quoted strings and identifiers) moved up by `by`. */
export function shifted(sql: string, by: number): string {
  return replacePlaceholders(sql, (n) => `$${n + by}`);
}
