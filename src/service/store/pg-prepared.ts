/**
 * PreparedStatements: the names under which PgMetadataStore sends a statement with values, so that each
 * connection parses and plans a statement's text once and then only binds and runs it. An unnamed
 * statement with values is parsed, analysed and planned at every call: for the authentication's join
 * that is most of its round trip (on the 2-core machine about 1.5 ms a call unnamed, 0.3–0.5 named).
 *
 * Texts get names up to MAX_NAMES per process (statements whose text varies with their values, such as
 * `IN (?, ?, …)` lists, would otherwise prepare without end on every connection); beyond that they go
 * unnamed. A statement prepared before another process changed the schema under it can be refused
 * ("cached plan must not change result type"): `renew` then names every text anew, and the caller
 * sends it again.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';

const MAX_NAMES = 200;

export class PreparedStatements {
  private readonly names = new Map<string, string>();
  private generation = 0;

  /** `sql` (with `$n` placeholders) and its values as the driver's query: named when it takes values. */
  query(sql: string, values: unknown[]): pg.QueryConfig {
    if (values.length === 0) return { text: sql, values };
    let name = this.names.get(sql);
    if (name === undefined) {
      if (this.names.size >= MAX_NAMES) return { text: sql, values };
      name = createHash('sha1').update(sql).digest('hex').slice(0, 24);
      this.names.set(sql, name);
    }
    return { name: `s${this.generation}_${name}`, text: sql, values };
  }

  /** After a refusal of a statement prepared under an older schema: new names from now on. */
  renew(): void {
    this.generation++;
  }
}

/** True for PostgreSQL's refusal of a prepared statement whose result changed with the schema. */
export function isStalePlan(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e.code === '0A000' && /cached plan must not change result type/.test(e.message ?? '');
}
