/**
 * Sends a response body in batches. A file read from the service arrives in socket-sized pieces (64 KiB);
 * written one by one to the client, each piece is a system call and a pass through the TCP stack on both
 * sides. Gathered into batches of about 1 MiB written with one writev (the socket is corked while a batch
 * is handed over: no copy is made), a GET of a large file costs markedly less CPU. A batch not full
 * after `maxDelayMs` goes out as it is, so a slow source is not held back.
 */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';

export interface BatchOptions {
  /** Bytes gathered before a batch is written. Default 1 MiB. */
  batchBytes?: number;
  /** Longest wait of a partial batch, ms. Default 2. */
  maxDelayMs?: number;
}

/** Pipes `source` into `res` and ends it; rejects (and destroys both) when either fails or the client goes away. */
export function sendBatched(source: Readable, res: ServerResponse, opts: BatchOptions = {}): Promise<void> {
  const batchBytes = opts.batchBytes ?? 1024 * 1024;
  const maxDelayMs = opts.maxDelayMs ?? 2;
  return new Promise<void>((resolve, reject) => {
    let batch: Buffer[] = [];
    let bytes = 0;
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const settle = (err?: Error): void => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      source.off('data', onData);
      if (err) {
        source.destroy();
        res.destroy(err);
        reject(err);
      } else resolve();
    };
    const flush = (): void => {
      if (timer) clearTimeout(timer);
      timer = undefined;
      if (bytes === 0 || settled) return;
      const out = batch;
      batch = [];
      bytes = 0;
      res.cork();
      let ok = true;
      for (const b of out) ok = res.write(b);
      res.uncork();
      if (!ok && !source.isPaused()) {
        source.pause();
        res.once('drain', () => source.resume());
      }
    };
    const onData = (chunk: Buffer): void => {
      batch.push(chunk);
      bytes += chunk.length;
      if (bytes >= batchBytes) flush();
      else timer ??= setTimeout(flush, maxDelayMs);
    };
    source.on('data', onData);
    source.once('end', () => {
      flush();
      if (settled) return;
      res.end(() => settle());
    });
    source.once('error', (err: Error) => settle(err));
    res.once('close', () => {
      if (!res.writableFinished) settle(new Error('the client closed the connection before the body was sent'));
    });
    res.once('error', (err: Error) => settle(err));
  });
}
