/**
 * MountHarness: starts mount-child.ts in a child process on a fresh temp mount point and talks to it
 * over IPC. Teardown always unmounts (asking the child, then `fusermount -uz`, then fusectl abort) and
 * removes the temp folder. Everything here is async: the test process never blocks on the mount.
 */
import { execFile, fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../../support/wait-for.js';

const CHILD = fileURLToPath(new URL('./mount-child.ts', import.meta.url));

export interface MountHarness {
  /** The mount point; `/Lib` and `/Other` are its libraries. */
  mnt: string;
  /** A temp folder on local disk (not the mount) for reference copies. */
  local: string;
  call<T = unknown>(cmd: string, args?: Record<string, unknown>, timeoutMs?: number): Promise<T>;
  stop(): Promise<void>;
  child: ChildProcess;
}

/** Runs a command with a time limit, never through a shell; resolves with its output, rejects on failure. */
export function sh(cmd: string, args: string[], opts: { cwd?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {}): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd: opts.cwd, timeout: opts.timeoutMs ?? 30_000, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024, env: opts.env ?? process.env }, (err, stdout, stderr) => {
      if (err) reject(Object.assign(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stderr}`), { stderr, code: (err as { code?: unknown }).code }));
      else resolve({ stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** waitFor for a probe of the mount (every 100 ms): done when it gives a value; a probe that throws is not done yet. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  return (await waitFor(what, probe, { until: (v) => v !== undefined, timeoutMs, intervalMs: 100 })) as T;
}

/**
 * Runs `command` (a process serving a mount at `mnt`, made if missing) and waits until it prints
 * `mounted`; resolves with what it printed so far, its exit, and how to stop it (SIGTERM, its exit waited
 * for up to 10 s, then the mount cleared and the process killed).
 */
export async function startMountProcess(command: string, argv: string[], mnt: string, what: string): Promise<{ stop: () => Promise<void>; output: () => string; exited: Promise<void> }> {
  await mkdir(mnt, { recursive: true });
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  let printed = '';
  child.stdout.on('data', (c: Buffer) => { printed += c.toString(); });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    child.kill('SIGTERM');
    // A bound on the wait for its exit, not a sleep: past it, the mount is cleared and the process killed.
    // eslint-disable-next-line no-restricted-syntax -- the bound of a wait that does not fail
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    await sh('fusermount', ['-uz', mnt]).catch(() => undefined);
    child.kill('SIGKILL');
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what} did not come up in 30 s`)), 30_000);
      child.stdout.on('data', () => {
        if (printed.includes('mounted')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${what} exited with ${code}`));
      });
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { stop, output: () => printed, exited };
}

/** A folder on a tmpfs of `sizeMiB` (mounting one needs root): a disk that fills up; `remove` unmounts and removes it. */
export async function smallDisk(sizeMiB: number): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), 'cloudlib-fuse-full-'));
  let mounted = false;
  const remove = async (): Promise<void> => {
    if (mounted) await sh('umount', ['-l', path]);
    await rm(path, { recursive: true, force: true });
  };
  try {
    await sh('mount', ['-t', 'tmpfs', '-o', `size=${sizeMiB}m`, 'tmpfs', path]);
    mounted = true;
  } catch (err) {
    await remove();
    throw err;
  }
  return { path, remove };
}

/**
 * A mount (service backend, uploads held back) whose gateway data folder, spools and journal, is on a
 * small disk of its own (smallDisk: mounting one needs root): a spool disk that fills. Its stop removes
 * the disk too.
 */
export async function startMountOnSmallDisk(sizeMiB: number, mount: Record<string, unknown>): Promise<MountHarness> {
  const disk = await smallDisk(sizeMiB);
  let h: MountHarness;
  try {
    h = await startMount({ mount, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_UPLOAD_DELAY_MS: '600000', FUSE_TEST_DATA_PARENT: disk.path } });
  } catch (err) {
    await disk.remove();
    throw err;
  }
  return {
    ...h,
    async stop() {
      try {
        await h.stop();
      } finally {
        await disk.remove();
      }
    },
  };
}

export interface StartMountOptions {
  /** mountVfs options passed to the child (JSON). */
  mount?: Record<string, unknown>;
  env?: Record<string, string>;
  /** Mount here instead of a fresh temp folder (that folder is then not removed). */
  mountpoint?: string;
}

export async function startMount(opts: StartMountOptions = {}): Promise<MountHarness> {
  const options = opts.mount ?? {};
  const env = opts.env ?? {};
  const base = await mkdtemp(join(tmpdir(), 'cloudlib-fuse-'));
  const mnt = opts.mountpoint ?? join(base, 'mnt');
  const local = join(base, 'local');
  const child = fork(CHILD, [mnt], {
    // FUSE_CHILD_NODE_ARGS: extra node flags for the mount child (e.g. --cpu-prof when profiling).
    execArgv: ['--import', 'tsx', ...(process.env.FUSE_CHILD_NODE_ARGS?.split(' ').filter(Boolean) ?? [])],
    env: { ...process.env, ...env, FUSE_TEST_OPTIONS: JSON.stringify(options) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('mount child did not become ready in 30 s')), 30_000);
    child.on('message', (msg: { ready?: boolean; failed?: string; id?: number; result?: unknown; error?: string }) => {
      if (msg.failed !== undefined) {
        clearTimeout(timer);
        reject(new Error(`mount child failed: ${msg.failed}`));
        return;
      }
      if (msg.ready) {
        clearTimeout(timer);
        resolve();
        return;
      }
      const p = msg.id !== undefined ? pending.get(msg.id) : undefined;
      if (!p) return;
      pending.delete(msg.id!);
      if (msg.error) p.reject(new Error(msg.error));
      else p.resolve(msg.result);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`mount child exited with ${code}`));
      for (const p of pending.values()) p.reject(new Error(`mount child exited with ${code}`));
      pending.clear();
    });
  });

  const call = <T>(cmd: string, args: Record<string, unknown> = {}, timeoutMs = 30_000): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`${cmd}: no answer from the mount child in ${timeoutMs} ms`));
      }, timeoutMs);
      pending.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v as T)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      child.send({ id, cmd, args });
    });

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      const exited = new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) resolve();
        else child.once('exit', () => resolve());
      });
      if (child.connected) await call('unmount', {}, 20_000).catch(() => undefined);
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      if (child.connected) child.disconnect();
      await exited;
      clearTimeout(timer);
      // A mount left behind (child killed): clear it without touching it from this process.
      await sh('fusermount', ['-uz', mnt], { timeoutMs: 10_000 }).catch(() => undefined);
      await rm(base, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
    })());

  try {
    await ready;
  } catch (err) {
    await stop();
    throw err;
  }
  const { mkdir } = await import('node:fs/promises');
  await mkdir(local, { recursive: true });
  return { mnt, local, call, stop, child };
}
