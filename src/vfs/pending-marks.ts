/**
 * PendingMarks: the lock and the tags given to a file that is not on the service yet (written here, its
 * upload still to come). They answer at once as they will once the file is there — the gateway's own
 * hold of the lock refuses the other front ends' writers from the moment it is granted, `getTags`
 * answers the tags set — and reach the service right after the file's upload (`apply`).
 */
import type { Logger } from '../shared/log.js';
import type { Operator } from './types.js';
import type { Remote } from './remote.js';

interface Marks {
  /** Lock the file on the service once it is there, as this operator. */
  lock?: { operator?: Operator };
  /** The file's tags, all of them. */
  tags?: string[];
}

export class PendingMarks {
  private readonly marks = new Map<string, Marks>();

  constructor(private readonly logger: Logger) {}

  private key(library: string, fullpath: string): string {
    return `${library}\0${fullpath}`;
  }

  setLock(library: string, fullpath: string, locked: boolean, operator?: Operator): void {
    this.update(library, fullpath, (m) => { m.lock = locked ? { operator } : undefined; });
  }

  setTags(library: string, fullpath: string, tags: string[]): void {
    this.update(library, fullpath, (m) => { m.tags = [...tags]; });
  }

  /** The tags set on the file while it waits for its upload, undefined when none were. */
  tags(library: string, fullpath: string): string[] | undefined {
    const t = this.marks.get(this.key(library, fullpath))?.tags;
    return t ? [...t] : undefined;
  }

  /** Forgets what was set on a path (the file is gone). */
  forget(library: string, fullpath: string): void {
    this.marks.delete(this.key(library, fullpath));
  }

  /**
   * The file reached the service: what was set on it goes there too. Resolves with what was applied;
   * a refusal is logged (the file stays as uploaded; the gateway's hold of a lock is not changed here).
   */
  async apply(library: string, fullpath: string, remote: Remote): Promise<{ locked?: boolean; tags?: string[] }> {
    const key = this.key(library, fullpath);
    const m = this.marks.get(key);
    if (!m) return {};
    this.marks.delete(key);
    const done: { locked?: boolean; tags?: string[] } = {};
    if (m.tags && m.tags.length > 0) {
      try {
        await remote.addTags(fullpath, m.tags);
        done.tags = m.tags;
      } catch (err) {
        this.logger.warn({ library, fullpath, err: (err as Error).message }, 'tags set before the upload could not be given to the uploaded file');
      }
    }
    if (m.lock) {
      try {
        await remote.lock(fullpath, true, { operator: m.lock.operator });
        done.locked = true;
      } catch (err) {
        this.logger.warn({ library, fullpath, err: (err as Error).message }, 'the lock taken before the upload could not be taken on the service; the gateway holds it alone');
      }
    }
    return done;
  }

  private update(library: string, fullpath: string, change: (m: Marks) => void): void {
    const key = this.key(library, fullpath);
    const m = this.marks.get(key) ?? {};
    change(m);
    if (m.lock === undefined && m.tags === undefined) this.marks.delete(key);
    else this.marks.set(key, m);
  }
}
