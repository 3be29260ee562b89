import { describe, expect, it } from 'vitest';
import { InodeTable, ROOT_INO } from '../../../../src/fuse/engine/inode-table.js';
import { KernelInvalidation, MAX_PENDING } from '../../../../src/fuse/engine/kernel-invalidation.js';
import type { Fuse3Binding, NativeSession } from '../../../../src/fuse/engine/binding.js';
import type { ChangeEvent } from '../../../../src/vfs/types.js';
import { silentLogger } from '../../../../src/shared/log.js';

/** A table with /Lib/a.txt and /Lib/d/ known to the kernel; notifications recorded, run only when `run()` is called. */
function setup(answers: { notifyDelete?: number } = {}) {
  const inodes = new InodeTable();
  const lib = inodes.remember(ROOT_INO, 'Lib', true);
  const file = inodes.remember(lib.ino, 'a.txt', false);
  const folder = inodes.remember(lib.ino, 'd', true);
  const told: string[] = [];
  const binding = {
    invalidateEntry: async (_s: NativeSession, parent: number, name: string) => (told.push(`entry ${parent} ${name}`), 0),
    invalidateInode: async (_s: NativeSession, ino: number) => (told.push(`inode ${ino}`), 0),
    notifyDelete: async (_s: NativeSession, parent: number, child: number, name: string) => (told.push(`delete ${parent} ${child} ${name}`), answers.notifyDelete ?? 0),
  } as unknown as Fuse3Binding;
  const queued: ((se: NativeSession) => Promise<number>)[] = [];
  const k = new KernelInvalidation({
    binding, inodes, session: () => ({}) as NativeSession, isLive: () => false, logger: silentLogger,
    notify: (_what, call) => void queued.push(call),
  });
  const run = async () => {
    for (const call of queued.splice(0)) await call({} as NativeSession);
  };
  const event = (kind: ChangeEvent['kind'], path: string, more: Partial<ChangeEvent> = {}): ChangeEvent => ({ seq: 1, kind, path, isDir: false, timeMs: 0, ...more });
  return { inodes, lib, file, folder, told, k, run, queued, event };
}

describe('KernelInvalidation', () => {
  it('tells the kernel what each kind of change made stale', async () => {
    const { k, run, told, lib, file, folder, event, inodes } = setup();
    k.changed(event('changed', '/Lib/a.txt'));
    k.changed(event('created', '/Lib/new.txt'));
    k.changed(event('deleted', '/Lib/d', { isDir: true }));
    await run();
    expect(told).toEqual([`inode ${file.ino}`, `inode ${lib.ino}`, `entry ${lib.ino} new.txt`, `inode ${lib.ino}`, `delete ${lib.ino} ${folder.ino} d`]);
    // The deleted name has left the table: a lookup makes a new inode.
    expect(inodes.find(lib.ino, 'd')).toBeUndefined();
  });

  it('a move: the old name deleted, the new one made; what the gateway showed already tells nothing', async () => {
    const { k, run, told, lib, file, event } = setup();
    k.changed(event('changed', '/Lib/a.txt', { shown: true }));
    k.changed(event('moved', '/Lib/b.txt', { from: '/Lib/a.txt' }));
    await run();
    expect(told).toEqual([`inode ${lib.ino}`, `delete ${lib.ino} ${file.ino} a.txt`, `inode ${lib.ino}`, `entry ${lib.ino} b.txt`]);
  });

  it('regression: a name made elsewhere: the folder is told before the name (the engine forgets its names first)', async () => {
    // The engine answers a lookup of a name it does not hold in a folder whose names it knows. Told the
    // name first, the kernel could look it up before the folder was told: the engine answered "no such
    // entry" again, and the kernel kept that for its timeout (e2e `fuse/changes-elsewhere`, the sentinel).
    const { k, run, told, lib, file, event } = setup();
    k.changed(event('created', '/Lib/made.txt'));
    k.changed(event('created', '/Lib/a.txt', { size: 5 }));
    await run();
    expect(told).toEqual([`inode ${lib.ino}`, `entry ${lib.ino} made.txt`, `inode ${file.ino}`, `inode ${lib.ino}`, `entry ${lib.ino} a.txt`]);
  });

  it('regression: a change shown already, of another size than the kernel was shown, makes it forget the file', async () => {
    // The Vfs found the change first (an open looking up the file's lock): the feed brings it as shown
    // already, while the kernel still holds the old size, and reads no further than it.
    const { k, run, told, file, event } = setup();
    file.shown = { size: 13, mtimeMs: 1000 };
    k.changed(event('changed', '/Lib/a.txt', { size: 13, shown: true }));
    k.changed(event('created', '/Lib/a.txt', { size: 23, shown: true }));
    await run();
    expect(told).toEqual([`inode ${file.ino}`]);
    // Written through the mount since the kernel was last shown attributes (what it shows is its own).
    file.shown = undefined;
    k.changed(event('changed', '/Lib/a.txt', { size: 40, shown: true }));
    await run();
    expect(told).toEqual([`inode ${file.ino}`]);
  });

  it('a file open for writing here keeps its pages; names the kernel never got tell nothing', async () => {
    const { k, run, told, file, event } = setup();
    file.writers = 1;
    k.changed(event('changed', '/Lib/a.txt'));
    k.changed(event('changed', '/Other/x.txt'));
    k.changed(event('deleted', '/Other/x.txt'));
    await run();
    expect(told).toEqual([]);
  });

  it('a folder the kernel cannot delete (names still in use) has its name forgotten instead', async () => {
    const { k, run, told, lib, folder, event } = setup({ notifyDelete: -39 });
    k.changed(event('deleted', '/Lib/d', { isDir: true }));
    await run();
    expect(told).toEqual([`inode ${lib.ino}`, `delete ${lib.ino} ${folder.ino} d`, `entry ${lib.ino} d`]);
  });

  it('at most MAX_PENDING wait: a flood beyond it is counted as dropped, and telling resumes as they are told', async () => {
    const { k, run, queued, event } = setup();
    const counters = k.counters;
    for (let i = 0; i < MAX_PENDING + 10; i++) k.changed(event('changed', '/Lib/a.txt'));
    expect(queued).toHaveLength(MAX_PENDING);
    expect(counters).toMatchObject({ inodes: MAX_PENDING, dropped: 10 });
    await run();
    k.changed(event('changed', '/Lib/a.txt'));
    expect(queued).toHaveLength(1);
    expect(counters.inodes).toBe(MAX_PENDING + 1);
  });
});
