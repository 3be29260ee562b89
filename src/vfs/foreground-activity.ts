/**
 * ForegroundActivity: whether applications are being served right now. The front ends say so at each
 * request they take (`touch`); background work that shares the main thread with them (the uploads) asks
 * `busy()` and gives way while they are, so a `cp -r` into the mount is not slowed down by the uploads of
 * the files it copied a moment ago: those catch up once it pauses. Nothing waits on it; it only changes
 * how much background work runs at once.
 */
export class ForegroundActivity {
  private lastMs = -Infinity;
  /** Requests taken since creation (what the tests look at). */
  touches = 0;

  /** `windowMs`: how long after the last request the foreground counts as busy. */
  constructor(readonly windowMs = 200) {
    if (!(windowMs >= 0)) throw new TypeError(`windowMs: expected milliseconds >= 0, got ${String(windowMs)}`);
  }

  /** A front end is taking a request now. */
  touch(now = performance.now()): void {
    this.lastMs = now;
    this.touches++;
  }

  /** True while a request came within the last `windowMs`. */
  busy(now = performance.now()): boolean {
    return now - this.lastMs < this.windowMs;
  }
}
