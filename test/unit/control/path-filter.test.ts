import { describe, expect, it } from 'vitest';
import { PathFilter, PathFilterError } from '../../../src/control/path-filter.js';

describe('PathFilter (rclone glob rules)', () => {
  it('a pattern without / matches a name at any depth; with / the path from the top', () => {
    const f = new PathFilter({ exclude: ['*.log', 'build/**', '/dist'] });
    expect(f.takesFile('a.log')).toBe(false);
    expect(f.takesFile('deep/down/a.log')).toBe(false);
    expect(f.takesFile('build/x/y.o')).toBe(false);
    expect(f.takesFile('src/build/y.o')).toBe(true);
    expect(f.walksFolder('build')).toBe(false);
    expect(f.walksFolder('dist')).toBe(false);
    expect(f.walksFolder('src')).toBe(true);
    expect(f.takesFile('src/a.ts')).toBe(true);
  });

  it('includes: only matching files; excludes win; * stays within a folder, ** crosses, {a,b} and [..] sets', () => {
    const f = new PathFilter({ include: ['*.{md,txt}', 'docs/**/*.png', 'file[0-9]'], exclude: ['secret.md'] });
    expect(f.takesFile('README.md')).toBe(true);
    expect(f.takesFile('a/notes.txt')).toBe(true);
    expect(f.takesFile('secret.md')).toBe(false);
    expect(f.takesFile('docs/img/a.png')).toBe(true);
    expect(f.takesFile('docs/a.png')).toBe(true);
    expect(f.takesFile('img/a.png')).toBe(false);
    expect(f.takesFile('file7')).toBe(true);
    expect(f.takesFile('filex')).toBe(false);
    expect(new PathFilter({ exclude: ['build/*'] }).walksFolder('build')).toBe(true);
  });

  it('bad patterns are refused', () => {
    expect(() => new PathFilter({ include: ['[abc'] })).toThrow(PathFilterError);
    expect(() => new PathFilter({ include: ['{a,b'] })).toThrow(PathFilterError);
    expect(() => new PathFilter({ exclude: [' '] })).toThrow(PathFilterError);
  });
});
