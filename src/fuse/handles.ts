/**
 * HandleTable: the numbers the kernel knows open files by (`fh`), each bound to one Vfs FileHandle.
 * Keyed by number, never by path: a rename of an open file keeps its handle.
 */
import type { LeasedHandle } from '../vfs/engine-lease.js';
import { FuseOpError } from './errno.js';

export interface OpenFile {
  readonly fh: number;
  readonly handle: LeasedHandle;
  readonly writable: boolean;
}

/**
 * Highest handle number before wrapping around (the engine numbers the files it creates from 2^32 and
 * folder handles from 2^40).
 */
const FH_MAX = 0x7fff_ffff;

export class HandleTable {
  /** Guarded by the event loop: only touched from operation callbacks on the main thread. */
  private readonly open = new Map<number, OpenFile>();
  private next = 1;

  get size(): number {
    return this.open.size;
  }

  /** Binds `handle` to a free number, or to `given` (numbered by the engine, above FH_MAX: EBADF if taken). */
  add(handle: LeasedHandle, writable: boolean, given?: number): OpenFile {
    let fh: number;
    if (given !== undefined) {
      if (!(Number.isSafeInteger(given) && given > FH_MAX) || this.open.has(given)) throw new FuseOpError('EBADF', `handle ${given} is taken or not the engine's`);
      fh = given;
    } else {
      fh = this.next;
      while (this.open.has(fh)) fh = fh >= FH_MAX ? 1 : fh + 1;
      this.next = fh >= FH_MAX ? 1 : fh + 1;
    }
    const file: OpenFile = { fh, handle, writable };
    this.open.set(fh, file);
    return file;
  }

  get(fh: number): OpenFile {
    const file = this.open.get(fh);
    if (!file) throw new FuseOpError('EBADF', `no open file with handle ${fh}`);
    return file;
  }

  /** Removes the handle from the table (the caller releases it). */
  take(fh: number): OpenFile {
    const file = this.get(fh);
    this.open.delete(fh);
    return file;
  }

  /** Every open file, in no particular order. */
  list(): OpenFile[] {
    return [...this.open.values()];
  }

  /** Removes and returns every open file (shutdown). */
  takeAll(): OpenFile[] {
    const all = [...this.open.values()];
    this.open.clear();
    return all;
  }
}
