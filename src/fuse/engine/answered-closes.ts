/**
 * AnsweredCloses: the closes the engine answers itself (see docs/fuse.md, Closes answered by the engine).
 * A small file the engine created and whose every write it answered is closed by the engine once the
 * file's close record is written to a side log of the upload journal; the journal learns here when the
 * engine moves to a new side log, and when every record written to the earlier ones is settled (applied
 * by the Vfs, or kept), so that those logs may go.
 */
import type { SideLogWriter } from '../../vfs/engine-lease.js';

/** While waiting for records to be settled, the queued ones are taken this often (they travel quietly). */
const PULL_MS = 20;

export class AnsweredCloses implements SideLogWriter {
  /** Every record up to this number is settled; `settledAbove`: those above it settled out of order. */
  private settledUpTo = 0;
  private readonly settledAbove = new Set<number>();
  private readonly waiters = new Set<{ upTo: number; resolve: () => void }>();
  private stopped = false;
  private highestSeen = 0;

  /**
   * `journalSwitch`: moves the engine to a log (null: none) and answers how many records it wrote before;
   * `pull`: hands over what the engine queued and has not handed over yet.
   */
  constructor(private readonly journalSwitch: (path: string | null) => number, private readonly pull: () => void) {}

  async switchTo(path: string): Promise<void> {
    if (this.stopped) throw new Error('the engine answers no closes any more');
    await this.settledThrough(this.journalSwitch(path));
  }

  /**
   * The engine writes no more records; resolves true once every record it wrote is settled, false when
   * some are not within `waitMs` (they stay in the side log, which the journal then keeps for the next
   * start: the writer is not detached).
   */
  async stop(waitMs: number): Promise<boolean> {
    this.stopped = true;
    const upTo = this.journalSwitch(null);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), waitMs); });
    try {
      return await Promise.race([this.settledThrough(upTo).then(() => true as const), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Record `record` reached JavaScript (its close was answered). */
  seen(record: number): void {
    if (record > this.highestSeen) this.highestSeen = record;
  }

  /** Resolves once every close answered so far is applied (what is queued is taken first). */
  async settle(): Promise<void> {
    this.pull();
    await this.settledThrough(this.highestSeen);
  }

  /** Record `record` (numbered from 1) was applied or kept. */
  settled(record: number): void {
    if (record <= this.settledUpTo) return;
    this.settledAbove.add(record);
    while (this.settledAbove.delete(this.settledUpTo + 1)) this.settledUpTo++;
    for (const w of this.waiters) {
      if (w.upTo > this.settledUpTo) continue;
      this.waiters.delete(w);
      w.resolve();
    }
  }

  private settledThrough(upTo: number): Promise<void> {
    if (this.settledUpTo >= upTo) return Promise.resolve();
    return new Promise((resolve) => {
      const poll = setInterval(() => this.pull(), PULL_MS);
      poll.unref();
      this.waiters.add({ upTo, resolve: () => { clearInterval(poll); resolve(); } });
      this.pull();
    });
  }
}
