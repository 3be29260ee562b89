/**
 * JournalLog: an UploadJournal's log file — appends, group commits, the fsync of the log, and its rewrite
 * with only the live entries (compaction); legacy one-file-an-entry records read at start-up.
 */
import { createReadStream, writeSync } from 'node:fs';
import { open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

import { fsyncFile, fsyncFolderIfSupported } from '../../shared/atomic-file.js';
import { NEWLINE, lineAsWritten, lineOf, parseLine, putLineOf, validEntry, type JournalEntry, type LogRecord } from './journal-records.js';
import { JournalSpools, COMPACT_DEAD_RECORDS, SYNC_APPEND_MAX_BYTES, APPENDS_OFF_THREAD_MS, ignoreMissing, type LiveEntry } from './journal-spools.js';

export abstract class JournalLog extends JournalSpools {
  /** Compactions while another writer keeps a side log, and after it stopped (JournalSideLogs). */
  protected abstract compactWithSideWriter(): Promise<void>;
  protected abstract compactDroppingSideLogs(): Promise<void>;

  /** Rewrites an entry's metadata (a rename, a new time) of a spool already journaled. */
  async rewrite(entry: JournalEntry): Promise<void> {
    const before = this.live.get(entry.id);
    const wasDurable = !before || before.record <= this.synced;
    // The content is the same (a journaled version is immutable): its bytes stay where they were safe.
    await this.appendPut(entry, undefined, before);
    if (wasDurable) await this.syncLog();
  }

  /**
   * `before`: the entry's live record this one rewrites (its bytes stay in the line that carried them).
   * `written`: the line, written already by a side writer, with the entry's bytes in it.
   */
  protected async appendPut(entry: JournalEntry, inline: Buffer | undefined, before?: LiveEntry, written?: Buffer): Promise<void> {
    const { line, check } = written ? lineAsWritten(written) : putLineOf(entry, inline);
    const record = await this.append(line);
    const lines = new Set([check]);
    const carries = !!inline || !!written;
    // A record of a file still open (an fsync) that carries no bytes: its bytes are the spool's now.
    const keeps = !carries && !entry.open && !!before?.inline;
    if (keeps) for (const c of before.lines) lines.add(c);
    this.live.set(entry.id, { entry, inline: carries || keeps, record, lines });
  }

  /** Appends one line; resolves with the count of records written once it is in the log (page cache). */
  protected append(line: Buffer): Promise<number> {
    return new Promise((resolve, reject) => {
      this.queue.push({ line, done: (err, record) => (err ? reject(err) : resolve(record)) });
      if (this.flushQueued) return;
      this.flushQueued = true;
      void this.onLog(() => this.writeQueue());
    });
  }

  /** Everything queued goes out in one write; what is queued meanwhile goes in the next. */
  protected async writeQueue(): Promise<void> {
    this.flushQueued = false;
    const batch = this.queue.splice(0);
    if (batch.length === 0) return;
    const lines = batch.map((b) => b.line);
    if (this.tornTail) lines.unshift(NEWLINE);
    try {
      await this.writeLog(lines.length === 1 ? lines[0]! : Buffer.concat(lines));
      this.tornTail = false;
      this.written += batch.length;
      this.logRecords += batch.length;
      for (const b of batch) b.done(undefined, this.written);
    } catch (err) {
      for (const b of batch) b.done(err as Error, 0);
      return;
    }
    if (this.compactionDue() && !this.closed) {
      // With a side writer, it first moves to a new side log (outside this chain: the records it waits
      // for are settled by appends that queue behind it).
      if (this.sideWriter) this.sideCompaction ??= this.compactWithSideWriter().finally(() => { this.sideCompaction = undefined; });
      else await this.compactDroppingSideLogs().catch(() => undefined);
    }
  }

  /** Rewrites of the log (compactions) so far (for tests and figures). */
  get logRewrites(): number {
    return this.rewrites;
  }

  /**
   * The log holds COMPACT_DEAD_RECORDS records more than live entries, and twice as many; and since its
   * last rewrite, as many records came as that rewrite kept (at least COMPACT_DEAD_RECORDS). The last
   * keeps each rewrite's cost (every line kept is read and written again) within twice the records
   * appended since the one before, whatever the entries keep: a file renamed after its close keeps two
   * lines (its bytes and its path), and with only the first two conditions a journal of 2,000 such files
   * would be rewritten at every append.
   */
  protected compactionDue(): boolean {
    return this.logRecords > this.live.size + COMPACT_DEAD_RECORDS && this.logRecords > 2 * this.live.size &&
      this.logRecords - this.keptRecords > Math.max(COMPACT_DEAD_RECORDS, this.keptRecords);
  }

  /** Runs `fn` with the log to itself (no other write or rewrite in between). */
  protected onLog<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn);
    this.chain = run.then(() => undefined, () => undefined);
    return run;
  }

  /** Resolves once every change of the log started so far is done. */
  protected async drained(): Promise<void> {
    let last: Promise<void> | undefined;
    while (last !== this.chain) {
      last = this.chain;
      await last;
    }
  }

  protected async writeLog(buf: Buffer): Promise<void> {
    const fh = this.log ?? (await open(this.logPath, 'a', 0o600));
    let done = 0;
    try {
      this.logBytes ??= (await fh.stat()).size;
      if (buf.length <= SYNC_APPEND_MAX_BYTES && Date.now() >= this.appendsOffThreadUntil) {
        const started = performance.now();
        while (done < buf.length) done += writeSync(fh.fd, buf, done, buf.length - done);
        this.appendCounts.inline++;
        if (performance.now() - started > this.slowAppendMs) this.appendsOffThreadUntil = Date.now() + APPENDS_OFF_THREAD_MS;
      } else {
        while (done < buf.length) done += (await fh.write(buf, done, buf.length - done)).bytesWritten;
        this.appendCounts.pooled++;
      }
      this.logBytes += done;
    } catch (err) {
      // Undo a part-written batch; if that fails too, the next batch starts on a fresh line.
      if (done > 0 && !(this.logBytes !== undefined && (await fh.truncate(this.logBytes).then(() => true, () => false)))) {
        this.tornTail = true;
        this.logBytes = undefined;
      }
      throw err;
    } finally {
      if (this.closed) await fh.close();
      else this.log = fh;
    }
  }

  /** Makes every record written so far durable (one fdatasync serves everyone waiting meanwhile). */
  protected async syncLog(): Promise<void> {
    const target = this.written;
    while (this.synced < target) {
      if (this.syncing) {
        await this.syncing;
        continue;
      }
      const upTo = this.written;
      const upToBytes = this.logBytes ?? 0;
      this.syncing = (async () => {
        const fh = this.log ?? (await open(this.logPath, 'a', 0o600));
        try {
          await fh.datasync();
        } finally {
          if (fh !== this.log) await fh.close();
        }
        this.synced = Math.max(this.synced, upTo);
        this.syncedBytes = Math.max(this.syncedBytes, upToBytes);
      })().finally(() => { this.syncing = undefined; });
      await this.syncing;
    }
  }

  /**
   * Rewrites the log with only the lines live entries need (each one's last line, and the one carrying
   * its bytes), copied as they are: streamed, nothing fsynced but the new log. `extra`: entries with no
   * line yet (of the earlier layout), written as new lines.
   */
  protected async compact(extra: JournalEntry[] = [], sources: string[] = [this.logPath], removed: string[] = []): Promise<void> {
    const tmp = `${this.logPath}.${randomBytes(4).toString('hex')}.tmp`;
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
      await this.eachLine(sources, async (rec, check, text) => {
        if (rec.put && (this.live.get(rec.put.id)?.lines.has(check) || this.keptLines.has(check))) await keep(`${text}\n`);
      });
      for (const e of extra) {
        const { text, check } = lineOf({ put: e });
        await keep(text);
        const l = this.live.get(e.id);
        if (l) l.lines = new Set([check]);
      }
      for (const id of removed) await keep(lineOf({ rm: id }).text);
      await flush();
      await out.sync();
    } catch (err) {
      await out.close().catch(() => undefined);
      await rm(tmp, { force: true });
      throw err;
    }
    await out.close();
    await rename(tmp, this.logPath);
    await fsyncFolderIfSupported(this.dir);
    const old = this.log;
    this.log = undefined;
    await old?.close().catch(() => undefined);
    this.tornTail = false;
    this.logBytes = bytes;
    this.syncedBytes = bytes;
    this.logRecords = kept;
    this.keptRecords = kept;
    this.rewrites++;
    this.synced = this.written;
    for (const l of this.live.values()) l.record = this.written;
  }

  /** Calls `fn` with each record of the logs `paths`, in order, as it is read; lines that do not match their check are skipped. */
  protected async eachLine(paths: string[], fn: (rec: LogRecord, check: string, text: string) => Promise<void>): Promise<void> {
    for (const path of paths) await this.eachLineOf(path, fn);
  }

  protected async eachLineOf(path: string, fn: (rec: LogRecord, check: string, text: string) => Promise<void>): Promise<void> {
    const input = createReadStream(path, { encoding: 'utf8' });
    const opened = await new Promise<boolean>((resolve, reject) => {
      input.once('open', () => resolve(true));
      input.once('error', (err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? resolve(false) : reject(err)));
    });
    if (!opened) return;
    for await (const text of createInterface({ input, crlfDelay: Infinity })) {
      const parsed = parseLine(text);
      if (parsed) await fn(parsed.rec, parsed.check, text);
    }
  }

  /** Entries of the earlier layout (one JSON file each), if any are left. */
  protected async legacyEntries(): Promise<JournalEntry[]> {
    const names = await readdir(this.entriesDir).catch(() => [] as string[]);
    const out: JournalEntry[] = [];
    for (const name of names) {
      if (!name.endsWith('.json')) continue;
      try {
        const e = JSON.parse(await readFile(join(this.entriesDir, name), 'utf8')) as JournalEntry;
        if (validEntry(e)) out.push(e);
      } catch { /* written with fsync then renamed: a torn file cannot be an acknowledged one */ }
    }
    return out;
  }

  // ---- group commit --------------------------------------------------------------------------------------

  protected scheduleGroupCommit(): void {
    if (this.groupTimer || this.closed) return;
    this.groupTimer = setTimeout(() => {
      this.groupTimer = undefined;
      const run = this.committing.then(() => this.groupCommit());
      this.committing = run.catch(() => undefined);
    }, this.groupCommitMs);
    this.groupTimer.unref();
  }

  /** fsyncs the spools written since the last group commit (not those carried in records), then the log. */
  protected async groupCommit(): Promise<void> {
    const spools = [...this.unsyncedSpools];
    this.unsyncedSpools.clear();
    if (spools.length > 0) {
      // A spool removed since (its upload confirmed) needs nothing.
      await Promise.all(spools.map((f) => fsyncFile(f).catch(ignoreMissing)));
      await this.syncSpoolFolder();
    }
    await this.drained();
    await this.syncLog();
  }
}
