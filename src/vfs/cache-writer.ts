/**
 * CacheWriter: writes the content cache's bytes to its files off the readers' way. A cold read that keeps
 * what it reads in the cache pays for a second copy of every byte (into the cache file's page cache) on
 * top of the reader's own; written on the threads the readers share (the main thread, libuv's pool at the
 * process's priority) that copy took the cores the readers needed, and made a cold read through the mount
 * about twice as slow. Here the bytes are copied into a shared ring of SLOTS slots (bounded memory) and a
 * worker thread of its own, at the lowest CPU priority (nice 19), writes them: when the cores are busy
 * the readers go first and the cache falls behind; its owner (ContentCache) then lets copies go rather
 * than hold more than its bound. Nothing here ever waits on a reader's behalf.
 */
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { skipBytes } from './byte-ranges.js';

const WORKER_FILE = fileURLToPath(new URL('./cache-write-worker.mjs', import.meta.url));

/** Bytes of one slot of the ring, and slots: the memory the writer holds (16 MiB). */
const SLOT_BYTES = 4 * 1024 * 1024;
const SLOTS = 4;

export interface CacheWriterOptions {
  /** Nice value of the writing thread (Linux; elsewhere it keeps the process's). Default 19, the lowest. */
  nice?: number;
}

interface InFlight { resolve: () => void; reject: (err: Error) => void }

export class CacheWriter {
  private worker: Worker | undefined;
  private ring: SharedArrayBuffer | undefined;
  private readonly freeSlots: number[] = [];
  private readonly slotWaiters: ((slot: number) => void)[] = [];
  private readonly inFlight = new Map<number, InFlight>();
  private nextId = 1;
  private closed = false;
  /** Whether the writing thread runs at the lower priority (known once it started). */
  lowered: boolean | undefined;
  readonly counters = { writes: 0, bytes: 0 };

  constructor(private readonly opts: CacheWriterOptions = {}) {}

  /**
   * Writes `length` bytes of `parts` to descriptor `fd` at `position` (the descriptor must stay open until
   * the promise settles). The pieces are copied before this returns a slot's worth at a time; the caller
   * may reuse them once it resolves.
   */
  async write(fd: number, position: number, parts: readonly Buffer[], length: number): Promise<void> {
    if (this.closed) throw new Error('the content cache\'s writer is closed');
    const done: Promise<void>[] = [];
    let rest = parts;
    for (let at = 0; at < length;) {
      const n = Math.min(SLOT_BYTES, length - at);
      const slot = await this.takeSlot();
      const ring = Buffer.from(this.ring!, slot * SLOT_BYTES, n);
      let copied = 0;
      for (const p of rest) {
        if (copied >= n) break;
        copied += p.copy(ring, copied, 0, Math.min(p.length, n - copied));
      }
      rest = skipBytes(rest, n);
      done.push(this.post(fd, position + at, slot, n).finally(() => this.giveSlot(slot)));
      at += n;
    }
    await Promise.all(done);
    this.counters.writes++;
    this.counters.bytes += length;
  }

  async close(): Promise<void> {
    this.closed = true;
    const worker = this.worker;
    this.worker = undefined;
    this.fail(new Error('the content cache\'s writer is closed'));
    await worker?.terminate();
  }

  private post(fd: number, position: number, slot: number, length: number): Promise<void> {
    const worker = this.spawn();
    const id = this.nextId++;
    return new Promise<void>((resolve, reject) => {
      this.inFlight.set(id, { resolve, reject });
      worker.postMessage({ id, fd, position, offset: slot * SLOT_BYTES, length });
    });
  }

  private takeSlot(): Promise<number> {
    this.spawn();
    const slot = this.freeSlots.pop();
    if (slot !== undefined) return Promise.resolve(slot);
    return new Promise((resolve) => this.slotWaiters.push(resolve));
  }

  private giveSlot(slot: number): void {
    const next = this.slotWaiters.shift();
    if (next) next(slot);
    else this.freeSlots.push(slot);
  }

  private spawn(): Worker {
    if (this.worker) return this.worker;
    if (this.closed) throw new Error('the content cache\'s writer is closed');
    if (!this.ring) {
      this.ring = new SharedArrayBuffer(SLOTS * SLOT_BYTES);
      for (let i = SLOTS - 1; i >= 0; i--) this.freeSlots.push(i);
    }
    const worker = new Worker(WORKER_FILE, { workerData: { ring: this.ring, nice: this.opts.nice ?? 19 } });
    worker.unref();
    worker.on('message', (m: { id?: number; error?: string; ready?: boolean; lowered?: boolean }) => {
      if (m.ready) {
        this.lowered = !!m.lowered;
        return;
      }
      const p = this.inFlight.get(m.id!);
      if (!p) return;
      this.inFlight.delete(m.id!);
      if (m.error) p.reject(new Error(`writing the cached content: ${m.error}`));
      else p.resolve();
    });
    const gone = (err: Error): void => {
      if (this.worker === worker) this.worker = undefined;
      this.fail(err);
    };
    worker.on('error', gone);
    worker.on('exit', (code) => gone(new Error(`the content cache's writer thread exited (${code})`)));
    this.worker = worker;
    return worker;
  }

  private fail(err: Error): void {
    for (const p of this.inFlight.values()) p.reject(err);
    this.inFlight.clear();
  }
}
