/**
 * rclone against the WebDAV server: copy a tree in, `rclone check` it back out (content compared); with
 * the owncloud vendor, hashes without downloading and a sync that keeps times (X-OC-Mtime).
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdir, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startMemoryDav, type MemoryDav } from '../../support/serve-memory-dav.js';

const run = promisify(execFile);
const haveRclone = spawnSync('rclone', ['version']).error === undefined;

describe.skipIf(!haveRclone)('rclone against the WebDAV server', { timeout: 60_000 }, () => {
  let d: MemoryDav;
  let src: string;
  beforeAll(async () => {
    d = await startMemoryDav();
    src = await mkdtemp(join(tmpdir(), 'cloudlib-rclone-'));
    for (const dir of ['a', 'a/b', 'c d', 'ünïcode']) await mkdir(join(src, dir), { recursive: true });
    const files = ['top.txt', 'a/one.bin', 'a/b/two.bin', 'c d/with space.txt', 'ünïcode/é.txt', 'a/empty.txt'];
    for (const [i, f] of files.entries()) await writeFile(join(src, f), f === 'a/empty.txt' ? Buffer.alloc(0) : randomBytes(1000 * (i + 1) * (i + 1)));
  });
  afterAll(async () => {
    await d?.close();
    if (src) await rm(src, { recursive: true, force: true });
  });

  it('copies a tree in and checks it back out', async () => {
    const remote = [`--webdav-url=${d.url}Library/`, '--webdav-user=alice', `--webdav-pass=${(await run('rclone', ['obscure', 'secret'])).stdout.trim()}`, '--webdav-vendor=other'];
    const opts = ['--config=/dev/null', '--retries=1', '--low-level-retries=1'];
    await run('rclone', ['copy', src, ':webdav:tree', ...remote, ...opts]);
    await d.vfs.flushAll();
    const check = await run('rclone', ['check', src, ':webdav:tree', '--download', ...remote, ...opts]).catch((e: { stdout: string; stderr: string; code: number }) => e);
    expect('code' in check ? check.stderr : '').toBe('');
    const { stdout } = await run('rclone', ['lsf', '-R', ':webdav:tree', ...remote, ...opts]);
    expect(stdout.split('\n').filter(Boolean).sort()).toEqual(['a/', 'a/b/', 'a/b/two.bin', 'a/empty.txt', 'a/one.bin', 'c d/', 'c d/with space.txt', 'top.txt', 'ünïcode/', 'ünïcode/é.txt'].sort());
  });

  it('reads the SHA-1 of each file (ownCloud\'s checksums property) and checks hashes without downloading; an unlimited quota has no total', async () => {
    const remote = [`--webdav-url=${d.url}Library/`, '--webdav-user=alice', `--webdav-pass=${(await run('rclone', ['obscure', 'secret'])).stdout.trim()}`, '--webdav-vendor=owncloud'];
    const opts = ['--config=/dev/null', '--retries=1', '--low-level-retries=1'];
    await run('rclone', ['copy', src, ':webdav:hashed', ...remote, ...opts]);
    await d.vfs.flushAll();
    const local = (await run('rclone', ['sha1sum', src, ...opts])).stdout.split('\n').filter(Boolean).sort();
    const served = (await run('rclone', ['sha1sum', ':webdav:hashed', ...remote, ...opts])).stdout.split('\n').filter(Boolean).sort();
    expect(served).toEqual(local);
    expect(served.length).toBe(6);
    // `rclone check` picks MD5 first, which the service does not keep: a SHA-1 sum file checks instead.
    await writeFile(join(d.dataDir, 'sums.sha1'), local.join('\n') + '\n');
    const check = await run('rclone', ['checksum', 'sha1', join(d.dataDir, 'sums.sha1'), ':webdav:hashed', ...remote, ...opts]).catch((e: { stdout: string; stderr: string; code: number }) => e);
    expect('code' in check ? check.stderr : '').toBe('');
    expect(check.stderr).toMatch(/0 differences found/);
    expect(check.stderr).toMatch(/6 matching files/);
    expect(check.stderr).not.toMatch(/could not be checked/);
    const about = (await run('rclone', ['about', ':webdav:', ...remote, ...opts])).stdout;
    expect(about).toMatch(/Used:/);
    expect(about).not.toMatch(/Total|Free|Pi/);
  });
  it('syncs with the owncloud vendor keeping times (X-OC-Mtime): a second sync transfers nothing', async () => {
    const remote = [`--webdav-url=${d.url}Library/`, '--webdav-user=alice', `--webdav-pass=${(await run('rclone', ['obscure', 'secret'])).stdout.trim()}`, '--webdav-vendor=owncloud'];
    const opts = ['--config=/dev/null', '--retries=1', '--low-level-retries=1', '--stats-one-line', '--stats=0', '-v'];
    const sync = async (): Promise<string> => (await run('rclone', ['sync', src, ':webdav:synced', ...remote, ...opts])).stderr;
    const lib = d.remotes.get('Library')!;
    const versions = async (): Promise<number[]> => Promise.all(lib.paths().filter((p) => p.startsWith('synced/')).sort().map(async (p) => (await lib.history(p, 100)).length));

    // Times well before the upload: a server that kept the upload's own time would differ from them.
    for (const f of ['top.txt', 'a/one.bin', 'a/b/two.bin', 'c d/with space.txt', 'ünïcode/é.txt', 'a/empty.txt']) await utimes(join(src, f), 1_600_000_000.5, 1_600_000_000.5);
    const first = await sync();
    expect(first.match(/Copied \(new\)/g)).toHaveLength(6);
    await d.vfs.flushAll();
    const before = await versions();
    expect(before).toHaveLength(10); // 6 files, 4 folders

    const second = await sync();
    expect(second).not.toMatch(/Copied|Updated|Deleted/);
    expect(second).toMatch(/There was nothing to transfer/);
    await d.vfs.flushAll();
    expect(await versions()).toEqual(before);

    // A file changed since is the one sent again: the sync compares, it does not just skip.
    await writeFile(join(src, 'top.txt'), 'changed');
    await utimes(join(src, 'top.txt'), 1_700_000_000, 1_700_000_000);
    const third = await sync();
    expect(third.match(/Copied \(replaced existing\)/g)).toHaveLength(1);
    expect(third).toMatch(/top\.txt: Copied/);
    await d.vfs.flushAll();
    const check = await run('rclone', ['check', src, ':webdav:synced', ...remote, ...opts]).catch((e: { stdout: string; stderr: string; code: number }) => e);
    expect('code' in check ? check.stderr : '').toBe('');
    expect(check.stderr).toMatch(/0 differences found/);
    expect(check.stderr).toMatch(/6 matching files/);
    const local = (await run('rclone', ['sha1sum', src, '--config=/dev/null'])).stdout.split('\n').filter(Boolean).sort();
    expect((await run('rclone', ['sha1sum', ':webdav:synced', ...remote, '--config=/dev/null'])).stdout.split('\n').filter(Boolean).sort()).toEqual(local);
  });
});
