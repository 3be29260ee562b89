/** rclone against the WebDAV server: copy a tree in, `rclone check` it back out (content compared). */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
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
});
