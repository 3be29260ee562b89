/** CPU time a process of this machine has used so far, from /proc (benchmarks: where the cores went). */
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';

const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** User + system CPU time of a process so far (ms), from /proc/PID/stat (fields 14 and 15, in clock ticks). */
export async function cpuMsOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}

/**
 * User + system CPU time (ms) of a process's children it has waited for (fields 16–17): a server whose
 * worker processes come and go (PostgreSQL's backends, its autovacuum workers) keeps their time there
 * once they exit.
 */
export async function reapedCpuMsOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / CLOCK_TICKS;
}

/** User and system CPU time (ms) of a process so far, apart (fields 14 and 15). */
export async function cpuTimesOf(pid: number): Promise<{ user: number; system: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: (Number(fields[11]) * 1000) / CLOCK_TICKS, system: (Number(fields[12]) * 1000) / CLOCK_TICKS };
}
