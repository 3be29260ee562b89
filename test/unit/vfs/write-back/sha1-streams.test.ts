import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sha1Streams } from '../../../../src/vfs/write-back/sha1-streams.js';
import { FileHasher } from '../../../../src/vfs/write-back/file-hasher.js';
import { LocalVersion as LocalFile } from '../../../../src/vfs/write-back/local-version.js';

const sha1 = (b: Buffer): string => createHash('sha1').update(b).digest('hex');

describe('Sha1Streams: the SHA-1 of a file kept up to date as it is appended to', () => {
  let dir: string;
  let streams: Sha1Streams;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cloudlib-sha1s-'));
    streams = new Sha1Streams();
  });
  afterAll(async () => {
    await streams.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('hashes each range reported written; a digest mid-way leaves the stream going', async () => {
    const path = join(dir, 'a');
    await writeFile(path, '');
    const s = streams.open(path);
    const parts = [randomBytes(3000), randomBytes(2 * 1024 * 1024 + 17), randomBytes(1)];
    let all = Buffer.alloc(0);
    for (const [i, p] of parts.entries()) {
      await appendFile(path, p);
      all = Buffer.concat([all, p]);
      s.extend(all.length);
      if (i === 0) expect(await s.digest()).toEqual({ sha1: sha1(all), size: all.length });
    }
    expect(await s.digest()).toEqual({ sha1: sha1(all), size: all.length });
    s.close();
    await expect(s.digest()).rejects.toThrow(/closed/);
  });

  it('a range reported beyond the end of the file fails the digest instead of hashing short', async () => {
    const path = join(dir, 'b');
    await writeFile(path, 'abc');
    const s = streams.open(path);
    s.extend(10);
    await expect(s.digest()).rejects.toThrow(/spool ends at 3/);
    s.close();
  });
});

describe('LocalFile with a running SHA-1', () => {
  let dir: string;
  let streams: Sha1Streams;
  let files: FileHasher;
  const counted = { full: 0 };
  const hasher = { hash: (p: string) => { counted.full++; return files.hash(p); } };
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cloudlib-sha1lf-'));
    streams = new Sha1Streams();
    files = new FileHasher();
  });
  afterAll(async () => {
    await streams.close();
    await files.close();
    await rm(dir, { recursive: true, force: true });
  });
  const newFile = async (name: string): Promise<LocalFile> => {
    const spool = join(dir, name);
    const f = new LocalFile(name, spool, 'L', name, undefined, { baseSize: 0, sha1Stream: () => streams.open(spool) });
    await f.startEmpty();
    return f;
  };

  it('a file written front to back is hashed as it is written: the flush makes no second pass', async () => {
    const f = await newFile('seq');
    const data = randomBytes(3 * 1024 * 1024 + 5);
    for (let at = 0; at < data.length; at += 1024 * 1024) await f.write(at, data.subarray(at, at + 1024 * 1024));
    counted.full = 0;
    // A snapshot in the middle uses the running hash too, and appending goes on with it.
    expect((await f.snapshotHash(hasher)).sha1).toBe(sha1(data));
    const more = randomBytes(1000);
    await f.write(data.length, more);
    await f.seal(hasher);
    expect(f.currentSha1()).toBe(sha1(Buffer.concat([data, more])));
    expect(counted.full).toBe(0);
    // Sealed: the bytes never change again.
    await expect(f.write(0, more)).rejects.toMatchObject({ code: 'EIO' });
    await f.closeSpool();
  });

  it('a write elsewhere than the end, or a truncate, falls back to a full pass with the right hash', async () => {
    const f = await newFile('random');
    const data = randomBytes(100_000);
    await f.write(0, data);
    const patch = Buffer.from('patched');
    await f.write(10, patch);
    patch.copy(data, 10);
    counted.full = 0;
    await f.seal(hasher);
    expect(f.currentSha1()).toBe(sha1(data));
    expect(counted.full).toBe(1);

    const g = await newFile('truncated');
    await g.write(0, data);
    await g.truncate(5000);
    expect((await g.snapshotHash(hasher)).sha1).toBe(sha1(data.subarray(0, 5000)));
    // Emptied again (O_TRUNC): a new running hash from there.
    await g.startEmpty();
    g.touch();
    counted.full = 0;
    await g.write(0, patch);
    await g.seal(hasher);
    expect(g.currentSha1()).toBe(sha1(patch));
    expect(counted.full).toBe(0);
    await f.closeSpool();
    await g.closeSpool();
  });
});
