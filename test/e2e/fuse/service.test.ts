/**
 * The FUSE mount over the gateway's real Vfs and a real embedded service (in the mount's child
 * process): what the mount does is checked through the service's API, and what another client of the
 * service writes shows up on the mount within the feed interval.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, open, readFile, readdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { eventually, sh, startMount, type MountHarness } from './harness.js';

const T = 90_000;

describe('FUSE mount over the embedded service', () => {
  let h: MountHarness;
  let lib: string;
  const remoteRead = async (path: string) => Buffer.from(await h.call<string>('remoteRead', { path }), 'base64');

  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 1 }, env: { FUSE_TEST_BACKEND: 'service' } });
    lib = join(h.mnt, 'Lib');
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('cp, mkdir, mv, rm through the mount, verified through the API', async () => {
    const src = join(h.local, 'src.bin');
    const data = Buffer.alloc(2 * 1024 * 1024 + 5);
    for (let i = 0; i < data.length; i++) data[i] = (i * 13 + (i >> 9)) & 0xff;
    await writeFile(src, data);
    await sh('mkdir', ['-p', join(lib, 'tools/a/b')]);
    await sh('cp', [src, join(lib, 'tools/a/b/copy.bin')]);
    await h.call('flushAll');
    expect((await remoteRead('/Lib/tools/a/b/copy.bin')).equals(data)).toBe(true);
    await sh('mv', [join(lib, 'tools/a/b/copy.bin'), join(lib, 'tools/moved.bin')]);
    expect(await h.call('remoteList', { path: '/Lib/tools' })).toEqual(['a', 'moved.bin']);
    await sh('cmp', [src, join(lib, 'tools/moved.bin')]);
    await sh('rm', ['-r', join(lib, 'tools/a')]);
    await sh('rm', [join(lib, 'tools/moved.bin')]);
    expect(await h.call('remoteList', { path: '/Lib/tools' })).toEqual([]);
  }, T);

  it('a file another client uploads shows up on the mount within the feed interval', async () => {
    await h.call('remoteWrite', { path: '/Lib/from-elsewhere.txt', data: Buffer.from('remote data').toString('base64') });
    await eventually('listing shows the file', async () => ((await readdir(lib)).includes('from-elsewhere.txt') ? true : undefined), 5_000);
    expect(await readFile(join(lib, 'from-elsewhere.txt'), 'utf8')).toBe('remote data');
  }, T);

  it('an editor-style save replaces the file on the service, with no temp file left', async () => {
    const target = join(lib, 'doc.txt');
    await writeFile(target, 'version 1');
    const tmp = join(lib, '.doc.txt.swp');
    const fh = await open(tmp, 'w');
    await fh.writeFile('version 2, longer than before');
    await fh.sync();
    await fh.close();
    await rename(tmp, target);
    await h.call('flushAll');
    expect((await remoteRead('/Lib/doc.txt')).toString()).toBe('version 2, longer than before');
    expect(await h.call('remoteStat', { path: '/Lib/.doc.txt.swp' })).toBeNull();
  }, T);

  it('git clone into the mount, then git status is clean', async () => {
    const repo = join(h.local, 'repo');
    const git = (args: string[], cwd: string) => sh('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', '-c', 'init.defaultBranch=main', ...args], { cwd, timeoutMs: 60_000 });
    await mkdir(join(repo, 'src'), { recursive: true });
    for (let i = 0; i < 10; i++) await writeFile(join(repo, 'src', `f${i}.txt`), `line ${i}\n`.repeat(i * 50 + 1));
    await git(['init', '-q'], repo);
    await git(['add', '.'], repo);
    await git(['commit', '-q', '-m', 'one'], repo);
    await git(['clone', '-q', `file://${repo}`, join(lib, 'clone')], h.local);
    expect((await git(['status', '--porcelain'], join(lib, 'clone'))).stdout).toBe('');
    await sh('diff', ['-r', '--exclude=.git', repo, join(lib, 'clone')]);
  }, T);

  it('tar extract into the mount matches the archive, on the mount and on the service', async () => {
    const tree = join(h.local, 'tree');
    for (let d = 0; d < 3; d++) {
      await mkdir(join(tree, `d${d}`, 'sub'), { recursive: true });
      for (let f = 0; f < 6; f++) await writeFile(join(tree, `d${d}`, f % 2 ? 'sub' : '', `file${f}.dat`), Buffer.alloc(f * 1000 + d, d + f));
    }
    const archive = join(h.local, 'tree.tar');
    await sh('tar', ['-cf', archive, '-C', h.local, 'tree']);
    await mkdir(join(lib, 'x'));
    await sh('tar', ['-xf', archive, '-C', join(lib, 'x'), '--no-same-owner', '--no-same-permissions']);
    await sh('diff', ['-r', tree, join(lib, 'x/tree')]);
    await h.call('flushAll');
    expect(await h.call<string[]>('remoteList', { path: '/Lib/x/tree/d2/sub' })).toEqual(['file1.dat', 'file3.dat', 'file5.dat']);
    expect((await remoteRead('/Lib/x/tree/d1/file4.dat')).equals(await readFile(join(tree, 'd1/file4.dat')))).toBe(true);
  }, T);
});
