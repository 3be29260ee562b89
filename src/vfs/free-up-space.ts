/**
 * Free up space: the cached content of every file under a path is dropped from the content cache, except
 * what must stay: pinned files, files with local changes (the write-back's, waiting to upload) and content
 * the budget keeps (open, or pinned under another name). Their entries stay: a later read fetches again.
 */
import type { ContentCache } from './content-cache.js';
import type { RemoteEntry } from './remote.js';
import { VfsError } from './types.js';

export interface FreeUpSpaceOptions {
  disk: ContentCache;
  /** Library path the walk starts at ('' = the library). */
  root: string;
  stat: (fullpath: string) => Promise<RemoteEntry | null>;
  list: (fullpath: string) => Promise<RemoteEntry[]>;
  /** True for a file whose content must stay (pinned, local changes). */
  kept: (fullpath: string) => boolean;
}

/** Returns the files whose content was dropped and the bytes it took on disk. */
export async function freeUpSpace(opts: FreeUpSpaceOptions): Promise<{ files: number; bytes: number }> {
  const self = await opts.stat(opts.root);
  if (!self) throw new VfsError('ENOENT', `no such file or folder: ${opts.root}`);
  let files = 0;
  let bytes = 0;
  const dropOne = async (e: RemoteEntry): Promise<void> => {
    if (!e.contentHash || opts.kept(e.fullpath)) return;
    const freed = await opts.disk.drop(e.contentHash);
    if (freed > 0) {
      files++;
      bytes += freed;
    }
  };
  if (!self.isDir) await dropOne(self);
  const folders = self.isDir ? [self.fullpath] : [];
  while (folders.length > 0) {
    for (const e of await opts.list(folders.shift()!)) {
      if (e.isDir) folders.push(e.fullpath);
      else await dropOne(e);
    }
  }
  return { files, bytes };
}
