/**
 * TimeOverrides: the modification times the gateway shows instead of the service's, for as long as the
 * version they belong to is the file's current one on the service. The service keeps times in whole
 * seconds and sets them itself at upload; a program that saved a file saw a finer time, and a time that
 * moved back after the upload would make editors and build tools think the file changed behind them.
 * Kept in a file (one JSON line per record, compacted at start), so they hold across restarts.
 *
 * Key: library folder and the object's stable id; a record applies only while the entry's version (its
 * content hash, or its service time for a folder) is the one recorded.
 */
import { open, readFile, type FileHandle } from 'node:fs/promises';
import { writeFileAtomic } from '../shared/atomic-file.js';
import { LRUCache } from 'lru-cache';
import type { Logger } from '../shared/log.js';

interface TimeRecord { version: string; mtimeMs: number }

export class TimeOverrides {
  private readonly map: LRUCache<string, TimeRecord>;
  private fh: FileHandle | undefined;
  private chain: Promise<void> = Promise.resolve();
  private appended = 0;
  /** Lines recorded while an append was under way: the next append writes them together. */
  private unwritten = '';

  constructor(private readonly file: string, private readonly logger: Logger, private readonly max = 10_000) {
    this.map = new LRUCache({ max });
  }

  /** Loads what earlier runs kept and rewrites the file compactly. */
  async load(): Promise<void> {
    let text = '';
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    for (const line of text.split('\n')) {
      if (line === '') continue;
      try {
        const [key, version, mtimeMs] = JSON.parse(line) as [unknown, unknown, unknown];
        if (typeof key === 'string' && typeof version === 'string' && typeof mtimeMs === 'number' && Number.isFinite(mtimeMs)) this.map.set(key, { version, mtimeMs });
      } catch { /* a line torn by a crash: that record is lost, the service's time shows */ }
    }
    await this.compact();
  }

  /** The time to show for an entry of this version, if one is recorded. */
  get(library: string, id: string, version: string): number | undefined {
    const r = this.map.get(keyOf(library, id));
    return r && r.version === version ? r.mtimeMs : undefined;
  }

  /** Records the time of an entry's version (written in the background; failures are logged). */
  set(library: string, id: string, version: string, mtimeMs: number): void {
    const key = keyOf(library, id);
    const had = this.map.get(key);
    if (had && had.version === version && had.mtimeMs === mtimeMs) return;
    this.map.set(key, { version, mtimeMs });
    const first = this.unwritten === '';
    this.unwritten += `${JSON.stringify([key, version, mtimeMs])}\n`;
    this.appended++;
    if (!first) return; // an append already queued takes this line too
    this.chain = this.chain.then(async () => {
      const lines = this.unwritten;
      this.unwritten = '';
      if (this.appended > this.max) await this.compact();
      else await (await this.handle()).appendFile(lines);
    }).catch((err: Error) => this.logger.warn({ err: err.message }, 'recording a modification time failed'));
  }

  async close(): Promise<void> {
    await this.chain;
    await this.fh?.close().catch(() => undefined);
    this.fh = undefined;
  }

  private async compact(): Promise<void> {
    await this.fh?.close().catch(() => undefined);
    this.fh = undefined;
    const lines = [...this.map.entries()].reverse().map(([k, r]) => `${JSON.stringify([k, r.version, r.mtimeMs])}\n`).join('');
    // Times shown are a convenience: a power loss may cost the compacted file (the service's times show).
    await writeFileAtomic(this.file, lines, { durability: 'rename', mode: 0o600 });
    this.appended = 0;
  }

  private async handle(): Promise<FileHandle> {
    this.fh ??= await open(this.file, 'a', 0o600);
    return this.fh;
  }
}

function keyOf(library: string, id: string): string {
  return `${library}\0${id}`;
}
