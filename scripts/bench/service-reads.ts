/**
 * One read at a time, by kind: `ls` (a page of the 20 entries of a folder), `info` and `download_url`
 * (a file), BENCH_READS_OPS calls of each kind (default 1 500) from 2 clients in flight, after 200 to
 * warm up, against one `cloudlib service` process on SQLite (the reference) and one on PostgreSQL, in
 * BENCH_READS_ROUNDS rounds (default 2) of the rows in turn. Each kind of each row gives calls per
 * second, p50/p99 latency, and the CPU time per call of the service process (user and system, from
 * /proc) and of PostgreSQL (all its processes): where a read's cost goes on each engine, without the
 * writes and the lock of the mixed load (service-load.ts). BENCH_READS_BASELINE=DIR (another checkout)
 * adds that code's process on PostgreSQL (a database of its own in the same cluster). BENCH_READS_SYNC=1
 * runs PostgreSQL with fsync and synchronous commit on (the server's defaults; the tests' cluster has
 * them off) and adds a row of this code with the replay guard's table made logged again.
 * Standalone: `node --import tsx scripts/bench/service-reads.ts`.
 */
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { ServiceProcess } from '../../test/support/service-process.js';
import { prepareLoad, quantile } from './support/service-load.js';
import { clusterCpuMs, type ClusterCpu } from './service-load.js';
import { startServiceSetups } from './support/service-setups.js';
import { cpuTimesOf } from './support/process-cpu.js';

const opsPerKind = Number(process.env.BENCH_READS_OPS ?? 1_500);
const rounds = Number(process.env.BENCH_READS_ROUNDS ?? 2);
const baselineRoot = process.env.BENCH_READS_BASELINE;
const sync = process.env.BENCH_READS_SYNC === '1';
const KINDS = ['ls', 'info', 'download_url'] as const;
type Kind = (typeof KINDS)[number];
const WARM_UP = 200;
const IN_FLIGHT = 2;
const DATABASE = 'bench_reads';

interface Measured { latencies: number[]; elapsedMs: number; userMs: number; systemMs: number; postgresMs: number | undefined }

export async function benchServiceReads(): Promise<Record<string, unknown>[]> {
  if (sync && baselineRoot) throw new Error('BENCH_READS_SYNC=1 and BENCH_READS_BASELINE: one at a time (each takes the baseline database)');
  const setups = await startServiceSetups(DATABASE, sync ? ['fsync=on', 'synchronous_commit=on'] : []);
  const rows: { setup: string; target: ServiceProcess; postgres: boolean; root: string }[] = [];
  const measured = new Map<string, Measured[]>();
  try {
    rows.push({ setup: 'sqlite', target: await setups.sqlite(), postgres: false, root: 'r0' });
    const onPostgres = await setups.postgres();
    rows.push({ setup: 'postgresql', target: onPostgres, postgres: true, root: 'r1' });
    if (baselineRoot) rows.push({ setup: 'postgresql, baseline', target: await setups.baseline(join(baselineRoot, 'bin', 'cloudlib.js')), postgres: true, root: 'r2' });
    if (sync) {
      // This code again, on a database of its own whose guard table writes WAL as it did before.
      const logged = await setups.baseline(join(fileURLToPath(new URL('../..', import.meta.url)), 'bin', 'cloudlib.js'));
      const admin = new pg.Client({ connectionString: `postgresql://cloudlib@127.0.0.1:${setups.pg.port}/${DATABASE}_baseline` });
      await admin.connect();
      try {
        await admin.query('ALTER TABLE signature_uses SET LOGGED');
      } finally {
        await admin.end();
      }
      rows.push({ setup: 'postgresql, guard table logged', target: logged, postgres: true, root: 'r3' });
    }
    for (const r of rows) await prepareLoad(r.target.client, { clients: 1, opsPerClient: 0, root: r.root });
    for (let round = 0; round < rounds; round++) {
      for (const r of rows) {
        for (const kind of KINDS) {
          const key = `${r.setup}\0${kind}`;
          measured.set(key, [...measured.get(key) ?? [], await measure(r.target, r.root, kind, r.postgres ? setups.pg.port : undefined)]);
        }
      }
    }
  } finally {
    await setups.close();
  }
  const out: Record<string, unknown>[] = [];
  for (const r of rows) {
    for (const kind of KINDS) {
      const m = measured.get(`${r.setup}\0${kind}`)!;
      const ref = measured.get(`sqlite\0${kind}`)!;
      const latencies = m.flatMap((x) => x.latencies);
      const calls = latencies.length;
      const perSecond = (ms: Measured[]) => ms.reduce((n, x) => n + x.latencies.length, 0) / (ms.reduce((n, x) => n + x.elapsedMs, 0) / 1000);
      const perCall = (f: (x: Measured) => number) => round(m.reduce((n, x) => n + f(x), 0) / calls, 3);
      const o = {
        bench: 'service.reads', setup: r.setup, kind, calls, rounds, cores: availableParallelism(), load_average: round(loadavg()[0]!, 1),
        calls_per_s: round(perSecond(m)), ratio_to_sqlite: round(perSecond(m) / perSecond(ref), 2),
        p50_ms: round(quantile(latencies, 0.5), 2), p99_ms: round(quantile(latencies, 0.99)),
        p50_ratio_to_sqlite: round(quantile(ref.flatMap((x) => x.latencies), 0.5) / quantile(latencies, 0.5), 2),
        service_cpu_ms_per_call: { user: perCall((x) => x.userMs), system: perCall((x) => x.systemMs) },
        ...(r.postgres ? { postgresql_cpu_ms_per_call: perCall((x) => x.postgresMs ?? 0) } : {}),
      };
      out.push(o);
      process.stdout.write(JSON.stringify(o) + '\n');
    }
  }
  return out;
}

async function measure(target: ServiceProcess, root: string, kind: Kind, postgresPort: number | undefined): Promise<Measured> {
  const c = target.client;
  const call = (i: number) => {
    const file = `${root}/c0/keep/f${i % 20}.bin`;
    if (kind === 'ls') return c.file.ls({ fullpath: `${root}/c0/keep`, size: 100 });
    if (kind === 'info') return c.file.info({ fullpath: file });
    return c.file.downloadUrl({ fullpath: file });
  };
  for (let i = 0; i < WARM_UP; i++) await call(i);
  const cpu0 = await cpuTimesOf(target.pid);
  const pg0 = postgresPort === undefined ? undefined : await clusterCpuMs(postgresPort);
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(Array.from({ length: IN_FLIGHT }, async (_, w) => {
    for (let i = w; i < opsPerKind; i += IN_FLIGHT) {
      const t = performance.now();
      await call(i);
      latencies.push(performance.now() - t);
    }
  }));
  const elapsedMs = performance.now() - t0;
  const cpu1 = await cpuTimesOf(target.pid);
  const pg1 = postgresPort === undefined ? undefined : await clusterCpuMs(postgresPort);
  const total = (x: ClusterCpu) => x.backends + x.exited + x.background;
  return { latencies, elapsedMs, userMs: cpu1.user - cpu0.user, systemMs: cpu1.system - cpu0.system, postgresMs: pg0 && pg1 ? total(pg1) - total(pg0) : undefined };
}

function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await benchServiceReads();
