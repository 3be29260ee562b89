/**
 * UploadSessionJournal: the on-disk state of chunked upload sessions, so that an upload resumes after a
 * service restart. One directory; per session a JSON journal `<id>.json` (written atomically: temp file,
 * fsync, rename) and the temporary content file `<id>.part`. The length of the `.part` file is the
 * committed byte count; the journal holds what was declared at upload_init and, once finished, the result.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../../shared/atomic-file.js';
import type { UploadedFile } from './types.js';

export interface SessionRecord {
  /** 32 lowercase hex characters; the session's only credential after upload_init. */
  id: string;
  pathhash: string;
  libraryId: number;
  fullpath: string;
  filename: string;
  filehash: string;
  filesize: number;
  /** Unix milliseconds. */
  createdAt: number;
  /** Set once upload_finish committed the file: repeated finish calls answer it. */
  result?: UploadedFile;
}

const ID_RE = /^[0-9a-f]{32}$/;

export class UploadSessionJournal {
  constructor(readonly dir: string) {}

  static newId(): string {
    return randomBytes(16).toString('hex');
  }

  static isId(text: string): boolean {
    return ID_RE.test(text);
  }

  async open(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
  }

  partPath(id: string): string {
    return join(this.dir, `${id}.part`);
  }

  private journalPath(id: string): string {
    return join(this.dir, `${id}.json`);
  }

  /** Writes the journal durably (the rename is atomic; a crash leaves the old or the new one). */
  async save(record: SessionRecord): Promise<void> {
    await writeFileAtomic(this.journalPath(record.id), JSON.stringify(record), { durability: 'fsync-file' });
  }

  async load(id: string): Promise<SessionRecord | undefined> {
    if (!UploadSessionJournal.isId(id)) return undefined;
    try {
      return JSON.parse(await readFile(this.journalPath(id), 'utf8')) as SessionRecord;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
  }

  /** Removes a session's journal and temporary file (missing ones are fine). */
  async remove(id: string): Promise<void> {
    await rm(this.partPath(id), { force: true });
    await rm(this.journalPath(id), { force: true });
  }

  /** Removes only the temporary file (after the host ingested or copied it). */
  async removePart(id: string): Promise<void> {
    await rm(this.partPath(id), { force: true });
  }

  /** Committed byte count: the temporary file's length; undefined when it is gone. */
  async committedBytes(id: string): Promise<number | undefined> {
    try {
      return (await stat(this.partPath(id))).size;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
  }

  /**
   * Every session id with its last activity (latest mtime of journal and temporary file, ms), plus stray
   * files that belong to no session (a `.part` without journal, an interrupted journal write).
   */
  async scan(): Promise<{ sessions: Map<string, number>; strays: string[] }> {
    const sessions = new Map<string, number>();
    const strays: string[] = [];
    const names = await readdir(this.dir);
    const journals = new Set(names.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -5)));
    for (const name of names) {
      const m = /^([0-9a-f]{32})\.(json|part)$/.exec(name);
      if (!m || !journals.has(m[1]!)) {
        strays.push(join(this.dir, name));
        continue;
      }
      try {
        const mtime = (await stat(join(this.dir, name))).mtimeMs;
        sessions.set(m[1]!, Math.max(sessions.get(m[1]!) ?? 0, mtime));
      } catch {
        // removed concurrently
      }
    }
    return { sessions, strays };
  }
}
