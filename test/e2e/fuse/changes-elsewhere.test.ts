/**
 * Changes made elsewhere (through the service's API) show on the mount as soon as the updates feed brings
 * them: the kernel is told to forget what it cached of the name and the file. The kernel is told to keep
 * names and attributes for an hour here, so only that notification can make a change show within the wait.
 * A delete (and the old name of a move) reaches inotify watches of the file itself (IN_DELETE_SELF); a
 * watch of its folder gets nothing of it (the kernel's delete notification makes no IN_DELETE).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { eventually, startMount, type MountHarness } from './harness.js';
import { waitFor } from '../../support/wait-for.js';

const T = 90_000;
/** What the kernel is told to keep: far longer than any wait here. */
const ATTR_TIMEOUT_S = 3600;
/** The feed's poll interval, ms. */
const POLL_MS = 200;
/** How long a change may take to show: generous on a busy machine, nothing next to ATTR_TIMEOUT_S. */
const SHOW_MS = 15_000;

/**
 * One `inotifywait -m` on `paths` (folders and files, one queue: its lines come in the order the kernel made
 * the events), running once it says its watches are set; `events()` is what it printed so far, as
 * `EVENT path`.
 */
async function watch(paths: string[]): Promise<{ events: () => string[]; stop: () => void }> {
  const child: ChildProcess = spawn('inotifywait', ['-m', '-e', 'delete,delete_self,create,moved_from,moved_to,modify,attrib', '--format', '%e %w%f', ...paths], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr!.on('data', (c: Buffer) => { err += c.toString(); });
  const stop = () => void child.kill('SIGKILL');
  try {
    await waitFor('inotifywait to set its watches', () => err.includes('Watches established'), { timeoutMs: 10_000, stopIf: () => (child.exitCode !== null ? `inotifywait exited: ${err}` : undefined) });
  } catch (e) {
    stop();
    throw e;
  }
  return { events: () => out.split('\n').filter(Boolean), stop };
}

/** Waits until `file` on the mount reads `text` (a file not there yet, or another text, is not done). */
function reads(what: string, file: string, text: string): Promise<true> {
  return eventually(what, async () => ((await readFile(file, 'utf8').catch(() => undefined)) === text ? true : undefined), SHOW_MS);
}

describe('changes made elsewhere show on the mount at once', () => {
  let h: MountHarness;
  let lib: string;
  const put = (path: string, text: string) => h.call('remoteWrite', { path, data: Buffer.from(text).toString('base64') });

  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: ATTR_TIMEOUT_S }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_FEED_INTERVAL_MS: String(POLL_MS) } });
    lib = join(h.mnt, 'Lib');
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('a file changed through the API is read anew, of the same size too (cached pages dropped)', async () => {
    await put('/Lib/note.txt', 'first version');
    const file = join(lib, 'note.txt');
    await reads('the mount to show the first version', file, 'first version');
    await put('/Lib/note.txt', 'other version');
    await reads('the mount to show the second version (same size)', file, 'other version');
    const w = await watch([lib, file]);
    try {
      await put('/Lib/note.txt', 'a third, longer version');
      await reads('the mount to show the third version', file, 'a third, longer version');
      expect((await stat(file)).size).toBe('a third, longer version'.length);
      // Nothing tells inotify of a file changed elsewhere: no MODIFY or ATTRIB before the marker's CREATE.
      await writeFile(join(lib, 'marker0.txt'), 'x');
      await waitFor('inotifywait to report the marker', () => w.events().some((e) => e.startsWith('CREATE ') && e.endsWith('marker0.txt')), { timeoutMs: SHOW_MS, detail: () => w.events().join('\n') });
      expect(w.events().filter((e) => !e.endsWith('marker0.txt'))).toEqual([]);
    } finally {
      w.stop();
    }
  }, T);

  it('a file created through the API is found by a name looked up before it existed', async () => {
    const file = join(lib, 'later.txt');
    // The kernel now keeps "no such entry" for an hour.
    await expect(stat(file)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await readdir(lib)).not.toContain('later.txt');
    await put('/Lib/later.txt', 'made elsewhere');
    await reads('the new name to be found', file, 'made elsewhere');
    expect(await readdir(lib)).toContain('later.txt');
  }, T);

  it('a file written through the mount, back through the feed, tells the kernel nothing', async () => {
    const counters = async () => (await h.call<{ elsewhere: { entries: number; inodes: number; deletes: number } }>('mountCounters')).elsewhere;
    await writeFile(join(lib, 'mine.txt'), 'written here');
    await h.call('flushAll');
    const before = await counters();
    // Made elsewhere after the upload: once the mount shows it, the feed has brought the upload's change too.
    await put('/Lib/sentinel.txt', 'after mine');
    await reads('the mount to show the sentinel', join(lib, 'sentinel.txt'), 'after mine');
    const after = await counters();
    // The sentinel's name and its folder only.
    expect({ entries: after.entries - before.entries, inodes: after.inodes - before.inodes, deletes: after.deletes - before.deletes }).toEqual({ entries: 1, inodes: 1, deletes: 0 });
    expect(await readFile(join(lib, 'mine.txt'), 'utf8')).toBe('written here');
  }, T);

  it('a delete through the API: a watch of the file sees DELETE_SELF, a watch of its folder no DELETE', async () => {
    await put('/Lib/doomed.txt', 'soon gone');
    const file = join(lib, 'doomed.txt');
    await reads('the mount to show the file', file, 'soon gone');
    const w = await watch([lib, file]);
    try {
      await h.call('remoteDelete', { path: '/Lib/doomed.txt' });
      await waitFor('inotifywait to report the file deleted', () => w.events().includes(`DELETE_SELF ${file}`), { timeoutMs: SHOW_MS, detail: () => w.events().join('\n') });
      await expect(stat(file)).rejects.toMatchObject({ code: 'ENOENT' });
      expect(await readdir(lib)).not.toContain('doomed.txt');
      // A file made through the mount after it: its CREATE comes after anything the delete made in the folder's queue.
      await writeFile(join(lib, 'marker.txt'), 'x');
      await waitFor('inotifywait to report the marker', () => w.events().includes(`CREATE ${join(lib, 'marker.txt')}`), { timeoutMs: SHOW_MS, detail: () => w.events().join('\n') });
      expect(w.events().filter((e) => e.startsWith('DELETE '))).toEqual([]);
    } finally {
      w.stop();
    }
  }, T);

  it('a folder deleted through the API is gone from the mount, and a watch of it sees DELETE_SELF', async () => {
    await put('/Lib/gone/inner.txt', 'inside');
    const folder = join(lib, 'gone');
    await reads('the mount to show the folder\'s file', join(folder, 'inner.txt'), 'inside');
    expect(await readdir(folder)).toEqual(['inner.txt']);
    const w = await watch([folder]);
    try {
      await h.call('remoteDelete', { path: '/Lib/gone' });
      await waitFor('inotifywait to report the folder deleted', () => w.events().includes(`DELETE_SELF ${folder}/`), { timeoutMs: SHOW_MS, detail: () => w.events().join('\n') });
      await eventually('the folder to be gone', async () => ((await stat(folder).catch((e: NodeJS.ErrnoException) => e.code)) === 'ENOENT' ? true : undefined), SHOW_MS);
      expect(await readdir(lib)).not.toContain('gone');
    } finally {
      w.stop();
    }
  }, T);

  it('a move through the API: a watch of the old name sees DELETE_SELF, the new name reads the file', async () => {
    await put('/Lib/before.txt', 'moving');
    const was = join(lib, 'before.txt');
    await reads('the mount to show the file', was, 'moving');
    await expect(stat(join(lib, 'after.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    const w = await watch([lib, was]);
    try {
      await h.call('remoteMove', { from: '/Lib/before.txt', to: '/Lib/after.txt' });
      await waitFor('inotifywait to report the old name deleted', () => w.events().includes(`DELETE_SELF ${was}`), { timeoutMs: SHOW_MS, detail: () => w.events().join('\n') });
      await reads('the new name to read the file', join(lib, 'after.txt'), 'moving');
      await expect(stat(was)).rejects.toMatchObject({ code: 'ENOENT' });
      await writeFile(join(lib, 'marker2.txt'), 'x');
      await waitFor('inotifywait to report the marker', () => w.events().includes(`CREATE ${join(lib, 'marker2.txt')}`), { timeoutMs: SHOW_MS, detail: () => w.events().join('\n') });
      // Nothing tells a watch of the folder of a move made elsewhere: no MOVED_FROM, MOVED_TO, DELETE or CREATE.
      expect(w.events().filter((e) => !e.startsWith('DELETE_SELF ') && !e.includes('marker2.txt'))).toEqual([]);
    } finally {
      w.stop();
    }
  }, T);
});
