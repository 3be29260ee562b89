/**
 * Requests per second of `ls` (a page of 100 of a folder of 1 000 entries) answered by one `cloudlib
 * service` process and by two processes on the same PostgreSQL database, the load spread round-robin
 * over both (as a load balancer would), measured in one run; the one-process service on SQLite (the
 * default) as the reference. The load comes from this process: BENCH_LS_CLIENTS requests in flight
 * (default 8), BENCH_LS_REQUESTS in all per row (default 3 000), after 300 to warm up. PostgreSQL is a
 * cluster of Debian's server started for the run (as the tests start it), the blobs a folder shared by
 * the processes. Runs standalone: `node --import tsx scripts/bench/service-processes.ts`.
 */
import { availableParallelism } from 'node:os';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServiceClient } from '../../src/api/client.js';
import { startPostgres } from '../../test/support/postgres.js';
import { startServiceProcess, type ServiceProcess } from '../../test/support/service-process.js';

export async function benchServiceProcesses(): Promise<Record<string, unknown>[]> {
  const clients = Number(process.env.BENCH_LS_CLIENTS ?? 8);
  const total = Number(process.env.BENCH_LS_REQUESTS ?? 3_000);
  const results: Record<string, unknown>[] = [];
  const print = (r: Record<string, unknown>) => { results.push(r); process.stdout.write(JSON.stringify(r) + '\n'); };
  const shared = await mkdtemp(join(tmpdir(), 'cloudlib-bench-procs-'));
  await mkdir(join(shared, 'blobs'));
  await mkdir(join(shared, 'staging'));
  const pg = await startPostgres();
  const running: ServiceProcess[] = [];
  try {
    const sqlite = await startServiceProcess();
    running.push(sqlite);
    await fillFolder(sqlite.client);
    const reference = await requestsPerSecond([sqlite.client], clients, total);
    await sqlite.close();
    running.pop();

    const args = ['--metadata', await pg.createDatabase('bench_procs'), '--blobs', `file://${join(shared, 'blobs')}`, '--upload-staging', join(shared, 'staging')];
    const a = await startServiceProcess({ serviceArgs: args });
    running.push(a);
    const b = await startServiceProcess({ serviceArgs: args });
    running.push(b);
    await fillFolder(a.client);
    const one = await requestsPerSecond([a.client], clients, total);
    const two = await requestsPerSecond([a.client, b.client], clients, total);
    const base = { bench: 'service.processes', what: 'ls 100 of 1000', clients, requests: total, cores: availableParallelism() };
    print({ ...base, metadata: 'sqlite', processes: 1, requests_per_s: round(reference) });
    print({ ...base, metadata: 'postgresql', processes: 1, requests_per_s: round(one), ratio_to_sqlite: round(one / reference, 2) });
    print({ ...base, metadata: 'postgresql', processes: 2, requests_per_s: round(two), ratio_to_one_process: round(two / one, 2) });
  } finally {
    for (const p of running.reverse()) await p.close();
    await pg.stop();
    await rm(shared, { recursive: true, force: true });
  }
  return results;
}

async function fillFolder(client: ServiceClient): Promise<void> {
  for (let i = 0; i < 1000; i += 100) {
    await Promise.all(Array.from({ length: 100 }, (_, j) => client.file.createFolder({ fullpath: `wide/f-${String(i + j).padStart(4, '0')}` })));
  }
}

/** `total` ls calls, `inFlight` at a time, the n-th sent to `targets[n % targets.length]`; after 300 unmeasured. */
async function requestsPerSecond(targets: ServiceClient[], inFlight: number, total: number): Promise<number> {
  const run = async (count: number) => {
    let next = 0;
    await Promise.all(Array.from({ length: inFlight }, async () => {
      for (let n = next++; n < count; n = next++) {
        const page = await targets[n % targets.length]!.file.ls({ fullpath: 'wide', start: (n % 10) * 100, size: 100 });
        if (page.list.length !== 100) throw new Error(`ls: expected 100 entries, got ${page.list.length}`);
      }
    }));
  };
  await run(300);
  const t0 = performance.now();
  await run(total);
  return total / ((performance.now() - t0) / 1000);
}

function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await benchServiceProcesses();
