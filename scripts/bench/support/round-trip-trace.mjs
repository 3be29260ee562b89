/**
 * Loaded into a service process by the service-load benchmark (BENCH_LOAD_TRACE=1, `node --import`): times
 * what the process asks PostgreSQL, from the driver's side, and writes it as JSON to
 * `$CLOUDLIB_ROUND_TRIP_TRACE/PID.json` (every second and at exit):
 * - `round_trips`: the statements one connection sent in one turn of the event loop (one round trip,
 *   pipelined), by their kinds in order: how many, and p50/mean ms from the send to the last answer, to
 *   the first answer, and of the gap since the connection's previous answer inside a transaction (the
 *   service's own work between two round trips of a change);
 * - `lock_hold_ms`: from the answer of a library's lock (`… FOR UPDATE`) to the answer of its COMMIT;
 * - `transaction_ms`: from the round trip that sent BEGIN to the answer of COMMIT or ROLLBACK;
 * - `pool`: the wait for a connection of the pool, and connections opened;
 * - `requests`: by path, p50 ms of the whole request and of its parts: before its first statement,
 *   from it to its last answer, and after it (the reply), and its round trips;
 * - `event_loop`: over the seconds in which the process answered 20 requests or more, the median of
 *   each second's event-loop delay p50 and p99 (ms: what an answer arriving waits for the work ahead of
 *   it, or for a core) and of the share of the second the loop was not idle (busy, or ready and waiting
 *   for a core).
 * It changes nothing the service does.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

const out = process.env.CLOUDLIB_ROUND_TRIP_TRACE;
// The driver the service itself loads: resolved from its `bin/cloudlib.js`.
const pg = out && process.argv[1] ? createRequire(process.argv[1])('pg') : undefined;

const quantile = (values, q) => {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  return Number(s[Math.min(s.length - 1, Math.floor(q * s.length))].toFixed(3));
};
const mean = (values) => (values.length === 0 ? null : Number((values.reduce((a, b) => a + b, 0) / values.length).toFixed(3)));

function kindOf(text) {
  const t = text.replace(/\s+/g, ' ').trim();
  if (/^(BEGIN|COMMIT|ROLLBACK)\b/.test(t)) return t.split(' ')[0];
  if (/\bFOR UPDATE\b/.test(t)) return 'lock';
  if (/^UPDATE libraries SET last_op_ms\b/.test(t)) return 'clock';
  const m = /^(WITH \w+ AS \(INSERT INTO \w+|INSERT INTO \w+|UPDATE \w+|DELETE FROM \w+|SELECT .*? FROM \w+)/.exec(t);
  return m ? m[1].replace(/^SELECT .*? FROM/, 'SELECT FROM') : t.slice(0, 30);
}

if (pg) {
  const requestOf = new AsyncLocalStorage();
  const roundTrips = new Map();
  const holds = [];
  const transactions = [];
  const poolWaits = [];
  let opened = 0;
  const requests = new Map();

  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (event, req, res) {
    if (event !== 'request') return emit.apply(this, arguments);
    const r = { t0: performance.now(), first: undefined, last: undefined, trips: 0 };
    const path = (/^\/[^?]*/.exec(req.url ?? '')?.[0] ?? '?').replace(/\/\d+\//g, '/N/');
    res.on('finish', () => {
      const t = performance.now();
      answered++;
      let s = requests.get(path);
      if (!s) requests.set(path, (s = { total: [], before: [], statements: [], after: [], trips: [] }));
      s.total.push(t - r.t0);
      if (r.first !== undefined) {
        s.before.push(r.first - r.t0);
        s.statements.push(r.last - r.first);
        s.after.push(t - r.last);
        s.trips.push(r.trips);
      }
    });
    return requestOf.run(r, () => emit.apply(this, arguments));
  };

  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (config, values, callback) {
    const text = typeof config === 'string' ? config : config?.text;
    // The pool's own queries (a statement outside a transaction) come with a callback.
    const done = typeof callback === 'function' ? callback : typeof values === 'function' ? values : undefined;
    if (!text || typeof config?.submit === 'function') return query.call(this, config, values, callback);
    let settle;
    const settled = new Promise((resolve) => { settle = resolve; });
    let answer;
    if (done) {
      const traced = (err, res) => { settle(); done(err, res); };
      answer = done === callback ? query.call(this, config, values, traced) : query.call(this, config, traced);
    } else {
      answer = query.call(this, config, values);
      if (typeof answer?.then !== 'function') return answer;
      answer.then(settle, settle);
    }
    const now = performance.now();
    const request = requestOf.getStore();
    if (request) request.first ??= now;
    if (!this.traceTrip) {
      this.traceTrip = { kinds: [], t0: now, first: undefined, open: 0, gap: this.traceInTx && this.traceLastAnswer !== undefined ? now - this.traceLastAnswer : undefined };
      if (request) request.trips++;
      process.nextTick(() => { this.traceTrip = undefined; });
    }
    const trip = this.traceTrip;
    const kind = kindOf(text);
    trip.kinds.push(kind);
    trip.open++;
    if (kind === 'BEGIN') { this.traceInTx = true; this.traceTxFrom = now; }
    const onAnswer = () => {
      const t = performance.now();
      if (request) request.last = t;
      if (kind === 'lock') this.traceLockAt = t;
      trip.first ??= t - trip.t0;
      if (--trip.open > 0) return;
      const key = trip.kinds.join(' | ');
      let s = roundTrips.get(key);
      if (!s) roundTrips.set(key, (s = { total: [], first: [], gap: [] }));
      s.total.push(t - trip.t0);
      s.first.push(trip.first);
      if (trip.gap !== undefined) s.gap.push(trip.gap);
      this.traceLastAnswer = t;
      if (trip.kinds.includes('COMMIT') || trip.kinds.includes('ROLLBACK')) {
        if (this.traceLockAt !== undefined) holds.push(t - this.traceLockAt);
        if (this.traceTxFrom !== undefined) transactions.push(t - this.traceTxFrom);
        this.traceInTx = false;
        this.traceLockAt = undefined;
        this.traceTxFrom = undefined;
      }
    };
    void settled.then(onAnswer);
    return answer;
  };

  const connect = pg.Pool.prototype.connect;
  pg.Pool.prototype.connect = function (callback) {
    if (!this.traceCounted) {
      this.traceCounted = true;
      this.on('connect', () => { opened++; });
    }
    if (callback) return connect.call(this, callback);
    const t0 = performance.now();
    return connect.call(this).then((client) => { poolWaits.push(performance.now() - t0); return client; });
  };

  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  let loopFrom = performance.eventLoopUtilization();
  let answered = 0;
  let answeredBefore = 0;
  const loop = { delayP50: [], delayP99: [], busy: [] };
  const sampleLoop = () => {
    if (answered - answeredBefore >= 20) {
      // The histogram holds each 1 ms timer's whole interval: its delay is the rest.
      loop.delayP50.push(Math.max(0, loopDelay.percentile(50) / 1e6 - 1));
      loop.delayP99.push(Math.max(0, loopDelay.percentile(99) / 1e6 - 1));
      loop.busy.push(performance.eventLoopUtilization(loopFrom).utilization);
    }
    answeredBefore = answered;
    loopFrom = performance.eventLoopUtilization();
    loopDelay.reset();
  };
  const write = () => {
    const trips = {};
    for (const [key, s] of [...roundTrips].sort((a, b) => b[1].total.length - a[1].total.length)) {
      if (s.total.length < 20) continue;
      trips[key] = { n: s.total.length, p50_ms: quantile(s.total, 0.5), mean_ms: mean(s.total), first_answer_p50_ms: quantile(s.first, 0.5), gap_before_p50_ms: quantile(s.gap, 0.5), gap_before_mean_ms: mean(s.gap) };
    }
    const byPath = {};
    for (const [path, s] of requests) {
      if (s.total.length < 20) continue;
      byPath[path] = { n: s.total.length, p50_ms: quantile(s.total, 0.5), before_p50_ms: quantile(s.before, 0.5), statements_p50_ms: quantile(s.statements, 0.5), after_p50_ms: quantile(s.after, 0.5), round_trips_p50: quantile(s.trips, 0.5) };
    }
    writeFileSync(join(out, `${process.pid}.json`), JSON.stringify({
      lock_hold_ms: { n: holds.length, p50: quantile(holds, 0.5), mean: mean(holds), p90: quantile(holds, 0.9) },
      transaction_ms: { p50: quantile(transactions, 0.5), mean: mean(transactions) },
      event_loop: { seconds: loop.busy.length, delay_p50_ms: quantile(loop.delayP50, 0.5), delay_p99_ms: quantile(loop.delayP99, 0.5), busy: quantile(loop.busy, 0.5) },
      pool: { waits: poolWaits.length, p50_ms: quantile(poolWaits, 0.5), p99_ms: quantile(poolWaits, 0.99), connections_opened: opened },
      round_trips: trips,
      requests: byPath,
    }));
  };
  setInterval(() => { sampleLoop(); write(); }, 1000).unref();
  process.on('exit', write);
}
