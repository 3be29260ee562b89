/**
 * What the retry policy on the dispatcher (serviceRetry, src/api/retry-policy.ts) costs a JSON call that
 * succeeds the first time: BENCH_CLIENT_CALLS (default 2,000) POSTs of the same signed `file.ls` body to a
 * local server answering a small JSON list, one after another on one keep-alive connection, sent three
 * ways in each round:
 * - baseline: undici `request` on the client's own dispatcher (no policy, no signing, no parsing);
 * - through the policy: the same request on `retryingDispatcher` with the call's `attempts` (its
 *   per-attempt deadline timer and attempt handler), nothing else added;
 * - `client.file.ls`: the whole call (signing, the policy, parsing, normalising).
 * Rounds alternate which side goes first; the figures are the medians of the rounds' ratios to the
 * baseline. Prints one JSON line. Run: `node --import tsx scripts/bench/client-retry.ts` (or
 * `npm run bench -- client-retry`).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request, type Dispatcher } from 'undici';
import { ServiceClient } from '../../src/api/client.js';
import type { CallDispatchOptions } from '../../src/api/retry-policy.js';
import { ENDPOINTS } from '../../src/shared/endpoints.js';

const calls = Number(process.env.BENCH_CLIENT_CALLS ?? 2_000);
const rounds = 5;
const answer = JSON.stringify({ count: 3, list: [{ hash: 'a', fullpath: 'x', filename: 'x', dir: 0, filesize: 1 }] });

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
    res.end(answer);
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const client = new ServiceClient({ baseUrl, credentials: { library: { org_client_id: 'oc_bench', org_client_secret: 'bench-secret-0000' } } });
const body = new URLSearchParams(client.signedParams(ENDPOINTS.file.ls, { fullpath: 'x' })).toString();
const headers = { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' };

async function raw(): Promise<void> {
  const res = await request(`${baseUrl}/m-open/1/file/ls`, { method: 'POST', headers, body, dispatcher: client.dispatcher });
  await res.body.text();
}

async function policy(): Promise<void> {
  const opts: Dispatcher.RequestOptions & CallDispatchOptions = {
    origin: baseUrl, path: '/m-open/1/file/ls', method: 'POST', headers, body,
    attempts: { timeoutMs: 30_000, idempotent: true, renew: () => ({ path: '/m-open/1/file/ls', headers, body }) },
  };
  const res = await client.retryingDispatcher.request(opts);
  await res.body.text();
}

async function whole(): Promise<void> {
  await client.file.ls({ fullpath: 'x' });
}

async function timed(fn: () => Promise<void>): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < calls; i++) await fn();
  return performance.now() - started;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
// Warm the connection and the code paths.
for (const fn of [raw, policy, whole]) for (let i = 0; i < 200; i++) await fn();

const ratios: { policy: number; whole: number }[] = [];
const baselineMs: number[] = [];
for (let r = 0; r < rounds; r++) {
  const order = r % 2 === 0 ? [raw, policy, whole] : [whole, policy, raw];
  const ms = new Map<() => Promise<void>, number>();
  for (const fn of order) ms.set(fn, await timed(fn));
  baselineMs.push(ms.get(raw)!);
  ratios.push({ policy: ms.get(policy)! / ms.get(raw)!, whole: ms.get(whole)! / ms.get(raw)! });
}

process.stdout.write(JSON.stringify({
  figure: 'JSON call through the retry policy vs a bare request',
  calls, rounds,
  baselineUsPerCall: Math.round((median(baselineMs) / calls) * 1000),
  policyRatio: Number(median(ratios.map((x) => x.policy)).toFixed(2)),
  wholeCallRatio: Number(median(ratios.map((x) => x.whole)).toFixed(2)),
  ratios: ratios.map((x) => [Number(x.policy.toFixed(2)), Number(x.whole.toFixed(2))]),
}) + '\n');

await client.close();
await new Promise<void>((resolve) => server.close(() => resolve()));
