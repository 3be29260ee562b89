/**
 * A real FUSE mount served by a child process; this process only does async I/O on it and runs real
 * tools (cp, mv, rm, mkdir, ls, git, tar, python for xattrs) against it, checking results through the
 * backend the way another client of the service would see them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, open, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { eventually, sh, startMount, type MountHarness } from './harness.js';
import { editorSave, gitCloneInto, tarExtractInto } from './tool-scenarios.js';

const T = 60_000;

async function errCode(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code;
  }
}

describe('FUSE mount', () => {
  let h: MountHarness;
  let lib: string;

  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 1 } });
    lib = join(h.mnt, 'Lib');
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('lists the libraries at the root', async () => {
    expect((await readdir(h.mnt)).sort()).toEqual(['Lib', 'Other']);
  });

  it('the kernel reads ahead 4 MiB of a sequential reader (the read-ahead window of the mount\'s device)', async () => {
    const entry = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').find((l) => l.split(' ')[4] === h.mnt);
    const device = entry?.split(' ')[2];
    expect(device).toMatch(/^\d+:\d+$/);
    // Set just after the mount (best effort: root only, which the FUSE tests are).
    await eventually('read_ahead_kb 4096', async () => ((await readFile(`/sys/class/bdi/${device}/read_ahead_kb`, 'utf8')).trim() === '4096' ? true : undefined), 10_000);
  }, T);

  it('cp, mv, rm, mkdir, ls through the mount show up on the service', async () => {
    const src = join(h.local, 'src.bin');
    const data = Buffer.alloc(3 * 1024 * 1024 + 17);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7 + (i >> 10)) & 0xff;
    await writeFile(src, data);
    await sh('mkdir', ['-p', join(lib, 'tools/a/b')]);
    await sh('cp', [src, join(lib, 'tools/a/b/copy.bin')]);
    const remote = Buffer.from(await h.call<string>('remoteRead', { path: '/Lib/tools/a/b/copy.bin' }), 'base64');
    expect(remote.equals(data)).toBe(true);
    await sh('mv', [join(lib, 'tools/a/b/copy.bin'), join(lib, 'tools/moved.bin')]);
    expect(await h.call('remoteList', { path: '/Lib/tools' })).toEqual(['a', 'moved.bin']);
    const ls = await sh('ls', ['-l', join(lib, 'tools')]);
    expect(ls.stdout).toMatch(new RegExp(`-rw-r--r-- 1 \\S+ \\S+ ${data.length} .* moved\\.bin`));
    await sh('cmp', [src, join(lib, 'tools/moved.bin')]);
    await sh('rm', ['-r', join(lib, 'tools/a')]);
    await sh('rm', [join(lib, 'tools/moved.bin')]);
    expect(await h.call('remoteList', { path: '/Lib/tools' })).toEqual([]);
  }, T);

  it('answers exact errnos', async () => {
    await mkdir(join(lib, 'e'));
    await writeFile(join(lib, 'e/f'), 'x');
    expect(await errCode(mkdir(join(lib, 'e')))).toBe('EEXIST');
    expect(await errCode(rm(join(lib, 'e'), { recursive: false }))).toBe('ERR_FS_EISDIR');
    expect(await errCode(sh('rmdir', [join(lib, 'e')]).catch((e: { stderr: string }) => Promise.reject(Object.assign(new Error(), { code: /not empty/.test(e.stderr) ? 'ENOTEMPTY' : e.stderr }))))).toBe('ENOTEMPTY');
    expect(await errCode(stat(join(lib, 'nope')))).toBe('ENOENT');
    expect(await errCode(writeFile(join(lib, 'n'.repeat(256)), 'x'))).toBe('ENAMETOOLONG');
    expect(await errCode(mkdir(join(h.mnt, 'NewLibrary')))).toBe('EPERM');
    const wx = await open(join(lib, 'e/f'), 'r');
    await wx.close();
    expect(await errCode(open(join(lib, 'e/f'), 'wx'))).toBe('EEXIST');
  }, T);

  it('fallocate: mode 0 makes the file that long with zeros (fallocate -l, posix_fallocate); keeping the size or punching holes is EOPNOTSUPP', async () => {
    const path = join(lib, 'preallocated.bin');
    await writeFile(path, 'data');
    await sh('fallocate', ['-l', '1M', path]);
    const got = await readFile(path);
    expect(got.length).toBe(1024 * 1024);
    expect(got.subarray(0, 4).toString()).toBe('data');
    expect(got.subarray(4).every((b) => b === 0)).toBe(true);
    // EOPNOTSUPP, as util-linux words it for each mode.
    await expect(sh('fallocate', ['-n', '-l', '2M', path])).rejects.toThrow(/keep size mode is unsupported/);
    await expect(sh('fallocate', ['-p', '-o', '0', '-l', '4096', path])).rejects.toThrow(/unsupported|not supported/);
    expect((await stat(path)).size).toBe(1024 * 1024);
  }, T);

  it('a file written by another client shows up within the attribute timeout', async () => {
    await h.call('remoteWrite', { path: '/Lib/from-elsewhere.txt', data: Buffer.from('remote data').toString('base64') });
    const names = await eventually('listing shows the file', async () => {
      const list = await readdir(lib);
      return list.includes('from-elsewhere.txt') ? list : undefined;
    }, 3_000);
    expect(names).toContain('from-elsewhere.txt');
    expect(await readFile(join(lib, 'from-elsewhere.txt'), 'utf8')).toBe('remote data');
  }, T);

  it('an editor-style save (write temp, fsync, rename over) replaces the file', async () => {
    await editorSave(lib, 'version 2, longer than before');
    expect(await readFile(join(lib, 'doc.txt'), 'utf8')).toBe('version 2, longer than before');
    expect(Buffer.from(await h.call<string>('remoteRead', { path: '/Lib/doc.txt' }), 'base64').toString()).toBe('version 2, longer than before');
    expect(await h.call('remoteStat', { path: '/Lib/.doc.txt.swp' })).toBeNull();
  }, T);

  it('git clone into the mount, then git status is clean', async () => {
    await gitCloneInto(h.local, lib, { files: 20, commits: 2, timeoutMs: 30_000 });
  }, T);

  it('tar extract into the mount matches the archive', async () => {
    await tarExtractInto(h.local, lib, { dirs: 5, files: 10 });
    const list = await h.call<string[]>('remoteList', { path: '/Lib/x/tree/d3/sub' });
    expect(list).toEqual(['file1.dat', 'file3.dat', 'file5.dat', 'file7.dat', 'file9.dat']);
  }, T);

  it('tags, lock and pin as extended attributes', async () => {
    const f = join(lib, 'tagged.txt');
    await writeFile(f, 'x');
    const py = (code: string) => sh('python3', ['-c', code, f]);
    await py(`import os,sys; os.setxattr(sys.argv[1], 'user.cloudlib.tags', b'red;green')`);
    expect((await h.call<{ tags: string[] }>('remoteStat', { path: '/Lib/tagged.txt' })).tags).toEqual(['red', 'green']);
    const got = await py(`import os,sys; print(os.getxattr(sys.argv[1], 'user.cloudlib.tags').decode()); print(sorted(os.listxattr(sys.argv[1])))`);
    expect(got.stdout).toBe("red;green\n['user.cloudlib.lock', 'user.cloudlib.pin', 'user.cloudlib.tags']\n");
    await py(`import os,sys; os.setxattr(sys.argv[1], 'user.cloudlib.lock', b'1')`);
    expect((await h.call<{ locked: boolean }>('remoteStat', { path: '/Lib/tagged.txt' })).locked).toBe(true);
    const denied = await py(`import os,sys\ntry:\n  open(sys.argv[1],'w')\nexcept OSError as e: print(e.errno)`);
    expect(denied.stdout.trim()).toBe('13');
    await py(`import os,sys; os.removexattr(sys.argv[1], 'user.cloudlib.lock')`);
    expect((await h.call<{ locked: boolean }>('remoteStat', { path: '/Lib/tagged.txt' })).locked).toBe(false);
    const missing = await py(`import os,sys\ntry:\n  os.getxattr(sys.argv[1], 'user.nothing')\nexcept OSError as e: print(e.errno)`);
    expect(missing.stdout.trim()).toBe('61');
    // Not pinned (setting it is tested over the gateway's Vfs: unit `pin-xattr`; this backend keeps nothing).
    expect((await py(`import os,sys; print(os.getxattr(sys.argv[1], 'user.cloudlib.pin').decode())`)).stdout.trim()).toBe('0');
  }, T);

  it('df shows the capacity and use of the library', async () => {
    const out = await sh('df', ['-B1', '--output=size,used,target', lib]);
    const [size, used] = out.stdout.trim().split('\n')[1]!.trim().split(/\s+/).map(Number);
    expect(size).toBe(10 * 1024 ** 3);
    expect(used).toBeGreaterThan(0);
  }, T);

  it('sync on a folder of the mount flushes pending uploads', async () => {
    // Uploads wait ten minutes on this mount: only the sync can have sent the file.
    const held = await startMount({ env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_UPLOAD_DELAY_MS: '600000' } });
    try {
      await writeFile(join(held.mnt, 'Lib/s.txt'), 'sync me');
      expect(await held.call('remoteStat', { path: '/Lib/s.txt' })).toBeNull();
      await sh('sync', [join(held.mnt, 'Lib')]);
      expect(Buffer.from(await held.call<string>('remoteRead', { path: '/Lib/s.txt' }), 'base64').toString()).toBe('sync me');
    } finally {
      await held.stop();
    }
  }, T);
});

describe('FUSE mount lifecycle', () => {
  it('answers EIO within the deadline when the service does not answer', async () => {
    const h = await startMount({ mount: { attrTimeoutS: 0, deadlines: { metadataMs: 500, durableMs: 500, dataMs: 500 } } });
    try {
      await writeFile(join(h.mnt, 'Lib/ok.txt'), 'ok');
      await h.call('faults', { delayMs: 2_000 });
      const started = Date.now();
      expect(await errCode(stat(join(h.mnt, 'Lib/ok.txt')))).toBe('EIO');
      expect(Date.now() - started).toBeLessThan(3_000);
      await h.call('faults', { delayMs: 0 });
      // The mount survives the late answers: operations work again.
      expect(await eventually('the mount to answer a stat again', async () => (await stat(join(h.mnt, 'Lib/ok.txt'))).size, 10_000)).toBe(2);
    } finally {
      await h.stop();
    }
  }, T);

  it('without the writeback cache, what is written reads back the same', async () => {
    const h = await startMount({ mount: { writebackCache: false } });
    try {
      const src = join(h.local, 'src.bin');
      const data = Buffer.alloc(2 * 1024 * 1024 + 11);
      for (let i = 0; i < data.length; i++) data[i] = (i * 31 + (i >> 12)) & 0xff;
      await writeFile(src, data);
      await sh('cp', [src, join(h.mnt, 'Lib/copy.bin')]);
      await sh('cmp', [src, join(h.mnt, 'Lib/copy.bin')]);
      const remote = Buffer.from(await h.call<string>('remoteRead', { path: '/Lib/copy.bin' }), 'base64');
      expect(remote.equals(data)).toBe(true);
    } finally {
      await h.stop();
    }
  }, T);

  it('read-only mount refuses changes with EROFS', async () => {
    const h = await startMount({ mount: { readOnly: true } });
    try {
      expect(await errCode(writeFile(join(h.mnt, 'Lib/x'), 'x'))).toBe('EROFS');
      expect(await errCode(mkdir(join(h.mnt, 'Lib/d')))).toBe('EROFS');
      expect((await stat(join(h.mnt, 'Lib'))).mode & 0o222).toBe(0);
    } finally {
      await h.stop();
    }
  }, T);

  it('SIGTERM flushes and unmounts; a mount left by a killed process is cleared on the next start', async () => {
    const first = await startMount();
    const mnt = first.mnt;
    await writeFile(join(mnt, 'Lib/a.txt'), 'a');
    const exited = new Promise<number | null>((r) => first.child.once('exit', (code) => r(code)));
    first.child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const mounts = await readFile('/proc/self/mountinfo', 'utf8');
    expect(mounts).not.toContain(` ${mnt} `);
    await first.stop();

    const second = await startMount({ mountpoint: mnt });
    const crashed = new Promise<void>((r) => second.child.once('exit', () => r()));
    second.child.kill('SIGKILL');
    await crashed;
    // Over io_uring, a request made while the kernel tears the rings down is told ECONNABORTED (or
    // ECANCELED, when the ring's own request was cancelled with it).
    expect(['ENOTCONN', 'ECONNABORTED', 'ECANCELED']).toContain(await errCode(stat(join(mnt, 'Lib'))));
    // Once the teardown is over: ENOTCONN.
    await eventually('the dead mount to answer ENOTCONN', async () => ((await errCode(stat(join(mnt, 'Lib')))) === 'ENOTCONN' ? true : undefined), 10_000);

    const third = await startMount({ mountpoint: mnt });
    try {
      expect((await readdir(mnt)).sort()).toEqual(['Lib', 'Other']);
    } finally {
      await third.stop();
      await second.stop();
      await rm(dirname(mnt), { recursive: true, force: true });
    }
  }, T);
});
