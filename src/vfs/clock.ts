/**
 * The time src/vfs/ reads: the current time and one-shot timers. Parts that depend on time take a Clock
 * at construction (the real one by default), so that a test moves time on instead of waiting for it.
 */

/** A timer set with Clock.after. */
export interface ClockTimer {
  /** The callback will not be called (no effect once it was). */
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `fn` once, `ms` from now. A pending timer never keeps the process alive. */
  after(ms: number, fn: () => void): ClockTimer;
}

/** The real time: Date.now and unreferenced setTimeout. */
export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
};

/** Resolves `ms` from now on `clock` (a pause of a waiting loop that a test's clock moves on). */
export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => { clock.after(ms, resolve); });
}
