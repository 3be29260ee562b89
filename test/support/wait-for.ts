import { inspect } from 'node:util';

export interface WaitOptions<T> {
  /** When the value `check` returned is the one awaited; by default any truthy value. */
  until?: (value: T) => boolean;
  /** How long to wait before failing (default 10 s). */
  timeoutMs?: number;
  /** How long between two checks (default 20 ms). */
  intervalMs?: number;
  /** Why the value can no longer come (a process exited, say), asked after each check that was not done: the wait fails at once. */
  stopIf?: () => string | undefined;
  /** What to add to the failure (a process's output, say). */
  detail?: () => string;
}

/**
 * The one wait of the tests: calls `check` until its value is the one awaited and resolves with that value;
 * fails with `timed out after N ms waiting for <what>` and the last value observed (or the last error
 * `check` threw) when it does not come. A test never sleeps a fixed time: it waits for the event that
 * proves the work is done, here.
 */
export async function waitFor<T>(what: string, check: () => T | Promise<T>, opts: WaitOptions<T> = {}): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const intervalMs = opts.intervalMs ?? 20;
  const done = opts.until ?? ((v: T) => Boolean(v));
  const start = Date.now();
  const fail = (why: string): Error => new Error(`${why}${opts.detail ? `\n${opts.detail()}` : ''}`);
  let last: string;
  for (;;) {
    try {
      const value = await check();
      if (done(value)) return value;
      last = `last observed: ${inspect(value, { depth: 3, breakLength: Infinity })}`;
    } catch (err) {
      last = `last error: ${err instanceof Error ? err.message : String(err)}`;
    }
    const stopped = opts.stopIf?.();
    if (stopped !== undefined) throw fail(`stopped waiting for ${what}: ${stopped} (${last})`);
    if (Date.now() - start >= timeoutMs) throw fail(`timed out after ${timeoutMs} ms waiting for ${what} (${last})`);
    await pause(intervalMs);
  }
}

/**
 * A pause of `ms` milliseconds, for the few waits that are not for an event: a test that must let time pass
 * (a timer, a clock, a client's own timeout) says why beside its call.
 */
export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
