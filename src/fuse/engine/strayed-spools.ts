/**
 * StrayedSpools: files the engine created with passthrough whose spool the Vfs could not take over (the
 * name was made meanwhile through another front end, which holds it open for writing: the version there
 * is not a new empty one, so the create joined it, emptied, as the program's O_CREAT|O_TRUNC open would
 * have). The kernel writes the engine's spool all the same, so what the program writes is there and
 * nowhere else. Before each flush (a close) and fsync of such a handle, and before its release, what the
 * spool holds is written into the handle's version, the open file both writers share, in place of what
 * it held (as the program's writes would have been): the flush then journals it, and another writer's
 * later writes go on from it. A failure answers that flush or fsync. At the release the spool goes.
 */
import { open, type FileHandle as SpoolFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { Errno, errnoOf } from '../errno.js';
import type { FileHandle } from '../../vfs/types.js';

/** Bytes copied from the spool at a time (memory stays bounded whatever the file's size). */
const COPY_CHUNK = 1024 * 1024;

export interface StrayedSpoolsOptions {
  /** The Vfs handle of `fh` (undefined once released). */
  handleOf(fh: number): FileHandle | undefined;
  /** Removes the spool the engine made under `journalId` (never pooled: the kernel may still hold it). */
  dropSpool(journalId: string): Promise<void>;
  logger: Logger;
}

interface StrayedSpool {
  /** The spool, opened here (the journal may remove its name), and the id the engine made it under. */
  spool: Promise<SpoolFile | undefined>;
  journalId: string;
  /** Size and modification time (ns) of the spool when last copied. */
  copied?: string;
  /** The copies of this handle, one after the other. */
  queue: Promise<unknown>;
}

export class StrayedSpools {
  private readonly byFh = new Map<number, StrayedSpool>();

  constructor(private readonly opts: StrayedSpoolsOptions) {}

  /** Handle `fh` writes spool `spool` (made under `journalId`), which is not its version's. */
  add(fh: number, spool: string, journalId: string): void {
    this.byFh.set(fh, { spool: open(spool, 'r').catch(() => undefined), journalId, queue: Promise.resolve() });
  }

  has(fh: number): boolean {
    return this.byFh.has(fh);
  }

  /**
   * Writes what the spool of `fh` holds into the handle's version, unless it was copied so already:
   * undefined, or the errno (> 0) its writer hears.
   */
  copy(fh: number): Promise<number | undefined> {
    return this.then(fh, async (s) => {
      const spool = await s.spool;
      if (!spool) return Errno.EIO;
      const st = await spool.stat({ bigint: true }).catch(() => undefined);
      if (!st) return Errno.EIO;
      const mark = `${st.size}:${st.mtimeNs}`;
      if (mark === s.copied) return undefined;
      const errno = await this.write(fh, Number(st.size), (buf, at) => spool.read(buf, 0, buf.length, at).then((r) => r.bytesRead));
      if (errno === undefined) s.copied = mark;
      return errno;
    });
  }

  /** Writes `data` into the handle's version: the bytes a close the engine answered put (its record has them). */
  copyBytes(fh: number, data: Buffer): Promise<number | undefined> {
    return this.then(fh, async (s) => {
      const spool = await s.spool;
      const st = await spool?.stat({ bigint: true }).catch(() => undefined);
      const errno = await this.write(fh, data.length, async (buf, at) => data.copy(buf, 0, at, at + buf.length));
      if (errno === undefined && st) s.copied = `${st.size}:${st.mtimeNs}`;
      return errno;
    });
  }

  /** `fh` is released (after `copy`): its spool goes. */
  async released(fh: number): Promise<void> {
    const s = this.byFh.get(fh);
    if (!s) return;
    this.byFh.delete(fh);
    await s.queue;
    await (await s.spool)?.close().catch(() => undefined);
    await this.opts.dropSpool(s.journalId).catch(() => undefined);
  }

  private then(fh: number, work: (s: StrayedSpool) => Promise<number | undefined>): Promise<number | undefined> {
    const s = this.byFh.get(fh);
    if (!s) return Promise.resolve(undefined);
    const next = s.queue.then(() => work(s));
    s.queue = next.catch(() => undefined);
    return next;
  }

  /** The handle's version becomes `size` bytes read by `read` (into a buffer, from an offset), in chunks. */
  private async write(fh: number, size: number, read: (buf: Buffer, at: number) => Promise<number>): Promise<number | undefined> {
    const handle = this.opts.handleOf(fh);
    if (!handle) return Errno.EIO;
    try {
      // Emptied, then written from the start: an appending handle appends each piece in turn.
      await handle.truncate(0);
      const buf = Buffer.allocUnsafe(Math.min(COPY_CHUNK, Math.max(1, size)));
      for (let at = 0; at < size; ) {
        const got = await read(buf.subarray(0, Math.min(buf.length, size - at)), at);
        if (got <= 0) return Errno.EIO;
        await handle.write(at, buf.subarray(0, got));
        at += got;
      }
      return undefined;
    } catch (err) {
      this.opts.logger.warn({ err: String(err) }, 'fuse: the bytes the kernel wrote into a spool of its own could not be written into the file');
      return -errnoOf(err);
    }
  }
}
