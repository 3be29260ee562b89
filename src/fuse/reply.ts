/**
 * OperationReply: answers one FUSE operation exactly once, within a deadline.
 *
 * The kernel waits for the answer to each request (the application's system call with it); an answer
 * that never comes hangs that application, a second one is refused by the engine and logged. So every
 * operation runs through `replyWithin`: the work gets an AbortSignal and a `live()` check, the
 * first of (result, error, deadline) answers, and whatever comes later is logged and dropped.
 */
import type { Logger } from 'pino';
import { Errno, errnoNameOf, type ErrnoName } from './errno.js';

/** Callback of an operation: `cb(code, ...values)`; code 0 or a positive count = success, negative = -errno. */
export type NativeCallback = (code: number, ...values: unknown[]) => void;

/** What the work of an operation sees. */
export interface OperationScope {
  /** Aborted when the deadline passes; pass it to Vfs calls as `ctx.signal`. */
  readonly signal: AbortSignal;
  /** False once the operation has been answered (deadline passed): never touch the kernel's buffer then. */
  live(): boolean;
}

/** Result of an operation's work: the code (0 or a byte count) and the values after it. */
export type OperationResult = number | readonly [number, ...unknown[]];

export interface ReplyOptions {
  /** Operation name, for logs. */
  op: string;
  /** Path the operation is about, for logs. */
  path?: string;
  /** Budget in ms; 0 = no deadline. */
  deadlineMs: number;
  /** Errno answered when the deadline passes. Default EIO. */
  deadlineErrno?: ErrnoName;
  logger: Logger;
  /** Operations slower than this (ms) are logged at warn level. Default 5000. */
  slowMs?: number;
  /** Counts operations in flight, so shutdown can wait for them. */
  inFlight?: InFlightCounter;
}

/** Number of operations still running; `drained()` resolves when it reaches zero. */
export class InFlightCounter {
  private count = 0;
  private waiters: Array<() => void> = [];

  get size(): number {
    return this.count;
  }

  enter(): void {
    this.count++;
  }

  leave(): void {
    this.count--;
    if (this.count === 0) {
      const waiters = this.waiters;
      this.waiters = [];
      for (const w of waiters) w();
    }
  }

  /** Resolves when nothing is in flight, or after `timeoutMs`; true if drained. */
  drained(timeoutMs: number): Promise<boolean> {
    if (this.count === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== done);
        resolve(false);
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      this.waiters.push(done);
    });
  }
}

/**
 * Runs `work` and answers `cb` exactly once: with its result, with the errno of what it threw, or with
 * `deadlineErrno` when `deadlineMs` passes first. Never throws.
 */
export function replyWithin(opts: ReplyOptions, cb: NativeCallback, work: (scope: OperationScope) => Promise<OperationResult>): void {
  const started = Date.now();
  // Made when the work first asks for it: most reads and writes never do (thousands per second).
  let controller: AbortController | undefined;
  let expired: Error | undefined;
  let answered = false;
  let timer: NodeJS.Timeout | undefined;
  const scope: OperationScope = {
    get signal(): AbortSignal {
      if (!controller) {
        controller = new AbortController();
        if (expired) controller.abort(expired);
      }
      return controller.signal;
    },
    live: () => !answered,
  };
  opts.inFlight?.enter();

  const answer = (code: number, values: readonly unknown[]): void => {
    if (answered) return;
    answered = true;
    if (timer) clearTimeout(timer);
    try {
      cb(code, ...values);
    } catch (err) {
      opts.logger.error({ op: opts.op, path: opts.path, err }, 'fuse: answering the kernel failed');
    }
  };

  if (opts.deadlineMs > 0) {
    timer = setTimeout(() => {
      const errno = opts.deadlineErrno ?? 'EIO';
      opts.logger.warn({ op: opts.op, path: opts.path, deadlineMs: opts.deadlineMs, errno }, 'fuse: operation passed its deadline');
      answer(-Errno[errno], []);
      expired = new Error(`fuse ${opts.op}: deadline of ${opts.deadlineMs} ms passed`);
      controller?.abort(expired);
    }, opts.deadlineMs);
    timer.unref?.();
  }

  const finish = (): void => {
    opts.inFlight?.leave();
    const ms = Date.now() - started;
    if (ms >= (opts.slowMs ?? 5000)) opts.logger.warn({ op: opts.op, path: opts.path, ms }, 'fuse: slow operation');
  };

  let pending: Promise<OperationResult>;
  try {
    pending = work(scope);
  } catch (err) {
    pending = Promise.reject(err);
  }
  pending.then(
    (result) => {
      const late = answered;
      if (typeof result === 'number') answer(result, []);
      else answer(result[0], result.slice(1));
      if (late) opts.logger.warn({ op: opts.op, path: opts.path, ms: Date.now() - started }, 'fuse: late result dropped');
      finish();
    },
    (err: unknown) => {
      const errno = errnoNameOf(err);
      const late = answered;
      if (!late) answer(-Errno[errno], []);
      const level = errno === 'EIO' || late ? 'warn' : 'debug';
      opts.logger[level]({ op: opts.op, path: opts.path, errno, late, err: err instanceof Error ? err.message : String(err) }, 'fuse: operation failed');
      finish();
    },
  );
}
