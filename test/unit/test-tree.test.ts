import { describe, expect, it } from 'vitest';
import { existsSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** The folders below `dir` that hold files, as paths relative to `base`. */
function folders(dir: string, base: string): string[] {
  const entries = readdirSync(dir, { withFileTypes: true });
  const below = entries.filter((e) => e.isDirectory()).flatMap((e) => folders(join(dir, e.name), base));
  return entries.some((e) => e.isFile()) && dir !== base ? [relative(base, dir), ...below] : below;
}

describe('the test tree mirrors src/', () => {
  it.each(['unit', 'integration'])('every folder of test/%s is a folder of src/ (the benchmarks\' tests: of scripts/)', (layer) => {
    const base = join(root, 'test', layer);
    const strays = folders(base, base).filter((f) => !existsSync(join(root, 'src', f)) && !existsSync(join(root, 'scripts', f)));
    expect(strays).toEqual([]);
  });
});
