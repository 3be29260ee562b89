/**
 * What the engine answers in C without waiting for JavaScript (docs/fuse.md, The engine): getattr from
 * the attributes of earlier answers, the small writes of a new file and the times the kernel writes back
 * at close. What the mount shows must stay what the Vfs holds: after a write, a truncate, a change of
 * times, a rename and a change made by another client; and a name looked up before it existed is found
 * once created. Over the gateway's real Vfs and an embedded service, with the writeback cache (writeMode
 * "writeback": what the engine answers there differs with passthrough, see passthrough.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, open, readdir, readFile, rename, stat, truncate, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { eventually, sh, startMount, type MountHarness } from './harness.js';
import { expectRefusedNamesFail } from './refused-names.js';

const T = 90_000;

interface Counters {
  answered: { getattr: number; writes: number; times: number; lookups: number; creates: number; closes: number };
}

interface VfsAttr {
  size: number;
  mtimeMs: number;
}

describe('attributes through the engine, changed through the mount and elsewhere', () => {
  let h: MountHarness;
  let lib: string;
  const vfsStat = (path: string): Promise<VfsAttr> => h.call<VfsAttr>('localStat', { path });
  /** What the mount shows of `name` (size, mtime in whole ms) and what the Vfs holds for it. */
  const both = async (name: string): Promise<[VfsAttr, VfsAttr]> => {
    const st = await stat(join(lib, name));
    const v = await vfsStat(`/Lib/${name}`);
    return [{ size: st.size, mtimeMs: Math.round(st.mtimeMs) }, { size: v.size, mtimeMs: Math.round(v.mtimeMs) }];
  };

  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 1, writeMode: 'writeback' }, env: { FUSE_TEST_BACKEND: 'service' } });
    lib = join(h.mnt, 'Lib');
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('getattr after a write, a truncate, a change of times and a rename shows the new size and time', async () => {
    await writeFile(join(lib, 'changing.txt'), 'first');
    expect((await both('changing.txt'))[0].size).toBe(5);
    const fh = await open(join(lib, 'changing.txt'), 'r+');
    await fh.write(Buffer.alloc(10_000, 1), 0, 10_000, 5);
    expect((await fh.stat()).size).toBe(10_005);
    await fh.close();
    let [shown, held] = await both('changing.txt');
    expect(shown).toEqual(held);
    expect(shown.size).toBe(10_005);
    await truncate(join(lib, 'changing.txt'), 100);
    [shown, held] = await both('changing.txt');
    expect(shown).toEqual(held);
    expect(shown.size).toBe(100);
    const when = new Date('2022-02-03T04:05:06Z');
    await utimes(join(lib, 'changing.txt'), when, when);
    [shown, held] = await both('changing.txt');
    expect(shown).toEqual(held);
    expect(shown.mtimeMs).toBe(when.getTime());
    await writeFile(join(lib, 'changing.txt'), 'x', { flag: 'a' });
    [shown, held] = await both('changing.txt');
    expect(shown).toEqual(held);
    expect(shown.size).toBe(101);
    await rename(join(lib, 'changing.txt'), join(lib, 'renamed.txt'));
    [shown, held] = await both('renamed.txt');
    expect(shown).toEqual(held);
  }, T);

  it('a name the service refuses fails at its create with its errno, where the engine answers creates too; nothing is made', async () => {
    await expectRefusedNamesFail(h, 'fresh-names');
  }, T);

  it('a file changed by another client shows its new size and time', async () => {
    await writeFile(join(lib, 'shared-attrs.txt'), 'short');
    await h.call('flushAll');
    expect((await stat(join(lib, 'shared-attrs.txt'))).size).toBe(5);
    await h.call('remoteWrite', { path: '/Lib/shared-attrs.txt', data: Buffer.from('a longer second version').toString('base64') });
    // Within the feed interval plus the attribute timeout.
    await eventually('the new size shows', async () => ((await stat(join(lib, 'shared-attrs.txt'))).size === 23 ? true : undefined), 15_000);
    const [shown, held] = await both('shared-attrs.txt');
    expect(shown).toEqual(held);
  }, T);

  it('a name made elsewhere in a folder made through the mount shows within the timeout', async () => {
    await mkdir(join(lib, 'made-here'));
    // The engine knows the new folder empty: this lookup is answered by it.
    await expect(stat(join(lib, 'made-here/from-elsewhere.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    await h.call('vfsWrite', { path: '/Lib/made-here/from-elsewhere.txt', data: Buffer.from('made by another front end').toString('base64') });
    await eventually('the name shows', async () => ((await stat(join(lib, 'made-here/from-elsewhere.txt')).catch(() => undefined))?.size === 25 ? true : undefined), 15_000);
    expect(await readFile(join(lib, 'made-here/from-elsewhere.txt'), 'utf8')).toBe('made by another front end');
  }, T);

  it('a name looked up before it existed is found once created', async () => {
    await expect(stat(join(lib, 'later.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(stat(join(lib, 'later.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    await writeFile(join(lib, 'later.txt'), 'now here');
    expect((await stat(join(lib, 'later.txt'))).size).toBe(8);
    expect(await readFile(join(lib, 'later.txt'), 'utf8')).toBe('now here');
  }, T);
});

describe('requests the engine answers itself', () => {
  let h2: MountHarness;
  let lib2: string;
  const answered2 = async (): Promise<Counters['answered']> => (await h2.call<Counters>('mountCounters')).answered;
  const both2 = async (name: string): Promise<[VfsAttr, VfsAttr]> => {
    const st = await stat(join(lib2, name));
    const v = await h2.call<VfsAttr>('localStat', { path: `/Lib/${name}` });
    return [{ size: st.size, mtimeMs: Math.round(st.mtimeMs) }, { size: v.size, mtimeMs: Math.round(v.mtimeMs) }];
  };

  beforeAll(async () => {
    // Attributes valid long enough that no pause of a busy machine lets them lapse during the test. No
    // updates feed: a change it reports in a folder (the numbered name an upload retried on a busy machine
    // lands at first, among others) makes the engine forget the folder's names, at a time the machine decides.
    h2 = await startMount({ mount: { attrTimeoutS: 600, writeMode: 'writeback' }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_FEED_INTERVAL_MS: '0' } });
    lib2 = join(h2.mnt, 'Lib');
  }, T);
  afterAll(async () => {
    await h2?.stop();
  }, T);

  it('a folder listed through the mount: lookups of names it does not have are answered by the engine', async () => {
    await h2.call('remoteWrite', { path: '/Lib/listed/a.txt', data: Buffer.from('a').toString('base64') });
    await h2.call('remoteWrite', { path: '/Lib/listed/b.txt', data: Buffer.from('b').toString('base64') });
    const names = await eventually('the folder lists both', async () => {
      const list = (await readdir(join(lib2, 'listed')).catch(() => [])).sort();
      return list.length === 2 ? list : undefined;
    }, 15_000);
    expect(names).toEqual(['a.txt', 'b.txt']);
    // A fresh listing hands the names over; a name it does not hold is then answered "no such file" in C.
    await readdir(join(lib2, 'listed'));
    const before = await answered2();
    await expect(stat(join(lib2, 'listed/not-there.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect((await answered2()).lookups - before.lookups).toBe(1);
    expect(await readFile(join(lib2, 'listed/b.txt'), 'utf8')).toBe('b');
    // A file made there is created and closed by the engine (the listing told it where the folder is).
    await writeFile(join(lib2, 'listed/c.txt'), 'c');
    const after = await answered2();
    expect([after.creates - before.creates, after.closes - before.closes]).toEqual([1, 1]);
    expect(await readFile(join(lib2, 'listed/c.txt'), 'utf8')).toBe('c');
  }, T);

  it('getattr of a file after a close that changed nothing: answered by the engine, as the Vfs holds it', async () => {
    await writeFile(join(lib2, 'read-only.txt'), 'some content');
    await h2.call('flushAll');
    await stat(join(lib2, 'read-only.txt'));
    const before = await answered2();
    // The kernel drops a file's cached block count at every close (writeback cache): the stat after a
    // read asks again, and the engine answers from what JavaScript last said.
    for (let i = 0; i < 3; i++) {
      expect(await readFile(join(lib2, 'read-only.txt'), 'utf8')).toBe('some content');
      const [shown, held] = await both2('read-only.txt');
      expect(shown).toEqual(held);
    }
    expect((await answered2()).getattr - before.getattr).toBeGreaterThan(0);
  }, T);

  it('cp -r of small files: their writes and times answered by the engine; stat shows what the Vfs holds', async () => {
    const src = join(h2.local, 'small');
    await mkdir(src);
    for (let i = 0; i < 20; i++) await writeFile(join(src, `f${i}`), Buffer.alloc(4096 + i, i));
    const before = await answered2();
    await sh('cp', ['-r', src, join(lib2, 'small')]);
    const after = await answered2();
    expect(after.writes - before.writes).toBeGreaterThanOrEqual(20);
    expect(after.times - before.times).toBeGreaterThanOrEqual(20);
    // The folder is new: each name's lookup and its create were answered by the engine too.
    expect(after.lookups - before.lookups).toBeGreaterThanOrEqual(20);
    expect(after.creates - before.creates).toBe(20);
    // And their closes, once each file's journal record was written (docs/fuse.md, Closes answered by the engine).
    expect(after.closes - before.closes).toBe(20);
    expect((await readdir(join(lib2, 'small'))).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `f${i}`).sort());
    for (let i = 0; i < 20; i++) {
      const [shown, held] = await both2(`small/f${i}`);
      expect(shown).toEqual(held);
      expect(shown.size).toBe(4096 + i);
      expect((await readFile(join(lib2, `small/f${i}`))).equals(Buffer.alloc(4096 + i, i))).toBe(true);
    }
    // cp -p: the times it sets are kept.
    await sh('touch', ['-d', '2019-03-04 05:06:07', join(src, 'f0')]);
    await sh('cp', ['-p', join(src, 'f0'), join(lib2, 'small/kept')]);
    expect(Math.round((await stat(join(lib2, 'small/kept'))).mtimeMs)).toBe(Math.round((await stat(join(src, 'f0'))).mtimeMs));
    const [keptShown, keptHeld] = await both2('small/kept');
    expect(keptShown).toEqual(keptHeld);
    // Committed to the service as written.
    await h2.call('flushAll');
    expect(Buffer.from(await h2.call<string>('remoteRead', { path: '/Lib/small/f7' }), 'base64').equals(Buffer.alloc(4096 + 7, 7))).toBe(true);
  }, T);

  it('cp of files into a folder the engine knows: the stat after each close is answered by the engine, showing what the Vfs holds', async () => {
    const src = join(h2.local, 'into-known');
    await mkdir(src);
    for (let i = 0; i < 20; i++) await writeFile(join(src, `g${i}`), Buffer.alloc(1000 + i, i));
    await mkdir(join(lib2, 'known'));
    await stat(join(lib2, 'known'));
    const before = await answered2();
    // cp FILES… DIR stats each file it made right after closing it.
    await sh('sh', ['-c', 'cp "$1"/* "$2"/', 'sh', src, join(lib2, 'known')]);
    const shown = await Promise.all(Array.from({ length: 20 }, (_, i) => stat(join(lib2, `known/g${i}`), { bigint: true })));
    const after = await answered2();
    // Every getattr after a close was the engine's: two a file, cp's and this test's.
    expect(after.getattr - before.getattr).toBeGreaterThanOrEqual(40);
    for (let i = 0; i < 20; i++) {
      expect(shown[i]!.size).toBe(BigInt(1000 + i));
      expect(shown[i]!.ctimeNs).toBeGreaterThanOrEqual(shown[i]!.mtimeNs);
      // The Vfs holds the time the kernel shows (in ms: within a microsecond) once it applied the close.
      const shownMs = Number(shown[i]!.mtimeNs) / 1e6;
      await eventually(`the Vfs's time of g${i}`, async () => {
        const held = await h2.call<VfsAttr>('localStat', { path: `/Lib/known/g${i}` });
        return held.size === 1000 + i && Math.abs(held.mtimeMs - shownMs) < 0.001 ? true : undefined;
      }, 15_000);
    }
  }, T);

  it('writers at once in a new folder: creates, renames and removals end as the Vfs and the service hold them', async () => {
    await mkdir(join(lib2, 'busy'));
    const before = await answered2();
    // Four shells at once, each: make a file, rename it, remove every other one, make a folder with a file.
    const script = 'cd "$1"; w=$2; i=0; while [ $i -lt 40 ]; do printf "%s-%s" $w $i > t$w-$i; mv t$w-$i f$w-$i; ' +
      'if [ $((i % 2)) -eq 1 ]; then rm f$w-$i; fi; i=$((i+1)); done; mkdir d$w; printf last > d$w/in';
    await Promise.all([0, 1, 2, 3].map((w) => sh('sh', ['-c', script, 'sh', join(lib2, 'busy'), String(w)], { timeoutMs: 60_000 })));
    const expected = [0, 1, 2, 3].flatMap((w) => [`d${w}`, ...Array.from({ length: 20 }, (_, k) => `f${w}-${2 * k}`)]).sort();
    expect((await readdir(join(lib2, 'busy'))).sort()).toEqual(expected);
    expect((await answered2()).creates - before.creates).toBeGreaterThan(0);
    await h2.call('flushAll');
    const listed = await h2.call<string[]>('remoteList', { path: '/Lib/busy' });
    expect(listed).toEqual(expected);
    for (const w of [0, 3]) {
      expect(await readFile(join(lib2, `busy/f${w}-38`), 'utf8')).toBe(`${w}-38`);
      expect(Buffer.from(await h2.call<string>('remoteRead', { path: `/Lib/busy/f${w}-10` }), 'base64').toString()).toBe(`${w}-10`);
      expect(await readFile(join(lib2, `busy/d${w}/in`), 'utf8')).toBe('last');
    }
  }, T);

  it('rsync into a folder made through the mount: each file it writes under a temporary name and renames is closed by the engine', async () => {
    const src = join(h2.local, 'to-rsync');
    await mkdir(src);
    for (let i = 0; i < 20; i++) await writeFile(join(src, `r${i}`), Buffer.alloc(3000 + i, 65 + i));
    await mkdir(join(lib2, 'rsynced'));
    const before = await answered2();
    await sh('rsync', ['-a', `${src}/`, `${join(lib2, 'rsynced')}/`], { timeoutMs: 60_000 });
    // A rename of a file moves no folder: the engine keeps what it knows of the folders' paths.
    expect((await answered2()).closes - before.closes).toBe(20);
    const names = Array.from({ length: 20 }, (_, i) => `r${i}`).sort();
    expect((await readdir(join(lib2, 'rsynced'))).sort()).toEqual(names);
    // A folder renamed: what was told of paths below it is not kept; files made there land at the new path.
    await rename(join(lib2, 'rsynced'), join(lib2, 'rsynced-2'));
    await writeFile(join(lib2, 'rsynced-2', 'after'), 'after the folder moved');
    await h2.call('flushAll');
    expect(await h2.call<string[]>('remoteList', { path: '/Lib/rsynced-2' })).toEqual([...names, 'after'].sort());
    expect(await h2.call<string[]>('remoteList', { path: '/Lib/rsynced' }).catch(() => [])).toEqual([]);
    for (const i of [0, 19]) expect(Buffer.from(await h2.call<string>('remoteRead', { path: `/Lib/rsynced-2/r${i}` }), 'base64').equals(Buffer.alloc(3000 + i, 65 + i))).toBe(true);
    expect(Buffer.from(await h2.call<string>('remoteRead', { path: '/Lib/rsynced-2/after' }), 'base64').toString()).toBe('after the folder moved');
  }, T);

  it('a file the engine created reaches the Vfs while it is held open, with nothing written', async () => {
    await mkdir(join(lib2, 'held'));
    const before = await answered2();
    const fh = await open(join(lib2, 'held/open.lock'), 'wx');
    try {
      expect((await answered2()).creates - before.creates).toBe(1);
      // No request follows the create: its record reaches JavaScript within a second all the same.
      await eventually('the Vfs has the file', async () => ((await h2.call<VfsAttr>('localStat', { path: '/Lib/held/open.lock' }).catch(() => undefined)) ? true : undefined), 15_000);
      expect((await h2.call<VfsAttr>('localStat', { path: '/Lib/held/open.lock' })).size).toBe(0);
    } finally {
      await fh.close();
    }
  }, T);

  it('a create the engine answered that the Vfs then refuses: fsync answers the error, the name shows what the Vfs holds', async () => {
    await mkdir(join(lib2, 'raced'));
    // Made through the Vfs itself after the engine learnt the folder empty: the engine does not know it.
    await h2.call('vfsWrite', { path: '/Lib/raced/taken.txt', data: Buffer.from('the first one').toString('base64') });
    const before = await answered2();
    const fh = await open(join(lib2, 'raced/taken.txt'), 'wx');
    expect((await answered2()).creates - before.creates).toBe(1);
    await fh.write('the second one');
    // An fsync is JavaScript's (and so is the close after it): it answers the refusal.
    await expect(fh.sync()).rejects.toMatchObject({ code: 'EEXIST' });
    await fh.close().catch(() => undefined);
    expect((await answered2()).closes - before.closes).toBe(0);
    // The kernel was told to forget the name: it shows the Vfs's file, not the refused one.
    await eventually('the first file shows', async () => ((await stat(join(lib2, 'raced/taken.txt')).catch(() => undefined))?.size === 13 ? true : undefined), 15_000);
    expect(await readFile(join(lib2, 'raced/taken.txt'), 'utf8')).toBe('the first one');
  }, T);

  it('a small file the engine closed whose name the Vfs had meanwhile: the later close wins, as a later writer', async () => {
    await mkdir(join(lib2, 'raced-small'));
    await h2.call('vfsWrite', { path: '/Lib/raced-small/taken.txt', data: Buffer.from('the first one').toString('base64') });
    const before = await answered2();
    const fh = await open(join(lib2, 'raced-small/taken.txt'), 'wx');
    await fh.write('the second one');
    // Answered by the engine once the record was written: nobody is left to tell of the refusal.
    await fh.close();
    const after = await answered2();
    expect(after.creates - before.creates).toBe(1);
    expect(after.closes - before.closes).toBe(1);
    await eventually('the Vfs holds the closed bytes', async () => ((await h2.call<VfsAttr>('localStat', { path: '/Lib/raced-small/taken.txt' })).size === 14 ? true : undefined), 15_000);
    await h2.call('flushAll');
    expect(Buffer.from(await h2.call<string>('remoteRead', { path: '/Lib/raced-small/taken.txt' }), 'base64').toString()).toBe('the second one');
    await eventually('the mount shows it', async () => ((await readFile(join(lib2, 'raced-small/taken.txt'), 'utf8').catch(() => '')) === 'the second one' ? true : undefined), 15_000);
  }, T);
});
