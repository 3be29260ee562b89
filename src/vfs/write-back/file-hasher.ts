/**
 * FileHasher: SHA-1 of local files computed in worker threads, so hashing a large spool file never
 * blocks the event loop (the FUSE front end answers every operation on the main thread). The worker is a
 * plain .mjs file next to this one, so it loads the same way whether the sources run compiled or through
 * a TypeScript loader.
 */
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';

export interface FileHasherOptions {
  /** Worker threads. Default 2. */
  threads?: number;
}

interface Job { id: number; path: string; resolve: (r: { sha1: string; size: number }) => void; reject: (e: Error) => void }

const WORKER_FILE = fileURLToPath(new URL('./sha1-worker.mjs', import.meta.url));

export class FileHasher {
  private readonly idle: Worker[] = [];
  private readonly all: Worker[] = [];
  private readonly waiting: Job[] = [];
  private readonly busy = new Map<Worker, Job>();
  private nextId = 1;
  private closed = false;

  constructor(private readonly opts: FileHasherOptions = {}) {
    const threads = opts.threads ?? 2;
    if (!Number.isInteger(threads) || threads < 1) throw new TypeError(`threads: expected a whole number >= 1, got ${threads}`);
  }

  /** SHA-1 (lowercase hex) and size of the file's bytes as read now. */
  hash(path: string): Promise<{ sha1: string; size: number }> {
    if (this.closed) return Promise.reject(new Error('FileHasher is closed'));
    return new Promise((resolve, reject) => {
      this.waiting.push({ id: this.nextId++, path, resolve, reject });
      this.pump();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.splice(0)) job.reject(new Error('FileHasher closed'));
    await Promise.all(this.all.map((w) => w.terminate()));
    this.all.length = 0;
    this.idle.length = 0;
  }

  private pump(): void {
    while (this.waiting.length > 0) {
      const worker = this.idle.pop() ?? this.spawn();
      if (!worker) return;
      const job = this.waiting.shift()!;
      this.busy.set(worker, job);
      worker.postMessage({ id: job.id, path: job.path });
    }
  }

  private spawn(): Worker | undefined {
    if (this.all.length >= (this.opts.threads ?? 2)) return undefined;
    const worker = new Worker(WORKER_FILE);
    worker.unref();
    worker.on('message', (msg: { id: number; sha1?: string; size?: number; error?: string }) => {
      const job = this.busy.get(worker);
      this.busy.delete(worker);
      this.idle.push(worker);
      if (job) {
        if (msg.error) job.reject(new Error(`hashing ${job.path}: ${msg.error}`));
        else job.resolve({ sha1: msg.sha1!, size: msg.size! });
      }
      this.pump();
    });
    worker.on('error', (err) => {
      const job = this.busy.get(worker);
      this.busy.delete(worker);
      this.all.splice(this.all.indexOf(worker), 1);
      job?.reject(err);
      this.pump();
    });
    this.all.push(worker);
    return worker;
  }
}
