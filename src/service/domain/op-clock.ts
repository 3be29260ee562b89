/**
 * OperationClock: the operation time (ms) of every change in a library, strictly increasing per library,
 * so that the updates feed's millisecond cursor never skips nor repeats a change. A time is
 * max(now, previous + 1); a change touching n entries takes n consecutive times. Must be called inside
 * the transaction that writes the change (the last time is stored in `libraries.last_op_ms`, whose row
 * the reservation updates: transactions of one library take their times in commit order, across
 * processes).
 */
import { reserveOperationTimes, type MetadataStore } from '../store/metadata-store.js';

export class OperationClock {
  constructor(private readonly db: MetadataStore, private readonly clock: () => number) {}

  /** Reserves `n` consecutive operation times; returns the first. */
  next(libraryId: number, n = 1): Promise<number> {
    return reserveOperationTimes(this.db, libraryId, this.clock(), n);
  }

  /** The newest operation time handed out (0 when none). */
  async last(libraryId: number): Promise<number> {
    const row = await this.db.get<{ last_op_ms: number }>('SELECT last_op_ms FROM libraries WHERE id = ?', [libraryId]);
    return row?.last_op_ms ?? 0;
  }
}
