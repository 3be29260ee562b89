/**
 * Requests per second of `ls` (a page of 100 of a folder of 1 000 entries) answered by one `cloudlib
 * service` process and by two processes on the same PostgreSQL database, the load spread round-robin
 * over both (as a load balancer would), measured in one run; the one-process service on SQLite (the
 * default) as the reference. The load comes from this process: BENCH_LS_CLIENTS requests in flight
 * (default 8), BENCH_LS_REQUESTS in all per row (default 3 000), after 300 to warm up. PostgreSQL is a
 * cluster of Debian's server started for the run (as the tests start it), the blobs a folder shared by
 * the processes (a listing reads no blob). Each row also gives the CPU time per request of each service
 * process and of the load generator (from /proc over the measured requests), which says where the two
 * cores went when the rate does not. Runs standalone: `node --import tsx scripts/bench/service-processes.ts`.
 */
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { ServiceClient } from '../../src/api/client.js';
import type { ServiceProcess } from '../../test/support/service-process.js';
import { cpuMsOf } from './support/process-cpu.js';
import { startServiceSetups } from './support/service-setups.js';

export async function benchServiceProcesses(): Promise<Record<string, unknown>[]> {
  const clients = Number(process.env.BENCH_LS_CLIENTS ?? 8);
  const total = Number(process.env.BENCH_LS_REQUESTS ?? 3_000);
  const results: Record<string, unknown>[] = [];
  const print = (r: Record<string, unknown>) => { results.push(r); process.stdout.write(JSON.stringify(r) + '\n'); };
  const setups = await startServiceSetups('bench_procs');
  try {
    const sqlite = await setups.sqlite();
    await fillFolder(sqlite.client);
    const reference = await requestsPerSecond([sqlite], clients, total);
    await setups.stop(sqlite);

    const a = await setups.postgres();
    const b = await setups.postgres();
    await fillFolder(a.client);
    const one = await requestsPerSecond([a], clients, total);
    const two = await requestsPerSecond([a, b], clients, total);
    const base = { bench: 'service.processes', what: 'ls 100 of 1000', clients, requests: total, cores: availableParallelism() };
    const cpu = (r: Rate) => ({ service_cpu_ms_per_request: r.serviceCpuMs.map((ms) => round(ms, 3)), client_cpu_ms_per_request: round(r.clientCpuMs, 3) });
    print({ ...base, metadata: 'sqlite', processes: 1, requests_per_s: round(reference.perSecond), ...cpu(reference) });
    print({ ...base, metadata: 'postgresql', processes: 1, requests_per_s: round(one.perSecond), ratio_to_sqlite: round(one.perSecond / reference.perSecond, 2), ...cpu(one) });
    print({ ...base, metadata: 'postgresql', processes: 2, requests_per_s: round(two.perSecond), ratio_to_one_process: round(two.perSecond / one.perSecond, 2), ...cpu(two) });
  } finally {
    await setups.close();
  }
  return results;
}

async function fillFolder(client: ServiceClient): Promise<void> {
  for (let i = 0; i < 1000; i += 100) {
    await Promise.all(Array.from({ length: 100 }, (_, j) => client.file.createFolder({ fullpath: `wide/f-${String(i + j).padStart(4, '0')}` })));
  }
}

interface Rate {
  perSecond: number;
  /** CPU time (user + system) of each service process per request of the whole row, ms. */
  serviceCpuMs: number[];
  /** CPU time of this (the load generator's) process per request, ms. */
  clientCpuMs: number;
}

/** `total` ls calls, `inFlight` at a time, the n-th sent to `targets[n % targets.length]`; after 300 unmeasured. */
async function requestsPerSecond(targets: ServiceProcess[], inFlight: number, total: number): Promise<Rate> {
  const run = async (count: number) => {
    let next = 0;
    await Promise.all(Array.from({ length: inFlight }, async () => {
      for (let n = next++; n < count; n = next++) {
        const page = await targets[n % targets.length]!.client.file.ls({ fullpath: 'wide', start: (n % 10) * 100, size: 100 });
        if (page.list.length !== 100) throw new Error(`ls: expected 100 entries, got ${page.list.length}`);
      }
    }));
  };
  await run(300);
  const cpu0 = await Promise.all(targets.map((t) => cpuMsOf(t.pid)));
  const own0 = process.cpuUsage();
  const t0 = performance.now();
  await run(total);
  const elapsed = performance.now() - t0;
  const own = process.cpuUsage(own0);
  const cpu1 = await Promise.all(targets.map((t) => cpuMsOf(t.pid)));
  return {
    perSecond: total / (elapsed / 1000),
    serviceCpuMs: cpu1.map((ms, i) => (ms - cpu0[i]!) / total),
    clientCpuMs: (own.user + own.system) / 1000 / total,
  };
}

function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await benchServiceProcesses();
