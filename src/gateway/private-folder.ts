/**
 * The gateway's data folder is the owner's only: it holds the upload journal and spool, the caches, the
 * WebDAV properties and locks, and credentials. A folder 0700 protects everything inside it, whatever the
 * modes of the files (the Vfs's own files included), so the start makes it 0700, and says so when it
 * had to tighten a folder others could enter or read.
 */
import { chmod, mkdir, stat } from 'node:fs/promises';
import type { Logger } from '../shared/log.js';

/** Creates `dir` 0700, or tightens an existing one to 0700 (logged as a warning when it was open). Returns the mode it had. */
export async function makePrivateFolder(dir: string, logger: Logger): Promise<number | undefined> {
  let before: number | undefined;
  try {
    const s = await stat(dir);
    if (!s.isDirectory()) throw new Error(`data folder ${dir}: expected a folder, got a file`);
    before = s.mode & 0o777;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (before === undefined) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await chmod(dir, 0o700);
    return undefined;
  }
  if ((before & 0o077) !== 0) {
    try {
      await chmod(dir, 0o700);
    } catch (err) {
      throw new Error(`data folder ${dir} is readable by others (mode ${before.toString(8)}) and could not be made private: ${(err as Error).message}`);
    }
    logger.warn({ dir, was: before.toString(8), now: '700' }, 'data folder was readable by others; made private (0700)');
  }
  return before;
}
