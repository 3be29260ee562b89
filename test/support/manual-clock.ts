import type { Clock, ClockTimer } from '../../src/vfs/clock.js';

/**
 * A Clock whose time moves only when the test moves it: `advance(ms)` calls the timers that fall due, in
 * the order of their times (those they set on the way too), so a test of time-dependent logic waits for
 * no real time and cannot be broken by a busy machine.
 */
export class ManualClock implements Clock {
  private ms: number;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.ms = startMs;
  }

  now(): number {
    return this.ms;
  }

  after(ms: number, fn: () => void): ClockTimer {
    if (!Number.isFinite(ms) || ms < 0) throw new TypeError(`after: expected a delay in ms >= 0, got ${ms}`);
    const id = this.seq++;
    this.timers.set(id, { at: this.ms + ms, fn });
    return { cancel: () => { this.timers.delete(id); } };
  }

  /** Timers set and not yet called or cancelled. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves time on by `ms`, calling each timer as its time comes. */
  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new TypeError(`advance: expected ms >= 0, got ${ms}`);
    const end = this.ms + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const t of this.timers) if (t[1].at <= end && (!next || t[1].at < next[1].at)) next = t;
      if (!next) break;
      this.timers.delete(next[0]);
      this.ms = Math.max(this.ms, next[1].at);
      next[1].fn();
    }
    this.ms = end;
  }
}
