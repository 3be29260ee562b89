/**
 * The service setups the service benchmarks compare, in one run: `cloudlib service` processes on SQLite
 * (the reference; each its own data) and on one PostgreSQL database with one blobs folder, shared by every
 * such process as processes behind a load balancer share them. PostgreSQL is a cluster of Debian's
 * server started for the run, as the tests start it.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPostgres, type Postgres } from '../../../test/support/postgres.js';
import { startServiceProcess, type ServiceProcess } from '../../../test/support/service-process.js';

export interface ServiceSetups {
  /** A service process on SQLite, with data of its own. */
  sqlite(): Promise<ServiceProcess>;
  /** A service process on the run's PostgreSQL database and blobs folder (the same for every one). */
  postgres(): Promise<ServiceProcess>;
  /**
   * A service process of another checkout (`bin`: its `bin/cloudlib.js`) on a database of its own in the
   * run's cluster, with a blobs folder of its own: the code before a change, measured beside it.
   */
  baseline(bin: string): Promise<ServiceProcess>;
  /** Stops one process started here before the others. */
  stop(p: ServiceProcess): Promise<void>;
  /** The run's PostgreSQL cluster (its port: its processes' CPU time). */
  readonly pg: Postgres;
  /** Stops every process still running, last started first, then PostgreSQL; removes the blobs. */
  close(): Promise<void>;
}

/**
 * Starts PostgreSQL with database `database` and a blobs folder; the service processes on demand.
 * `settings`: server settings of the cluster (startPostgres).
 */
export async function startServiceSetups(database: string, settings: readonly string[] = []): Promise<ServiceSetups> {
  const shared = await mkdtemp(join(tmpdir(), `cloudlib-bench-${database}-`));
  await mkdir(join(shared, 'blobs'));
  let pg: Postgres;
  try {
    pg = await startPostgres({ settings });
  } catch (err) {
    await rm(shared, { recursive: true, force: true });
    throw err;
  }
  const running: ServiceProcess[] = [];
  let pgArgs: Promise<string[]> | undefined;
  const started = async (p: Promise<ServiceProcess>): Promise<ServiceProcess> => {
    const s = await p;
    running.push(s);
    return s;
  };
  return {
    pg,
    sqlite: () => started(startServiceProcess()),
    async postgres() {
      pgArgs ??= pg.createDatabase(database).then((url) => ['--metadata', url, '--blobs', `file://${join(shared, 'blobs')}`]);
      return started(startServiceProcess({ serviceArgs: await pgArgs }));
    },
    async baseline(bin) {
      const url = await pg.createDatabase(`${database}_baseline`);
      await mkdir(join(shared, 'blobs-baseline'));
      return started(startServiceProcess({ bin, serviceArgs: ['--metadata', url, '--blobs', `file://${join(shared, 'blobs-baseline')}`] }));
    },
    async stop(p) {
      const at = running.indexOf(p);
      if (at < 0) throw new Error('stop: expected a service process started by these setups and still running');
      running.splice(at, 1);
      await p.close();
    },
    async close() {
      try {
        for (const p of running.splice(0).reverse()) await p.close();
      } finally {
        await pg.stop();
        await rm(shared, { recursive: true, force: true });
      }
    },
  };
}
