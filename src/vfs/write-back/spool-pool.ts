/**
 * SpoolPool: empty spool files kept for reuse. Once started, a spool nobody needs any more is emptied
 * into the pool instead of removed, and the pool is filled in the background with empty files up to
 * POOL_MAX; a front end that makes spools itself, many a second (the FUSE engine with passthrough), takes
 * one from there (a rename into the spool folder) before it makes a new file. Making a file costs more than
 * reusing one: on ext4, the inodes of files removed in the last seconds are skipped one by one by the next
 * allocations in their group, and the spool folder's group is where every spool comes and goes (measured:
 * creates in a busy spool folder took a third of a small-file copy's CPU).
 */
import { mkdir, open, readdir, rename, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { removeFileIfPresent } from '../../shared/atomic-file.js';
import { systemClock, type Clock } from '../clock.js';

/** The pool's folder in the spool folder, its files' prefix, its size. */
const POOL = '.pool';
const POOL_PREFIX = 'p';
const POOL_MAX = 4096;
/** A pool that looks full is counted again at most this often (a front end takes from it silently). */
const POOL_RECOUNT_MS = 1000;

export class SpoolPool {
  /** The folder of empty spool files (in the spool folder). */
  readonly dir: string;
  /** Files in the pool as last counted or added (a front end takes some meanwhile), and names given so far. */
  private on = false;
  private pooled = 0;
  private countedMs = 0;
  private filling: Promise<void> = Promise.resolve();
  private serial = 0;
  private closed = false;

  /** `clock`: the time between two counts of a full pool (POOL_RECOUNT_MS). */
  constructor(spoolDir: string, private readonly clock: Clock = systemClock) {
    this.dir = join(spoolDir, POOL);
  }

  /** From now on spools nobody needs are kept, emptied; the pool is filled in the background. */
  async start(): Promise<void> {
    if (this.on) return;
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    this.pooled = (await readdir(this.dir).catch(() => [] as string[])).length;
    this.on = true;
    // In the background: a spool is made anew meanwhile (close waits for it).
    this.filling = this.fill().catch(() => undefined);
  }

  /** No more filling; resolves once the filling under way stopped. */
  async close(): Promise<void> {
    this.closed = true;
    await this.filling;
  }

  /** Makes empty files in the pool up to POOL_MAX (before anything waits for a spool). */
  private async fill(): Promise<void> {
    for (; this.pooled < POOL_MAX && !this.closed; this.pooled++) {
      const fh = await open(join(this.dir, this.name()), 'wx', 0o600).catch(() => undefined);
      if (!fh) return;
      await fh.close();
    }
  }

  private name(): string {
    // eslint-disable-next-line no-restricted-syntax -- a name unique across runs of one process id, not a time: real whatever the clock
    return `${POOL_PREFIX}${process.pid.toString(36)}-${Date.now().toString(36)}-${(this.serial++).toString(36)}`;
  }

  /**
   * A spool nobody needs any more: removed; once the pool is started, emptied and kept in the pool for a
   * later spool, up to POOL_MAX files (else removed). A spool someone still has open must not come here:
   * it is emptied.
   */
  async recycle(path: string): Promise<void> {
    if (!this.on) return removeFileIfPresent(path);
    if (this.pooled >= POOL_MAX && this.clock.now() - this.countedMs >= POOL_RECOUNT_MS) {
      // Taken from meanwhile by a front end (which says nothing): counted again, at most once a second.
      this.countedMs = this.clock.now();
      this.pooled = (await readdir(this.dir).catch(() => [] as string[])).length;
    }
    if (this.pooled >= POOL_MAX) return removeFileIfPresent(path);
    // Renamed into the pool, then emptied (a front end takes only an empty one).
    const pooled = join(this.dir, this.name());
    try {
      await rename(path, pooled);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') await removeFileIfPresent(path);
      return;
    }
    this.pooled++;
    await truncate(pooled, 0).catch(() => removeFileIfPresent(pooled).catch(() => undefined));
  }
}
