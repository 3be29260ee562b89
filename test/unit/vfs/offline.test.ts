/**
 * The service goes away: each library goes offline and the gateway keeps serving what it has — listings
 * and attributes it knows (marked stale, not dropped), content in the content cache, new files, edits and
 * folders into the journal — and comes back by itself: the feed resumes from its cursor (what others
 * changed meanwhile shows), the uploads and folders made meanwhile reach the service.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, FaultyRemote, MemoryRemote, type GatewayVfs } from '../../../src/vfs/index.js';
import { readAll, vfsCode } from '../../support/vfs.js';
import { waitFor } from '../../support/wait-for.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function gateway(remote: MemoryRemote, dataDir?: string, uploadDelayMs?: number): Promise<{ vfs: GatewayVfs; faulty: FaultyRemote; dataDir: string }> {
  const dir = dataDir ?? (await mkdtemp(join(tmpdir(), 'cloudlib-offline-')));
  if (!dataDir) cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const faulty = new FaultyRemote(remote);
  // A long feed interval: the test polls with refresh() when it wants to.
  const vfs = await createVfs({ libraries: [{ name: 'A', remote: faulty }], dataDir: dir, feedIntervalMs: 3_600_000, cache: { diskBytes: 64 * 1024 * 1024 }, upload: { retryBaseMs: 20, retryMaxMs: 100, delayMs: uploadDelayMs } });
  cleanups.push(() => vfs.close());
  return { vfs, faulty, dataDir: dir };
}

async function names(vfs: GatewayVfs, path: string): Promise<string[]> {
  return (await vfs.readdir(path)).map((a) => a.name).sort();
}

describe('offline', () => {
  it('serves what it has while the service is away, takes writes and folders into the journal, and catches up when it is back', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('doc.txt', Buffer.from('hello'));
    await remote.mkdir('folder');
    remote.putFile('folder/inner.txt', Buffer.from('inner'));
    const { vfs, faulty } = await gateway(remote);
    // What a user looked at before the outage.
    expect(await names(vfs, '/A')).toEqual(['doc.txt', 'folder']);
    expect(await names(vfs, '/A/folder')).toEqual(['inner.txt']);
    expect(await readAll(vfs, '/A/doc.txt')).toBe('hello');
    await vfs.statfs('/A');
    await waitFor('the content cache to hold doc.txt', () => vfs.status().disk?.writtenBytes ?? 0, { until: (n) => n >= 5 });

    faulty.down(3_600_000);
    await vfs.refresh();
    const lib = vfs.status().libraries[0]!;
    expect(lib.online).toBe(false);
    expect(lib.offlineSinceMs).toBeGreaterThan(0);

    // Listings, attributes (stale) and cached content are still there.
    expect(await names(vfs, '/A')).toEqual(['doc.txt', 'folder']);
    const doc = await vfs.stat('/A/doc.txt');
    expect(doc.size).toBe(5);
    expect(doc.stale).toBe(true);
    expect(await readAll(vfs, '/A/doc.txt')).toBe('hello');
    expect((await vfs.statfs('/A')).used).toBeGreaterThan(0);

    // New files, edits and folders are taken.
    await vfs.writeFile('/A/new.txt', Buffer.from('written offline'));
    await vfs.writeFile('/A/doc.txt', Buffer.from('edited offline'));
    await vfs.mkdir('/A/made');
    await vfs.mkdir('/A/made/deeper');
    const h = await vfs.open('/A/made/deeper/x.txt', { write: true, create: true });
    await h.write(0, Buffer.from('x'));
    await h.release();
    expect(await names(vfs, '/A')).toEqual(['doc.txt', 'folder', 'made', 'new.txt']);
    expect(await names(vfs, '/A/made')).toEqual(['deeper']);
    expect(await names(vfs, '/A/made/deeper')).toEqual(['x.txt']);
    expect(await readAll(vfs, '/A/doc.txt')).toBe('edited offline');
    // Deletes and renames of what is on the service need the service.
    expect(await vfsCode(vfs.unlink('/A/folder/inner.txt'))).toBe('EIO');
    expect(vfs.status().libraries[0]!.pendingUploads).toBe(3);

    // Meanwhile another client changes something on the service.
    remote.putFile('folder/other.txt', Buffer.from('theirs'));

    faulty.heal();
    await vfs.refresh();
    expect(vfs.status().libraries[0]!.online).toBe(true);
    await vfs.flushAll();
    expect(remote.read('new.txt').toString()).toBe('written offline');
    expect(remote.read('doc.txt').toString()).toBe('edited offline');
    expect(remote.read('made/deeper/x.txt').toString()).toBe('x');
    expect((await remote.stat('made'))?.isDir).toBe(true);
    // The feed resumed from its cursor: the change made meanwhile shows.
    expect(await names(vfs, '/A/folder')).toEqual(['inner.txt', 'other.txt']);
    expect((await vfs.stat('/A/doc.txt')).stale).toBeUndefined();
  });

  it('a folder made offline survives a restart and is made on the service when it is back', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    const a = await gateway(remote);
    expect(await names(a.vfs, '/A')).toEqual([]);
    a.faulty.down(3_600_000);
    await a.vfs.refresh();
    await a.vfs.mkdir('/A/empty-folder');
    await a.vfs.close();
    const b = await gateway(remote, a.dataDir);
    // Still offline at the start: the folder is shown from the journal.
    b.faulty.down(3_600_000);
    expect((await b.vfs.stat('/A/empty-folder')).isDir).toBe(true);
    b.faulty.heal();
    await b.vfs.refresh();
    expect((await waitFor('the folder made on the service', () => remote.stat('empty-folder')))?.isDir).toBe(true);
  });

  it('a file made here whose upload never started is renamed without the service (so offline too); once handed to the uploader, or after a restart, not', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('theirs.txt', Buffer.from('theirs'));
    const a = await gateway(remote, undefined, 3_600_000);
    expect(await names(a.vfs, '/A')).toEqual(['theirs.txt']);
    a.faulty.down(3_600_000);
    await a.vfs.refresh();
    // As rsync and editors save: a temporary name, then the final one (over an existing file too).
    await a.vfs.writeFile('/A/.doc.txt.tmp', Buffer.from('saved offline'));
    await a.vfs.rename('/A/.doc.txt.tmp', '/A/doc.txt');
    await a.vfs.writeFile('/A/.theirs.tmp', Buffer.from('mine now'));
    expect(await vfsCode(a.vfs.rename('/A/.theirs.tmp', '/A/theirs.txt'))).toBe('EIO'); // replacing theirs needs the service
    await a.vfs.rename('/A/.theirs.tmp', '/A/mine.txt');
    expect(await names(a.vfs, '/A')).toEqual(['doc.txt', 'mine.txt', 'theirs.txt']);
    expect(await readAll(a.vfs, '/A/doc.txt')).toBe('saved offline');
    // After a restart nothing tells what of a replayed file reached the service: its rename asks it.
    await a.vfs.close();
    const b = await gateway(remote, a.dataDir, 3_600_000);
    b.faulty.down(3_600_000);
    expect(await vfsCode(b.vfs.rename('/A/mine.txt', '/A/mine-2.txt'))).toBe('EIO');
    b.faulty.heal();
    await b.vfs.refresh();
    await b.vfs.flushAll();
    expect((await remote.list('')).map((e) => e.name).sort()).toEqual(['doc.txt', 'mine.txt', 'theirs.txt']);
    expect(remote.read('doc.txt').toString()).toBe('saved offline');
    expect(remote.read('theirs.txt').toString()).toBe('theirs');
    // Handed to the uploader (flushAll): the service has it, and a rename moves it there.
    await b.vfs.rename('/A/doc.txt', '/A/doc-2.txt');
    expect((await remote.list('')).map((e) => e.name).sort()).toEqual(['doc-2.txt', 'mine.txt', 'theirs.txt']);
  });
});
