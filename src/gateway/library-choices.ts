/**
 * What `ctl library add` and `library remove` changed, kept in `<data>/libraries.json` (mode 0600: it
 * holds library secrets, like the configuration does) so that the next start serves the same libraries:
 * libraries added at run time are added again (their journaled uploads with them), libraries of the
 * configuration that were removed stay removed.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../shared/atomic-file.js';

export interface AddedLibrary { org_client_id: string; org_client_secret: string; name?: string; folder: string }

interface ChoicesFile { added: AddedLibrary[]; removed: string[] }

export class LibraryChoices {
  private constructor(private readonly file: string, private data: ChoicesFile) {}

  static async open(dataDir: string): Promise<LibraryChoices> {
    const file = join(dataDir, 'libraries.json');
    let data: ChoicesFile = { added: [], removed: [] };
    try {
      const raw = JSON.parse(await readFile(file, 'utf8')) as Partial<ChoicesFile>;
      data = {
        added: Array.isArray(raw.added) ? raw.added.filter((a) => typeof a?.org_client_id === 'string' && typeof a.org_client_secret === 'string' && typeof a.folder === 'string') : [],
        removed: Array.isArray(raw.removed) ? raw.removed.filter((r): r is string => typeof r === 'string') : [],
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`${file}: unreadable (${(err as Error).message}); fix or remove it`);
    }
    return new LibraryChoices(file, data);
  }

  /** Libraries added at run time, in the order they were added. */
  get added(): readonly AddedLibrary[] {
    return this.data.added;
  }

  /** Folder names of configured libraries that were removed. */
  get removed(): readonly string[] {
    return this.data.removed;
  }

  async recordAdded(lib: AddedLibrary): Promise<void> {
    this.data.added = [...this.data.added.filter((a) => a.org_client_id !== lib.org_client_id && a.folder !== lib.folder), lib];
    this.data.removed = this.data.removed.filter((r) => r !== lib.folder);
    await this.save();
  }

  async recordRemoved(folder: string): Promise<void> {
    const wasAdded = this.data.added.some((a) => a.folder === folder);
    this.data.added = this.data.added.filter((a) => a.folder !== folder);
    if (!wasAdded && !this.data.removed.includes(folder)) this.data.removed.push(folder);
    await this.save();
  }

  private async save(): Promise<void> {
    // What an admin chose is kept through a power loss.
    await writeFileAtomic(this.file, JSON.stringify(this.data, null, 2) + '\n', { durability: 'fsync-file-and-folder', mode: 0o600 });
  }
}
