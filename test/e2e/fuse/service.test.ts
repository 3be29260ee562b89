/**
 * The FUSE mount over the gateway's real Vfs and a real embedded service (in the mount's child
 * process): what the mount does is checked through the service's API, and what another client of the
 * service writes shows up on the mount within the feed interval.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { eventually, sh, startMount, type MountHarness } from './harness.js';
import { editorSave, gitCloneInto, tarExtractInto } from './tool-scenarios.js';

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
    await editorSave(lib, 'version 2, longer than before');
    await h.call('flushAll');
    expect((await remoteRead('/Lib/doc.txt')).toString()).toBe('version 2, longer than before');
    expect(await h.call('remoteStat', { path: '/Lib/.doc.txt.swp' })).toBeNull();
  }, T);

  it('git clone into the mount, then git status is clean', async () => {
    await gitCloneInto(h.local, lib, { files: 10, commits: 1, timeoutMs: 60_000 });
  }, T);

  it('tar extract into the mount matches the archive, on the mount and on the service', async () => {
    const tree = await tarExtractInto(h.local, lib, { dirs: 3, files: 6 });
    await h.call('flushAll');
    expect(await h.call<string[]>('remoteList', { path: '/Lib/x/tree/d2/sub' })).toEqual(['file1.dat', 'file3.dat', 'file5.dat']);
    expect((await remoteRead('/Lib/x/tree/d1/file4.dat')).equals(await readFile(join(tree, 'd1/file4.dat')))).toBe(true);
  }, T);
});
