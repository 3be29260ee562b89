/**
 * Symbolic links through the mount (docs/fuse.md, Symbolic links): each stored as a link file
 * NAME.rclonelink holding its target, over a real embedded service. ln -s, readlink, ls -l, rm and mv of
 * links; a link to a folder; a dangling link; a Python virtual environment and a git tree with links; the
 * link file as the plain file it is through WebDAV and the service's API; and a restart of the mount on
 * the same service and data folder keeps them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lstat, mkdir, readFile, readdir, readlink, stat, symlink, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sh, type MountHarness } from './harness.js';
import { MountsOverService } from './mounts-over-service.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service-process.js';

const T = 90_000;

describe('symbolic links through the FUSE mount', () => {
  // The service in a process of its own, never in this one: this process's calls on the mount hold threads
  // of its pool (fs/promises) until the mount answers, and the mount waits for the service. Four such calls
  // at once took every thread an in-process service needed to answer: each waited for the 30 s deadline
  // and failed with EIO (the readlink EIO once seen here under load).
  let mounts: MountsOverService<ServiceProcess> | undefined;
  let h: MountHarness | undefined;
  let dir: string;
  const remoteRead = async (path: string): Promise<string> => Buffer.from(await h!.call<string>('remoteRead', { path }), 'base64').toString('utf8');
  const mount = (): Promise<MountHarness> => mounts!.mount({ mount: { attrTimeoutS: 1 } });

  beforeAll(async () => {
    mounts = await MountsOverService.start(await startServiceProcess(), 'cloudlib-links-');
    h = await mount();
    dir = join(h.mnt, 'Lib', 'links');
    await mkdir(join(dir, 'sub'), { recursive: true });
    await writeFile(join(dir, 'target.txt'), 'the target');
    await writeFile(join(dir, 'sub', 'inside.txt'), 'inside');
  }, T);
  afterAll(async () => {
    await mounts?.stop();
  }, T);

  it('ln -s makes a link: readlink, ls -l and reads through it; the service holds NAME.rclonelink', async () => {
    await sh('ln', ['-s', 'target.txt', join(dir, 'to-file')]);
    expect(await readlink(join(dir, 'to-file'))).toBe('target.txt');
    expect((await lstat(join(dir, 'to-file'))).isSymbolicLink()).toBe(true);
    expect((await lstat(join(dir, 'to-file'))).size).toBe('target.txt'.length);
    expect(await readFile(join(dir, 'to-file'), 'utf8')).toBe('the target');
    expect((await sh('ls', ['-l', dir])).stdout).toMatch(/^l[rwx-]{9} .* to-file -> target\.txt$/m);
    // The listing shows the link, not its file, and a lookup does not find the file by its name either.
    expect((await readdir(dir)).sort()).toEqual(['sub', 'target.txt', 'to-file']);
    await expect(lstat(join(dir, 'to-file.rclonelink'))).rejects.toMatchObject({ code: 'ENOENT' });
    await h!.call('flushAll');
    expect(await h!.call('remoteList', { path: '/Lib/links' })).toEqual(['sub', 'target.txt', 'to-file.rclonelink']);
    expect(await remoteRead('/Lib/links/to-file.rclonelink')).toBe('target.txt');
    // Something is there already: refused, nothing changed.
    await expect(sh('ln', ['-s', 'other', join(dir, 'to-file')])).rejects.toThrow(/File exists/);
    await expect(sh('ln', ['-s', 'other', join(dir, 'target.txt')])).rejects.toThrow(/File exists/);
    expect(await readlink(join(dir, 'to-file'))).toBe('target.txt');
  }, T);

  it('a link to a folder lists the folder; a dangling link reads back its target and stats ENOENT', async () => {
    await sh('ln', ['-s', 'sub', join(dir, 'to-dir')]);
    expect(await readdir(join(dir, 'to-dir'))).toEqual(['inside.txt']);
    expect(await readFile(join(dir, 'to-dir', 'inside.txt'), 'utf8')).toBe('inside');
    expect((await stat(join(dir, 'to-dir'))).isDirectory()).toBe(true);
    await sh('ln', ['-s', '../nowhere/missing', join(dir, 'dangling')]);
    expect(await readlink(join(dir, 'dangling'))).toBe('../nowhere/missing');
    await expect(stat(join(dir, 'dangling'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect((await sh('find', [dir, '-maxdepth', '1', '-type', 'l'])).stdout.split('\n').filter(Boolean).sort()).toEqual(
      ['dangling', 'to-dir', 'to-file'].map((n) => join(dir, n)),
    );
  }, T);

  it('mv and rm of a link move and remove its link file; the target stays', async () => {
    await sh('ln', ['-s', 'target.txt', join(dir, 'moving')]);
    await sh('mv', [join(dir, 'moving'), join(dir, 'sub', 'moved')]);
    expect(await readlink(join(dir, 'sub', 'moved'))).toBe('target.txt');
    await expect(lstat(join(dir, 'moving'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(lstat(join(dir, 'sub', 'moved.rclonelink'))).rejects.toMatchObject({ code: 'ENOENT' });
    await h!.call('flushAll');
    expect(await h!.call('remoteList', { path: '/Lib/links/sub' })).toEqual(['inside.txt', 'moved.rclonelink']);
    await sh('rm', [join(dir, 'sub', 'moved')]);
    await expect(lstat(join(dir, 'sub', 'moved'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await h!.call('remoteList', { path: '/Lib/links/sub' })).toEqual(['inside.txt']);
    expect(await readFile(join(dir, 'target.txt'), 'utf8')).toBe('the target');
  }, T);

  it('a Python virtual environment made in the mount runs its python through its links', async () => {
    const venv = join(dir, 'venv');
    await sh('python3', ['-m', 'venv', '--without-pip', venv], { timeoutMs: 60_000 });
    expect((await lstat(join(venv, 'bin', 'python'))).isSymbolicLink()).toBe(true);
    const ran = await sh(join(venv, 'bin', 'python'), ['-c', 'import sys; print(sys.prefix)'], { timeoutMs: 60_000 });
    expect(ran.stdout.trim()).toBe(venv);
  }, T);

  it('git clone of a tree with links checks them out as links, and git status is clean', async () => {
    const repo = join(h!.local, 'repo-with-links');
    const git = (args: string[], cwd: string) => sh('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', '-c', 'init.defaultBranch=main', ...args], { cwd, timeoutMs: 60_000 });
    await mkdir(join(repo, 'docs'), { recursive: true });
    await writeFile(join(repo, 'docs', 'guide.md'), 'guide\n');
    await symlink('docs/guide.md', join(repo, 'GUIDE.md'));
    await symlink('docs', join(repo, 'manual'));
    await git(['init', '-q'], repo);
    await git(['add', '.'], repo);
    await git(['commit', '-q', '-m', 'links'], repo);
    const clone = join(dir, 'clone');
    await git(['clone', '-q', `file://${repo}`, clone], h!.local);
    expect(await readlink(join(clone, 'GUIDE.md'))).toBe('docs/guide.md');
    expect(await readlink(join(clone, 'manual'))).toBe('docs');
    expect(await readFile(join(clone, 'manual', 'guide.md'), 'utf8')).toBe('guide\n');
    expect((await git(['status', '--porcelain'], clone)).stdout).toBe('');
  }, T);

  it('WebDAV shows the link file as the plain file it is', async () => {
    const url = await h!.call<string>('serveWebdav');
    const auth = { authorization: `Basic ${Buffer.from('alice:secret').toString('base64')}` };
    const got = await fetch(new URL('Lib/links/to-file.rclonelink', url), { headers: auth });
    expect(got.status).toBe(200);
    expect(await got.text()).toBe('target.txt');
    const listing = await fetch(new URL('Lib/links/', url), { method: 'PROPFIND', headers: { ...auth, depth: '1' } });
    const xml = await listing.text();
    expect(xml).toContain('to-file.rclonelink');
    expect(xml).not.toMatch(/links\/to-file</);
  }, T);

  it('a restart of the mount on the same service and data folder keeps the links', async () => {
    await h!.call('flushAll');
    await h!.stop();
    h = await mount();
    dir = join(h.mnt, 'Lib', 'links');
    expect(await readlink(join(dir, 'to-file'))).toBe('target.txt');
    expect(await readlink(join(dir, 'to-dir'))).toBe('sub');
    expect(await readlink(join(dir, 'dangling'))).toBe('../nowhere/missing');
    expect(await readFile(join(dir, 'to-file'), 'utf8')).toBe('the target');
    expect((await readdir(dir)).sort()).toEqual(['clone', 'dangling', 'sub', 'target.txt', 'to-dir', 'to-file', 'venv']);
  }, T);

  it('readlink EIO regression: readlink and lstat loops in parallel while links are made again and files written answer every time', async () => {
    const load = join(h!.mnt, 'Lib', 'load');
    await mkdir(load);
    const n = 8;
    for (let i = 0; i < n; i++) await symlink(`target-${i}`, join(load, `k${i}`));
    const failures: string[] = [];
    let done = false;
    let reads = 0;
    const loop = async (first: number): Promise<void> => {
      for (let k = first; !done; k++) {
        const link = join(load, `k${k % n}`);
        // ENOENT: caught between the removal of a link and its making again.
        await readlink(link).then((t) => { reads++; if (!t.startsWith('target-')) failures.push(`readlink ${link}: ${t}`); }, (err: NodeJS.ErrnoException) => { if (err.code !== 'ENOENT') failures.push(`readlink ${link}: ${err.code}`); });
        await lstat(link).catch((err: NodeJS.ErrnoException) => { if (err.code !== 'ENOENT') failures.push(`lstat ${link}: ${err.code}`); });
      }
    };
    // Four at once: as many as the thread pool of this process holds by default.
    const loops = [0, 1, 2, 3].map((i) => loop(i * 2));
    try {
      for (let round = 0; round < 6; round++) {
        for (let i = 0; i < n; i += 2) {
          await unlink(join(load, `k${i}`));
          await symlink(`target-${i}-${round}`, join(load, `k${i}`));
        }
        await writeFile(join(load, `data-${round}.bin`), Buffer.alloc(256 * 1024, round));
        if (round % 3 === 0) await h!.call('flushAll');
      }
    } finally {
      done = true;
      await Promise.all(loops);
    }
    expect(failures).toEqual([]);
    expect(reads).toBeGreaterThan(0);
    expect(await readlink(join(load, 'k0'))).toBe('target-0-5');
    expect(await readlink(join(load, 'k1'))).toBe('target-1');
  }, T);
});
