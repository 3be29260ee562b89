/**
 * The retry policy composed onto the client's dispatcher (src/api/retry-policy.ts): against a fault
 * server through ServiceClient (a 503 then 200, each attempt signed anew; Retry-After; a hang then 200
 * within the per-attempt deadline; a 4xx never repeated), and on a scripted dispatch with fake timers
 * (an aborted call makes no further attempt, whatever the wait).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { Dispatcher } from 'undici';
import { ServiceClient, type ClientOptions } from '../../../src/api/client.js';
import { retryAfterMs, serviceRetry, type CallDispatchOptions } from '../../../src/api/retry-policy.js';
import { sign, type Params } from '../../../src/shared/sign.js';
import type { Logger } from '../../../src/shared/log.js';
import { waitFor } from '../../support/wait-for.js';

const SECRET = 'LIBSECRET-4d5e6f7a8b';

/** What the fault server does with the next request: answer, or hold it unanswered until closed. */
type Fault = { status: number; body?: unknown; headers?: Record<string, string> } | 'hang' | 'hang-body';

class FaultServer {
  readonly seen: { path: string; form: Record<string, string> }[] = [];
  readonly faults: Fault[] = [];
  private server?: Server;
  private readonly held = new Set<ServerResponse>();

  get url(): string { return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`; }

  async start(): Promise<this> {
    this.server = createServer((req, res) => { void this.handle(req, res); });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return this;
  }

  async close(): Promise<void> {
    for (const res of this.held) res.destroy();
    this.server!.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req as AsyncIterable<Buffer>) chunks.push(c);
    this.seen.push({ path: new URL(req.url ?? '/', 'http://x').pathname, form: Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8'))) });
    const fault = this.faults.shift() ?? { status: 200, body: { count: 0, list: [] } };
    if (fault === 'hang') { this.held.add(res); return; }
    if (fault === 'hang-body') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 100 });
      res.write('{"count":');
      this.held.add(res);
      return;
    }
    const data = JSON.stringify(fault.body ?? {});
    res.writeHead(fault.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), ...fault.headers });
    res.end(data);
  }
}

function logCapture(): { logger: Logger; warnings: () => Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({ write(chunk: Buffer, _enc, cb) { lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>); cb(); } });
  return { logger: pino({ level: 'trace' }, sink) as unknown as Logger, warnings: () => lines.filter((l) => l.level === 40) };
}

describe('retry policy on the dispatcher, against a fault server', { timeout: 20_000 }, () => {
  let server: FaultServer;
  const clients: ServiceClient[] = [];
  const make = (opts: Partial<ClientOptions> = {}) => {
    const c = new ServiceClient({ baseUrl: server.url, retryBaseMs: 1, credentials: { library: { org_client_id: 'oc_1', org_client_secret: SECRET } }, ...opts });
    clients.push(c);
    return c;
  };

  beforeAll(async () => { server = await new FaultServer().start(); });
  afterAll(async () => {
    for (const c of clients) await c.close();
    await server.close();
  });
  beforeEach(() => { server.seen.length = 0; server.faults.length = 0; });

  it('a 503 then a 200: asked again, each attempt signed anew with its own dateline', async () => {
    let now = 1_795_312_800_000;
    const { logger, warnings } = logCapture();
    const exchanges: { status: number }[] = [];
    server.faults.push({ status: 503, body: { error_code: 50301, error_msg: 'busy' } });
    const res = await make({ clock: () => (now += 1000), logger, onExchange: (e) => exchanges.push(e) }).file.ls({ fullpath: 'a' });
    expect(res.list).toEqual([]);
    expect(server.seen).toHaveLength(2);
    const [first, second] = server.seen.map((s) => s.form);
    expect(first!.dateline).not.toBe(second!.dateline);
    for (const form of [first!, second!]) {
      const { sign: given, ...rest } = form;
      expect(sign(SECRET, rest as Params)).toBe(given);
    }
    expect(warnings()).toEqual([expect.objectContaining({ endpoint: 'file.ls', attempt: 1, status: 503, error_code: 50301 })]);
    expect(exchanges.map((e) => e.status)).toEqual([503, 200]);
  });

  it('Retry-After is honoured (seconds or a date); one longer than retryAfterMaxMs passes the answer on', async () => {
    const { logger, warnings } = logCapture();
    // A backoff of this base would wait seconds: the service's Retry-After of 0 is what is waited.
    const c = make({ retryBaseMs: 60_000, logger, retryAfterMaxMs: 10_000 });
    server.faults.push({ status: 429, headers: { 'retry-after': '0' } }, { status: 503, headers: { 'retry-after': new Date(Date.now() - 60_000).toUTCString() } });
    await c.file.ls({ fullpath: 'a' });
    expect(server.seen).toHaveLength(3);
    expect(warnings().map((w) => w.retryInMs)).toEqual([0, 0]);

    server.seen.length = 0;
    server.faults.push({ status: 503, headers: { 'retry-after': '3600' }, body: { error_code: 50301, error_msg: 'come back later' } });
    await expect(c.file.ls({ fullpath: 'a' })).rejects.toMatchObject({ status: 503, code: 50301 });
    expect(server.seen).toHaveLength(1);

    expect(retryAfterMs('120')).toBe(120_000);
    expect(retryAfterMs('Thu, 26 Nov 2026 10:00:30 GMT', Date.parse('Thu, 26 Nov 2026 10:00:00 GMT'))).toBe(30_000);
    expect(retryAfterMs('soon')).toBeUndefined();
  });

  it('an attempt that hangs ends at its own deadline and the next one answers', async () => {
    const { logger, warnings } = logCapture();
    server.faults.push('hang');
    const res = await make({ timeoutMs: 2_000, logger }).file.info({ fullpath: 'a' });
    expect(res).toMatchObject({ count: 0 });
    expect(server.seen).toHaveLength(2);
    expect(warnings()).toEqual([expect.objectContaining({ endpoint: 'file.info', attempt: 1, status: 0 })]);
  });

  it('the deadline covers the body too; once an answer passed on, it is not asked again', async () => {
    server.faults.push('hang-body');
    const err = await make({ timeoutMs: 2_000 }).file.info({ fullpath: 'a' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 200, transport: true, transportCode: 'ETIMEDOUT', serviceMessage: 'timed out after 2000 ms' });
    expect(server.seen).toHaveLength(1);
  });

  it('a 4xx is never asked again, nor a 501; a write only when it was never sent', async () => {
    const c = make({ retries: 3 });
    server.faults.push({ status: 403, body: { error_code: 40310, error_msg: 'no permission' } });
    await expect(c.file.ls({ fullpath: 'a' })).rejects.toMatchObject({ status: 403, code: 40310 });
    server.faults.push({ status: 404, body: { error_code: 40402, error_msg: 'missing' } });
    await expect(c.file.info({ fullpath: 'a' })).rejects.toMatchObject({ status: 404, code: 40402 });
    server.faults.push({ status: 501, body: { error_code: 50101, error_msg: 'not supported' } });
    await expect(c.file.ls({ fullpath: 'a' })).rejects.toMatchObject({ status: 501 });
    server.faults.push({ status: 503, body: { error_code: 50301, error_msg: 'busy' } });
    await expect(c.file.createFolder({ fullpath: 'x' })).rejects.toMatchObject({ status: 503 });
    expect(server.seen).toHaveLength(4);
  });

  it('a signal aborted while an attempt hangs ends the call with no further attempt', async () => {
    server.faults.push('hang');
    const abort = new AbortController();
    const c = make({ timeoutMs: 60_000 });
    const call = c.file.info({ fullpath: 'a' }, { signal: abort.signal });
    await waitFor('the first attempt at the server', () => server.seen.length, { until: (n) => n >= 1 });
    abort.abort(new Error('caller gone'));
    await expect(call).rejects.toMatchObject({ transport: true, serviceMessage: expect.stringContaining('caller gone') });
    expect(server.seen).toHaveLength(1);
  });
});

/** A dispatch whose attempts answer as scripted (a status, or a transport error), synchronously. */
function scriptedDispatch(script: (number | Error)[]): { dispatch: Dispatcher.Dispatch; calls: Dispatcher.DispatchOptions[] } {
  const calls: Dispatcher.DispatchOptions[] = [];
  const dispatch = ((opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) => {
    calls.push(opts);
    const step = script.shift() ?? 200;
    const controller: Dispatcher.DispatchController = { aborted: false, paused: false, reason: null, abort() {}, pause() {}, resume() {} };
    handler.onRequestStart?.(controller, {});
    if (step instanceof Error) handler.onResponseError?.(controller, step);
    else {
      handler.onResponseStart?.(controller, step, {}, '');
      handler.onResponseData?.(controller, Buffer.from('{}'));
      handler.onResponseEnd?.(controller, {});
    }
    return true;
  }) as Dispatcher.Dispatch;
  return { dispatch, calls };
}

function recordingHandler(): { handler: Dispatcher.DispatchHandler; events: string[] } {
  const events: string[] = [];
  return {
    events,
    handler: {
      onRequestStart: () => events.push('start'),
      onResponseStart: (_c, status) => events.push(`status ${status}`),
      onResponseEnd: () => events.push('end'),
      onResponseError: (_c, err) => events.push(`error ${err.message}`),
    },
  };
}

describe('retry policy on a scripted dispatch', () => {
  beforeEach(() => { vi.useFakeTimers(); });
  afterEach(() => { vi.useRealTimers(); });

  const policy = { retries: 3, baseMs: 100, maxDelayMs: 5_000, retryAfterMaxMs: 10_000 };
  const call = (attempts: Partial<NonNullable<CallDispatchOptions['attempts']>> = {}): CallDispatchOptions => ({
    method: 'POST', path: '/m-open/1/file/ls', origin: 'http://service',
    attempts: { timeoutMs: 1_000, idempotent: true, renew: () => ({ path: '/m-open/1/file/ls?renewed' }), ...attempts },
  });

  it('a call aborted during the wait between attempts makes no further attempt', () => {
    const { dispatch, calls } = scriptedDispatch([503, 503, 503, 503]);
    const { handler, events } = recordingHandler();
    let controller: Dispatcher.DispatchController | undefined;
    const h = { ...handler, onRequestStart: (c: Dispatcher.DispatchController) => { controller = c; events.push('start'); } };
    serviceRetry(policy)(dispatch)(call(), h);
    expect(calls).toHaveLength(1);
    controller!.abort(new Error('caller gone'));
    vi.advanceTimersByTime(600_000);
    expect(calls).toHaveLength(1);
    expect(events).toEqual(['start', 'error caller gone']);
  });

  it('a call aborted before it began sends nothing', () => {
    const { dispatch, calls } = scriptedDispatch([200]);
    const { handler, events } = recordingHandler();
    const h = { ...handler, onRequestStart: (c: Dispatcher.DispatchController) => { events.push('start'); c.abort(new Error('already aborted')); } };
    serviceRetry(policy)(dispatch)(call(), h);
    vi.advanceTimersByTime(60_000);
    expect(calls).toHaveLength(0);
    expect(events).toEqual(['start', 'error already aborted']);
  });

  it('retries stop after `retries`; the attempts after the first use the renewed request; the last answer passes on', () => {
    const { dispatch, calls } = scriptedDispatch([503, 503, 503, 503]);
    const { handler, events } = recordingHandler();
    serviceRetry(policy)(dispatch)(call(), handler);
    vi.advanceTimersByTime(600_000);
    expect(calls.map((c) => c.path)).toEqual(['/m-open/1/file/ls', '/m-open/1/file/ls?renewed', '/m-open/1/file/ls?renewed', '/m-open/1/file/ls?renewed']);
    expect(events).toEqual(['start', 'status 503', 'end']);
  });

  it('a transport failure: asked again for an idempotent call, or whatever the call when nothing was sent', () => {
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const refused = Object.assign(new Error('connect refused'), { code: 'ECONNREFUSED' });
    let s = scriptedDispatch([reset, 200]);
    serviceRetry(policy)(s.dispatch)(call(), recordingHandler().handler);
    vi.advanceTimersByTime(60_000);
    expect(s.calls).toHaveLength(2);

    s = scriptedDispatch([reset, 200]);
    const write = recordingHandler();
    serviceRetry(policy)(s.dispatch)(call({ idempotent: false }), write.handler);
    vi.advanceTimersByTime(60_000);
    expect(s.calls).toHaveLength(1);
    expect(write.events).toEqual(['start', 'error socket hang up']);

    s = scriptedDispatch([refused, 200]);
    serviceRetry(policy)(s.dispatch)(call({ idempotent: false }), recordingHandler().handler);
    vi.advanceTimersByTime(60_000);
    expect(s.calls).toHaveLength(2);
  });

  it('policy values are checked', () => {
    expect(() => serviceRetry({ ...policy, retries: 1.5 })).toThrow(/retries: expected a non-negative integer, got 1.5/);
    expect(() => serviceRetry({ ...policy, baseMs: -1 })).toThrow(/baseMs: expected a non-negative number of milliseconds, got -1/);
  });
});
