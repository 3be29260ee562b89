/** The operation table driven directly (no kernel): argument and errno mapping over an in-memory Vfs. */
import { describe, expect, it } from 'vitest';
import { DEFAULT_DEADLINES, FuseOperations, RequestedOwnership, TIMES_KEPT_MAX, toOpenFlags } from '../../../src/fuse/operations.js';
import { silentLogger } from '../../../src/shared/log.js';
import { MemoryVfs } from '../../support/memory-vfs.js';

function setup(opts: { readOnly?: boolean; deadlines?: Partial<typeof DEFAULT_DEADLINES>; links?: boolean } = {}) {
  const vfs = new MemoryVfs(['Lib']);
  const operations = new FuseOperations({
    vfs,
    ownership: { uid: 1000, gid: 100, umask: 0o027, readOnly: !!opts.readOnly },
    deadlines: { ...DEFAULT_DEADLINES, ...opts.deadlines },
    logger: silentLogger,
    links: opts.links,
  });
  const ops = operations.toNative();
  /** Calls an operation and resolves with what it answered. */
  const call = (name: string, ...args: unknown[]): Promise<unknown[]> =>
    new Promise((resolve) => ops[name]!(...args, (...answer: unknown[]) => resolve(answer)));
  return { vfs, ops, call, inFlight: operations.inFlight };
}

describe('FuseOperations', () => {
  it('maps open(2) flags', () => {
    expect(toOpenFlags(0)).toEqual({ read: true, write: false, truncate: false, append: false });
    expect(toOpenFlags(0o1 | 0o1000)).toEqual({ read: false, write: true, truncate: true, append: false });
    expect(toOpenFlags(0o2 | 0o2000)).toEqual({ read: true, write: true, truncate: false, append: true });
  });

  it('create, write, read, fgetattr, release round-trip through handles', async () => {
    const { call } = setup();
    const [code, fh] = await call('create', '/Lib/f.txt', 0o640);
    expect(code).toBe(0);
    const data = Buffer.from('hello world');
    expect(await call('write', '/Lib/f.txt', fh, data, data.length, 0)).toEqual([11]);
    const [, st] = (await call('fgetattr', '/Lib/f.txt', fh)) as [number, { size: number; mode: number; uid: number; gid: number }];
    expect(st).toMatchObject({ size: 11, mode: 0o100640, uid: 1000, gid: 100 });
    const buf = Buffer.alloc(64);
    expect(await call('read', '/Lib/f.txt', fh, buf, 64, 6)).toEqual([5]);
    expect(buf.subarray(0, 5).toString()).toBe('world');
    expect(await call('release', '/Lib/f.txt', fh)).toEqual([0]);
    expect(await call('read', '/Lib/f.txt', fh, buf, 64, 0)).toEqual([-9]); // EBADF after release
  });

  it('createWithFlags binds the handle number the engine gave the kernel; a taken one or one of its own range is refused', async () => {
    const ops = new FuseOperations({ vfs: new MemoryVfs(['Lib']), ownership: { uid: 1000, gid: 100, umask: 0o022, readOnly: false }, deadlines: DEFAULT_DEADLINES, logger: silentLogger });
    const create = (path: string, fh: number): Promise<unknown[]> => new Promise((resolve) => ops.createWithFlags(path, 0o1 | 0o100 | 0o200, 0o644, (...a: unknown[]) => resolve(a), fh));
    expect(await create('/Lib/a', 2 ** 32)).toEqual([0, 2 ** 32]);
    expect(ops.handles.get(2 ** 32).writable).toBe(true);
    expect(await create('/Lib/b', 2 ** 32)).toEqual([-9]);
    expect(await create('/Lib/c', 7)).toEqual([-9]);
    expect(ops.handles.size).toBe(1);
    expect(await create('/Lib/a', 2 ** 32 + 1)).toEqual([-17]); // exclusive: the name is taken
  });

  it('answers the right errno for each failure', async () => {
    const { call } = setup();
    expect(await call('getattr', '/Lib/missing')).toEqual([-2]);
    expect(await call('mkdir', '/Lib/d', 0o755)).toEqual([0]);
    expect(await call('mkdir', '/Lib/d', 0o755)).toEqual([-17]);
    await call('create', '/Lib/d/x', 0o644);
    expect(await call('rmdir', '/Lib/d')).toEqual([-39]);
    expect(await call('unlink', '/Lib/d')).toEqual([-21]);
    expect(await call('mkdir', '/NewLibrary', 0o755)).toEqual([-1]);
    expect(await call('mkdir', `/Lib/${'n'.repeat(256)}`, 0o755)).toEqual([-36]);
    expect(await call('rename', '/Lib/d/x', '/Other/x')).toEqual([-2]);
    expect(await call('link', '/Lib/d/x', '/Lib/y')).toEqual([-1]);
    expect(await call('create', '/Lib/bad\uFFFDname', 0o644)).toEqual([-84]); // not UTF-8 at the kernel
    expect(await call('mkdir', '/Lib/\uFFFD', 0o755)).toEqual([-84]);
    expect(await call('rename', '/Lib/d/x', '/Lib/\uFFFD')).toEqual([-84]);
    expect(await call('symlink', 'x', '/Lib/d')).toEqual([-17]);
  });

  it('symlink and readlink keep a link as a link file, shown as the link (S_IFLNK); with links off, EPERM', async () => {
    const { call, vfs } = setup();
    expect(await call('symlink', '../t', '/Lib/l')).toEqual([0]);
    expect(await call('readlink', '/Lib/l')).toEqual([0, '../t']);
    const [, st] = (await call('getattr', '/Lib/l')) as [number, { mode: number; size: number }];
    expect(st).toMatchObject({ mode: 0o120777, size: 4 });
    const [, names, stats] = (await call('readdir', '/Lib')) as [number, string[], { mode: number }[], string[]];
    expect(names).toEqual(['.', '..', 'l']);
    expect(stats[2]!.mode).toBe(0o120777);
    expect((await vfs.readdir('/Lib')).map((e) => e.name)).toEqual(['l.rclonelink']);
    expect(await call('readlink', '/Lib/l.rclonelink')).toEqual([-2]);
    expect(await call('getattr', '/Lib/l.rclonelink')).toEqual([-2]);
    expect(await call('rename', '/Lib/l', '/Lib/m')).toEqual([0]);
    expect(await call('unlink', '/Lib/m')).toEqual([0]);
    expect(await vfs.readdir('/Lib')).toEqual([]);
    const off = setup({ links: false });
    expect(await off.call('symlink', 'x', '/Lib/y')).toEqual([-1]);
    await off.vfs.writeFile('/Lib/y.rclonelink', Buffer.from('x'));
    expect((await off.call('readdir', '/Lib'))[1]).toEqual(['.', '..', 'y.rclonelink']);
  });

  it('answers ENOSPC when the library is full', async () => {
    const { call, vfs } = setup();
    vfs.capacity = 4;
    const [, fh] = await call('create', '/Lib/big', 0o644);
    expect(await call('write', '/Lib/big', fh, Buffer.alloc(8), 8, 0)).toEqual([-28]);
  });

  it('answers EACCES for a file locked on the service', async () => {
    const { call, vfs } = setup();
    await call('create', '/Lib/l', 0o644);
    await vfs.setLocked('/Lib/l', true);
    expect(await call('open', '/Lib/l', 0o2)).toEqual([-13]);
  });

  it('answers EIO at the deadline when the service does not answer, and never twice', async () => {
    const { call, vfs } = setup({ deadlines: { metadataMs: 40 } });
    vfs.faults.delayMs = 300;
    const started = Date.now();
    expect(await call('getattr', '/Lib')).toEqual([-5]);
    expect(Date.now() - started).toBeLessThan(250);
  });

  it('a read that answers late never writes into the kernel buffer', async () => {
    const { call, vfs, inFlight } = setup({ deadlines: { dataMs: 30 } });
    const [, fh] = await call('create', '/Lib/r', 0o644);
    await call('write', '/Lib/r', fh, Buffer.from('abc'), 3, 0);
    vfs.faults.delayMs = 100;
    const buf = Buffer.alloc(8);
    expect(await call('read', '/Lib/r', fh, buf, 8, 0)).toEqual([-5]);
    // The late read has settled (nothing in flight): had it written, it would have by now.
    expect(await inFlight.drained(5_000)).toBe(true);
    expect(buf.equals(Buffer.alloc(8))).toBe(true);
  });

  it('refuses every change on a read-only mount with EROFS', async () => {
    const { call } = setup({ readOnly: true });
    expect(await call('mkdir', '/Lib/d', 0o755)).toEqual([-30]);
    expect(await call('create', '/Lib/f', 0o644)).toEqual([-30]);
    expect(await call('open', '/Lib/f', 0o1)).toEqual([-30]);
    const [code, st] = (await call('getattr', '/Lib')) as [number, { mode: number }];
    expect(code).toBe(0);
    expect(st.mode & 0o222).toBe(0);
  });

  it('truncate without a handle, utimens, statfs', async () => {
    const { call, vfs } = setup();
    const [, fh] = await call('create', '/Lib/t', 0o644);
    await call('write', '/Lib/t', fh, Buffer.alloc(100, 1), 100, 0);
    expect(await call('truncate', '/Lib/t', 10)).toEqual([0]);
    expect((await vfs.stat('/Lib/t')).size).toBe(10);
    expect(await call('utimens', '/Lib/t', 1_500_000_000_000, 1_500_000_000_000)).toEqual([0]);
    expect((await vfs.stat('/Lib/t')).mtimeMs).toBe(1_500_000_000_000);
    const [code, fs] = (await call('statfs', '/Lib')) as [number, { bfree: number; blocks: number; namemax: number }];
    expect(code).toBe(0);
    expect(fs.namemax).toBe(255);
    expect(fs.blocks).toBeGreaterThan(fs.bfree - 1);
  });

  it('chmod/chown keep the mode and owner asked for, in memory, moved by rename and dropped by unlink', async () => {
    const { call } = setup();
    const shown = async (path: string) => ((await call('getattr', path)) as [number, { mode: number; uid: number; gid: number }])[1];
    await call('create', '/Lib/c', 0o640);
    expect(await call('chmod', '/Lib/c', 0o100755)).toEqual([0]);
    expect(await shown('/Lib/c')).toMatchObject({ mode: 0o100755, uid: 1000, gid: 100 });
    expect(await call('chown', '/Lib/c', 0, 0xffff_ffff)).toEqual([0]);
    expect(await shown('/Lib/c')).toMatchObject({ mode: 0o100755, uid: 0, gid: 100 });
    expect(await call('chmod', '/Lib/missing', 0o644)).toEqual([-2]);
    await call('mkdir', '/Lib/d', 0o700);
    expect(await shown('/Lib/d')).toMatchObject({ mode: 0o040700 });
    expect(await call('rename', '/Lib/c', '/Lib/d/c')).toEqual([0]);
    expect(await shown('/Lib/d/c')).toMatchObject({ mode: 0o100755, uid: 0 });
    expect(await call('rename', '/Lib/d', '/Lib/e')).toEqual([0]);
    expect(await shown('/Lib/e/c')).toMatchObject({ mode: 0o100755, uid: 0 });
    expect(await call('unlink', '/Lib/e/c')).toEqual([0]);
    await call('create', '/Lib/e/c', 0o640);
    expect(await shown('/Lib/e/c')).toMatchObject({ mode: 0o100640, uid: 1000 });
    // Asking for what is shown by default keeps nothing.
    expect(await call('chmod', '/Lib/e', 0o750)).toEqual([0]);
    expect(await shown('/Lib/e')).toMatchObject({ mode: 0o040750 });
  });

  it('times a local disk keeps: the access time set, the change time of chmod, chown and utimens, a folder\'s times when a name in it changes', async () => {
    const { call } = setup();
    type Times = { atime: number; mtime: number; ctime: number };
    const shown = async (path: string): Promise<Times> => ((await call('getattr', path)) as [number, Times])[1];
    await call('mkdir', '/Lib/d', 0o755);
    const [, fh] = await call('create', '/Lib/d/f', 0o644);
    await call('release', '/Lib/d/f', fh);
    expect(await call('utimens', '/Lib/d/f', 1_900_000_000_000, 1_950_000_000_000)).toEqual([0]);
    expect(await shown('/Lib/d/f')).toMatchObject({ atime: 1_900_000_000_000, mtime: 1_950_000_000_000 });
    // A change time never before the modification time (here in the future), nor before the change.
    const before = Date.now();
    expect(await call('utimens', '/Lib/d/f', 1_000_000_000_000, 1_000_000_000_000)).toEqual([0]);
    const set = await shown('/Lib/d/f');
    expect(set).toMatchObject({ atime: 1_000_000_000_000, mtime: 1_000_000_000_000 });
    expect(set.ctime).toBeGreaterThanOrEqual(before);
    const folder = await shown('/Lib/d');
    // chmod and chown move the change time on.
    for (const change of [() => call('chmod', '/Lib/d/f', 0o600), () => call('chown', '/Lib/d/f', 5, 5)]) {
      const was = (await shown('/Lib/d/f')).ctime;
      const at = Date.now();
      expect(await change()).toEqual([0]);
      const now = await shown('/Lib/d/f');
      expect(now.ctime).toBeGreaterThanOrEqual(Math.max(was, at));
      expect(now.mtime).toBe(1_000_000_000_000);
    }
    // unlink and rmdir move the folder's modification and change times on.
    const at = Date.now();
    expect(await call('unlink', '/Lib/d/f')).toEqual([0]);
    const after = await shown('/Lib/d');
    expect(after.mtime).toBeGreaterThanOrEqual(Math.max(at, folder.mtime));
    expect(after.ctime).toBeGreaterThanOrEqual(after.mtime);
    await call('mkdir', '/Lib/d/sub', 0o755);
    const made = (await shown('/Lib/d')).mtime;
    expect(made).toBeGreaterThanOrEqual(after.mtime);
    expect(await call('rmdir', '/Lib/d/sub')).toEqual([0]);
    expect((await shown('/Lib/d')).mtime).toBeGreaterThanOrEqual(made);
    // A time set on the folder afterwards (rsync -a, tar, cp -a set it last) is the one shown.
    expect(await call('utimens', '/Lib/d', 1_000_000_000_000, 1_000_000_000_000)).toEqual([0]);
    expect((await shown('/Lib/d')).mtime).toBe(1_000_000_000_000);
  });

  it('kept times are bounded: past TIMES_KEPT_MAX paths the oldest are forgotten, modes stay', () => {
    const kept = new RequestedOwnership();
    kept.set('/Lib/moded', { mode: 0o600 }, { mode: 0o644, uid: 1, gid: 1 });
    kept.setTimes('/Lib/moded', { atimeMs: 1 });
    for (let i = 0; i < TIMES_KEPT_MAX; i++) kept.setTimes(`/Lib/f${i}`, { atimeMs: i });
    expect(kept.get('/Lib/moded')).toEqual({ mode: 0o600 });
    expect(kept.get('/Lib/f0')).toEqual({ atimeMs: 0 });
    kept.setTimes('/Lib/one-more', { atimeMs: 5 });
    expect(kept.get('/Lib/f0')).toBeUndefined();
    expect(kept.size).toBe(TIMES_KEPT_MAX + 1); // the mode's path and the newest TIMES_KEPT_MAX timed ones
  });

  it('fallocate (mode 0) makes the file as long as a local disk would, zeros added, never shorter; bad ranges EINVAL', async () => {
    const { call, vfs } = setup();
    const [, fh] = await call('create', '/Lib/pre', 0o644);
    await call('write', '/Lib/pre', fh, Buffer.from('head'), 4, 0);
    expect(await call('fallocate', '/Lib/pre', fh, 0, 4096)).toEqual([0]);
    expect((await vfs.stat('/Lib/pre')).size).toBe(4096);
    expect(await call('fallocate', '/Lib/pre', fh, 0, 10)).toEqual([0]);
    expect((await vfs.stat('/Lib/pre')).size).toBe(4096);
    expect(await call('fallocate', '/Lib/pre', fh, -1, 10)).toEqual([-22]);
    const buf = Buffer.alloc(4096);
    expect(await call('read', '/Lib/pre', fh, buf, 4096, 0)).toEqual([4096]);
    expect(buf.subarray(0, 4).toString()).toBe('head');
    expect(buf.subarray(4).every((b) => b === 0)).toBe(true);
    await call('release', '/Lib/pre', fh);
  });

  it('chmod/chown answer EROFS on a read-only mount', async () => {
    const { call } = setup({ readOnly: true });
    expect(await call('chmod', '/Lib', 0o755)).toEqual([-30]);
    expect(await call('chown', '/Lib', 0, 0)).toEqual([-30]);
  });

  it('readdir lists names with their attributes', async () => {
    const { call } = setup();
    await call('mkdir', '/Lib/sub', 0o755);
    await call('create', '/Lib/a', 0o644);
    const [code, names, stats] = (await call('readdir', '/Lib')) as [number, string[], Array<{ mode: number }>];
    expect(code).toBe(0);
    expect(names.sort()).toEqual(['.', '..', 'a', 'sub']);
    expect(stats).toHaveLength(4);
  });

  it('xattrs: tags and lock, size queries and ERANGE', async () => {
    const { call, vfs } = setup();
    await call('create', '/Lib/x', 0o644);
    expect(await call('setxattr', '/Lib/x', 'user.cloudlib.tags', Buffer.from('red; blue;red'), 0, 0)).toEqual([0]);
    expect(await vfs.getTags('/Lib/x')).toEqual(['red', 'blue']);
    expect(await call('getxattr', '/Lib/x', 'user.cloudlib.tags', Buffer.alloc(0))).toEqual([8]);
    expect(await call('getxattr', '/Lib/x', 'user.cloudlib.tags', Buffer.alloc(3))).toEqual([-34]);
    const buf = Buffer.alloc(32);
    expect(await call('getxattr', '/Lib/x', 'user.cloudlib.tags', buf)).toEqual([8]);
    expect(buf.subarray(0, 8).toString()).toBe('red;blue');
    expect(await call('setxattr', '/Lib/x', 'user.cloudlib.lock', Buffer.from('1'), 0, 0)).toEqual([0]);
    expect((await vfs.stat('/Lib/x')).locked).toBe(true);
    expect(await call('setxattr', '/Lib/x', 'user.cloudlib.lock', Buffer.from('maybe'), 0, 0)).toEqual([-22]);
    expect(await call('removexattr', '/Lib/x', 'user.cloudlib.lock')).toEqual([0]);
    expect((await vfs.stat('/Lib/x')).locked).toBe(false);
    expect(await call('getxattr', '/Lib/x', 'user.other', Buffer.alloc(10))).toEqual([-61]);
    // Other namespaces are not supported at all (ls caches that per file system).
    expect(await call('getxattr', '/Lib/x', 'security.selinux', Buffer.alloc(10))).toEqual([-95]);
    expect(await call('getxattr', '/Lib/x', 'system.posix_acl_access', Buffer.alloc(10))).toEqual([-95]);
    expect(await call('setxattr', '/Lib/x', 'user.other', Buffer.from('v'), 0, 0)).toEqual([-95]);
    const list = Buffer.alloc(64);
    const [n] = (await call('listxattr', '/Lib/x', list)) as [number];
    expect(list.subarray(0, n).toString()).toBe('user.cloudlib.tags\0user.cloudlib.lock\0user.cloudlib.pin\0');
    // A Vfs that keeps nothing on this machine: never pinned, pinning not supported.
    const pin = Buffer.alloc(4);
    expect(await call('getxattr', '/Lib/x', 'user.cloudlib.pin', pin)).toEqual([1]);
    expect(pin.subarray(0, 1).toString()).toBe('0');
    expect(await call('setxattr', '/Lib/x', 'user.cloudlib.pin', Buffer.from('1'), 0, 0)).toEqual([-95]);
  });
});
