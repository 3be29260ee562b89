/**
 * How a person runs this `cloudlib` from a shell, for the commands the banner prints: `cloudlib` when
 * that name on the PATH is this checkout's bin/cloudlib.js (scripts/bootstrap links it), else
 * `node /path/to/bin/cloudlib.js`, which runs as printed from any folder.
 */
import { realpathSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** bin/cloudlib.js of this checkout (src/cli and dist/cli are both two levels below it). */
export const CLOUDLIB_BIN = fileURLToPath(new URL('../../bin/cloudlib.js', import.meta.url));

/** A word for a POSIX shell: as is when it is plain, else in single quotes. */
export function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

export function cloudlibCommand(env: NodeJS.ProcessEnv = process.env, bin = CLOUDLIB_BIN): string {
  let target: string;
  try {
    target = realpathSync(bin);
  } catch {
    return `node ${shellWord(bin)}`;
  }
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    try {
      if (realpathSync(join(dir, 'cloudlib')) === target) return 'cloudlib';
    } catch {
      // not in this folder
    }
  }
  return `node ${shellWord(bin)}`;
}
