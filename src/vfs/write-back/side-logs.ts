/**
 * JournalSideLogs: the logs of another writer of put records (the FUSE engine, a lessee: see
 * engine-lease.ts) — attached one at a time, their records settled or kept, the logs dropped at a
 * compaction once all of theirs are settled.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { SideLogWriter } from '../engine-lease.js';

import { fsyncFolderIfSupported, removeFileIfPresent } from '../../shared/atomic-file.js';
import { ID_RE, lineAsWritten, lineOf, putContentOfLine, putEntryOfLine, type JournalEntry } from './journal-records.js';
import { SIDE_LOG_RE } from './journal-spools.js';
import { JournalLog } from './journal-log.js';

export abstract class JournalSideLogs extends JournalLog {
  async attachSideWriter(writer: SideLogWriter): Promise<void> {
    if (this.sideWriter) throw new Error('the journal has a side writer already');
    if (this.closed) throw new Error('the journal is closed');
    const path = this.newSideLogPath();
    this.sideWriter = writer;
    this.settledSinceSwitch.clear();
    try {
      await writer.switchTo(path);
    } catch (err) {
      this.sideWriter = undefined;
      throw err;
    }
    this.sideLog = path;
  }

  detachSideWriter(writer: SideLogWriter): void {
    if (this.sideWriter !== writer) return;
    // Its logs stay until the next compaction (or start): every record in them is settled.
    this.sideWriter = undefined;
    this.sideLog = undefined;
  }

  /** Resolves once every record the side writer wrote so far is settled (flushAll: what was closed is flushed). */
  async sideSettled(): Promise<void> {
    await this.sideWriter?.settle();
  }

  async sideRecordSettled(id: string): Promise<void> {
    this.settledSinceSwitch.add(id);
    if (this.live.has(id) || !ID_RE.test(id)) return;
    // The version went without a line of the journal's own (deleted, superseded, refused): one says so.
    await this.append(Buffer.from(lineOf({ rm: id }).text));
    this.scheduleGroupCommit();
  }

  async keepSideRecord(written: Buffer): Promise<void> {
    const { line, check } = lineAsWritten(written);
    await this.append(line);
    this.keptLines.add(check);
    this.scheduleGroupCommit();
  }

  /**
   * The entry a side record puts, with its bytes in the line (not decoded): what the journal keeps of it
   * when the line is taken as its own (`put` with `line`). Undefined for a line that does not match its
   * check, or is not a put of a small file's bytes.
   */
  sideRecordEntry(line: Buffer): JournalEntry | undefined {
    return putEntryOfLine(line);
  }

  /**
   * What a side record put, for a front end that must apply it itself (the file it closed was refused):
   * the file's place and bytes; undefined for a line that is not a put of a small file's bytes.
   */
  sideRecordContent(line: Buffer): { library: string; fullpath: string; data: Buffer } | undefined {
    return putContentOfLine(line);
  }

  protected newSideLogPath(): string {
    return join(this.dir, `closes.${this.newId()}.log`);
  }

  /** Side logs in the folder. */
  protected async sideLogs(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    return names.filter((n) => SIDE_LOG_RE.test(n)).sort().map((n) => join(this.dir, n));
  }

  /** Moves the side writer to a new log, then compacts, the earlier side logs dropped (all settled). */
  protected async compactWithSideWriter(): Promise<void> {
    const writer = this.sideWriter;
    if (writer) {
      const path = this.newSideLogPath();
      this.settledSinceSwitch.clear();
      try {
        await writer.switchTo(path);
      } catch {
        return; // the writer is going (unmount): the next compaction does it
      }
      if (this.sideWriter === writer) this.sideLog = path;
    }
    await this.onLog(() => this.compactDroppingSideLogs()).catch(() => undefined);
  }

  /**
   * Compacts with the side logs other than the one being written removed first: their records are all
   * settled, so the journal's own log has all that replay needs of them. Removed before the new log is in
   * place, so that no state ever has a side record without the journal's lines that supersede it.
   */
  protected async compactDroppingSideLogs(): Promise<void> {
    const old = (await this.sideLogs()).filter((p) => p !== this.sideLog);
    for (const side of old) await removeFileIfPresent(side);
    if (old.length > 0) await fsyncFolderIfSupported(this.dir);
    // Records of the side log being written that were settled and are gone keep their removal lines.
    const gone = [...this.settledSinceSwitch].filter((id) => !this.live.has(id));
    await this.compact([], [this.logPath], this.sideLog ? gone : []);
  }
}
