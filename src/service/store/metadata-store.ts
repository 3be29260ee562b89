/**
 * MetadataStore: the service's metadata behind one asynchronous interface, with two engines — SQLite
 * (better-sqlite3, embedded under `--data`) and PostgreSQL (the `pg` driver, shared by every process of
 * a service). SQL is written once with `?` placeholders in the dialect both engines share; a
 * transaction is `tx(async (s) => …)` and everything done through `s` commits or rolls back together.
 *
 * Guarantees, the same on both engines:
 * - transactions are serializable (SQLite: one writer at a time per database, `BEGIN IMMEDIATE`, other
 *   statements of the process wait; PostgreSQL: SERIALIZABLE, retried from the start on a conflict), so
 *   read-then-write code is correct across processes; a transaction's body does database work only;
 * - `reserveOperationTimes` updates the library row, so two transactions reserving times of one
 *   library never overlap: times are strictly increasing in commit order, across processes, and a
 *   reader of the updates feed never skips nor repeats a change.
 */

export interface RunResult {
  /** Rows changed. */
  changes: number;
}

export interface MetadataSession {
  get<T>(sql: string, params?: readonly unknown[]): Promise<T | undefined>;
  all<T>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  run(sql: string, params?: readonly unknown[]): Promise<RunResult>;
  /** Runs an INSERT into a table with an `id` column; returns the new row's id. */
  insert(sql: string, params?: readonly unknown[]): Promise<number>;
}

export interface MetadataStore extends MetadataSession {
  readonly engine: 'sqlite' | 'postgresql';
  /** Runs `fn` in one transaction; its result once committed. A thrown error rolls everything back. */
  tx<T>(fn: (session: MetadataSession) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/**
 * Reserves `n` consecutive operation times of a library (ms): the first is max(now, last + 1). Call it
 * inside the transaction that writes the change.
 */
export async function reserveOperationTimes(session: MetadataSession, libraryId: number, now: number, n = 1): Promise<number> {
  const row = await session.get<{ last_op_ms: number }>(
    'UPDATE libraries SET last_op_ms = (CASE WHEN ? > last_op_ms THEN ? ELSE last_op_ms + 1 END) + ? WHERE id = ? RETURNING last_op_ms',
    [Math.floor(now), Math.floor(now), n - 1, libraryId],
  );
  if (!row) throw new Error(`library ${libraryId} does not exist`);
  return row.last_op_ms - (n - 1);
}
