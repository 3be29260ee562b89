/**
 * StaleMountCheck: finds a FUSE mount left on the mount point by a process that died (the kernel then
 * answers "Transport endpoint is not connected", or hangs if the process is stuck) and clears it:
 * abort the connection through fusectl when it hangs, then `fusermount -uz`. A live mount that some
 * other process serves is left alone and reported as in use.
 *
 * The mount point is only probed from a child process (`stat` with a time limit): a hung FUSE mount would
 * otherwise hold one of our own threads forever.
 */
import { execFile } from 'node:child_process';
import { access, readFile, writeFile, mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Logger } from 'pino';

export interface MountInfoEntry {
  /** Device `major:minor` of the mount; for FUSE the minor names the fusectl connection. */
  device: string;
  mountPoint: string;
  fsType: string;
  source: string;
}

export type MountPointState = 'free' | 'live' | 'disconnected' | 'hung';

const FUSECTL = '/sys/fs/fuse/connections';

/** Decodes the octal escapes (`\040` for a space…) of /proc/self/mountinfo fields. */
function unescapeMountField(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** Parses /proc/self/mountinfo text. */
export function parseMountInfo(text: string): MountInfoEntry[] {
  const entries: MountInfoEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    const l = left.split(' ');
    const r = right.split(' ');
    if (l.length < 5 || r.length < 2) continue;
    entries.push({ device: l[2]!, mountPoint: unescapeMountField(l[4]!), fsType: r[0]!, source: unescapeMountField(r[1]!) });
  }
  return entries;
}

/** The FUSE mount currently on `mountPoint` (the last one stacked there), if any. */
export async function findFuseMount(mountPoint: string): Promise<MountInfoEntry | undefined> {
  const target = resolve(mountPoint);
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  const found = parseMountInfo(text).filter((e) => e.mountPoint === target && (e.fsType === 'fuse' || e.fsType.startsWith('fuse.')));
  return found.at(-1);
}

function run(cmd: string, args: string[], timeoutMs: number): Promise<{ code: number | null; stderr: string; timedOut: boolean }> {
  return new Promise((resolveRun) => {
    execFile(cmd, args, { timeout: timeoutMs, killSignal: 'SIGKILL' }, (err, _stdout, stderr) => {
      const e = err as (NodeJS.ErrnoException & { killed?: boolean; code?: number | string }) | null;
      resolveRun({ code: e ? (typeof e.code === 'number' ? e.code : -1) : 0, stderr: String(stderr), timedOut: !!e?.killed });
    });
  });
}

/** Probes `mountPoint` from a child process: answers, disconnected (ENOTCONN, ECONNABORTED, ECANCELED) or hung (no answer in time). */
export async function probeMountPoint(mountPoint: string, timeoutMs = 3000): Promise<MountPointState> {
  const entry = await findFuseMount(mountPoint);
  if (!entry) return 'free';
  const r = await run('stat', ['-c', '%i', resolve(mountPoint)], timeoutMs);
  if (r.timedOut) return 'hung';
  if (r.code === 0) return 'live';
  // Over io_uring the first request after the server died may be told ECONNABORTED or ECANCELED instead.
  if (/not connected|connection abort|operation cancel/i.test(r.stderr)) return 'disconnected';
  return 'hung';
}

/** Aborts the fusectl connection of a mount (mounting fusectl first if needed); false if not possible. */
export async function abortConnection(entry: MountInfoEntry, logger: Logger): Promise<boolean> {
  const minor = entry.device.split(':')[1];
  if (!minor) return false;
  try {
    await access(FUSECTL);
  } catch {
    return false;
  }
  const abortFile = `${FUSECTL}/${minor}/abort`;
  try {
    await access(abortFile);
  } catch {
    await mkdir(FUSECTL, { recursive: true }).catch(() => undefined);
    await run('mount', ['-t', 'fusectl', 'none', FUSECTL], 5000);
  }
  try {
    await writeFile(abortFile, '1');
    logger.warn({ connection: minor }, 'fuse: aborted a hung connection');
    return true;
  } catch (err) {
    logger.warn({ connection: minor, err: (err as Error).message }, 'fuse: could not abort the connection');
    return false;
  }
}

/** Lazily unmounts a FUSE mount point (`fusermount -uz`, then `umount -l` as root). */
export async function detachMount(mountPoint: string, logger: Logger): Promise<void> {
  const mnt = resolve(mountPoint);
  const r = await run('fusermount', ['-uz', mnt], 10_000);
  if (r.code === 0 || !(await findFuseMount(mnt))) return;
  const u = await run('umount', ['-l', mnt], 10_000);
  if (u.code !== 0 && (await findFuseMount(mnt))) {
    throw new Error(`cannot unmount ${mnt}: ${r.stderr.trim() || u.stderr.trim() || 'fusermount failed'}`);
  }
  logger.debug({ mountPoint: mnt }, 'fuse: unmounted with umount -l');
}

/**
 * Makes `mountPoint` usable: clears a disconnected or hung FUSE mount left there; throws if a live
 * mount is there. Returns what was found.
 */
export async function clearStaleMount(mountPoint: string, logger: Logger): Promise<MountPointState> {
  const state = await probeMountPoint(mountPoint);
  if (state === 'free') return state;
  if (state === 'live') throw new Error(`mount point ${resolve(mountPoint)} is in use by a live FUSE mount; unmount it first (fusermount -u)`);
  const entry = await findFuseMount(mountPoint);
  logger.warn({ mountPoint: resolve(mountPoint), state, fsType: entry?.fsType }, 'fuse: clearing a mount left behind by a previous run');
  if (state === 'hung' && entry) await abortConnection(entry, logger);
  await detachMount(mountPoint, logger);
  return state;
}
