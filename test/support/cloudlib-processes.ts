/**
 * `cloudlib` commands run as a person runs them, each a child process of the test: started with its output
 * kept (for the message of a failure), waited for (a file it writes, a line it logs, its exit) and stopped
 * at teardown. Also `cloudlib service` on its own with a configuration pointing at it.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServiceCredentialsFile } from '../../src/gateway/gateway.js';
import { waitFor } from './wait-for.js';

export const CLOUDLIB_BIN = fileURLToPath(new URL('../../bin/cloudlib.js', import.meta.url));

/** A child `cloudlib` and what it wrote so far (stdout and stderr together). */
export type CloudlibChild = ChildProcess & { output: () => string };

/** The children of a test file: started here, stopped by `stopAll()` in its teardown. */
export class CloudlibProcesses {
  private readonly children: ChildProcess[] = [];

  /** Runs `cloudlib ARGS` with exactly `env` (in `cwd`, default this process's). */
  start(args: string[], opts: { env: NodeJS.ProcessEnv; cwd?: string }): CloudlibChild {
    const child = spawn(process.execPath, [CLOUDLIB_BIN, ...args], { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => { out += c.toString(); });
    child.stderr!.on('data', (c: Buffer) => { out += c.toString(); });
    this.children.push(child);
    return Object.assign(child, { output: () => out });
  }

  /** Stops every child still running: SIGCONT (one a test stopped), SIGTERM, SIGKILL after 15 s. */
  async stopAll(): Promise<void> {
    for (const c of this.children.splice(0)) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGCONT');
        c.kill('SIGTERM');
        await exited(c, 15_000).catch(() => c.kill('SIGKILL'));
      }
    }
  }
}

/** The exit code of `child` (null when a signal ended it); fails when it has not exited within `timeoutMs`. */
export function exited(child: ChildProcess, timeoutMs: number): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`process did not exit within ${timeoutMs} ms`)), timeoutMs);
    child.once('exit', (code) => { clearTimeout(t); resolve(code); });
  });
}

/** What `child` wrote to `file`, once it parses as JSON; fails at once when the child exits first. */
export function jsonWrittenBy<T>(file: string, child: CloudlibChild, timeoutMs = 30_000): Promise<T> {
  return waitFor(file, async () => JSON.parse(await readFile(file, 'utf8')) as T, {
    timeoutMs, intervalMs: 100, stopIf: () => (child.exitCode !== null ? `exited with ${child.exitCode}` : undefined), detail: () => child.output(),
  });
}

/** Waits until the output of `child` matches `re`; fails with what it wrote. */
export async function logged(re: RegExp, child: CloudlibChild, what: string, timeoutMs = 30_000): Promise<void> {
  await waitFor(`${what} to log ${re}`, () => re.test(child.output()), {
    timeoutMs, intervalMs: 100, stopIf: () => (child.exitCode !== null ? `exited with ${child.exitCode}` : undefined), detail: () => child.output(),
  });
}

/** Runs `cloudlib ARGS` to its end (a minute at most). */
export function runCloudlib(args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLOUDLIB_BIN, ...args], { cwd, env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr });
    });
  });
}

/**
 * A `cloudlib service` on its own (data in `base/svc`) and a configuration file `base/cloudlib.json`
 * serving its library as folder `Remote`, with `extra` beside.
 */
export async function remoteService(processes: CloudlibProcesses, base: string, env: NodeJS.ProcessEnv, extra: Record<string, unknown> = {}): Promise<{ creds: ServiceCredentialsFile; config: string; service: CloudlibChild }> {
  const svcDir = join(base, 'svc');
  const service = processes.start(['service', '--data', svcDir, '--listen', '127.0.0.1:0'], { env });
  const creds = await jsonWrittenBy<ServiceCredentialsFile>(join(svcDir, 'credentials.json'), service);
  const config = join(base, 'cloudlib.json');
  await writeFile(config, JSON.stringify({
    service: { base_url: creds.base_url, libraries: [{ name: 'Remote', org_client_id: creds.library.org_client_id, org_client_secret: creds.library.org_client_secret }] },
    ...extra,
  }));
  return { creds, config, service };
}
