/**
 * The versions view through the FUSE mount, over the gateway's Vfs and a real embedded service (in the
 * mount's child process): `.versions` is found by name but not listed, each version reads byte-exact
 * (whole and a range), and every change inside it is EROFS.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendFile, mkdir, open, readFile, readdir, rename, rm, stat, truncate, unlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sh, startMount, type MountHarness } from './harness.js';

const T = 90_000;

/** The errno code a failing call ends with ('ok' when it does not fail). */
async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return String((err as NodeJS.ErrnoException).code ?? (err as Error).message);
  }
}

describe('versions view through the FUSE mount', () => {
  let h: MountHarness;
  let lib: string;

  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 1 }, env: { FUSE_TEST_BACKEND: 'service' } });
    lib = join(h.mnt, 'Lib');
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('lists the versions of a file, reads each byte-exact and a range; not in the root listing', async () => {
    const first = Buffer.from('first version, from another client');
    await h.call('remoteWrite', { path: '/Lib/docs/report.txt', data: first.toString('base64') });
    const second = Buffer.alloc(300_000);
    for (let i = 0; i < second.length; i++) second[i] = (i * 7 + (i >> 8)) & 0xff;
    expect((await stat(join(lib, 'docs/report.txt'))).size).toBe(first.length);
    await writeFile(join(lib, 'docs/report.txt'), second);
    await h.call('flushAll');

    expect(await readdir(lib)).not.toContain('.versions');
    expect((await stat(join(lib, '.versions'))).isDirectory()).toBe(true);
    expect(await readdir(join(lib, '.versions'))).toContain('docs');
    const names = await readdir(join(lib, '.versions/docs/report.txt'));
    expect(names).toHaveLength(2);
    expect(names.every((n) => /^\d{4}-\d\d-\d\d \d\d\.\d\d\.\d\d .+ [0-9a-f]{7}\.txt$/.test(n))).toBe(true);
    // Both may be of the same second (names then sort by operator): told apart by size.
    const paths = names.map((n) => join(lib, '.versions/docs/report.txt', n));
    const sizes = await Promise.all(paths.map(async (p) => (await stat(p)).size));
    const v1 = paths[sizes.indexOf(first.length)]!;
    const v2 = paths[sizes.indexOf(second.length)]!;
    expect((await readFile(v1)).equals(first)).toBe(true);
    expect((await readFile(v2)).equals(second)).toBe(true);
    const st = await stat(v2);
    expect([st.size, st.mode & 0o222]).toEqual([second.length, 0]);
    const fh = await open(v2, 'r');
    try {
      const buf = Buffer.alloc(1000);
      const { bytesRead } = await fh.read(buf, 0, 1000, 200_000);
      expect(bytesRead).toBe(1000);
      expect(buf.equals(second.subarray(200_000, 201_000))).toBe(true);
    } finally {
      await fh.close();
    }
    await sh('cmp', [v2, join(lib, 'docs/report.txt')]);
  }, T);

  it('refuses every change inside it with EROFS; copying a version back restores it', async () => {
    await writeFile(join(lib, 'a.txt'), 'old');
    await h.call('flushAll');
    await writeFile(join(lib, 'a.txt'), 'new content');
    await h.call('flushAll');
    const folder = join(lib, '.versions/a.txt');
    const [oldName] = await readdir(folder);
    const version = join(folder, oldName!);
    const refusals = {
      write: await code(writeFile(version, 'x')),
      append: await code(appendFile(version, 'x')),
      openRw: await code(open(version, 'r+')),
      truncate: await code(truncate(version, 0)),
      create: await code(writeFile(join(folder, 'new.txt'), 'x')),
      mkdir: await code(mkdir(join(lib, '.versions/newdir'))),
      unlink: await code(unlink(version)),
      rmTree: await code(rm(folder, { recursive: true })),
      renameOut: await code(rename(version, join(lib, 'moved.txt'))),
      renameIn: await code(rename(join(lib, 'a.txt'), join(folder, 'in.txt'))),
      utimes: await code(utimes(version, 1, 1)),
    };
    expect(refusals).toEqual(Object.fromEntries(Object.keys(refusals).map((k) => [k, 'EROFS'])));
    const setxattr = await sh('python3', ['-c', `import os,sys\ntry:\n  os.setxattr(sys.argv[1], 'user.cloudlib.tags', b'red')\nexcept OSError as e: print(e.errno)`, version]);
    expect(setxattr.stdout.trim()).toBe('30');
    expect(await readdir(folder)).toHaveLength(2);
    expect(await readFile(join(lib, 'a.txt'), 'utf8')).toBe('new content');

    await sh('cp', [version, join(lib, 'a.txt')]);
    await h.call('flushAll');
    expect(Buffer.from(await h.call<string>('remoteRead', { path: '/Lib/a.txt' }), 'base64').toString()).toBe('old');
  }, T);
});
