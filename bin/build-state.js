// Whether the compiled JavaScript in dist/ matches the sources in src/. Plain JavaScript (read before
// anything is compiled or loaded): `bin/cloudlib.js` runs dist/ only when it is current, and
// `scripts/build.js` writes the record this reads.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** What a build depends on besides src/: a change to these makes a build stale too. */
export const BUILD_INPUTS = ['tsconfig.json', 'tsconfig.build.json', 'package.json'];

/** The newest modification time (ms) and the number of the files a build is made from. */
export function sourcesSnapshot(root) {
  let newestMs = 0;
  let files = 0;
  const visit = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) visit(p);
      else if (e.isFile()) {
        files++;
        newestMs = Math.max(newestMs, statSync(p).mtimeMs);
      }
    }
  };
  visit(join(root, 'src'));
  for (const f of BUILD_INPUTS) newestMs = Math.max(newestMs, statSync(join(root, f)).mtimeMs);
  return { newest_ms: newestMs, files };
}

/**
 * `{ state: 'current' }` when dist/ was built from the sources as they are now; `'absent'` when there
 * is no build; `'stale'` with a reason when a source file changed, appeared or went away since.
 */
export function buildState(root) {
  let record;
  try {
    record = JSON.parse(readFileSync(join(root, 'dist', 'build.json'), 'utf8'));
  } catch {
    return { state: 'absent' };
  }
  const now = sourcesSnapshot(root);
  if (now.files !== record.sources?.files) return { state: 'stale', reason: `src/ has ${now.files} files, the build was made from ${record.sources?.files}` };
  if (now.newest_ms > record.sources?.newest_ms) return { state: 'stale', reason: 'a source file changed after the build' };
  return { state: 'current' };
}
