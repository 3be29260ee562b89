/**
 * Sha1Streams: the SHA-1 of files written front to back, kept up to date as they grow, in a worker thread
 * of its own. The main thread reports each range written (`extend`); the worker reads it back from the
 * file (the page cache, so no disk read) and hashes it. When the file is closed its hash is ready, and
 * an upload can start at once instead of after a second pass over the whole file. Nothing CPU-heavy
 * runs on the main thread, where the FUSE front end answers every operation.
 */
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { systemClock, type Clock } from '../clock.js';

const WORKER_FILE = fileURLToPath(new URL('./sha1-stream-worker.mjs', import.meta.url));

export interface Sha1Stream {
  /** Bytes `[0, to)` of the file are written: hash up to there (calls must not go backwards). */
  extend(to: number): void;
  /** SHA-1 and size of every byte reported so far. The stream goes on (more can be appended). */
  digest(): Promise<{ sha1: string; size: number }>;
  /** Forgets the stream (its descriptor is closed). */
  close(): void;
}

interface Pending { resolve: (r: { sha1: string; size: number }) => void; reject: (e: Error) => void }

export class Sha1Streams {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;

  /** `clock`: the time of the short wait that joins small extends into one message. */
  constructor(private readonly clock: Clock = systemClock) {}

  /** A new stream over the file at `path` (empty now; it grows from byte 0). */
  open(path: string): Sha1Stream {
    if (this.closed) throw new Error('Sha1Streams is closed');
    const worker = this.spawn();
    const sid = this.nextId++;
    worker.postMessage({ op: 'open', sid, path });
    let at = 0;
    let posted = 0;
    let open = true;
    let scheduled = false;
    // One message per MiB (the rest within 20 ms, or with the digest) rather than one per write: a
    // sequential write through FUSE is thousands of 128 KiB writes a second.
    const post = (): void => {
      scheduled = false;
      if (!open || at <= posted) return;
      posted = at;
      this.worker?.postMessage({ op: 'extend', sid, to: at });
    };
    return {
      extend: (to: number) => {
        if (!open || to <= at) return;
        at = to;
        if (at - posted >= 1024 * 1024) post();
        else if (!scheduled) {
          scheduled = true;
          this.clock.after(20, post);
        }
      },
      digest: () => new Promise((resolve, reject) => {
        if (!open || !this.worker) return reject(new Error('sha1 stream is closed'));
        post();
        const id = this.nextId++;
        this.pending.set(id, { resolve, reject });
        this.worker.postMessage({ op: 'digest', sid, id });
      }),
      close: () => {
        if (!open) return;
        open = false;
        this.worker?.postMessage({ op: 'close', sid });
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.fail(new Error('Sha1Streams closed'));
    await this.worker?.terminate();
    this.worker = undefined;
  }

  private spawn(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_FILE);
    worker.unref();
    worker.on('message', (msg: { id: number; sha1?: string; size?: number; error?: string }) => {
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if (!p) return;
      if (msg.error) p.reject(new Error(`hashing a spool as it is written: ${msg.error}`));
      else p.resolve({ sha1: msg.sha1!, size: msg.size! });
    });
    const gone = (err: Error) => {
      if (this.worker === worker) this.worker = undefined;
      this.fail(err);
    };
    worker.on('error', gone);
    worker.on('exit', (code) => gone(new Error(`sha1 stream worker exited (${code})`)));
    this.worker = worker;
    return worker;
  }

  private fail(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}
