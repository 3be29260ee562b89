/**
 * The service under a realistic load (scripts/bench/support/service-load.ts: listings, info, downloads,
 * instant and chunked create_file, create_folder, moves, deletes, tags, locks, the feed polled by a
 * gateway), BENCH_LOAD_CLIENTS clients (default 4) of BENCH_LOAD_OPS operations each (default 500), in
 * one run against: one `cloudlib service` process on SQLite (the reference), one process on PostgreSQL,
 * two processes on the same PostgreSQL database (clients spread over both), in BENCH_LOAD_ROUNDS rounds
 * (default 3) of the three in turn, each round starting one row later, so that the machine's other work and a row's place in the round fall on each row alike; a row
 * sums its rounds. Each row gives reads and
 * writes per second and their p50/p99 latency, the ratios to SQLite, the p99 of a single `ls` sent one
 * after the other during the load against its p50 with no load (and what bounds it from below, probed in
 * turn with it: the p99 of `GET /m-open/status`, which runs no statement, against its unloaded p50; on
 * PostgreSQL one `SELECT 1` round trip from this process; this process's event-loop delay during the
 * load; the lone `ls`'s own p99 with no load), and the CPU time per operation of each
 * service process and of PostgreSQL (all its processes, from /proc), so the scaling can be computed
 * when the machine lacks the cores to show it (the row of two processes computes it:
 * `scaling_with_a_core_each`). BENCH_LOAD_STATEMENTS=1 also prints, for the PostgreSQL
 * row of one process, the statements PostgreSQL spent most time on (pg_stat_statements: calls, mean
 * and total ms of execution, not counting the round trip). BENCH_LOAD_BASELINE=DIR (another checkout of
 * the project, e.g. a `git worktree` of the commit before a change) measures that code's one process on
 * PostgreSQL (a database of its own in the same cluster) in place of the two-process row: the code
 * before and after a change in turn, in one run. BENCH_LOAD_TRACE=1 loads support/round-trip-trace.mjs
 * into every service process and prints, for each process on PostgreSQL, where its statements' time
 * went (`service.load.trace`: each kind of round trip's latency and the gap before it, the hold of the
 * library's lock, the pool's wait, each request's time before, during and after its statements) and,
 * for every process, its event loop; read it with BENCH_LOAD_BASELINE (one process a row).
 * BENCH_LOAD_MIX (default `mixed,reads,writes`) names the mixes measured, each with every row: the whole
 * mix, its reads alone and its changes alone. BENCH_LOAD_PIN=1 gives PostgreSQL a core of its own (as on
 * a machine of its own): its processes on the last core, this process and the services on the others.
 * BENCH_LOAD_LIBRARIES=N spreads the clients over N libraries (default 1: all in one library, whose
 * changes queue on its lock; with N = the clients, each works in a library of its own).
 * Standalone: `node --import tsx scripts/bench/service-load.ts`.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pg from 'pg';
import { request } from 'undici';
import type { Postgres } from '../../test/support/postgres.js';
import type { ServiceProcess } from '../../test/support/service-process.js';
import type { ServiceClient } from '../../src/api/client.js';
import { LOAD_MIXES, READS, createLoadLibraries, prepareLoad, quantile, runLoad, type LoadMix, type LoadResult, type OpKind } from './support/service-load.js';
import { cpuMsOf, reapedCpuMsOf } from './support/process-cpu.js';
import { startServiceSetups } from './support/service-setups.js';

const clients = Number(process.env.BENCH_LOAD_CLIENTS ?? 4);
const opsPerClient = Number(process.env.BENCH_LOAD_OPS ?? 500);
const PROBES_UNLOADED = 100;
const rounds = Number(process.env.BENCH_LOAD_ROUNDS ?? 3);
const statements = process.env.BENCH_LOAD_STATEMENTS === '1';
/** PostgreSQL on a core of its own (its processes on the last core; this process and the services, which inherit it, on the others). */
const pinned = process.env.BENCH_LOAD_PIN === '1';
const libraryCount = Number(process.env.BENCH_LOAD_LIBRARIES ?? 1);
if (!Number.isSafeInteger(libraryCount) || libraryCount < 1) throw new Error(`BENCH_LOAD_LIBRARIES: expected a whole number of 1 or more, got ${JSON.stringify(process.env.BENCH_LOAD_LIBRARIES)}`);
/** The mixes measured, each with every row: the whole mix, and its reads and its changes alone. */
const mixes = (process.env.BENCH_LOAD_MIX ?? LOAD_MIXES.join(',')).split(',').map((m) => {
  if (!(LOAD_MIXES as readonly string[]).includes(m)) throw new Error(`BENCH_LOAD_MIX: ${JSON.stringify(m)} is none of ${LOAD_MIXES.join(', ')}`);
  return m as LoadMix;
});
/** Another checkout (its root folder): its code runs as a row of its own, in turn with this code's rows. */
const baselineRoot = process.env.BENCH_LOAD_BASELINE;
const DATABASE = 'bench_load';

interface Row {
  setup: string; mix: LoadMix; ops: number; load: LoadResult; lsUnloaded: number[]; lsLoaded: number[]; serviceCpuMs: number[]; postgresCpuMs: number | undefined;
  /** PostgreSQL's CPU per operation by kind of process (clusterCpuMs). */
  postgresCpuParts: ClusterCpu | undefined;
  /** The floors under the lone `ls`: `GET /m-open/status` (no statement), and `SELECT 1` from this process. */
  statusUnloaded: number[]; statusLoaded: number[]; selectUnloaded: number[]; selectLoaded: number[];
  /** This process's event-loop delay during the load (ms, p99 of each round). */
  loopDelayP99: number[];
  /** This process's CPU (the clients, the feed's poller, the probes) per operation (ms). */
  benchCpuMs: number;
  /** The machine's cores busy during the load, all processes (from /proc/stat), and the cores it has. */
  machineBusyCores: number;
}

export async function benchServiceLoad(): Promise<Record<string, unknown>[]> {
  // Where the service processes write their round-trip traces (BENCH_LOAD_TRACE=1). They inherit the
  // environment: the trace loads before the service's own code.
  const traceDir = process.env.BENCH_LOAD_TRACE === '1' ? await mkdtemp(join(tmpdir(), 'cloudlib-bench-trace-')) : undefined;
  if (traceDir) {
    process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --import ${pathToFileURL(fileURLToPath(new URL('./support/round-trip-trace.mjs', import.meta.url))).href}`.trim();
    process.env.CLOUDLIB_ROUND_TRIP_TRACE = traceDir;
  }
  const cores = availableParallelism();
  if (pinned && cores < 2) throw new Error('BENCH_LOAD_PIN=1: PostgreSQL on a core of its own needs 2 cores or more');
  // Everything started from here (the cluster too, until moved) inherits this process's cores.
  if (pinned) await pin([process.pid], `0-${cores - 2}`);
  const setups = await startServiceSetups(DATABASE, statements ? ['shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all'] : []);
  // The postmaster's connections, forked later, inherit its core.
  if (pinned) await pin(await postgresProcesses(setups.pg.port), String(cores - 1));
  const measured: Row[][][] = mixes.map(() => [[], [], []]);
  let plan: [string, ServiceProcess[], Postgres | undefined][] = [];
  try {
    const sqlite = await setups.sqlite();
    const a = await setups.postgres();
    // With a baseline, its one process on PostgreSQL takes the row of two processes.
    const b = baselineRoot ? await setups.baseline(join(baselineRoot, 'bin', 'cloudlib.js')) : await setups.postgres();
    plan = [
      ['sqlite, 1 process', [sqlite], undefined], ['postgresql, 1 process', [a], setups.pg],
      baselineRoot ? ['postgresql, 1 process, baseline', [b], setups.pg] : ['postgresql, 2 processes', [a, b], setups.pg],
    ];
    // Rounds of the rows in turn: the machine's other work falls on every row alike. Each round starts
    // one row later than the one before: a row's place in the round shows in its figures (the same code
    // twice, one after the other, differed by 5 % in rate and 8 % in CPU), so every row takes each place.
    for (const [m, mix] of mixes.entries()) {
      for (let round = 0; round < rounds; round++) {
        for (const i of plan.map((_, k) => (k + round) % plan.length)) {
          const [setup, targets, pg] = plan[i]!;
          const top = statements && m === 0 && round === 0 && i === 1 ? await statementTimes(setups.pg) : undefined;
          measured[m]![i]!.push(await measure(setup, mix, targets, pg));
          if (top) for (const s of await top()) process.stdout.write(JSON.stringify({ bench: 'service.load.statement', ...s }) + '\n');
        }
      }
    }
  } finally {
    await setups.close();
  }
  if (traceDir) {
    for (const [setup, targets] of plan) {
      for (const t of targets) {
        const trace = JSON.parse(await readFile(join(traceDir, `${t.pid}.json`), 'utf8')) as Record<string, unknown>;
        process.stdout.write(JSON.stringify({ bench: 'service.load.trace', setup, pid: t.pid, ...trace }) + '\n');
      }
    }
    await rm(traceDir, { recursive: true, force: true });
  }
  const out = measured.flatMap((ofMix) => {
    const rows = ofMix.map(merged);
    return rows.map((r) => ({ ...summary(r, rows[0]!), ...scaling(r, rows[1]!) }));
  });
  for (const o of out) process.stdout.write(JSON.stringify(o) + '\n');
  return out;
}

/** The rounds of one row as one: latencies together, time and CPU summed over the rounds. */
function merged(rounds: Row[]): Row {
  const latencies = new Map<OpKind, number[]>();
  for (const r of rounds) for (const [k, v] of r.load.latencies) latencies.set(k, [...latencies.get(k) ?? [], ...v]);
  const ops = rounds.reduce((n, r) => n + r.ops, 0);
  const perOp = (cpu: (r: Row) => number) => rounds.reduce((n, r) => n + cpu(r) * r.ops, 0) / ops;
  return {
    setup: rounds[0]!.setup, mix: rounds[0]!.mix, ops,
    load: { latencies, elapsedMs: rounds.reduce((n, r) => n + r.load.elapsedMs, 0), feedChanges: rounds.reduce((n, r) => n + r.load.feedChanges, 0) },
    lsUnloaded: rounds.flatMap((r) => r.lsUnloaded),
    lsLoaded: rounds.flatMap((r) => r.lsLoaded),
    statusUnloaded: rounds.flatMap((r) => r.statusUnloaded),
    statusLoaded: rounds.flatMap((r) => r.statusLoaded),
    selectUnloaded: rounds.flatMap((r) => r.selectUnloaded),
    selectLoaded: rounds.flatMap((r) => r.selectLoaded),
    loopDelayP99: rounds.flatMap((r) => r.loopDelayP99),
    benchCpuMs: perOp((r) => r.benchCpuMs),
    machineBusyCores: rounds.reduce((n, r) => n + r.machineBusyCores * r.load.elapsedMs, 0) / rounds.reduce((n, r) => n + r.load.elapsedMs, 0),
    serviceCpuMs: rounds[0]!.serviceCpuMs.map((_, i) => perOp((r) => r.serviceCpuMs[i]!)),
    postgresCpuMs: rounds[0]!.postgresCpuMs === undefined ? undefined : perOp((r) => r.postgresCpuMs!),
    postgresCpuParts: rounds[0]!.postgresCpuParts === undefined ? undefined : {
      backends: perOp((r) => r.postgresCpuParts!.backends), exited: perOp((r) => r.postgresCpuParts!.exited), background: perOp((r) => r.postgresCpuParts!.background),
    },
  };
}

let runs = 0;

async function measure(setup: string, mix: LoadMix, targets: ServiceProcess[], server: Postgres | undefined): Promise<Row> {
  const clientsOf = targets.map((t) => t.client);
  const root = `load${runs++}`;
  const libraries = libraryCount === 1 ? undefined : await createLoadLibraries(await enterpriseOf(targets[0]!), libraryCount, root);
  await prepareLoad(clientsOf[0]!, { clients, opsPerClient, root, libraries });
  // In the library of client 0, whose folder it lists.
  const probe = libraries ? clientsOf[0]!.withCredentials({ library: libraries[0]! }) : clientsOf[0]!;
  // The lone `ls`, and beside it (in turn) what it cannot go below: the service's answer with no
  // statement (`/m-open/status`) and, on PostgreSQL, one round trip of `SELECT 1` from this process.
  const status = async () => {
    const res = await request(`${targets[0]!.baseUrl}/m-open/status`);
    await res.body.arrayBuffer();
    if (res.statusCode !== 200) throw new Error(`/m-open/status: ${res.statusCode}`);
  };
  const select1 = server ? new pg.Client({ connectionString: `postgresql://cloudlib@127.0.0.1:${server.port}/${DATABASE}` }) : undefined;
  await select1?.connect();
  const unloaded: number[] = [];
  const statusUnloaded: number[] = [];
  const selectUnloaded: number[] = [];
  for (let i = 0; i < PROBES_UNLOADED; i++) {
    unloaded.push(await timed(() => probe.file.ls({ fullpath: `${root}/c0/keep`, size: 100 })));
    statusUnloaded.push(await timed(status));
    if (select1) selectUnloaded.push(await timed(() => select1.query('SELECT 1')));
  }
  const cpu0 = await Promise.all(targets.map((t) => cpuMsOf(t.pid)));
  const pg0 = server ? await clusterCpuMs(server.port) : undefined;
  let loading = true;
  const lsLoaded: number[] = [];
  const statusLoaded: number[] = [];
  const selectLoaded: number[] = [];
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  const benchCpu0 = process.cpuUsage();
  const machine0 = await machineTicks();
  const probing = (async () => {
    while (loading) {
      lsLoaded.push(await timed(() => probe.file.ls({ fullpath: `${root}/c0/keep`, size: 100 })));
      statusLoaded.push(await timed(status));
      if (select1) selectLoaded.push(await timed(() => select1.query('SELECT 1')));
    }
  })();
  const load = await runLoad(clientsOf, { clients, opsPerClient, root, mix, libraries }).finally(() => { loading = false; });
  await probing;
  const machine1 = await machineTicks();
  const benchCpu = process.cpuUsage(benchCpu0);
  loop.disable();
  await select1?.end();
  const ops = clients * opsPerClient + lsLoaded.length + statusLoaded.length;
  const cpu1 = await Promise.all(targets.map((t) => cpuMsOf(t.pid)));
  const pg1 = server ? await clusterCpuMs(server.port) : undefined;
  return {
    setup, mix, ops, load, lsLoaded,
    lsUnloaded: unloaded,
    statusUnloaded, statusLoaded, selectUnloaded, selectLoaded,
    loopDelayP99: [loop.percentile(99) / 1e6],
    benchCpuMs: (benchCpu.user + benchCpu.system) / 1000 / ops,
    machineBusyCores: availableParallelism() * (machine1.busy - machine0.busy) / (machine1.total - machine0.total),
    serviceCpuMs: cpu1.map((ms, i) => (ms - cpu0[i]!) / ops),
    postgresCpuMs: pg0 && pg1 ? (total(pg1) - total(pg0)) / ops : undefined,
    postgresCpuParts: pg0 && pg1 ? { backends: (pg1.backends - pg0.backends) / ops, exited: (pg1.exited - pg0.exited) / ops, background: (pg1.background - pg0.background) / ops } : undefined,
  };
}

/** A client of a service process with its enterprise's credentials (from its credentials.json). */
async function enterpriseOf(p: ServiceProcess): Promise<ServiceClient> {
  const creds = JSON.parse(await readFile(join(p.dir, 'credentials.json'), 'utf8')) as { enterprise?: { client_id: string; client_secret: string } };
  if (!creds.enterprise) throw new Error(`BENCH_LOAD_LIBRARIES: ${join(p.dir, 'credentials.json')} holds no enterprise credentials`);
  return p.client.withCredentials({ enterprise: creds.enterprise });
}

function summary(r: Row, reference: Row): Record<string, unknown> {
  const of = (reads: boolean) => [...r.load.latencies].filter(([k]) => READS.includes(k) === reads).flatMap(([, v]) => v);
  const rate = (row: Row, reads: boolean) => [...row.load.latencies].filter(([k]) => READS.includes(k) === reads).reduce((n, [, v]) => n + v.length, 0) / (row.load.elapsedMs / 1000);
  const reads = of(true);
  const writes = of(false);
  const ratio = (ofReads: boolean) => (ofReads ? reads : writes).length === 0 ? null : round(rate(r, ofReads) / rate(reference, ofReads), 2);
  return {
    bench: 'service.load', setup: r.setup, mix: r.mix, ...(libraryCount > 1 ? { libraries: libraryCount } : {}), ...(pinned ? { postgresql_on_a_core_of_its_own: true } : {}), clients, ops_per_client: opsPerClient, rounds, cores: availableParallelism(), load_average: round(loadavg()[0]!, 1),
    ops_per_s: round((reads.length + writes.length) / (r.load.elapsedMs / 1000)),
    reads_per_s: round(rate(r, true)), writes_per_s: round(rate(r, false)),
    reads_ratio_to_sqlite: ratio(true), writes_ratio_to_sqlite: ratio(false),
    read_p50_ms: round(quantile(reads, 0.5)), read_p99_ms: round(quantile(reads, 0.99)),
    write_p50_ms: round(quantile(writes, 0.5)), write_p99_ms: round(quantile(writes, 0.99)),
    ls_unloaded_p50_ms: round(quantile(r.lsUnloaded, 0.5)), ls_loaded_p99_ms: round(quantile(r.lsLoaded, 0.99)), ls_p99_to_unloaded_p50: round(quantile(r.lsLoaded, 0.99) / quantile(r.lsUnloaded, 0.5), 2),
    ls_unloaded_p99_ms: round(quantile(r.lsUnloaded, 0.99)),
    status_unloaded_p50_ms: round(quantile(r.statusUnloaded, 0.5)), status_loaded_p99_ms: round(quantile(r.statusLoaded, 0.99)),
    status_p99_to_unloaded_p50: round(quantile(r.statusLoaded, 0.99) / quantile(r.statusUnloaded, 0.5), 2),
    ...(r.selectLoaded.length === 0 ? {} : {
      select1_unloaded_p50_ms: round(quantile(r.selectUnloaded, 0.5), 2), select1_loaded_p50_ms: round(quantile(r.selectLoaded, 0.5), 2), select1_loaded_p99_ms: round(quantile(r.selectLoaded, 0.99)),
    }),
    bench_loop_delay_p99_ms: r.loopDelayP99.map((ms) => round(ms)),
    bench_cpu_ms_per_op: round(r.benchCpuMs, 3),
    machine_busy_cores: round(r.machineBusyCores, 2),
    service_cpu_ms_per_op: r.serviceCpuMs.map((ms) => round(ms, 3)),
    ...(r.postgresCpuMs === undefined ? {} : { postgresql_cpu_ms_per_op: round(r.postgresCpuMs, 3) }),
    ...(r.postgresCpuParts === undefined ? {} : { postgresql_cpu_ms_per_op_by_process: Object.fromEntries(Object.entries(r.postgresCpuParts).map(([k, v]) => [k, round(v, 3)])) }),
    p50_ms_by_kind: Object.fromEntries([...r.load.latencies].map(([k, v]) => [k, round(quantile(v, 0.5))])),
    feed_changes: r.load.feedChanges,
  };
}

/**
 * For a row of several processes: the rate they would reach over one process's, each process on a core
 * of its own (and PostgreSQL on its own), computed from the CPU per operation: one process is bound at
 * 1 / its CPU per operation; several at 1 / the largest share of one of them (the load split as measured).
 */
function scaling(r: Row, one: Row): Record<string, unknown> {
  if (r.serviceCpuMs.length < 2 || one.serviceCpuMs.length !== 1) return {};
  return { scaling_with_a_core_each: round(one.serviceCpuMs[0]! / Math.max(...r.serviceCpuMs), 2) };
}

/** Resets pg_stat_statements; the function returns the statements of most total time since then. */
async function statementTimes(server: Postgres): Promise<() => Promise<Record<string, unknown>[]>> {
  const client = new pg.Client({ connectionString: `postgresql://cloudlib@127.0.0.1:${server.port}/${DATABASE}` });
  await client.connect();
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await client.query('SELECT pg_stat_statements_reset()');
  } catch (err) {
    await client.end();
    throw err;
  }
  return async () => {
    try {
      const { rows } = await client.query<{ query: string; calls: string; total: number; mean: number }>(
        "SELECT query, calls, total_exec_time AS total, mean_exec_time AS mean FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 20",
      );
      return rows.map((r) => ({ calls: Number(r.calls), mean_ms: round(r.mean, 3), total_ms: round(r.total), query: r.query.replace(/\s+/g, ' ').slice(0, 160) }));
    } finally {
      await client.end();
    }
  };
}

/** The machine's CPU time since boot (/proc/stat, in ticks): all of it, and the part not idle. */
async function machineTicks(): Promise<{ total: number; busy: number }> {
  const cpu = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is counted in user already)
  const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
  return { total, busy: total - cpu[3]! - cpu[4]! };
}

/** Sets the cores (`taskset` list) of processes and all their threads. */
async function pin(pids: number[], cpus: string): Promise<void> {
  for (const pid of pids) {
    const code = await new Promise<number | null>((resolve, reject) => spawn('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' }).on('error', reject).on('exit', resolve));
    if (code !== 0) throw new Error(`taskset -a -p -c ${cpus} ${pid}: exit ${code}`);
  }
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** The postmaster listening on `port` and its children (backends, writer, WAL writer…). */
async function postgresProcesses(port: number): Promise<number[]> {
  const pids = (await readdir('/proc')).filter((d) => /^\d+$/.test(d)).map(Number);
  const cmdline = async (pid: number) => readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  let postmaster: number | undefined;
  for (const pid of pids) {
    const args = (await cmdline(pid)).split('\0');
    if (args.some((a) => a.endsWith('/postgres')) && args.join(' ').includes(`-p ${port}`)) postmaster = pid;
  }
  if (postmaster === undefined) throw new Error(`no PostgreSQL process listening on port ${port} found in /proc`);
  const children: number[] = [];
  for (const pid of pids) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    if (stat !== '' && Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster) children.push(pid);
  }
  return [postmaster, ...children];
}

/**
 * CPU time (ms) of the cluster so far, by kind of process: `backends`, the connections' processes
 * running now; `exited`, the children the postmaster has reaped (autovacuum workers, and connections a
 * pool closed: a backend that closes during a round moves its time from `backends` to here); and
 * `background`, the postmaster and its other children running now (WAL writer, checkpointer, …).
 */
export interface ClusterCpu { backends: number; exited: number; background: number }

export async function clusterCpuMs(port: number): Promise<ClusterCpu> {
  const [postmaster, ...children] = await postgresProcesses(port);
  const out: ClusterCpu = { backends: 0, exited: await reapedCpuMsOf(postmaster!), background: await cpuMsOf(postmaster!) };
  for (const pid of children) {
    // A connection's process is titled `postgres: USER DATABASE HOST(PORT) STATE`.
    const backend = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).startsWith('postgres: cloudlib ');
    const ms = await cpuMsOf(pid).catch(() => 0);
    if (backend) out.backends += ms;
    else out.background += ms;
  }
  return out;
}

const total = (c: ClusterCpu) => c.backends + c.exited + c.background;

function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}


if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await benchServiceLoad();
