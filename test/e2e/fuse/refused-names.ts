/**
 * Names the service refuses, created through the mount: each fails at its open(O_CREAT) with its errno,
 * in a folder made through the mount (whose names the engine knows, so it answers creates there) and in
 * one it does not know, and nothing is made. Shared by the suites of each write mode.
 */
import { constants } from 'node:fs';
import { mkdir, open, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { MountHarness } from './harness.js';

/** Names the service refuses: what each is, its bytes, and the errno its create fails with. */
export const REFUSED: Array<[string, Buffer, string]> = [
  ['256 bytes', Buffer.from('h'.repeat(256)), 'ENAMETOOLONG'],
  ['258 bytes of UTF-8', Buffer.from('é'.repeat(129)), 'ENAMETOOLONG'],
  ['an encoded surrogate', Buffer.from([0x61, 0xed, 0xa0, 0x80]), 'EILSEQ'],
];

export async function expectRefusedNamesFail(h: MountHarness, folder: string): Promise<void> {
  const fresh = join(h.mnt, 'Lib', folder);
  await mkdir(fresh);
  // A create through the mount: the engine now holds the folder's names and answers creates there.
  await writeFile(join(fresh, 'known.txt'), 'x');
  for (const dir of [fresh, join(h.mnt, 'Lib')]) {
    for (const [what, name, code] of REFUSED) {
      const path = Buffer.concat([Buffer.from(`${dir}/`), name]);
      const err = await open(path, constants.O_CREAT | constants.O_WRONLY, 0o644).then(
        async (fh) => {
          await fh.write('data').finally(() => fh.close());
          return undefined;
        },
        (e: NodeJS.ErrnoException) => e,
      );
      expect(err?.code, `create of ${what} in ${dir}`).toBe(code);
    }
  }
  const flushed = await h.call('flushAll').then(() => undefined, (e: Error) => e);
  expect(flushed).toBeUndefined();
  expect(await readdir(fresh)).toEqual(['known.txt']);
  const names = await h.call<string[]>('remoteList', { path: `/Lib/${folder}` });
  expect(names).toEqual(['known.txt']);
}
