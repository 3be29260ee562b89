/**
 * Failures the reference model through a mount (reference-model.test.ts) found, each kept as a test of
 * its own: a mount with the engine's answers and, where the kernel grants it, passthrough on.
 */
import { constants } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat, statfs, unlink, writeFile } from 'node:fs/promises';
import { release } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, smallDisk, startMount, type MountHarness } from './harness.js';

const T = 60_000;
const [major, minor] = release().split('.').map(Number) as [number, number];
/** Passthrough needs Linux 6.9 and CAP_SYS_ADMIN (root here). */
const passthrough = (major > 6 || (major === 6 && minor >= 9)) && process.getuid?.() === 0;
const root = process.getuid?.() === 0;

/** Opens `path` as a program writing a file anew does (O_CREAT, O_TRUNC), writes `data` at its start and closes it. */
async function writeClose(path: string, data: string | Buffer): Promise<void> {
  const fh = await open(path, constants.O_CREAT | constants.O_WRONLY | constants.O_TRUNC, 0o644);
  try {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    await fh.write(bytes, 0, bytes.length, 0);
  } finally {
    await fh.close();
  }
}

describe('regressions the reference model found', () => {
  let h: MountHarness;
  beforeAll(async () => {
    // The engine's names of a folder stay valid all through (no pause of a busy machine lets them lapse).
    h = await startMount({ mount: { attrTimeoutS: 600, ...(passthrough ? { writeMode: 'passthrough' } : {}) }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_UPLOAD_DELAY_MS: '600000' } });
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('regression: a create the engine answered of a name another front end made meanwhile opens that file emptied: no EEXIST at close', async () => {
    const folder = join(h.mnt, 'Lib', 'made-meanwhile');
    await mkdir(folder);
    // The engine holds the folder's names: it answers this lookup, and the create below, itself.
    await expect(stat(join(folder, 'f.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    await h.call('vfsWrite', { path: '/Lib/made-meanwhile/f.txt', data: Buffer.from('by another front end').toString('base64') });
    const creates = async (): Promise<number> => (await h.call<{ answered: { creates: number } }>('mountCounters')).answered.creates;
    const before = await creates();
    await writeClose(join(folder, 'f.txt'), 'through the mount');
    expect(await creates()).toBe(before + 1);
    expect(await readFile(join(folder, 'f.txt'), 'utf8')).toBe('through the mount');
    await h.call('flushAll');
    expect(Buffer.from(await h.call<string>('remoteRead', { path: '/Lib/made-meanwhile/f.txt' }), 'base64').toString()).toBe('through the mount');
  }, T);

  for (const first of ['', 'the first bytes']) {
    it(`regression: a new file ${first ? 'written' : 'left empty'}, fsynced and kept open, replaced through the gateway, then closed unwritten: the replace stays`, async () => {
      const folder = join(h.mnt, 'Lib', `replaced-open-${first.length}`);
      await mkdir(folder);
      const path = join(folder, 'a.txt');
      const fh = await open(path, constants.O_CREAT | constants.O_WRONLY | constants.O_TRUNC, 0o644);
      try {
        if (first) await fh.write(Buffer.from(first), 0, first.length, 0);
        await fh.sync();
        await h.call('vfsWrite', { path: `/Lib/replaced-open-${first.length}/a.txt`, data: Buffer.from('the replace').toString('base64') });
      } finally {
        await fh.close();
      }
      expect(await readFile(path, 'utf8')).toBe('the replace');
      await h.call('flushAll');
      expect(Buffer.from(await h.call<string>('remoteRead', { path: `/Lib/replaced-open-${first.length}/a.txt` }), 'base64').toString()).toBe('the replace');
    }, T);
  }

  // The feed brings the delete of the object a name held before: once applied to the name, whatever held
  // it now, so the kernel was told the file there was deleted, and an open meanwhile answered ENOENT.
  it('regression: a rename over a name, and a name written anew after an unlink, are not told to the kernel as deleted when the feed brings the old object\'s delete', async () => {
    const folder = join(h.mnt, 'Lib', 'replaced-names');
    await mkdir(folder);
    const deletes = async (): Promise<number> => (await h.call<{ elsewhere: { deletes: number } }>('mountCounters')).elsewhere.deletes;
    const write = (name: string, data: string): Promise<void> => writeClose(join(folder, name), data);
    await write('over.log', 'the object renamed over');
    await write('moved.txt', 'the object moved');
    await write('again.txt', 'the object unlinked');
    await h.call('flushAll');
    await h.call('refresh');
    const before = await deletes();
    await rename(join(folder, 'moved.txt'), join(folder, 'over.log'));
    await unlink(join(folder, 'again.txt'));
    await write('again.txt', 'written anew');
    await h.call('flushAll');
    const inos = [(await stat(join(folder, 'over.log'))).ino, (await stat(join(folder, 'again.txt'))).ino];
    // Every change above is on the service and brought by the feed once this poll is done.
    await h.call('refresh');
    expect(await deletes(), 'deletes told to the kernel').toBe(before);
    expect([(await stat(join(folder, 'over.log'))).ino, (await stat(join(folder, 'again.txt'))).ino], 'the inodes of the names').toEqual(inos);
    expect(await readFile(join(folder, 'over.log'), 'utf8')).toBe('the object moved');
    expect(await readFile(join(folder, 'again.txt'), 'utf8')).toBe('written anew');
  }, T);

  // The kernel writes the spool the engine made for the file, which the Vfs cannot take over (the version
  // at the name is another writer's): once the close answered EIO, or lost the mount's bytes; then (seed 19
  // of the model) the other writer's close, after the mount's, left the file empty.
  it.runIf(passthrough)('regression: a file the engine created with passthrough at a name made meanwhile elsewhere and held open there keeps the mount\'s bytes, in the file both share', async () => {
    const folder = join(h.mnt, 'Lib', 'held-elsewhere');
    await mkdir(folder);
    const creates = async (): Promise<number> => (await h.call<{ answered: { creates: number } }>('mountCounters')).answered.creates;
    // A small file (its close answered by the engine, its bytes in the record) and a larger one (closed by JavaScript).
    for (const [name, size] of [['small.bin', 5000], ['large.bin', 300_000]] as const) {
      const path = `/Lib/held-elsewhere/${name}`;
      // The engine holds the folder's names: it answers this lookup, and the create below, itself.
      await expect(stat(join(folder, name))).rejects.toMatchObject({ code: 'ENOENT' });
      // Another front end makes the name and keeps it open, past what the Vfs holds in memory written.
      await h.call('vfsHold', { path, data: Buffer.alloc(100_000, 'w').toString('base64') });
      const mine = Buffer.alloc(size, name[0]!);
      const before = await creates();
      await writeClose(join(folder, name), mine);
      expect(await creates(), `the create of ${name} answered by the engine`).toBe(before + 1);
      expect((await readFile(join(folder, name))).equals(mine), `${name} through the mount after its close`).toBe(true);
      // The other writer writes on after it, at its end, and closes: as one open file on a local disk.
      await h.call('vfsHeldWrite', { path, at: size, data: Buffer.from('Z').toString('base64') });
      await h.call('vfsRelease', { path });
      await h.call('flushAll');
      const both = Buffer.concat([mine, Buffer.from('Z')]);
      expect(Buffer.from(await h.call<string>('remoteRead', { path }), 'base64').equals(both), `${name} on the service`).toBe(true);
    }
  }, T);

  // Writers at once on a name (seed 19 of the model): the engine created the file with passthrough while
  // another front end's replace made the name, so the open emptied that version in a new one, which took
  // the id of the engine's spool yet could not take the spool over. Two owners of one file: the version,
  // sealed empty at the other mount writer's close, was then let go of and its spool emptied for reuse,
  // the kernel's bytes with it, and the last close saved the file empty.
  it.runIf(passthrough)('regression: a file the engine created at a name replaced meanwhile, written by two mount writers: the last write stays', async () => {
    const folder = join(h.mnt, 'Lib', 'replaced-at-create');
    await mkdir(folder);
    const name = 'c';
    const creates = async (): Promise<number> => (await h.call<{ answered: { creates: number } }>('mountCounters')).answered.creates;
    // The engine holds the folder's names: it answers this lookup, and the create below, itself.
    await expect(stat(join(folder, name))).rejects.toMatchObject({ code: 'ENOENT' });
    // Made elsewhere, on the service, then replaced there again: the version at the name has a base.
    await h.call('vfsWrite', { path: `/Lib/replaced-at-create/${name}`, data: Buffer.from('by another front end').toString('base64') });
    await h.call('flushAll');
    await h.call('vfsWrite', { path: `/Lib/replaced-at-create/${name}`, data: Buffer.from('and again').toString('base64') });
    const before = await creates();
    const first = await open(join(folder, name), constants.O_CREAT | constants.O_WRONLY | constants.O_TRUNC, 0o644);
    const second = await open(join(folder, name), constants.O_WRONLY | constants.O_TRUNC);
    try {
      await first.write(Buffer.from('the first writer'), 0, 16, 0);
      await second.write(Buffer.from('the later writer'), 0, 16, 0);
    } finally {
      await second.close();
      await first.close();
    }
    expect(await creates(), 'the create answered by the engine').toBe(before + 1);
    expect(await readFile(join(folder, name), 'utf8')).toBe('the later writer');
    await h.call('flushAll');
    expect(Buffer.from(await h.call<string>('remoteRead', { path: `/Lib/replaced-at-create/${name}` }), 'base64').toString()).toBe('the later writer');
  }, T);
});

// The data folder on a small tmpfs of its own (mounting one needs root).
describe.runIf(root)('regressions the reference model found, the data folder nearly full', () => {
  let h: MountHarness | undefined;
  let disk: { path: string; remove: () => Promise<void> } | undefined;
  beforeAll(async () => {
    disk = await smallDisk(24);
    h = await startMount({ mount: { attrTimeoutS: 600, ...(passthrough ? { writeMode: 'passthrough' } : {}) }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_UPLOAD_DELAY_MS: '600000', FUSE_TEST_DATA_PARENT: disk.path } });
  }, T);
  afterAll(async () => {
    await h?.stop();
    await disk?.remove();
  }, T);
  const answeredCloses = async (): Promise<number> => (await h!.call<{ answered: { closes: number } }>('mountCounters')).answered.closes;
  /** Holds the mount's JavaScript still (the engine answers on) until `release` exists. */
  const holdJavaScript = async (marker: string, release: string): Promise<void> => {
    await h!.call('stall', { ms: 30_000, marker, release });
    await eventually('JavaScript is held still', async () => ((await stat(marker).catch(() => undefined)) ? true : undefined), 15_000);
  };
  /** Fills the small disk to its last block with `filler`. */
  const fillDisk = async (filler: string): Promise<void> => {
    const fill = await open(filler, 'w');
    try {
      for (const size of [1024 * 1024, 4096]) {
        const chunk = Buffer.alloc(size, 1);
        while (await fill.write(chunk).then(() => true, (e: NodeJS.ErrnoException) => { if (e.code !== 'ENOSPC') throw e; return false; }));
      }
    } finally {
      await fill.close();
    }
  };

  it('regression: with little room left the engine answers no close (the writer hears the disk): a file whose close succeeded stays', async () => {
    const folder = join(h!.mnt, 'Lib', 'nearly-full');
    await mkdir(folder);
    const write = (name: string, data: string): Promise<void> => writeClose(join(folder, name), data);
    // With room, the engine answers a small new file's close itself.
    const before = await answeredCloses();
    await write('roomy.txt', 'written with room');
    expect(await answeredCloses(), 'a close the engine answered with room').toBe(before + 1);
    // Less than its minimum free (4 MiB) left: the close is JavaScript's, which journals the file first.
    const st = await statfs(disk!.path);
    const free = Number(st.bfree) * Number(st.bsize);
    await writeFile(join(disk!.path, 'filler'), Buffer.alloc(Math.max(0, free - 1024 * 1024)));
    let closed: string | undefined;
    try {
      // JavaScript's answer: saved, or ENOSPC (below the minimum a file the kernel writes is refused).
      closed = await write('tight.txt', 'written with 1 MiB left').then(() => 'saved', (e: NodeJS.ErrnoException) => e.code);
      expect(['saved', 'ENOSPC'], 'the close of a file with 1 MiB free').toContain(closed);
      expect(await answeredCloses(), 'no close answered by the engine with 1 MiB free').toBe(before + 1);
    } finally {
      await rm(join(disk!.path, 'filler'));
    }
    await h!.call('flushAll');
    if (closed === 'saved') {
      expect(await readFile(join(folder, 'tight.txt'), 'utf8')).toBe('written with 1 MiB left');
      expect(Buffer.from(await h!.call<string>('remoteRead', { path: '/Lib/nearly-full/tight.txt' }), 'base64').toString()).toBe('written with 1 MiB left');
    }
    expect(Buffer.from(await h!.call<string>('remoteRead', { path: '/Lib/nearly-full/roomy.txt' }), 'base64').toString()).toBe('written with room');
  }, T);

  it('regression: a close the engine answered stays saved and shown when the disk fills before JavaScript applies it', async () => {
    const folder = join(h!.mnt, 'Lib', 'filled-after');
    await mkdir(folder);
    await stat(folder);
    const before = await answeredCloses();
    // Past a page: the journal's line of it needs new blocks (a smaller one may fit in the log's last page).
    const data = Buffer.alloc(60_000, 'f');
    const marker = join(h!.local, 'stalled-filled-after');
    const release = join(h!.local, 'release-filled-after');
    await holdJavaScript(marker, release);
    const filler = join(disk!.path, 'filler-after-close');
    try {
      // Answered by the engine (JavaScript is held still), then the disk filled to its last block.
      const fh = await open(join(folder, 'answered.bin'), constants.O_CREAT | constants.O_WRONLY | constants.O_TRUNC, 0o644);
      try {
        await fh.write(data);
      } finally {
        await fh.close();
      }
      await fillDisk(filler);
      // JavaScript applies the close on the full disk.
      await writeFile(release, '');
      expect(await answeredCloses(), 'the close answered by the engine').toBe(before + 1);
      expect((await readFile(join(folder, 'answered.bin'))).equals(data), 'the file read back on the full disk').toBe(true);
    } finally {
      await writeFile(release, '').catch(() => undefined);
      await rm(filler, { force: true });
    }
    await h!.call('flushAll');
    expect((await readFile(join(folder, 'answered.bin'))).equals(data), 'the file read back after a flush').toBe(true);
    expect(Buffer.from(await h!.call<string>('remoteRead', { path: '/Lib/filled-after/answered.bin' }), 'base64').equals(data), 'on the service').toBe(true);
  }, T);

  it('regression: a close the engine answered of a file JavaScript had seen created stays saved when the disk fills before it is applied', async () => {
    const folder = join(h!.mnt, 'Lib', 'seen-then-filled');
    await mkdir(folder);
    await stat(folder);
    const before = await answeredCloses();
    const data = Buffer.alloc(60_000, 's');
    const fh = await open(join(folder, 'seen.bin'), constants.O_CREAT | constants.O_WRONLY | constants.O_TRUNC, 0o644);
    const filler = join(disk!.path, 'filler-seen');
    const marker = join(h!.local, 'stalled-seen');
    const release = join(h!.local, 'release-seen');
    try {
      await fh.write(data);
      // JavaScript has the create (the Vfs knows the file) before the close.
      await eventually('the create applied', async () => h!.call('localStat', { path: '/Lib/seen-then-filled/seen.bin' }).then(() => true, () => undefined), 15_000);
      await holdJavaScript(marker, release);
    } finally {
      await fh.close();
    }
    try {
      await fillDisk(filler);
      await writeFile(release, '');
      expect(await answeredCloses(), 'the close answered by the engine').toBe(before + 1);
      expect((await readFile(join(folder, 'seen.bin'))).equals(data), 'the file read back on the full disk').toBe(true);
    } finally {
      await writeFile(release, '').catch(() => undefined);
      await rm(filler, { force: true });
    }
    await h!.call('flushAll');
    expect(Buffer.from(await h!.call<string>('remoteRead', { path: '/Lib/seen-then-filled/seen.bin' }), 'base64').equals(data), 'on the service').toBe(true);
  }, T);
});
