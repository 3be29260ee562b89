/**
 * EmptyCreates: new empty files (a 0-byte PUT, a LOCK on an unmapped URL) held open for a short grace
 * period before they are committed. Explorer and Finder create a file empty and write its content right
 * after; holding the empty file open lets that content become the file's first version instead of an
 * empty version followed by the real one. The file exists in the Vfs (listed, stat-able) from the start;
 * it is committed (journaled, then uploaded) when the grace period ends, when it is written, moved or
 * deleted, or when the server closes.
 */
import type { Logger } from '../shared/log.js';
import type { CallContext, FileHandle, Vfs } from '../vfs/types.js';

export interface EmptyCreatesOptions {
  vfs: Vfs;
  logger: Logger;
  /** How long an empty new file is held before it is committed, ms. Default 2000; 0 = never held. */
  graceMs?: number;
}

export class EmptyCreates {
  /** Held handles by gateway path. */
  private readonly held = new Map<string, { handle: FileHandle; timer: NodeJS.Timeout }>();
  private readonly graceMs: number;

  constructor(private readonly opts: EmptyCreatesOptions) {
    this.graceMs = opts.graceMs ?? 2000;
  }

  /** Creates `path` empty (it must not exist) and holds it. */
  async create(path: string, ctx: CallContext): Promise<void> {
    const handle = await this.opts.vfs.open(path, { write: true, create: true, exclusive: true }, ctx);
    if (this.graceMs === 0) {
      await handle.release();
      return;
    }
    const timer = setTimeout(() => void this.commit(path), this.graceMs);
    timer.unref();
    this.held.set(path, { handle, timer });
  }

  /** True while `path` is an empty file being held. */
  has(path: string): boolean {
    return this.held.has(path);
  }

  /** Commits a held file now (nothing when not held). */
  async commit(path: string): Promise<void> {
    const h = this.held.get(path);
    if (!h) return;
    this.held.delete(path);
    clearTimeout(h.timer);
    try {
      await h.handle.release();
    } catch (err) {
      this.opts.logger.warn({ err, path }, 'webdav: committing an empty new file failed');
    }
  }

  /** Commits every held file at or below `path`. */
  async commitWithin(path: string): Promise<void> {
    for (const p of [...this.held.keys()]) if (p === path || path === '/' || p.startsWith(path + '/')) await this.commit(p);
  }

  async close(): Promise<void> {
    await this.commitWithin('/');
  }
}
