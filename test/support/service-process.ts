/**
 * startServiceProcess(): the embedded service in a process of its own (`cloudlib service` on an ephemeral
 * port, temporary data folder), as it runs beside a gateway in production: the benchmarks measure the
 * gateway with the service off its thread. Returns a library client like test/support/service.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ServiceClient } from '../../src/api/client.js';
import { waitFor } from './wait-for.js';

export interface ServiceProcess {
  client: ServiceClient;
  baseUrl: string;
  dir: string;
  pid: number;
  close(): Promise<void>;
}

const BIN = fileURLToPath(new URL('../../bin/cloudlib.js', import.meta.url));

export interface ServiceProcessOptions {
  readyTimeoutMs?: number;
  /**
   * Keep the service's data in memory (/dev/shm where there is one): a service on another machine does
   * not write to the gateway's disk, and one on the same disk would halve the disk's bandwidth for both.
   */
  memoryData?: boolean;
  /** Extra node flags for the service process (e.g. `--cpu-prof` when profiling a benchmark). */
  nodeArgs?: string[];
  /** `host:port` to listen on. Default `127.0.0.1:0`. */
  listen?: string;
  /** The service's `--public-url` (a proxy in front: links, upload servers and credentials name it). */
  publicUrl?: string;
  /** Extra `cloudlib service` options (e.g. `['--blobs', 's3://…']`). */
  serviceArgs?: string[];
  /** Extra environment variables of the service process (e.g. the object store's credentials). */
  env?: Record<string, string>;
  /** The `cloudlib` command to run (another checkout's `bin/cloudlib.js`: a benchmark's baseline). Default this one's. */
  bin?: string;
}

export async function startServiceProcess(opts: ServiceProcessOptions = {}): Promise<ServiceProcess> {
  const root = opts.memoryData && (await isDir('/dev/shm')) ? '/dev/shm' : tmpdir();
  const dir = await mkdtemp(join(root, 'cloudlib-svcproc-'));
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), opts.bin ?? BIN, 'service', '--data', dir, '--listen', opts.listen ?? '127.0.0.1:0', '--log-level', 'warn', ...(opts.publicUrl ? ['--public-url', opts.publicUrl] : []), ...(opts.serviceArgs ?? [])], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, ...opts.env },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Never outlive the process that started it, nor leave its data behind (in /dev/shm: memory).
  const orphaned = (): void => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', orphaned);
  try {
    const creds = await waitForCredentials(join(dir, 'credentials.json'), child, opts.readyTimeoutMs ?? 30_000);
    const client = new ServiceClient({
      baseUrl: creds.base_url,
      credentials: { library: { org_client_id: creds.library.org_client_id, org_client_secret: creds.library.org_client_secret } },
      retries: 0,
    });
    return {
      client, baseUrl: creds.base_url, dir, pid: child.pid!,
      async close() {
        await client.close();
        child.kill('SIGTERM');
        await exited;
        process.off('exit', orphaned);
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    child.kill('SIGKILL');
    await exited;
    process.off('exit', orphaned);
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

interface Credentials { base_url: string; library: { org_client_id: string; org_client_secret: string } }

async function waitForCredentials(path: string, child: ChildProcess, timeoutMs: number): Promise<Credentials> {
  return waitFor(`cloudlib service to write ${path}`, async () => JSON.parse(await readFile(path, 'utf8')) as Credentials, {
    timeoutMs, intervalMs: 50, stopIf: () => (child.exitCode !== null ? `cloudlib service exited with ${child.exitCode} before it was ready` : undefined),
  });
}

async function isDir(path: string): Promise<boolean> {
  return stat(path).then((s) => s.isDirectory(), () => false);
}
