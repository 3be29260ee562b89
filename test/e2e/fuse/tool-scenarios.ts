/**
 * What programs do on a mount, shared by the tests that run them over each backend (mount.test.ts over
 * the in-memory Vfs, service.test.ts over the embedded service): each does the work through the mount
 * and checks what the mount shows; the test checks what its backend holds.
 */
import { mkdir, open, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { sh } from './harness.js';

/** An editor's save in `lib`: `doc.txt` written, then replaced by a temporary file written, fsynced and renamed over it. */
export async function editorSave(lib: string, content: string): Promise<void> {
  const target = join(lib, 'doc.txt');
  await writeFile(target, 'version 1');
  const tmp = join(lib, '.doc.txt.swp');
  const fh = await open(tmp, 'w');
  await fh.writeFile(content);
  await fh.sync();
  await fh.close();
  await rename(tmp, target);
}

/**
 * A repository of `files` files (and an executable script) made in `local` with `commits` commits, cloned
 * into `lib/clone`: its status is clean and its files are the repository's.
 */
export async function gitCloneInto(local: string, lib: string, opts: { files: number; commits: 1 | 2; timeoutMs: number }): Promise<string> {
  const repo = join(local, 'repo');
  const clone = join(lib, 'clone');
  const git = (args: string[], cwd: string) => sh('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', '-c', 'init.defaultBranch=main', ...args], { cwd, timeoutMs: opts.timeoutMs });
  await mkdir(join(repo, 'src'), { recursive: true });
  for (let i = 0; i < opts.files; i++) await writeFile(join(repo, 'src', `f${i}.txt`), `line ${i}\n`.repeat(i * 50 + 1));
  await writeFile(join(repo, 'run.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
  await git(['init', '-q'], repo);
  await git(['add', '.'], repo);
  await git(['commit', '-q', '-m', 'one'], repo);
  if (opts.commits === 2) {
    await writeFile(join(repo, 'src/f1.txt'), 'changed\n');
    await git(['commit', '-q', '-am', 'two'], repo);
  }
  await git(['clone', '-q', `file://${repo}`, clone], local);
  expect((await git(['status', '--porcelain'], clone)).stdout, 'git status of the clone').toBe('');
  expect((await git(['log', '--oneline'], clone)).stdout.trim().split('\n')).toHaveLength(opts.commits);
  await sh('diff', ['-r', '--exclude=.git', repo, clone]);
  return clone;
}

/**
 * A tree of `dirs` folders (each with a `sub` folder) of `files` files each, archived in `local` and
 * extracted into `lib/x`: the same files through the mount. Answers the local tree's path.
 */
export async function tarExtractInto(local: string, lib: string, opts: { dirs: number; files: number }): Promise<string> {
  const tree = join(local, 'tree');
  for (let d = 0; d < opts.dirs; d++) {
    await mkdir(join(tree, `d${d}`, 'sub'), { recursive: true });
    for (let f = 0; f < opts.files; f++) await writeFile(join(tree, `d${d}`, f % 2 ? 'sub' : '', `file${f}.dat`), Buffer.alloc(f * 1000 + d, d + f));
  }
  const archive = join(local, 'tree.tar');
  await sh('tar', ['-cf', archive, '-C', local, 'tree']);
  await mkdir(join(lib, 'x'));
  await sh('tar', ['-xf', archive, '-C', join(lib, 'x'), '--no-same-owner', '--no-same-permissions']);
  await sh('diff', ['-r', tree, join(lib, 'x/tree')]);
  return tree;
}
