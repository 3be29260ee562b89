/**
 * Files unlinked while read handles are open on them: gone from the namespace at once, removed on the
 * service after their last reader (as a local disk keeps an unlinked file readable until it is closed).
 * Counts the read handles open on service files, by library and fullpath. The removal itself is the
 * WriteBack's (journaled, so that a crash still deletes the file).
 */
import { baseName, parentOf } from './remote.js';

/** What of the WriteBack the deferred removals need. */
export interface DeferredDeletes {
  /** The last reader of a path is gone: its deferred removal goes to the service. */
  readersGone(library: string, fullpath: string): Promise<unknown>;
  /** A deferred removal is not done (a new file takes the name). */
  cancelDelete(library: string, fullpath: string): Promise<unknown>;
}

export class UnlinkedWhileRead {
  /** Read handles open on service files, by `library\0fullpath`. */
  private readonly readers = new Map<string, number>();
  /** Paths unlinked while read, by `library\0fullpath`. */
  private readonly hidden = new Set<string>();

  constructor(private readonly deletes: DeferredDeletes) {}

  /** A read handle opened on a service file; the function answered is called at its release. */
  opened(library: string, fullpath: string): () => void {
    const key = `${library}\0${fullpath}`;
    this.readers.set(key, (this.readers.get(key) ?? 0) + 1);
    return () => {
      const left = (this.readers.get(key) ?? 1) - 1;
      if (left > 0) this.readers.set(key, left);
      else {
        this.readers.delete(key);
        void this.deletes.readersGone(library, fullpath);
      }
    };
  }

  /** Whether read handles are open on a service file. */
  isRead(library: string, fullpath: string): boolean {
    return (this.readers.get(`${library}\0${fullpath}`) ?? 0) > 0;
  }

  /** A path unlinked while read: hidden from now on. */
  hide(library: string, fullpath: string): void {
    this.hidden.add(`${library}\0${fullpath}`);
  }

  isHidden(library: string, fullpath: string): boolean {
    return this.hidden.has(`${library}\0${fullpath}`);
  }

  /** The deferred removal of a path was done. */
  removed(library: string, fullpath: string): void {
    this.hidden.delete(`${library}\0${fullpath}`);
  }

  /** Names of a folder hidden now. */
  *hiddenIn(library: string, folder: string): Generator<string> {
    for (const key of this.hidden) {
      const [name, path] = key.split('\0') as [string, string];
      if (name === library && parentOf(path) === folder) yield baseName(path);
    }
  }

  /**
   * A new file where one unlinked while read is waiting for its readers: the new content replaces that
   * object on the service instead (its readers keep reading their version, by its content hash).
   */
  async reuse(library: string, fullpath: string): Promise<void> {
    if (!this.isHidden(library, fullpath)) return;
    await this.deletes.cancelDelete(library, fullpath);
    this.removed(library, fullpath);
  }

  /** A folder or a rename target where a file unlinked while read is waiting: it is removed now. */
  async settle(library: string, fullpath: string): Promise<void> {
    if (!this.isHidden(library, fullpath)) return;
    await this.deletes.readersGone(library, fullpath);
  }
}
