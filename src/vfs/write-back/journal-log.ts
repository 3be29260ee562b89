/**
 * JournalLog: the upload journal's append-only log file (`journal.log`, lines of journal-lines.ts). It
 * owns the file and nothing of what the lines mean: appends (every line queued meanwhile goes out in one
 * write), fdatasyncs (one serves everyone waiting meanwhile), and rewrites that keep only the lines the
 * journal still needs (compaction). Every change of the file runs on one chain, one at a time.
 *
 * Appends of up to SYNC_APPEND_MAX_BYTES are written on the calling thread (a write into the page cache,
 * a few microseconds) rather than handed to the thread pool and back, two thread hand-offs on the path of
 * every close. One that takes longer than `slowAppendMs` (the kernel throttling writers of a busy disk)
 * sends the appends of the next APPENDS_OFF_THREAD_MS through the thread pool, so a throttled disk holds
 * the event loop once, not at every close.
 */
import { writeSync } from 'node:fs';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { NEWLINE, readLogs, type LogRecord } from './journal-lines.js';
import { fsyncFolderIfSupported } from '../../shared/atomic-file.js';
import { systemClock, type Clock } from '../clock.js';

const SYNC_APPEND_MAX_BYTES = 64 * 1024;
const SLOW_APPEND_MS = 5;
const APPENDS_OFF_THREAD_MS = 10_000;

export interface JournalLogOptions {
  /** An append on the calling thread slower than this sends the next ones through the thread pool for a while. */
  slowAppendMs?: number;
  /** Called on the log's chain after each batch of appends is written (the journal decides on a compaction there). */
  afterAppends?: () => Promise<void>;
  /** The time of the while appends go through the thread pool. Default the real one. */
  clock?: Clock;
}

export class JournalLog {
  /** The log, open for appending (closed after close(): each later append opens it). */
  private fh: FileHandle | undefined;
  private closed = false;
  /** Lines waiting for the writer (one write for all of them). */
  private queue: { line: Buffer; done: (err: Error | undefined, record: number) => void }[] = [];
  /** A write of the queue is on the log's chain. */
  private flushQueued = false;
  /** Every change of the log file runs on this chain, one at a time. */
  private chain: Promise<void> = Promise.resolve();
  /** Records written to the log (page cache), and how many of them are durable. */
  private writtenRecords = 0;
  private syncedRecords = 0;
  /** Bytes of the log file (undefined until first opened), and how many of them are durable. */
  private bytes: number | undefined;
  private syncedBytes = 0;
  /** Records in the log file (live and dead), for compaction, and how many its last rewrite kept. */
  private recordsInFile = 0;
  private keptByRewrite = 0;
  private rewriteCount = 0;
  /** The fdatasync under way, and how far it reaches. */
  private syncing: Promise<void> | undefined;
  /** A write failed part way and could not be undone: the next write starts on a line of its own. */
  private tornTail = false;
  /** Until then appends go through the thread pool (an append on the calling thread was slow). */
  private appendsOffThreadUntil = 0;
  /** Appends written on the calling thread, and those sent to the thread pool (for tests and figures). */
  readonly appendCounts = { inline: 0, pooled: 0 };
  private readonly slowAppendMs: number;
  private readonly clock: Clock;

  constructor(readonly path: string, private readonly opts: JournalLogOptions = {}) {
    this.slowAppendMs = opts.slowAppendMs ?? SLOW_APPEND_MS;
    this.clock = opts.clock ?? systemClock;
  }

  /** Records written so far (page cache), and how many of them are durable. */
  get written(): number {
    return this.writtenRecords;
  }

  get synced(): number {
    return this.syncedRecords;
  }

  /** How many of the file's bytes are durable (a power loss now keeps at least those). */
  get durableBytes(): number {
    return this.syncedBytes;
  }

  /** Records in the file (live and dead), and how many the last rewrite kept. */
  get records(): number {
    return this.recordsInFile;
  }

  get keptRecords(): number {
    return this.keptByRewrite;
  }

  /** Rewrites (compactions) so far. */
  get rewrites(): number {
    return this.rewriteCount;
  }

  /** Appends one line; resolves with the count of records written once it is in the log (page cache). */
  append(line: Buffer): Promise<number> {
    return new Promise((resolve, reject) => {
      this.queue.push({ line, done: (err, record) => (err ? reject(err) : resolve(record)) });
      if (this.flushQueued) return;
      this.flushQueued = true;
      void this.exclusive(() => this.writeQueue());
    });
  }

  /** Runs `fn` with the log to itself (no other write or rewrite in between). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn);
    this.chain = run.then(() => undefined, () => undefined);
    return run;
  }

  /** Resolves once every change of the log started so far is done. */
  async drained(): Promise<void> {
    let last: Promise<void> | undefined;
    while (last !== this.chain) {
      last = this.chain;
      await last;
    }
  }

  /** Everything queued goes out in one write; what is queued meanwhile goes in the next. */
  private async writeQueue(): Promise<void> {
    this.flushQueued = false;
    const batch = this.queue.splice(0);
    if (batch.length === 0) return;
    const lines = batch.map((b) => b.line);
    if (this.tornTail) lines.unshift(NEWLINE);
    try {
      await this.write(lines.length === 1 ? lines[0]! : Buffer.concat(lines));
      this.tornTail = false;
      this.writtenRecords += batch.length;
      this.recordsInFile += batch.length;
      for (const b of batch) b.done(undefined, this.writtenRecords);
    } catch (err) {
      for (const b of batch) b.done(err as Error, 0);
      return;
    }
    await this.opts.afterAppends?.();
  }

  private async write(buf: Buffer): Promise<void> {
    const fh = this.fh ?? (await open(this.path, 'a', 0o600));
    let done = 0;
    try {
      this.bytes ??= (await fh.stat()).size;
      if (buf.length <= SYNC_APPEND_MAX_BYTES && this.clock.now() >= this.appendsOffThreadUntil) {
        // The append's own duration is measured, not waited for: real time whatever the clock.
        const started = performance.now();
        while (done < buf.length) done += writeSync(fh.fd, buf, done, buf.length - done);
        this.appendCounts.inline++;
        if (performance.now() - started > this.slowAppendMs) this.appendsOffThreadUntil = this.clock.now() + APPENDS_OFF_THREAD_MS;
      } else {
        while (done < buf.length) done += (await fh.write(buf, done, buf.length - done)).bytesWritten;
        this.appendCounts.pooled++;
      }
      this.bytes += done;
    } catch (err) {
      // Undo a part-written batch; if that fails too, the next batch starts on a fresh line.
      if (done > 0 && !(this.bytes !== undefined && (await fh.truncate(this.bytes).then(() => true, () => false)))) {
        this.tornTail = true;
        this.bytes = undefined;
      }
      throw err;
    } finally {
      if (this.closed) await fh.close();
      else this.fh = fh;
    }
  }

  /** Makes every record written so far durable (one fdatasync serves everyone waiting meanwhile). */
  async sync(): Promise<void> {
    const target = this.writtenRecords;
    while (this.syncedRecords < target) {
      if (this.syncing) {
        await this.syncing;
        continue;
      }
      const upTo = this.writtenRecords;
      const upToBytes = this.bytes ?? 0;
      this.syncing = (async () => {
        const fh = this.fh ?? (await open(this.path, 'a', 0o600));
        try {
          await fh.datasync();
        } finally {
          if (fh !== this.fh) await fh.close();
        }
        this.syncedRecords = Math.max(this.syncedRecords, upTo);
        this.syncedBytes = Math.max(this.syncedBytes, upToBytes);
      })().finally(() => { this.syncing = undefined; });
      await this.syncing;
    }
  }

  /**
   * Rewrites the log (run it `exclusive`) with the lines of `sources` that `keeps` names, copied as they
   * are, then `more` (whole lines): streamed, nothing fsynced but the new log, which then replaces the log.
   * Every record written so far counts as durable after it.
   */
  async rewrite(sources: string[], keeps: (rec: LogRecord, check: string) => boolean, more: string[] = []): Promise<void> {
    const tmp = `${this.path}.${randomBytes(4).toString('hex')}.tmp`;
    const out = await open(tmp, 'w', 0o600);
    let bytes = 0;
    let kept = 0;
    try {
      let pending: string[] = [];
      let pendingBytes = 0;
      const flush = async (): Promise<void> => {
        const buf = Buffer.from(pending.join(''));
        pending = [];
        pendingBytes = 0;
        let done = 0;
        while (done < buf.length) done += (await out.write(buf, done, buf.length - done)).bytesWritten;
        bytes += buf.length;
      };
      const keep = async (text: string): Promise<void> => {
        pending.push(text);
        pendingBytes += text.length;
        kept++;
        if (pendingBytes >= 1024 * 1024) await flush();
      };
      await readLogs(sources, async (rec, check, text) => {
        if (keeps(rec, check)) await keep(`${text}\n`);
      });
      for (const text of more) await keep(text);
      await flush();
      await out.sync();
    } catch (err) {
      await out.close().catch(() => undefined);
      await rm(tmp, { force: true });
      throw err;
    }
    await out.close();
    await rename(tmp, this.path);
    await fsyncFolderIfSupported(dirname(this.path));
    const old = this.fh;
    this.fh = undefined;
    await old?.close().catch(() => undefined);
    this.tornTail = false;
    this.bytes = bytes;
    this.syncedBytes = bytes;
    this.recordsInFile = kept;
    this.keptByRewrite = kept;
    this.rewriteCount++;
    this.syncedRecords = this.writtenRecords;
  }

  /** Waits for every change under way, then closes the file; later appends open it each time. */
  async close(): Promise<void> {
    this.closed = true;
    await this.drained();
    const fh = this.fh;
    this.fh = undefined;
    await fh?.close().catch(() => undefined);
  }
}
