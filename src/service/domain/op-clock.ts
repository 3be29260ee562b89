/**
 * OperationClock: the operation time (ms) of every change in a library, strictly increasing per library,
 * so that the updates feed's millisecond cursor never skips nor repeats a change. A time is
 * max(now, previous + 1); a change touching n entries takes n consecutive times. Must be called inside
 * the transaction that writes the change (the last time is stored in `libraries.last_op_ms`).
 */
import type { Db } from '../store/database.js';

export class OperationClock {
  constructor(private readonly db: Db, private readonly clock: () => number) {}

  /** Reserves `n` consecutive operation times; returns the first. */
  next(libraryId: number, n = 1): number {
    const row = this.db.prepare('SELECT last_op_ms FROM libraries WHERE id = ?').get(libraryId) as { last_op_ms: number } | undefined;
    const first = Math.max(Math.floor(this.clock()), (row?.last_op_ms ?? 0) + 1);
    this.db.prepare('UPDATE libraries SET last_op_ms = ? WHERE id = ?').run(first + n - 1, libraryId);
    return first;
  }

  /** The newest operation time handed out (0 when none). */
  last(libraryId: number): number {
    const row = this.db.prepare('SELECT last_op_ms FROM libraries WHERE id = ?').get(libraryId) as { last_op_ms: number } | undefined;
    return row?.last_op_ms ?? 0;
  }
}
