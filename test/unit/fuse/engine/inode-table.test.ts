/** InodeTable: kernel inode numbers → gateway paths, with lookup/forget counting. */
import { describe, expect, it } from 'vitest';
import { InodeTable, ROOT_INO } from '../../../../src/fuse/engine/inode-table.js';

describe('InodeTable', () => {
  it('resolves paths through parents and counts lookups', () => {
    const t = new InodeTable();
    const lib = t.remember(ROOT_INO, 'Lib', true);
    const dir = t.remember(lib.ino, 'd', true);
    const file = t.remember(dir.ino, 'f.txt', false);
    expect(t.path(file.ino)).toBe('/Lib/d/f.txt');
    expect(t.childPath(ROOT_INO, 'Lib')).toBe('/Lib');
    expect(t.remember(dir.ino, 'f.txt', false)).toBe(file);
    expect(file.lookups).toBe(2);
    t.forget(file.ino, 1);
    expect(t.path(file.ino)).toBe('/Lib/d/f.txt');
    t.forget(file.ino, 1);
    expect(() => t.get(file.ino)).toThrow(/ENOENT/);
  });

  it('keeps a folder while a child is known, and drops it with the last child', () => {
    const t = new InodeTable();
    const lib = t.remember(ROOT_INO, 'Lib', true);
    const dir = t.remember(lib.ino, 'd', true);
    const file = t.remember(dir.ino, 'f', false);
    t.forget(dir.ino, 1);
    t.forget(lib.ino, 1);
    expect(t.path(file.ino)).toBe('/Lib/d/f');
    t.forget(file.ino, 1);
    expect(t.size).toBe(1);
  });

  it('regression: a rename binds the inode the kernel moved at the new name even when a change told meanwhile detached it', () => {
    const t = new InodeTable();
    const lib = t.remember(ROOT_INO, 'Lib', true);
    const moved = t.remember(lib.ino, 'a.txt', false);
    const target = t.remember(lib.ino, 'b.bin', false);
    // The feed's event of the service's move comes while the rename is under way: the old name goes.
    t.removeName(lib.ino, 'a.txt');
    t.rename(lib.ino, 'a.txt', lib.ino, 'b.bin', moved);
    expect(t.path(moved.ino)).toBe('/Lib/b.bin');
    expect(t.find(lib.ino, 'b.bin')).toBe(moved);
    expect(t.find(lib.ino, 'a.txt')).toBeUndefined();
    expect(() => t.path(target.ino)).toThrow(/ENOENT/);
    // Counted once in its folder: the folder goes with the last of its children.
    t.forget(target.ino, 1);
    t.forget(moved.ino, 1);
    t.forget(lib.ino, 1);
    expect(t.size).toBe(1);
  });

  it('rename moves the subtree; the replaced target loses its path', () => {
    const t = new InodeTable();
    const lib = t.remember(ROOT_INO, 'Lib', true);
    const a = t.remember(lib.ino, 'a', true);
    const f = t.remember(a.ino, 'f', false);
    const b = t.remember(lib.ino, 'b', true);
    const old = t.remember(b.ino, 'moved', true);
    t.rename(lib.ino, 'a', b.ino, 'moved');
    expect(t.path(f.ino)).toBe('/Lib/b/moved/f');
    expect(() => t.path(old.ino)).toThrow(/ENOENT/);
    expect(t.find(b.ino, 'moved')).toBe(a);
    expect(t.find(lib.ino, 'a')).toBeUndefined();
  });

  it('an unlinked inode lives until forgotten and closed; numbers are never reused', () => {
    const t = new InodeTable();
    const lib = t.remember(ROOT_INO, 'Lib', true);
    const f = t.remember(lib.ino, 'f', false);
    t.opened(f, true);
    t.removeName(lib.ino, 'f');
    expect(() => t.path(f.ino)).toThrow(/ENOENT/);
    t.forget(f.ino, 1);
    expect(t.get(f.ino)).toBe(f);
    t.closed(f, true);
    expect(() => t.get(f.ino)).toThrow(/ENOENT/);
    const again = t.remember(lib.ino, 'f', false);
    expect(again.ino).toBeGreaterThan(f.ino);
  });

  it('rememberAt binds a name to a number the engine gave; the name\'s old node is detached', () => {
    const t = new InodeTable();
    const lib = t.remember(ROOT_INO, 'Lib', true);
    const old = t.remember(lib.ino, 'f', false);
    const made = t.rememberAt(lib.ino, 'f', 2 ** 44);
    expect(made.ino).toBe(2 ** 44);
    expect(made.lookups).toBe(1);
    expect(t.find(lib.ino, 'f')).toBe(made);
    expect(t.path(made.ino)).toBe('/Lib/f');
    expect(() => t.path(old.ino)).toThrow(/ENOENT/);
    expect(() => t.rememberAt(lib.ino, 'g', 2 ** 44)).toThrow(/EEXIST/);
    expect(() => t.rememberAt(999, 'g', 2 ** 44 + 1)).toThrow(/ENOENT/);
    // The table's own numbers go on from where they were.
    expect(t.remember(lib.ino, 'h', false).ino).toBe(old.ino + 1);
  });

  it('a fresh lookup gives a name a new inode and detaches the old one', () => {
    const t = new InodeTable();
    const lib = t.remember(ROOT_INO, 'Lib', true);
    const f = t.remember(lib.ino, 'f', false);
    const g = t.remember(lib.ino, 'f', false, true);
    expect(g.ino).not.toBe(f.ino);
    expect(t.path(g.ino)).toBe('/Lib/f');
    expect(() => t.path(f.ino)).toThrow(/ENOENT/);
  });
});
