/**
 * DiskFaults: failures of the gateway's own disk on command (tests, fault drills), as FaultyRemote does
 * for the service: the next spool writes or journal entries fail with a system error code (ENOSPC for a
 * full disk, EMFILE for no descriptors left, EIO) before anything is written.
 */
export type DiskOperation = 'write' | 'journal';

interface DiskRule { op: DiskOperation; code: string; times: number }

export class DiskFaults {
  private rules: DiskRule[] = [];

  /** The next `times` operations `op` fail with `code` (default: every one until cleared). */
  fail(op: DiskOperation, code = 'ENOSPC', times = Number.POSITIVE_INFINITY): void {
    if (op !== 'write' && op !== 'journal') throw new TypeError(`DiskFaults.fail: expected 'write' or 'journal', got '${String(op)}'`);
    if (!/^E[A-Z]+$/.test(code)) throw new TypeError(`DiskFaults.fail: expected an errno name like ENOSPC, got '${code}'`);
    this.rules.push({ op, code, times });
  }

  clear(): void {
    this.rules = [];
  }

  /** True while a failure of `op` is still to come (a spool with a rule armed is not handed to a direct writer). */
  armed(op: DiskOperation): boolean {
    return this.rules.some((r) => r.op === op && r.times > 0);
  }

  /** Throws the injected error when a rule applies to `op`. */
  check(op: DiskOperation, what: string): void {
    const rule = this.rules.find((r) => r.op === op && r.times > 0);
    if (!rule) return;
    rule.times--;
    const err = new Error(`${rule.code}: injected disk fault, ${what}`) as NodeJS.ErrnoException;
    err.code = rule.code;
    throw err;
  }
}
