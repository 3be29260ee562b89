/**
 * JunkStore: the files macOS and Windows leave on every drive (`._*` AppleDouble files, `.DS_Store`,
 * `Thumbs.db`, `desktop.ini`), kept on the gateway's disk so they never reach the libraries. They live in a
 * mirror of the gateway tree under `<dataDir>/junk/`, are listed with their folder and served like any
 * file, and follow their folder on MOVE and DELETE.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { replaceFile } from '../shared/atomic-file.js';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import type { Attr } from '../vfs/types.js';

const JUNK_NAMES = new Set(['.ds_store', 'thumbs.db', 'desktop.ini', 'ehthumbs.db', 'ehthumbs_vista.db']);

/** True for a file name that is operating-system junk. */
export function isJunkName(name: string): boolean {
  return name.startsWith('._') || JUNK_NAMES.has(name.toLowerCase());
}

export class JunkStore {
  private readonly root: string;

  constructor(dataDir: string) {
    this.root = join(dataDir, 'junk');
  }

  private local(path: string): string {
    return join(this.root, ...path.split('/').filter((s) => s !== ''));
  }

  async stat(path: string): Promise<Attr | undefined> {
    try {
      const s = await stat(this.local(path));
      if (!s.isFile()) return undefined;
      const name = path.slice(path.lastIndexOf('/') + 1);
      return { path, name, isDir: false, size: s.size, mtimeMs: s.mtimeMs, ctimeMs: s.birthtimeMs || s.ctimeMs };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
      throw err;
    }
  }

  /** Junk files kept in a folder. */
  async list(folder: string): Promise<Attr[]> {
    let names: string[];
    try {
      names = (await readdir(this.local(folder), { withFileTypes: true })).filter((d) => d.isFile()).map((d) => d.name);
    } catch {
      return [];
    }
    const out: Attr[] = [];
    for (const n of names) {
      const a = await this.stat(`${folder === '/' ? '' : folder}/${n}`);
      if (a) out.push(a);
    }
    return out;
  }

  async write(path: string, source: Readable): Promise<void> {
    const file = this.local(path);
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    // Junk of the clients (never uploaded): nothing to keep through a power loss.
    await replaceFile(file, (_fh, tmp) => pipeline(source, createWriteStream(tmp, { flags: 'w' })), { durability: 'rename', mode: 0o600 });
  }

  read(path: string, range: { start?: number; end?: number } = {}): Readable {
    return createReadStream(this.local(path), range);
  }

  async remove(path: string): Promise<void> {
    await rm(this.local(path), { recursive: true, force: true });
  }

  /** Moves junk of a file or folder (a folder's subtree) to a new path. */
  async move(from: string, to: string): Promise<void> {
    const a = this.local(from);
    try {
      await stat(a);
    } catch {
      return;
    }
    const b = this.local(to);
    await rm(b, { recursive: true, force: true });
    await mkdir(dirname(b), { recursive: true, mode: 0o700 });
    await rename(a, b);
  }
}
