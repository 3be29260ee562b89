/**
 * The client's one retry policy, composed onto its HTTP dispatcher as an undici interceptor
 * (`dispatcher.compose(serviceRetry(policy))`), so that every exchange with the service passes the same
 * policy:
 *
 * - a JSON call (dispatch options carrying `attempts`) is sent again after a transient failure, at most
 *   `retries` times: a 429 or 5xx answer (but 501) or no answer at all when its endpoint is idempotent, a
 *   connection that never carried the request (refused, name not found) whatever the endpoint. Each attempt
 *   has its own deadline (connect, headers and body together), asks the call for a freshly signed request
 *   (a new `dateline` and `sign`), and waits the backoff before it: `Retry-After` when the service sent
 *   one (a longer one than `retryAfterMaxMs` is not waited for: the answer goes to the caller), otherwise
 *   exponential from `baseMs` with jitter, capped at `maxDelayMs`. The answer is decided on its status
 *   line: once a response passes to the caller, nothing is repeated. Aborting the request (its signal)
 *   stops the attempt under way and any further one.
 * - a download (a GET without `attempts`: range requests on download links) goes through undici's retry
 *   interceptor with the same counts, statuses and transport codes (a body cut mid-way is resumed where it
 *   stopped); its attempts are bounded by the request's own `headersTimeout` and `bodyTimeout`.
 * - anything else (the upload server's exchanges, whose protocol resumes by itself) passes untouched.
 */
import { interceptors, type Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'node:http';
import { isTransient, TRANSIENT_STATUS, TRANSIENT_TRANSPORT_CODES } from '../shared/transient.js';
import { transportCodeOf } from './errors.js';

export interface RetryPolicy {
  /** Attempts after the first. */
  retries: number;
  /** First wait before another attempt, ms; doubles each attempt, with jitter. */
  baseMs: number;
  /** Longest wait between attempts, ms (also the cap of a download's `Retry-After`). */
  maxDelayMs: number;
  /** Longest `Retry-After` a JSON call waits for, ms; a longer one ends the call with the service's answer. */
  retryAfterMaxMs: number;
}

/** What a JSON call tells the policy (the `attempts` dispatch option). */
export interface CallAttempts {
  /** Deadline of each attempt, ms: connect, headers and body together. */
  timeoutMs: number;
  /** True when sending the call twice does no harm (the endpoint table's `idempotent`). */
  idempotent: boolean;
  /** The request of another attempt: signed anew, since a signature carries its `dateline`. */
  renew: () => AttemptRequest;
  /** Told of each failed attempt that is to be followed by another (logs, metrics). */
  onRetry?: (r: RetriedAttempt) => void;
}

/** The parts of a request that change from one attempt to the next. */
export interface AttemptRequest {
  path: string;
  body?: Dispatcher.DispatchOptions['body'];
  headers?: Record<string, string>;
}

export interface RetriedAttempt {
  /** 1 for the first retry. */
  attempt: number;
  /** The failed attempt's HTTP status (0: no answer). */
  status: number;
  /** The service's `error_code` in that answer, when it had one. */
  errorCode?: number;
  /** The transport failure, when there was no answer. */
  error?: Error;
  /** How long the failed attempt took, ms. */
  ms: number;
  /** Wait before the next attempt, ms. */
  delayMs: number;
}

/** Dispatch options of a JSON call. */
export type CallDispatchOptions = Dispatcher.DispatchOptions & { attempts?: CallAttempts };

/** An attempt ended by its deadline. */
export class AttemptTimeoutError extends Error {
  readonly code = 'ETIMEDOUT';
  constructor(readonly ms: number) {
    super(`timed out after ${ms} ms`);
    this.name = 'AttemptTimeoutError';
  }
}

/** Errors raised before any byte of the request could have reached the service. */
export const NOT_SENT_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH']);

/** Wait before retry number `attempt + 1`, ms: `baseMs · 2^attempt` capped at `maxMs`, the upper half jittered. */
export function backoff(baseMs: number, attempt: number, maxMs = 5_000): number {
  const exp = Math.min(maxMs, baseMs * 2 ** attempt);
  return Math.round(exp / 2 + Math.random() * (exp / 2));
}

/** `Retry-After` (seconds, or an HTTP date) in ms from `now`; undefined when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export function checkRetryPolicy(p: RetryPolicy): void {
  if (!Number.isInteger(p.retries) || p.retries < 0) throw new TypeError(`retries: expected a non-negative integer, got ${String(p.retries)}`);
  for (const k of ['baseMs', 'maxDelayMs', 'retryAfterMaxMs'] as const) {
    if (!Number.isFinite(p[k]) || p[k] < 0) throw new TypeError(`${k}: expected a non-negative number of milliseconds, got ${String(p[k])}`);
  }
}

/** The interceptor of the policy (see the top of this file). */
export function serviceRetry(policy: RetryPolicy): Dispatcher.DispatcherComposeInterceptor {
  checkRetryPolicy(policy);
  const downloads = interceptors.retry({
    maxRetries: policy.retries, minTimeout: policy.baseMs, maxTimeout: policy.maxDelayMs, timeoutFactor: 2, throwOnError: false,
    methods: ['GET'], statusCodes: [...TRANSIENT_STATUS], errorCodes: [...TRANSIENT_TRANSPORT_CODES],
  });
  return (dispatch) => {
    const download = downloads(dispatch);
    return (opts, handler) => {
      const { attempts, ...rest } = opts as CallDispatchOptions;
      if (attempts) return new RetriedCall(policy, attempts, rest, handler, dispatch).start();
      return rest.method === 'GET' ? download(rest, handler) : dispatch(rest, handler);
    };
  };
}

type Handler = Dispatcher.DispatchHandler;
type Controller = Dispatcher.DispatchController;

/** Bytes of a retried answer kept to read its `error_code` from. */
const KEPT_ERROR_BYTES = 8 * 1024;

/**
 * One JSON call over its attempts. The caller's handler sees one request: one start, then one response
 * or one error. Each attempt reports to it through an `AttemptHandler` naming the attempt, so that events
 * of an attempt given up are ignored.
 */
class RetriedCall {
  /** Index of the attempt under way or next (0: the first). */
  private attempt = 0;
  /** Controller of the attempt under way, once undici started it. */
  private current?: Controller;
  private startedAt = 0;
  private deadline?: NodeJS.Timeout;
  private timedOut = false;
  /** The wait before the next attempt. */
  private waiting?: NodeJS.Timeout;
  /** An answer being read to its end before the call is sent again. */
  private discarded?: { status: number; delayMs: number; kept: Buffer[]; size: number };
  /** A response was handed to the caller: nothing is repeated any more. */
  private passed = false;
  /** The caller was told the end or an error. */
  private finished = false;
  /** Why the caller aborted. */
  private abortReason?: Error;
  private paused = false;
  /** The controller the caller holds for the whole call. */
  private readonly controller: Controller;

  constructor(
    private readonly policy: RetryPolicy,
    private readonly attempts: CallAttempts,
    private readonly opts: Dispatcher.DispatchOptions,
    private readonly handler: Handler,
    private readonly dispatch: Dispatcher.Dispatch,
  ) {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const call = this;
    this.controller = {
      get aborted() { return call.abortReason !== undefined; },
      get paused() { return call.paused; },
      get reason() { return call.abortReason ?? null; },
      get rawHeaders() { return call.current?.rawHeaders ?? null; },
      get rawTrailers() { return call.current?.rawTrailers ?? null; },
      abort: (reason: Error) => this.abort(reason),
      pause: () => { this.paused = true; this.current?.pause(); },
      resume: () => { this.paused = false; this.current?.resume(); },
    };
  }

  start(): boolean {
    this.handler.onRequestStart?.(this.controller, {});
    // Aborted before it began (a signal aborted already): nothing is sent.
    if (this.abortReason) this.finish(this.abortReason);
    if (this.finished) return true;
    return this.send();
  }

  private send(): boolean {
    const n = this.attempt;
    this.current = undefined;
    this.timedOut = false;
    this.discarded = undefined;
    this.startedAt = Date.now();
    this.deadline = setTimeout(() => this.expire(n), this.attempts.timeoutMs);
    this.deadline.unref?.();
    try {
      const opts = n === 0 ? this.opts : { ...this.opts, ...this.attempts.renew() };
      return this.dispatch(opts, new AttemptHandler(this, n));
    } catch (err) {
      this.clearDeadline();
      this.finish(err as Error);
      return true;
    }
  }

  private expire(n: number): void {
    if (n !== this.attempt || this.finished) return;
    this.timedOut = true;
    this.current?.abort(new AttemptTimeoutError(this.attempts.timeoutMs));
  }

  private clearDeadline(): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = undefined;
  }

  private abort(reason: Error): void {
    if (this.finished || this.abortReason) return;
    this.abortReason = reason;
    if (this.waiting) {
      clearTimeout(this.waiting);
      this.waiting = undefined;
      this.finish(reason);
    } else if (this.current) {
      this.current.abort(reason);
    }
    // Before undici started the attempt: it is aborted as it starts (attemptStarted).
  }

  private live(n: number): boolean {
    return n === this.attempt && !this.finished;
  }

  attemptStarted(n: number, controller: Controller): void {
    if (!this.live(n)) return controller.abort(new Error('attempt given up'));
    this.current = controller;
    if (this.abortReason) controller.abort(this.abortReason);
    else if (this.timedOut) controller.abort(new AttemptTimeoutError(this.attempts.timeoutMs));
    else if (this.paused) controller.pause();
  }

  responseStart(n: number, status: number, headers: IncomingHttpHeaders, message?: string): void {
    if (!this.live(n) || status < 200) return;
    const delayMs = this.retryDelay(status, headers);
    if (delayMs !== undefined) {
      this.discarded = { status, delayMs, kept: [], size: 0 };
      return;
    }
    this.passed = true;
    this.handler.onResponseStart?.(this.controller, status, headers, message);
  }

  responseData(n: number, chunk: Buffer): void {
    if (!this.live(n)) return;
    const d = this.discarded;
    if (!d) return this.handler.onResponseData?.(this.controller, chunk);
    if (d.size < KEPT_ERROR_BYTES) { d.kept.push(chunk); d.size += chunk.length; }
  }

  responseEnd(n: number, trailers: IncomingHttpHeaders): void {
    if (!this.live(n)) return;
    this.clearDeadline();
    const d = this.discarded;
    if (d) return this.again(d.status, errorCodeOf(d.kept), undefined, d.delayMs);
    this.finished = true;
    this.handler.onResponseEnd?.(this.controller, trailers);
  }

  responseError(n: number, err: Error): void {
    if (!this.live(n)) return;
    this.clearDeadline();
    if (this.abortReason) return this.finish(this.abortReason);
    const error = this.timedOut ? new AttemptTimeoutError(this.attempts.timeoutMs) : err;
    const d = this.discarded;
    // An answer already judged worth another attempt stays so when reading its body fails.
    if (d) return this.again(d.status, errorCodeOf(d.kept), undefined, d.delayMs);
    if (!this.passed && this.attempt < this.policy.retries && this.mayResend(error)) {
      return this.again(0, undefined, error, backoff(this.policy.baseMs, this.attempt, this.policy.maxDelayMs));
    }
    this.finish(error);
  }

  /** A failure without an answer: sent again when the request never left, or the call is idempotent. */
  private mayResend(err: Error): boolean {
    if (NOT_SENT_CODES.has(transportCodeOf(err) ?? '')) return true;
    return this.attempts.idempotent && isTransient(err);
  }

  /** The wait before asking again after an answer of `status`, or undefined when that answer is final. */
  private retryDelay(status: number, headers: IncomingHttpHeaders): number | undefined {
    if (!this.attempts.idempotent || this.attempt >= this.policy.retries || !TRANSIENT_STATUS.includes(status)) return undefined;
    const after = retryAfterMs(headers['retry-after']);
    if (after === undefined) return backoff(this.policy.baseMs, this.attempt, this.policy.maxDelayMs);
    return after <= this.policy.retryAfterMaxMs ? after : undefined;
  }

  private again(status: number, errorCode: number | undefined, error: Error | undefined, delayMs: number): void {
    this.current = undefined;
    const retried: RetriedAttempt = { attempt: this.attempt + 1, status, errorCode, error, ms: Date.now() - this.startedAt, delayMs };
    this.attempt++;
    // The wait is set before the call is told, so that an abort from onRetry ends it.
    this.waiting = setTimeout(() => { this.waiting = undefined; this.send(); }, delayMs);
    this.attempts.onRetry?.(retried);
  }

  private finish(err: Error): void {
    if (this.finished) return;
    this.finished = true;
    this.clearDeadline();
    this.handler.onResponseError?.(this.controller, err);
  }
}

/** The handler of one attempt: reports to its call with the attempt's number. */
class AttemptHandler implements Handler {
  constructor(private readonly call: RetriedCall, private readonly n: number) {}
  onRequestStart(controller: Controller): void { this.call.attemptStarted(this.n, controller); }
  onResponseStart(_c: Controller, status: number, headers: IncomingHttpHeaders, message?: string): void { this.call.responseStart(this.n, status, headers, message); }
  onResponseData(_c: Controller, chunk: Buffer): void { this.call.responseData(this.n, chunk); }
  onResponseEnd(_c: Controller, trailers: IncomingHttpHeaders): void { this.call.responseEnd(this.n, trailers); }
  onResponseError(_c: Controller, err: Error): void { this.call.responseError(this.n, err); }
}

function errorCodeOf(kept: Buffer[]): number | undefined {
  try {
    const code = Number((JSON.parse(Buffer.concat(kept).toString('utf8')) as { error_code?: unknown }).error_code);
    return Number.isFinite(code) && code !== 0 ? code : undefined;
  } catch {
    return undefined;
  }
}
