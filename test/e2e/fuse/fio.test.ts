/**
 * fio through the mount with its verify machinery (a crc32c header in every block, read back and checked):
 * sequential and random writes, with and without fsync every 32 writes, two jobs at once. What the mount
 * holds and what the service gets are checked; an fsync makes the file durable, not a version, so a
 * database-like writer (random 4 KiB writes, fsync after every 32) leaves one version on the service,
 * made at its close.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sh, startMount, type MountHarness } from './harness.js';

const T = 240_000;
const SIZE = '16m';

async function sha1Of(path: string): Promise<string> {
  const h = createHash('sha1');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest('hex');
}

describe('fio --verify through the mount', () => {
  let h: MountHarness;
  let dir: string;
  beforeAll(async () => {
    // Uploads wait for a close (or a flush), as with the default delay: an fsync must not upload.
    h = await startMount({ mount: { attrTimeoutS: 1 }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_UPLOAD_DELAY_MS: '600000' } });
    dir = join(h.mnt, 'Lib', 'fio');
    await mkdir(dir);
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  const fio = (name: string, args: string[]): Promise<{ stdout: string }> =>
    sh('fio', [`--name=${name}`, `--directory=${dir}`, `--size=${SIZE}`, '--ioengine=psync', '--verify=crc32c', '--verify_fatal=1', '--do_verify=1', '--verify_state_save=0', '--numjobs=2', '--group_reporting', ...args], { timeoutMs: T - 30_000 });

  for (const fsync of [false, true]) {
    it(`random 4 KiB writes and sequential 1 MiB writes verify${fsync ? ', with an fsync every 32 writes' : ''}; the service gets what the mount holds, one version a file`, async () => {
      const extra = fsync ? ['--fsync=32'] : [];
      const tag = fsync ? 'fsync' : 'plain';
      const rand = await fio(`rand-${tag}`, ['--rw=randwrite', '--bs=4k', '--randrepeat=1', ...extra]);
      expect(rand.stdout).not.toMatch(/verify: bad|bad magic|verify failed/);
      const seq = await fio(`seq-${tag}`, ['--rw=write', '--bs=1m', ...extra]);
      expect(seq.stdout).not.toMatch(/verify: bad|bad magic|verify failed/);
      await h.call('flushAll');
      for (const job of [`rand-${tag}.0.0`, `rand-${tag}.1.0`, `seq-${tag}.0.0`]) {
        const local = await sha1Of(join(dir, job));
        const remote = createHash('sha1').update(Buffer.from(await h.call<string>('remoteRead', { path: `/Lib/fio/${job}` }), 'base64')).digest('hex');
        expect(remote, job).toBe(local);
        // Made at the close: no version for each fsync.
        expect(await h.call<number[]>('remoteHistory', { path: `/Lib/fio/${job}` }), job).toHaveLength(1);
      }
    }, T);
  }
});
