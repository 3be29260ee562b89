/**
 * SizeLimits: a write that would make a file larger than the configured largest file (EFBIG) or grow a
 * library beyond its capacity (ENOSPC) is refused at the write, before anything of it is journaled. The
 * library's free space is what the service last told (its quota, asked again after a while); a library
 * without a capacity (or whose quota cannot be had) is not limited by it.
 *
 * The checks wrap what passes through JavaScript: a handle's writes and truncates, a whole-file write's
 * bytes. Writes that never reach a handle's `write` (the FUSE engine's own writes to a spool, the
 * kernel's writeback cache, passthrough) are checked when the write-back seals the version (its
 * `sizeCheck`): the close or fsync fails with the error, and the version with it.
 */
import type { CallContext } from './types.js';
import type { LeasedHandle } from './engine-lease.js';
import { VfsError } from './types.js';

export interface SizeLimitOptions {
  /** Largest file, bytes; undefined or 0 for no limit. */
  maxFileBytes?: number;
  /** Bytes the library may still grow by, undefined when unlimited or unknown. */
  freeBytes: (library: string, ctx?: CallContext) => Promise<number | undefined>;
  /** Room on this machine for a file of `size` bytes waiting to upload (upload-backpressure.ts); may wait unless `wait` is false. */
  room?: (path: string, size: number, ctx: CallContext | undefined, wait: boolean) => Promise<void>;
}

export class SizeLimits {
  constructor(private readonly opts: SizeLimitOptions) {}

  /**
   * Refuses a file of `size` bytes where one of `oldSize` was. `known`: the library's free bytes as already
   * known (the service is not asked), for a check that must not wait for it.
   */
  async check(path: string, library: string, size: number, oldSize: number, ctx?: CallContext, ...known: [number | undefined] | []): Promise<void> {
    const max = this.opts.maxFileBytes;
    if (max && size > max) throw new VfsError('EFBIG', `${path}: ${size} bytes is larger than the largest file allowed (${max} bytes)`);
    const growth = size - oldSize;
    if (growth <= 0) return;
    const free = known.length > 0 ? known[0] : await this.opts.freeBytes(library, ctx);
    if (free !== undefined && growth > free) throw new VfsError('ENOSPC', `${path}: ${growth} more bytes do not fit in library '${library}' (${free} bytes free)`);
    if (this.opts.room) await this.opts.room(path, size, ctx, known.length === 0);
  }

  /** `handle` with its writes and truncates checked first (everything else goes to it as it is). */
  limit(handle: LeasedHandle, library: string, size: number, ctx?: CallContext): LeasedHandle {
    let known = size;
    const check = (to: number, from: number): Promise<void> => this.check(handle.path, library, to, from, ctx);
    return {
      path: handle.path,
      read: (position, length, c) => handle.read(position, length, c),
      ...(handle.readParts ? { readParts: (position: number, length: number, c?: CallContext) => handle.readParts!(position, length, c) } : {}),
      async write(position: number, data: Buffer): Promise<number> {
        const end = position + data.length;
        if (end > known) {
          await check(end, known);
          known = end;
        }
        return handle.write(position, data);
      },
      async truncate(to: number): Promise<void> {
        if (to > known) await check(to, known);
        await handle.truncate(to);
        known = to;
      },
      stat: () => handle.stat(),
      flush: (closed) => handle.flush(closed),
      fsync: () => handle.fsync(),
      release: () => handle.release(),
      ...(handle.directSpool ? { directSpool: () => handle.directSpool!() } : {}),
      ...(handle.localRange ? { localRange: (position: number, length: number) => handle.localRange!(position, length) } : {}),
      ...(handle.passthrough ? { passthrough: () => handle.passthrough!() } : {}),
      ...(handle.localFile ? { localFile: () => handle.localFile!() } : {}),
      ...(handle.adoptSpool ? { adoptSpool: () => handle.adoptSpool!() } : {}),
    };
  }

  /**
   * The bytes of `source` as they come, refused (thrown) as soon as they pass what may be written; a
   * whole-file write with a known `declared` length is refused before the first byte.
   */
  async *limitSource(source: AsyncIterable<Buffer>, path: string, library: string, oldSize: number, ctx?: CallContext, declared?: number): AsyncGenerator<Buffer> {
    if (declared !== undefined) await this.check(path, library, declared, oldSize, ctx);
    const max = this.opts.maxFileBytes;
    const free = await this.opts.freeBytes(library, ctx);
    const allowed = Math.min(max || Infinity, free === undefined ? Infinity : oldSize + free);
    let total = 0;
    for await (const piece of source) {
      total += piece.length;
      if (total > allowed) await this.check(path, library, total, oldSize, ctx);
      else if (this.opts.room && total > oldSize) await this.opts.room(path, total, ctx, true);
      yield piece;
    }
  }
}
