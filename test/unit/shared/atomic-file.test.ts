import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { replaceFile, writeFileAtomic, type Durability } from '../../../src/shared/atomic-file.js';

let dir: string;
beforeEach(async () => { dir = await mkdtemp(join(tmpdir(), 'cloudlib-atomic-')); });
afterEach(async () => { await rm(dir, { recursive: true, force: true }); });

describe('writeFileAtomic', () => {
  it.each<Durability>(['rename', 'fsync-file', 'fsync-file-and-folder'])('replaces the file whole (%s), leaving no temporary file', async (durability) => {
    const file = join(dir, 'state.json');
    await writeFile(file, 'old');
    await writeFileAtomic(file, 'new content', { durability });
    expect(await readFile(file, 'utf8')).toBe('new content');
    expect(await readdir(dir)).toEqual(['state.json']);
  });

  it('gives the file the mode asked for, whatever the umask', async () => {
    const file = join(dir, 'secret.json');
    const before = process.umask(0o000);
    try {
      await writeFileAtomic(file, '{}', { durability: 'rename', mode: 0o600 });
    } finally {
      process.umask(before);
    }
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });
});

describe('replaceFile', () => {
  it('writes a stream under the temporary name, then renames it into place', async () => {
    const file = join(dir, 'download.bin');
    await replaceFile(file, (_fh, tmp) => pipeline(Readable.from([Buffer.from('abc'), Buffer.from('def')]), createWriteStream(tmp, { flags: 'w' })), { durability: 'fsync-file' });
    expect(await readFile(file, 'utf8')).toBe('abcdef');
    expect(await readdir(dir)).toEqual(['download.bin']);
  });

  it('keeps the old file and removes the temporary one when writing fails', async () => {
    const file = join(dir, 'kept.txt');
    await writeFile(file, 'old');
    await expect(replaceFile(file, async (fh) => { await fh.writeFile('part'); throw new Error('source failed'); }, { durability: 'fsync-file-and-folder' })).rejects.toThrow('source failed');
    expect(await readFile(file, 'utf8')).toBe('old');
    expect(await readdir(dir)).toEqual(['kept.txt']);
  });
});
