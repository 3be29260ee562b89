/**
 * StrayedSpools: files the engine created with passthrough whose spool the Vfs could not take over (the
 * name was made meanwhile through another front end, which holds it open for writing: the version there
 * is not a new empty one). The kernel writes the engine's spool all the same, so what the program writes
 * is there and nowhere else. At each close (flush) and fsync of such a handle, after the handle's own
 * flush, what the spool holds is saved as the file's next version, a whole replace (Vfs.writeFile), as a
 * later writer's close would win; the program hears that replace's failure. At the release, what the
 * spool gained since the last save is saved too, and the spool goes.
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { Errno } from '../errno.js';
import type { InodeNode } from './inode-table.js';

export interface StrayedSpoolsOptions {
  /** Makes `path` hold what `data` gives (FuseOperations.replaceWith): 0, or a negative errno. */
  replace(path: string, data: Buffer | (() => Readable)): Promise<number>;
  /** The path of `node` now; undefined once it has none (unlinked, replaced). */
  pathOf(node: InodeNode): string | undefined;
  /** Removes the spool the engine made under `journalId` (never pooled: the kernel may still hold it). */
  dropSpool(journalId: string): Promise<void>;
  logger: Logger;
}

interface StrayedSpool {
  /** The spool, opened here (the journal may remove its name), the id the engine made it under, and the file. */
  spool: Promise<FileHandle | undefined>;
  journalId: string;
  node: InodeNode;
  /** Size and modification time (ns) of the spool when last saved. */
  saved?: string;
  /** The saves of this handle, one after the other. */
  queue: Promise<unknown>;
}

export class StrayedSpools {
  private readonly byFh = new Map<number, StrayedSpool>();

  constructor(private readonly opts: StrayedSpoolsOptions) {}

  /** Handle `fh` of `node` writes spool `spool` (made under `journalId`), which is not its version's. */
  add(fh: number, node: InodeNode, spool: string, journalId: string): void {
    this.byFh.set(fh, { spool: open(spool, 'r').catch(() => undefined), journalId, node, queue: Promise.resolve() });
  }

  has(fh: number): boolean {
    return this.byFh.has(fh);
  }

  /** Saves what the spool of `fh` holds, unless it was saved so already: undefined, or the errno its writer hears. */
  save(fh: number): Promise<number | undefined> {
    return this.then(fh, async (s) => {
      const mark = await this.markOf(s);
      if (mark === undefined) return Errno.EIO;
      if (mark === s.saved) return undefined;
      const spool = (await s.spool)!;
      const errno = await this.replace(s, () => spool.createReadStream({ start: 0, autoClose: false }));
      if (errno === undefined) s.saved = mark;
      return errno;
    });
  }

  /** Saves `data`, the bytes a close the engine answered put (its record has them). */
  saveBytes(fh: number, data: Buffer): Promise<number | undefined> {
    return this.then(fh, async (s) => {
      const mark = await this.markOf(s);
      const errno = await this.replace(s, data);
      if (errno === undefined && mark !== undefined) s.saved = mark;
      return errno;
    });
  }

  /** `fh` is released: what the spool gained since the last save is saved, and the spool goes. */
  async released(fh: number): Promise<void> {
    const s = this.byFh.get(fh);
    if (!s) return;
    try {
      const errno = await this.save(fh);
      if (errno !== undefined) this.opts.logger.error({ path: this.opts.pathOf(s.node), errno }, 'fuse: what the kernel wrote after the last close of a file could not be saved');
    } finally {
      this.byFh.delete(fh);
      await (await s.spool)?.close().catch(() => undefined);
      await this.opts.dropSpool(s.journalId).catch(() => undefined);
    }
  }

  private then(fh: number, work: (s: StrayedSpool) => Promise<number | undefined>): Promise<number | undefined> {
    const s = this.byFh.get(fh);
    if (!s) return Promise.resolve(undefined);
    const next = s.queue.then(() => work(s));
    s.queue = next.catch(() => undefined);
    return next;
  }

  private async markOf(s: StrayedSpool): Promise<string | undefined> {
    try {
      const st = await (await s.spool)!.stat({ bigint: true });
      return `${st.size}:${st.mtimeNs}`;
    } catch {
      return undefined;
    }
  }

  private async replace(s: StrayedSpool, data: Buffer | (() => Readable)): Promise<number | undefined> {
    // Gone from its name (unlinked, replaced): as for a local file, its bytes go with it.
    const path = this.opts.pathOf(s.node);
    if (path === undefined) return undefined;
    const code = await this.opts.replace(path, data);
    if (code < 0) return -code;
    this.opts.logger.info({ path }, 'fuse: a file the kernel wrote into a spool of its own was saved whole at its close (its name was made meanwhile elsewhere)');
    return undefined;
  }
}
