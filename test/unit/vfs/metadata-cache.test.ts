import { describe, expect, it } from 'vitest';
import { MetadataCache } from '../../../src/vfs/metadata-cache.js';
import type { RemoteEntry } from '../../../src/vfs/remote.js';
import { ManualClock } from '../../support/manual-clock.js';

const file = (fullpath: string, size = 1): RemoteEntry => ({ id: `id-${fullpath}-${size}`, fullpath, name: fullpath.split('/').pop()!, isDir: false, size, mtimeMs: 0, ctimeMs: 0 });
const folder = (fullpath: string): RemoteEntry => ({ ...file(fullpath, 0), isDir: true });

describe('MetadataCache: a path in doubt', () => {
  it("leaves its parent's listing answering for the other names; the listing is fetched again before it is shown", () => {
    const c = new MetadataCache();
    const a = file('up/a');
    const b = file('up/b');
    c.setListing('L', 'up', [a, b]);
    c.doubt('L', 'up/a');
    expect(c.getEntry('L', 'up/b')).toEqual(b); // still answered by the listing
    expect(c.getEntry('L', 'up/new')).toBeNull(); // a name never seen: known missing, no request
    expect(c.getEntry('L', 'up/a')).toBeUndefined(); // in doubt: looked up on its own
    expect(c.getListing('L', 'up')).toBeUndefined(); // not shown whole while a name is in doubt
    expect(c.getNames('L', 'up')).toEqual({ entries: [b], inDoubt: ['a'] }); // its names, the doubted one apart

    // Looked up: the listing is whole again, with the answer.
    const a2 = file('up/a', 2);
    c.setEntry('L', 'up/a', a2);
    expect(c.getListing('L', 'up')?.map((e) => e.size).sort()).toEqual([1, 2]);
    expect(c.getEntry('L', 'up/a')).toEqual(a2);

    // Missing after all: the listing is whole without it.
    c.doubt('L', 'up/b');
    c.setEntry('L', 'up/b', null);
    expect(c.getListing('L', 'up')?.map((e) => e.name)).toEqual(['a']);
    expect(c.getNames('L', 'up')?.inDoubt).toEqual([]);

    // A fresh listing settles every doubt; an upsert settles its name.
    c.doubt('L', 'up/a');
    c.setListing('L', 'up', [a]);
    expect(c.getListing('L', 'up')).toEqual([a]);
    c.doubt('L', 'up/a');
    c.upsert('L', a2);
    expect(c.getListing('L', 'up')).toEqual([a2]);
  });

  it('a folder in doubt drops its parent listing (what is below it may have changed too); forget drops the parent listing', () => {
    const c = new MetadataCache();
    c.setListing('L', '', [folder('up'), file('x')]);
    c.setListing('L', 'up', [file('up/a')]);
    c.doubt('L', 'up');
    expect(c.getListing('L', '')).toBeUndefined();
    expect(c.getListing('L', 'up')).toBeUndefined();
    expect(c.getEntry('L', 'x')).toBeUndefined();
    c.setListing('L', 'up', [file('up/a'), file('up/b')]);
    c.forget('L', 'up/a');
    expect(c.getListing('L', 'up')).toBeUndefined();
    expect(c.getEntry('L', 'up/b')).toBeUndefined();
  });
});

describe('MetadataCache: a folder of many files', () => {
  it('single names change in place: the listing stays right, in order, and its counted bytes follow', () => {
    const c = new MetadataCache();
    const n = 20_000;
    const list = Array.from({ length: n }, (_, i) => file(`big/f${i}`));
    c.setListing('L', 'big', list);
    // An upload of each (a new version: the same name, a new size), twice: the second changes no count.
    for (let i = 0; i < n; i++) c.upsert('L', file(`big/f${i}`, 2));
    const bytes = c.stats().bytes;
    for (let i = 0; i < n; i++) c.upsert('L', file(`big/f${i}`, 2));
    expect(c.stats().bytes).toBe(bytes);
    // A new name, a rename and a delete.
    c.upsert('L', file('big/a-new-file-with-a-longer-name', 3));
    expect(c.stats().bytes).toBeGreaterThan(bytes);
    c.upsert('L', { ...file('big/moved', 2), id: 'id-big/f7-2' });
    c.doubt('L', 'big/f8');
    c.setEntry('L', 'big/f8', null);
    const shown = c.getListing('L', 'big')!;
    expect(shown).toHaveLength(n); // one added, f7 moved to "moved", f8 gone
    expect(shown.every((e) => e.size >= 2)).toBe(true);
    expect(shown.slice(-2).map((e) => e.name)).toEqual(['a-new-file-with-a-longer-name', 'moved']);
    expect(c.getEntry('L', 'big/f7')).toBeNull();
    expect(c.getEntry('L', 'big/f8')).toBeNull();
    expect(c.getEntry('L', 'big/f9')?.size).toBe(2);
    // The copy handed out is the caller's.
    shown.length = 0;
    expect(c.getListing('L', 'big')).toHaveLength(n);
  });
});

describe('MetadataCache: a removal', () => {
  it('of a path the caller knows was a file drops its entry and its name; of one the cache knows as a folder, everything below it too', () => {
    const c = new MetadataCache();
    c.setListing('L', 'd', [file('d/tmp'), folder('d/sub')]);
    c.setListing('L', 'd/sub', [file('d/sub/x')]);
    c.setEntry('L', 'd/sub/x', file('d/sub/x'));
    // A file the cache never held as an entry (an rsync's temporary file, made here): only its name goes.
    c.remove('L', 'd/tmp', false);
    expect(c.getEntry('L', 'd/tmp')).toBeNull();
    expect(c.getListing('L', 'd')?.map((e) => e.name)).toEqual(['sub']);
    expect(c.getEntry('L', 'd/sub/x')).toEqual(file('d/sub/x'));
    // Told "a file" of what the cache holds as a folder (a stale caller): what is below it goes all the same.
    c.setEntry('L', 'd/sub', folder('d/sub'));
    c.remove('L', 'd/sub', false);
    expect(c.getEntry('L', 'd/sub')).toBeNull();
    expect(c.getEntry('L', 'd/sub/x')).toBeUndefined();
    expect(c.getListing('L', 'd/sub')).toBeUndefined();
  });
});

describe('MetadataCache: trust limit (ttlMs)', () => {
  it('answers an entry and a listing up to ttlMs after they were set, and not after', () => {
    const clock = new ManualClock();
    const c = new MetadataCache({ ttlMs: 1000, clock });
    const a = file('a');
    c.setListing('L', '', [a]);
    clock.advance(1000);
    expect(c.getEntry('L', 'a')).toEqual(a);
    expect(c.getListing('L', '')?.map((e) => e.name)).toEqual(['a']);
    clock.advance(1);
    expect(c.getEntry('L', 'a')).toBeUndefined();
    expect(c.getListing('L', '')).toBeUndefined();
  });
});
