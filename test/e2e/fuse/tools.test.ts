/**
 * Everyday tools that set modes, owners and times (tar x, cp -a, rsync -a) exit 0 through the mount and
 * what they set shows (kept in memory by the front end); make and npm install work inside it; files
 * changed by another client, unlinked or replaced while open behave as on a local disk; npm's links of a
 * package's bin and of a local dependency are symbolic links (link files, docs/fuse.md).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chmod, lstat, mkdir, open, readFile, readlink, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { eventually, sh, startMount, type MountHarness } from './harness.js';

const T = 60_000;

describe('tools through the FUSE mount', () => {
  let h: MountHarness;
  let lib: string;
  let tree: string;

  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 1 } });
    lib = join(h.mnt, 'Lib');
    tree = join(h.local, 'tree');
    await mkdir(join(tree, 'bin'), { recursive: true });
    await mkdir(join(tree, 'private'), { recursive: true });
    await writeFile(join(tree, 'bin', 'run.sh'), '#!/bin/sh\necho hi\n');
    await chmod(join(tree, 'bin', 'run.sh'), 0o755);
    await writeFile(join(tree, 'private', 'key'), 'secret');
    await chmod(join(tree, 'private', 'key'), 0o600);
    await chmod(join(tree, 'private'), 0o700);
    await writeFile(join(tree, 'data.bin'), Buffer.alloc(300_000, 9));
    await sh('touch', ['-d', '2020-01-02 03:04:05', join(tree, 'data.bin')]);
    // Links, one of them dangling: the tools copy them as links (docs/fuse.md, Symbolic links).
    await symlink('run.sh', join(tree, 'bin', 'run'));
    await symlink('../nowhere', join(tree, 'dangling'));
    await sh('touch', ['-h', '-d', '2021-02-03 04:05:06', join(tree, 'bin', 'run')]);
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  const modeOf = async (p: string): Promise<number> => (await stat(p)).mode & 0o7777;
  /** The tree's links copied as links, with their targets and the link's own time. */
  const expectLinks = async (copy: string): Promise<void> => {
    expect(await readlink(join(copy, 'bin', 'run'))).toBe('run.sh');
    expect(await readlink(join(copy, 'dangling'))).toBe('../nowhere');
    expect((await lstat(join(copy, 'bin', 'run'))).mtimeMs).toBe((await lstat(join(tree, 'bin', 'run'))).mtimeMs);
  };

  it('tar x keeping modes and owners exits 0, and the modes show', async () => {
    const archive = join(h.local, 'tree.tar');
    await sh('tar', ['-cf', archive, '-C', h.local, 'tree']);
    await mkdir(join(lib, 'tar'));
    await sh('tar', ['-xpf', archive, '-C', join(lib, 'tar'), '--same-owner']);
    await sh('diff', ['-r', '--no-dereference', tree, join(lib, 'tar/tree')]);
    expect(await modeOf(join(lib, 'tar/tree/bin/run.sh'))).toBe(0o755);
    expect(await modeOf(join(lib, 'tar/tree/private/key'))).toBe(0o600);
    expect(await modeOf(join(lib, 'tar/tree/private'))).toBe(0o700);
    expect((await stat(join(lib, 'tar/tree/data.bin'))).mtime.toISOString()).toBe((await stat(join(tree, 'data.bin'))).mtime.toISOString());
    await expectLinks(join(lib, 'tar/tree'));
  }, T);

  it('cp -a exits 0 and keeps modes and times', async () => {
    await sh('cp', ['-a', tree, join(lib, 'cp')]);
    await sh('diff', ['-r', '--no-dereference', tree, join(lib, 'cp')]);
    expect(await modeOf(join(lib, 'cp/bin/run.sh'))).toBe(0o755);
    expect(await modeOf(join(lib, 'cp/private/key'))).toBe(0o600);
    expect((await stat(join(lib, 'cp/data.bin'))).mtimeMs).toBe((await stat(join(tree, 'data.bin'))).mtimeMs);
    await expectLinks(join(lib, 'cp'));
  }, T);

  it('rsync -a exits 0, and a second run finds nothing to copy', async () => {
    await sh('rsync', ['-a', `${tree}/`, join(lib, 'rsync')]);
    await sh('diff', ['-r', '--no-dereference', tree, join(lib, 'rsync')]);
    expect(await modeOf(join(lib, 'rsync/bin/run.sh'))).toBe(0o755);
    await expectLinks(join(lib, 'rsync'));
    const again = await sh('rsync', ['-a', '--itemize-changes', `${tree}/`, join(lib, 'rsync')]);
    expect(again.stdout.trim()).toBe('');
  }, T);

  it('make builds a program inside the mount, runs it, and a second make finds nothing to do', async () => {
    const dir = join(lib, 'make');
    await mkdir(dir);
    await writeFile(join(dir, 'hello.c'), '#include <stdio.h>\nint main(void) { puts("built here"); return 0; }\n');
    await writeFile(join(dir, 'Makefile'), 'out.txt: hello\n\t./hello > out.txt\nhello: hello.c\n\tcc -o hello hello.c\n');
    await sh('make', ['-C', dir], { timeoutMs: T });
    expect(await readFile(join(dir, 'out.txt'), 'utf8')).toBe('built here\n');
    expect((await stat(join(dir, 'hello'))).mode & 0o111).not.toBe(0);
    // The times make compares are the ones it left: nothing is rebuilt.
    const again = await sh('make', ['-C', dir], { timeoutMs: T });
    expect(again.stdout).toMatch(/Nothing to be done|is up to date/);
  }, T);

  it('npm install of a small project (a local package, no registry) inside the mount', async () => {
    const pkg = join(h.local, 'dep');
    await mkdir(pkg, { recursive: true });
    await writeFile(join(pkg, 'package.json'), JSON.stringify({ name: 'cloudlib-test-dep', version: '1.0.0', main: 'index.js' }));
    await writeFile(join(pkg, 'index.js'), 'module.exports = () => "from the dependency";\n');
    // npm's cache and settings of its own, in the test's folder.
    const env = { ...process.env, npm_config_cache: join(h.local, 'npm-cache'), npm_config_userconfig: join(h.local, 'npmrc') };
    const packed = (await sh('npm', ['pack', '--silent', '--pack-destination', h.local], { cwd: pkg, env, timeoutMs: T })).stdout.trim().split('\n').pop()!;
    const app = join(lib, 'app');
    await mkdir(app);
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
    await sh('npm', ['install', '--offline', '--no-audit', '--no-fund', '--silent', join(h.local, packed)], { cwd: app, env, timeoutMs: T });
    const run = await sh('node', ['-e', 'console.log(require("cloudlib-test-dep")())'], { cwd: app, timeoutMs: T });
    expect(run.stdout.trim()).toBe('from the dependency');
    expect(JSON.parse(await readFile(join(app, 'package.json'), 'utf8')).dependencies['cloudlib-test-dep']).toMatch(/cloudlib-test-dep-1\.0\.0\.tgz$/);
    expect((await stat(join(app, 'package-lock.json'))).size).toBeGreaterThan(0);
  }, T);

  it('npm install of a package with a bin and a local (file:) dependency makes their links in the mount', async () => {
    const env = { ...process.env, npm_config_cache: join(h.local, 'npm-cache'), npm_config_userconfig: join(h.local, 'npmrc') };
    const tool = join(h.local, 'tool');
    await mkdir(tool, { recursive: true });
    await writeFile(join(tool, 'package.json'), JSON.stringify({ name: 'cloudlib-test-tool', version: '1.0.0', bin: { 'cloudlib-test-tool': 'cli.js' } }));
    await writeFile(join(tool, 'cli.js'), '#!/usr/bin/env node\nconsole.log("the tool ran");\n');
    const packed = (await sh('npm', ['pack', '--silent', '--pack-destination', h.local], { cwd: tool, env, timeoutMs: T })).stdout.trim().split('\n').pop()!;
    const app = join(lib, 'linked-app');
    await mkdir(join(app, 'local-dep'), { recursive: true });
    await writeFile(join(app, 'local-dep', 'package.json'), JSON.stringify({ name: 'local-dep', version: '1.0.0', main: 'index.js' }));
    await writeFile(join(app, 'local-dep', 'index.js'), 'module.exports = "from the local dependency";\n');
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'linked-app', version: '1.0.0', private: true, dependencies: { 'local-dep': 'file:local-dep' } }));
    await sh('npm', ['install', '--offline', '--no-audit', '--no-fund', '--silent', join(h.local, packed)], { cwd: app, env, timeoutMs: T });
    // npm links a local dependency and a package's bin: both are symbolic links in the mount.
    expect(await readlink(join(app, 'node_modules', 'local-dep'))).toBe('../local-dep');
    expect(await readlink(join(app, 'node_modules', '.bin', 'cloudlib-test-tool'))).toBe('../cloudlib-test-tool/cli.js');
    const ran = await sh(join(app, 'node_modules', '.bin', 'cloudlib-test-tool'), [], { cwd: app, timeoutMs: T });
    expect(ran.stdout.trim()).toBe('the tool ran');
    const required = await sh('node', ['-e', 'console.log(require("local-dep"))'], { cwd: app, timeoutMs: T });
    expect(required.stdout.trim()).toBe('from the local dependency');
    // A second install finds everything in place.
    await sh('npm', ['install', '--offline', '--no-audit', '--no-fund', '--silent'], { cwd: app, env, timeoutMs: T });
    expect(await readlink(join(app, 'node_modules', 'local-dep'))).toBe('../local-dep');
  }, T);

  it('chown to another owner shows it', async () => {
    await writeFile(join(lib, 'owned'), 'x');
    await sh('chown', ['1234:5678', join(lib, 'owned')]);
    const st = await stat(join(lib, 'owned'));
    expect([st.uid, st.gid]).toEqual([1234, 5678]);
  }, T);

  it('a file changed by another client shows its new content and size', async () => {
    await writeFile(join(lib, 'shared.txt'), 'first version');
    expect(await readFile(join(lib, 'shared.txt'), 'utf8')).toBe('first version');
    await h.call('remoteWrite', { path: '/Lib/shared.txt', data: Buffer.from('second version, longer').toString('base64') });
    const text = await eventually('the new content shows', async () => {
      const t = await readFile(join(lib, 'shared.txt'), 'utf8');
      return t === 'second version, longer' ? t : undefined;
    }, 5_000);
    expect(text).toBe('second version, longer');
    expect((await stat(join(lib, 'shared.txt'))).size).toBe(22);
  }, T);

  it('a file unlinked while open stays readable and writable through its descriptor, and is gone after close', async () => {
    const f = join(lib, 'open-unlinked.txt');
    await writeFile(f, 'still here');
    const fh = await open(f, 'r+');
    try {
      await sh('rm', [f]);
      await expect(stat(f)).rejects.toMatchObject({ code: 'ENOENT' });
      const buf = Buffer.alloc(10);
      await fh.read(buf, 0, 10, 0);
      expect(buf.toString()).toBe('still here');
      await fh.write('STILL', 0);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await eventually('no hidden file left', async () => ((await h.call<string[]>('remoteList', { path: '/Lib' })).some((n) => n.startsWith('.fuse_hidden')) ? undefined : true), 5_000);
    expect(await h.call('remoteStat', { path: '/Lib/open-unlinked.txt' })).toBeNull();
  }, T);

  it('mv -n does not replace an existing file', async () => {
    await writeFile(join(lib, 'keep-a'), 'a');
    await writeFile(join(lib, 'keep-b'), 'b');
    await sh('mv', ['-n', join(lib, 'keep-a'), join(lib, 'keep-b')]).catch(() => undefined);
    expect(await readFile(join(lib, 'keep-b'), 'utf8')).toBe('b');
  }, T);
});
