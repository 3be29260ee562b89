/**
 * Replacing a file atomically: the new content is written to a temporary file beside it, then renamed
 * over it, so that a reader (or a restart after a crash) sees the old file or the new one, never a part.
 * What survives a power loss is each caller's choice, said explicitly:
 * - `rename`: nothing is fsynced (a crash of the process loses nothing; after a power loss the file may
 *   be the old one, or on some filesystems empty);
 * - `fsync-file`: the content is fsynced before the rename (after a power loss: the old content or the
 *   new, whole);
 * - `fsync-file-and-folder`: the folder too, after the rename (after a power loss: the new content).
 * The temporary file is hidden (`.<name>.<random>.tmp`) and removed when anything fails.
 */
import { randomBytes } from 'node:crypto';
import { open, rename, rm, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export type Durability = 'rename' | 'fsync-file' | 'fsync-file-and-folder';

export interface AtomicWriteOptions {
  durability: Durability;
  /** Permission bits of the new file, applied whatever the umask. Default: 0o666 less the umask. */
  mode?: number;
}

/** The temporary name a replacement of `path` is written under. */
export function tempPathOf(path: string): string {
  return join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
}

/** Replaces `path` with `data`. */
export async function writeFileAtomic(path: string, data: string | Uint8Array, opts: AtomicWriteOptions): Promise<void> {
  await replaceFile(path, async (fh) => { await fh.writeFile(data); }, opts);
}

/**
 * Replaces `path` with what `fill` writes to the temporary file's handle (or, for a stream, to the
 * temporary path it is given: `fill(handle, tempPath)`; the handle stays open until fill settles).
 */
export async function replaceFile(path: string, fill: (fh: FileHandle, tempPath: string) => Promise<void>, opts: AtomicWriteOptions): Promise<void> {
  const tmp = tempPathOf(path);
  try {
    const fh = await open(tmp, 'wx', opts.mode ?? 0o666);
    try {
      await fill(fh, tmp);
      if (opts.mode !== undefined) await fh.chmod(opts.mode);
      if (opts.durability !== 'rename') await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  if (opts.durability === 'fsync-file-and-folder') await fsyncFolder(dirname(path));
}

/** fsyncs a folder (its entries: names created, renamed or removed in it). */
export async function fsyncFolder(dir: string): Promise<void> {
  await fsyncPath(dir);
}

/**
 * fsyncs a folder where the file system allows it: some refuse fsync on a folder, and a rename in it is
 * atomic all the same (an error opening it still throws).
 */
export async function fsyncFolderIfSupported(dir: string): Promise<void> {
  await fsyncPath(dir, true);
}

/** fsyncs a file's bytes and attributes. */
export async function fsyncFile(path: string): Promise<void> {
  await fsyncPath(path);
}

async function fsyncPath(path: string, refusalIsFine = false): Promise<void> {
  const fh = await open(path, 'r');
  try {
    await fh.sync();
  } catch (err) {
    if (!refusalIsFine) throw err;
  } finally {
    await fh.close();
  }
}

/** The size of a file, or undefined when there is none. */
export async function sizeIfPresent(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Removes a file that may already be gone (a temporary file renamed into place, or never written): one
 * unlink, where `rm(path, { force: true })` also stats it first.
 */
export async function removeFileIfPresent(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
