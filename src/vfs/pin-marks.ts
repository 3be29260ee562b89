/**
 * PinMarks: which files and folders are marked "keep on this machine", persisted in the data folder (one
 * small JSON file, replaced atomically and fsynced at each change). A mark is a pin or an explicit unpin;
 * a path is pinned when its nearest marked ancestor (or itself) is a pin, so what is inside a pinned
 * folder is pinned too, and an unpin inside it wins for its own subtree.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { writeFileAtomic } from '../shared/atomic-file.js';
import { isWithin, parentOf } from './remote.js';

interface Mark { library: string; fullpath: string; pinned: boolean }

export class PinMarks {
  /** `library\0fullpath` → pinned (true) or explicitly not (false). */
  private marks = new Map<string, boolean>();

  constructor(private readonly file: string) {}

  async load(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    const list = JSON.parse(text) as Mark[];
    if (!Array.isArray(list)) throw new Error(`${this.file}: expected a list of pins`);
    for (const m of list) {
      if (typeof m?.library === 'string' && typeof m.fullpath === 'string' && typeof m.pinned === 'boolean') this.marks.set(key(m.library, m.fullpath), m.pinned);
    }
  }

  /** True when the path is pinned: its own mark, else its nearest marked ancestor's. */
  pinned(library: string, fullpath: string): boolean {
    for (let p = fullpath; ; p = parentOf(p)) {
      const m = this.marks.get(key(library, p));
      if (m !== undefined) return m;
      if (p === '') return false;
    }
  }

  /** The explicit mark of a path, if any. */
  markOf(library: string, fullpath: string): boolean | undefined {
    return this.marks.get(key(library, fullpath));
  }

  /** Pinned roots of a library: paths marked pinned whose parent is not pinned. */
  roots(library: string): string[] {
    const out: string[] = [];
    for (const [k, v] of this.marks) {
      const [lib, fullpath] = split(k);
      if (lib !== library || !v) continue;
      if (fullpath === '' || !this.pinned(library, parentOf(fullpath))) out.push(fullpath);
    }
    return out.sort();
  }

  /** Every library with a mark. */
  libraries(): string[] {
    return [...new Set([...this.marks.keys()].map((k) => split(k)[0]))];
  }

  /**
   * Marks a path pinned or not, and saves. Marks below it are dropped (the path's own decides for its
   * whole subtree); an unpin where no ancestor is pinned leaves no mark at all.
   */
  async set(library: string, fullpath: string, pinned: boolean): Promise<void> {
    for (const k of [...this.marks.keys()]) {
      const [lib, p] = split(k);
      if (lib === library && p !== fullpath && isWithin(p, fullpath)) this.marks.delete(k);
    }
    const inherited = fullpath === '' ? false : this.pinned(library, parentOf(fullpath));
    if (pinned === inherited) this.marks.delete(key(library, fullpath));
    else this.marks.set(key(library, fullpath), pinned);
    await this.save();
  }

  /** Drops every mark of a path and below (the path is gone from the service). */
  async forget(library: string, fullpath: string): Promise<void> {
    let changed = false;
    for (const k of [...this.marks.keys()]) {
      const [lib, p] = split(k);
      if (lib === library && (p === fullpath || isWithin(p, fullpath))) changed = this.marks.delete(k) || changed;
    }
    if (changed) await this.save();
  }

  private async save(): Promise<void> {
    const list: Mark[] = [...this.marks].map(([k, pinned]) => {
      const [library, fullpath] = split(k);
      return { library, fullpath, pinned };
    });
    await mkdir(dirname(this.file), { recursive: true, mode: 0o700 });
    await writeFileAtomic(this.file, JSON.stringify(list), { durability: 'fsync-file-and-folder', mode: 0o600 });
  }
}

function key(library: string, fullpath: string): string {
  return `${library}\0${fullpath}`;
}

function split(k: string): [string, string] {
  const i = k.indexOf('\0');
  return [k.slice(0, i), k.slice(i + 1)];
}
