/**
 * The write-back's promises, one test each: every acknowledged version whole, replaces atomic, nothing a
 * writer did not complete ever reaches the service, times that never move back, locks across front ends,
 * and failure paths that leave nothing half-done. "Crash" here is a gateway abandoned without close()
 * (what kill -9 leaves), with a second one opened on the same data folder.
 */
import { describe, it, expect, afterEach, vi } from 'vitest';
import { writeSync } from 'node:fs';
import { mkdtemp, readdir, readlink, rm, truncate } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createVfs, DiskFaults, FaultyRemote, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';
import type { CommitOptions, CommitSource, RemoteEntry } from '../../../../src/vfs/remote.js';
import { readAll, vfsCode } from '../../../support/vfs.js';
import { pause, waitFor } from '../../../support/wait-for.js';
import { ManualClock } from '../../../support/manual-clock.js';
import { UploadJournal } from '../../../../src/vfs/write-back/upload-journal.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

interface Setup { vfs: GatewayVfs; remote: MemoryRemote; faulty: FaultyRemote; dataDir: string; disk: DiskFaults }

/** A gateway over one MemoryRemote (behind a FaultyRemote); `dataDir`/`remote` reuse an earlier one's. */
async function gateway(opts: { dataDir?: string; remote?: MemoryRemote; feedIntervalMs?: number; durability?: { mode?: 'group' | 'close'; groupCommitMs?: number }; uploadDelayMs?: number; unwrittenSpoolBytes?: number; clock?: ManualClock } = {}): Promise<Setup> {
  const remote = opts.remote ?? new MemoryRemote({ name: 'A', id: '1' });
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'cloudlib-wb-')));
  if (!opts.dataDir) cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const faulty = new FaultyRemote(remote);
  const disk = new DiskFaults();
  const vfs = await createVfs({ libraries: [{ name: 'A', remote: faulty }], dataDir, feedIntervalMs: opts.feedIntervalMs ?? 0, upload: { retryBaseMs: 20, retryMaxMs: 100, delayMs: opts.uploadDelayMs }, diskFaults: disk, durability: opts.durability, unwrittenSpoolBytes: opts.unwrittenSpoolBytes, clock: opts.clock });
  cleanups.push(() => vfs.close());
  return { vfs, remote, faulty, dataDir, disk };
}

/** Uploads held back until `release()` (the service is slow or away). */
function holdUploads(faulty: FaultyRemote): void {
  faulty.inject({ kind: 'delay', methods: ['commit'], delayMs: 600_000 });
}

async function* slowly(parts: string[], gate?: Promise<void>, atGate?: () => void): AsyncGenerator<Buffer> {
  for (const [i, p] of parts.entries()) {
    if (i === 1 && gate) {
      atGate?.();
      await gate;
    }
    yield Buffer.from(p);
  }
}

/** A service that holds every commit until released, counting those under way by size. */
class HeldRemote extends MemoryRemote {
  inFlight = { small: 0, large: 0 };
  most = { small: 0, large: 0 };
  private release!: () => void;
  readonly released = new Promise<void>((r) => { this.release = r; });
  override async commit(...args: Parameters<MemoryRemote['commit']>): ReturnType<MemoryRemote['commit']> {
    const lane = args[1].size <= 256 * 1024 ? 'small' : 'large';
    this.inFlight[lane]++;
    this.most[lane] = Math.max(this.most[lane], this.inFlight[lane]);
    try {
      await this.released;
      return await super.commit(...args);
    } finally {
      this.inFlight[lane]--;
    }
  }
  open(): void { this.release(); }
}

/** A gateway over a HeldRemote with lanes of 2 large and 5 small uploads. */
async function heldLanes(): Promise<{ remote: HeldRemote; vfs: GatewayVfs }> {
  const remote = new HeldRemote({ name: 'A', id: '1' });
  const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-wb-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, feedIntervalMs: 0, upload: { concurrency: 2, smallConcurrency: 5 } });
  cleanups.push(() => vfs.close());
  return { remote, vfs };
}

/** 8 small files and 4 large ones (300 KiB), each filled with its number. */
async function writeLaneFiles(vfs: GatewayVfs): Promise<void> {
  for (let i = 0; i < 8; i++) await vfs.writeFile(`/A/small${i}`, Buffer.alloc(4096, i));
  for (let i = 0; i < 4; i++) await vfs.writeFile(`/A/large${i}`, Buffer.alloc(300 * 1024, i));
}

function expectLaneFiles(remote: MemoryRemote): void {
  for (let i = 0; i < 8; i++) expect(remote.read(`small${i}`).equals(Buffer.alloc(4096, i))).toBe(true);
  for (let i = 0; i < 4; i++) expect(remote.read(`large${i}`).equals(Buffer.alloc(300 * 1024, i))).toBe(true);
}

async function spools(dataDir: string): Promise<string[]> {
  return readdir(join(dataDir, 'journal', 'spool'));
}

describe('write-back', () => {
  it('a folder renamed or removed takes the files waiting below it, at every depth, and only those', async () => {
    // Nothing is uploaded before the flush (the write-back delay): every file is a local version until then.
    const { vfs, remote } = await gateway({ uploadDelayMs: 600_000 });
    for (const d of ['/A/a', '/A/a/b', '/A/a/b/c', '/A/ab', '/A/x']) await vfs.mkdir(d);
    const files = { '/A/a/f': '1', '/A/a/b/g': '2', '/A/a/b/c/h': '3', '/A/ab/i': '4', '/A/x/j': '5', '/A/a.txt': '6' };
    for (const [path, data] of Object.entries(files)) await vfs.writeFile(path, Buffer.from(data));
    await vfs.rename('/A/a', '/A/d');
    await vfs.rmdir('/A/x').catch(() => undefined); // not empty: refused, nothing of it dropped
    await vfs.unlink('/A/x/j');
    await vfs.flushAll();
    expect(remote.read('d/f').toString()).toBe('1');
    expect(remote.read('d/b/g').toString()).toBe('2');
    expect(remote.read('d/b/c/h').toString()).toBe('3');
    // A sibling whose name starts the same, and a file beside the folder, stay where they were.
    expect(remote.read('ab/i').toString()).toBe('4');
    expect(remote.read('a.txt').toString()).toBe('6');
    expect(await vfs.readdir('/A/x')).toEqual([]);
    expect((await vfs.readdir('/A/d/b')).map((e) => e.name).sort()).toEqual(['c', 'g']);
  });

  it('a replace whose source is cut off leaves the file as it was, and nothing behind', async () => {
    const { vfs, remote, dataDir } = await gateway();
    remote.putFile('f', Buffer.from('old content'));
    async function* cut(): AsyncGenerator<Buffer> {
      yield Buffer.alloc(3_000_000, 1);
      throw new Error('connection reset by the client');
    }
    await expect(vfs.writeFile('/A/f', cut())).rejects.toThrow(/connection reset/);
    expect(await readAll(vfs, '/A/f')).toBe('old content');
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('old content');
    expect(remote.commits).toEqual([]);
    expect(await spools(dataDir)).toEqual([]);
    expect(vfs.status().localFiles).toBe(0);
    // A new file cut off never appears.
    await expect(vfs.writeFile('/A/new', cut())).rejects.toThrow();
    expect(await vfsCode(vfs.stat('/A/new'))).toBe('ENOENT');
  });

  it('two replaces at once: the last to complete wins whole, the service never gets a mix', async () => {
    const { vfs, remote } = await gateway();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => { open = resolve; });
    let firstAtGate = false;
    const first = vfs.writeFile('/A/f', slowly(['first-1 ', 'first-2 ', 'first-3'], gate, () => { firstAtGate = true; }));
    await waitFor('the first replace under way, held at its gate', () => firstAtGate);
    await vfs.writeFile('/A/f', slowly(['second-1 ', 'second-2']));
    expect(await readAll(vfs, '/A/f')).toBe('second-1 second-2');
    open();
    await first;
    expect(await readAll(vfs, '/A/f')).toBe('first-1 first-2 first-3');
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('first-1 first-2 first-3');
    for (const c of remote.commits) expect(['first-1 first-2 first-3', 'second-1 second-2']).toContain(c.data.toString());
  });

  it('regression: two replaces of a new file at once, the second uploaded while the first is written: no conflict copy', async () => {
    const { vfs, remote } = await gateway();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => { open = resolve; });
    let firstAtGate = false;
    const first = vfs.writeFile('/A/new', slowly(['first-1 ', 'first-2'], gate, () => { firstAtGate = true; }));
    await waitFor('the first replace under way, held at its gate', () => firstAtGate);
    await vfs.writeFile('/A/new', slowly(['second-1 ', 'second-2']));
    // The second is on the service before the first is acknowledged (both began with no file at the name).
    await vfs.flushAll();
    expect(remote.read('new').toString()).toBe('second-1 second-2');
    open();
    await first;
    await vfs.flushAll();
    expect(remote.read('new').toString()).toBe('first-1 first-2');
    expect(remote.paths().filter((p) => !p.includes('/'))).toEqual(['new']);
    expect(vfs.status().conflicts).toEqual([]);
  });

  it('a write handle and a replace of one path: each version whole, the last acknowledged wins', async () => {
    const { vfs, remote } = await gateway();
    remote.putFile('f', Buffer.from('service'));
    const h = await vfs.open('/A/f', { write: true, truncate: true });
    await h.write(0, Buffer.from('handle-1 '));
    await vfs.writeFile('/A/f', Buffer.from('put body'));
    await h.write(9, Buffer.from('handle-2'));
    await h.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('handle-1 handle-2');
    for (const c of remote.commits) expect(['put body', 'handle-1 handle-2']).toContain(c.data.toString());
  });

  it('an empty new file is journaled before writeFile returns: a crash right after loses nothing', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    await a.vfs.writeFile('/A/empty', Buffer.alloc(0), undefined, { holdUploadMs: 60_000 });
    // Crash: the first gateway is abandoned, a second starts on the same data folder.
    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll();
    expect(a.remote.read('empty').length).toBe(0);
  });

  it('an acknowledged version is never changed in place: a truncating writer that never closes does not touch it', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    const v2 = Buffer.alloc(100_000, 2);
    await a.vfs.writeFile('/A/f', v2);
    const h = await a.vfs.open('/A/f', { write: true, truncate: true });
    await h.write(0, Buffer.alloc(1000, 3));
    expect(await readAll(a.vfs, '/A/f')).toBe(Buffer.alloc(1000, 3).toString());
    // Crash with the writer still open: what was acknowledged is what the service gets.
    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll();
    expect(a.remote.read('f').equals(v2)).toBe(true);
    await h.release().catch(() => undefined);
  });

  it('echo x > existing: the emptied file flushed on the way is journaled but never published', async () => {
    const { vfs, remote, dataDir } = await gateway();
    remote.putFile('f', Buffer.alloc(30, 7));
    const h = await vfs.open('/A/f', { write: true, truncate: true });
    await h.flush(); // the shell closes its first descriptor of the file (FLUSH) before it writes
    await h.write(0, Buffer.from('x\n'));
    await h.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('x\n');
    expect(remote.commits.map((c) => c.data.toString())).toEqual(['x\n']);
    expect(await spools(dataDir)).toEqual([]);
  });

  it('fsync makes a file kept open durable, not a version: it is uploaded once unchanged for the write-back delay', async () => {
    const { vfs, remote } = await gateway({ uploadDelayMs: 300 });
    const h1 = await vfs.open('/A/f', { write: true, create: true });
    const h2 = await vfs.open('/A/f', { write: true });
    await h1.write(0, Buffer.from('one'));
    await h1.release();
    await h2.write(3, Buffer.from('two'));
    for (let i = 0; i < 20; i++) {
      // A database's pattern: a write and an fsync again and again; none of them makes a version.
      await h2.write(6 + i, Buffer.from('.'));
      await h2.fsync();
    }
    expect(remote.commits).toEqual([]);
    expect(vfs.status().uploads).toEqual([]);
    // Left alone for the delay: what it holds is uploaded, while h2 keeps it open.
    await waitFor('the upload after the delay', () => remote.stat('f'));
    expect(remote.read('f').toString()).toBe(`onetwo${'.'.repeat(20)}`);
    expect(remote.commits.length).toBe(1);
    await h2.write(0, Buffer.from('ONE'));
    await h2.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe(`ONEtwo${'.'.repeat(20)}`);
  });

  it('the write-back delay runs on the Vfs clock: a closed file waits for it, then is uploaded; its times are the clock\'s', async () => {
    const clock = new ManualClock();
    const { vfs, remote } = await gateway({ uploadDelayMs: 60_000, clock });
    const h = await vfs.open('/A/f', { write: true, create: true });
    await h.write(0, Buffer.from('held'));
    await h.release();
    // Journaled at the release: its version's time is the clock's, and its upload waits on the clock.
    expect((await vfs.stat('/A/f')).mtimeMs).toBe(clock.now());
    clock.advance(59_999);
    expect(vfs.status().uploads).toEqual([]);
    expect(remote.commits).toEqual([]);
    clock.advance(1);
    expect(vfs.status().uploads.map((u) => u.fullpath)).toEqual(['f']);
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('held');
  });

  it('a failed upload waits out its retry delay on the Vfs clock, then is uploaded', async () => {
    const clock = new ManualClock();
    const { vfs, remote, faulty } = await gateway({ clock });
    faulty.inject({ kind: 'fail', code: 'EIO', methods: ['commit'], times: 1, unreachable: true });
    await vfs.writeFile('/A/f', Buffer.from('again'));
    const [failed] = await waitFor('the first attempt to fail', () => vfs.status().uploads, { until: (u) => u[0]?.state === 'retrying' });
    // The first retry comes retryBaseMs (20 ms) later on the clock, not on the real time.
    expect(failed!.nextAttemptMs).toBe(clock.now() + 20);
    clock.advance(19);
    expect(vfs.status().uploads.map((u) => u.state)).toEqual(['retrying']);
    expect(remote.commits).toEqual([]);
    clock.advance(1);
    await waitFor('the retried upload', () => remote.commits.length === 1);
    expect(remote.read('f').toString()).toBe('again');
  });

  it('regression: a write whose version another handle seals meanwhile goes to the next version, with no error', async () => {
    // Mount and WebDAV writers on one path got EIO "a journaled version cannot change (state writing)".
    const { vfs, remote } = await gateway();
    const a = await vfs.open('/A/f', { write: true, create: true });
    const b = await vfs.open('/A/f', { write: true });
    for (let i = 0; i < 50; i++) {
      await a.write(i, Buffer.from('a'));
      // b's flush seals the version while a's next write is on its way to it.
      await Promise.all([b.flush(), a.write(i, Buffer.from('b')), b.flush()]);
    }
    await a.release();
    await b.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('b'.repeat(50));
  });

  it('regression: fsync, a replace, then a write through the handle: the handle\'s write is what the service keeps', async () => {
    // The fsynced version was sealed (delay 0) while the write made the next one from it: the older one
    // finished journaling last and was uploaded over the newer, once with its spool already removed.
    for (let i = 0; i < 10; i++) {
      const { vfs, remote } = await gateway();
      const h = await vfs.open('/A/f', { read: true, write: true, create: true });
      await h.fsync();
      await vfs.writeFile('/A/f', Buffer.alloc(0));
      await h.write(0, Buffer.from([0]));
      await h.release();
      await vfs.flushAll();
      expect(remote.read('f')).toEqual(Buffer.from([0]));
    }
  });

  it('regression: an fsync of a handle whose file was replaced since its last change makes it the path\'s at once', async () => {
    // The model found it (seed -1876539661): the fsync kept the version open, so a read right after it
    // showed the replace until the write-back delay passed, then the fsynced bytes; a flush showed them at once.
    const { vfs, remote } = await gateway();
    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    await vfs.writeFile('/A/f', Buffer.from([0]));
    await h.fsync();
    expect(await readAll(vfs, '/A/f')).toBe('');
    // Unchanged since, the handle's next fsync leaves a newer replace shown.
    await vfs.writeFile('/A/f', Buffer.from('put'));
    await h.fsync();
    expect(await readAll(vfs, '/A/f')).toBe('put');
    await h.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('put');
  });

  it('regression: a replace committed while the upload it superseded is under way stays the file\'s', async () => {
    // The model found it (seed 1476812247): the superseded upload's commit, which a cancel does not cut,
    // landed after the replace's, at a numbered name (the file was new), and was then put in place over
    // the replace as this gateway's own older version: the replace gone from the name.
    class HeldFirstCommit extends MemoryRemote {
      held?: { reached: boolean; release: () => void };
      override async commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> {
        const held = this.held;
        this.held = undefined;
        if (held) {
          held.reached = true;
          await new Promise<void>((resolve) => { held.release = resolve; });
        }
        return super.commit(fullpath, source, opts);
      }
    }
    const remote = new HeldFirstCommit({ name: 'A', id: '1' });
    const held = { reached: false, release: () => undefined };
    remote.held = held;
    const { vfs } = await gateway({ remote });
    const h0 = await vfs.open('/A/f', { read: true, write: true, create: true });
    const h2 = await vfs.open('/A/f', { read: true, write: true });
    await h0.write(0, Buffer.from('old'));
    await h0.release();
    await h2.fsync(); // the closed version's upload starts, though h2 keeps the file open
    await waitFor('the first commit under way, held', () => held.reached);
    const put = vfs.writeFile('/A/f', Buffer.from('P'));
    await waitFor('the replace shown', async () => (await readAll(vfs, '/A/f')) === 'P');
    await h2.release(); // the last writer's close queues the replace's upload
    await waitFor('the replace queued', () => vfs.status().uploads.some((u) => u.fullpath === 'f'));
    held.release();
    await put;
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('P');
    expect(remote.paths()).toEqual(['f']);
  });

  for (const [how, flushed] of [['a truncating open', false], ['a truncate', false], ['a truncating open', true]] as const) {
    it(`regression: after a replace, ${how} of a file the kernel writes (passthrough) shows it emptied${flushed ? ', its writers having flushed before' : ''}`, async () => {
      // The model found it (seeds 1481072769, -1102932636): the truncate, made in place for the kernel,
      // changed the file without making it the path's again, so the path went on showing the replace;
      // flushed before the replace, the close then took the emptied version for the path's own.
      const { vfs, remote } = await gateway();
      const h0 = await vfs.open('/A/f', { read: true, write: true, create: true });
      await h0.write(0, Buffer.from('abc'));
      const spool = await h0.passthrough!();
      expect(spool, 'the kernel writes the spool').toBeDefined();
      if (flushed) await h0.flush();
      await vfs.writeFile('/A/f', Buffer.from('P'));
      const h1 = how === 'a truncate' ? undefined : await vfs.open('/A/f', { read: true, write: true, truncate: true });
      if (how === 'a truncate') await h0.truncate(0);
      expect(await readAll(vfs, '/A/f')).toBe('');
      await h1?.release();
      await h0.release();
      spool!.end();
      await vfs.flushAll();
      expect(remote.read('f').toString()).toBe('');
    });
  }

  it('regression: after a replace, a write through another handle of a file the kernel writes (passthrough) shows at once', async () => {
    // The model found it (seed 1149010831): the write went in place for the kernel, as a truncate did
    // before, without making the file the path's again: the path went on showing the replace.
    const { vfs, remote } = await gateway();
    const h0 = await vfs.open('/A/f', { read: true, write: true, create: true });
    const spool = await h0.passthrough!();
    expect(spool, 'the kernel writes the spool').toBeDefined();
    const h1 = await vfs.open('/A/f', { read: true, write: true });
    await vfs.writeFile('/A/f', Buffer.from('P'));
    await h1.write(0, Buffer.from('x'));
    expect(await readAll(vfs, '/A/f')).toBe('x');
    await h1.release();
    spool!.end();
    await h0.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('x');
  });

  it('regression: a truncating open of an empty file the kernel writes (passthrough) changes nothing: a replace after it stays', async () => {
    // The model found it (seed 859977722): the truncate, made in place for the kernel, counted as a change
    // although it emptied nothing, so the writers' close acknowledged the empty file over the replace.
    const { vfs, remote } = await gateway();
    const h0 = await vfs.open('/A/g', { read: true, write: true, create: true });
    const spool = await h0.passthrough!();
    expect(spool, 'the kernel writes the spool').toBeDefined();
    await vfs.flushAll();
    const h1 = await vfs.open('/A/g', { read: true, write: true, truncate: true });
    await vfs.writeFile('/A/g', Buffer.from('P'));
    spool!.end();
    await h0.release();
    await h1.release();
    expect(await readAll(vfs, '/A/g')).toBe('P');
    await vfs.flushAll();
    expect(remote.read('g').toString()).toBe('P');
  });

  it('regression: a write and fsync after a replace of a file the kernel writes, uploaded before the replace, win over it', async () => {
    // The model found it (seed 2077420161): the write, in place for the kernel, made the file the path's
    // again; the fsync then journaled it again with its earlier place in the order, not after the replace,
    // and the replace (waiting for the service) was uploaded as the file's last content.
    const { vfs, remote, faulty } = await gateway();
    const h0 = await vfs.open('/A/g', { read: true, write: true, create: true });
    const spool = await h0.passthrough!();
    expect(spool, 'the kernel writes the spool').toBeDefined();
    await vfs.flushAll();
    faulty.inject({ kind: 'fail', code: 'EIO', methods: ['commit'] });
    const h1 = await vfs.open('/A/g', { read: true, write: true });
    await vfs.writeFile('/A/g', Buffer.from('P'));
    await h1.write(0, Buffer.from('x'));
    await h1.fsync();
    expect(await readAll(vfs, '/A/g')).toBe('x');
    faulty.heal();
    spool!.end();
    await h0.release();
    await h1.release();
    await vfs.flushAll();
    expect(remote.read('g').toString()).toBe('x');
  });

  it('regression: the kernel\'s writes (passthrough) to a file opened unchanged show at its path at once', async () => {
    // The model found it (seed 2083979810): opened without a change, the file's version was not what its
    // path showed, so a fresh open and stat showed the service's bytes until the writers' close.
    const { vfs, remote } = await gateway();
    remote.putFile('f', Buffer.alloc(0)); // handed over at once: no bytes of the service's to fetch first
    const h = await vfs.open('/A/f', { read: true, write: true });
    const spool = await h.passthrough!();
    expect(spool, 'the kernel writes the spool').toBeDefined();
    writeSync(spool!.fd, Buffer.from('kernel'), 0, 6, 0);
    expect(await readAll(vfs, '/A/f')).toBe('kernel');
    expect((await vfs.stat('/A/f')).size).toBe(6);
    spool!.end();
    await h.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('kernel');
  });

  it('a file handed to the kernel (passthrough) and closed unwritten shows the service\'s version again, nothing uploaded', async () => {
    const { vfs, remote } = await gateway();
    remote.putFile('f', Buffer.alloc(0));
    const h = await vfs.open('/A/f', { read: true, write: true });
    const spool = await h.passthrough!();
    expect(spool, 'the kernel writes the spool').toBeDefined();
    spool!.end();
    await h.release();
    await vfs.flushAll();
    remote.putFile('f', Buffer.from('other'));
    vfs.dropCaches();
    expect(await readAll(vfs, '/A/f')).toBe('other');
    expect(remote.commits.filter((c) => c.fullpath === 'f')).toHaveLength(0);
    expect(vfs.status().localFiles).toBe(0);
  });

  it('the kernel\'s writes after a flush are journaled once when its hand-over ends before the release, as the mount does', async () => {
    // The end of the hand-over journaled them, unawaited, and the release journaled them again meanwhile:
    // two lines of one content, and an upload queued twice.
    const { vfs, remote } = await gateway();
    const journal = (vfs.writeBack as unknown as { journal: UploadJournal }).journal;
    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    const spool = await h.passthrough!();
    expect(spool, 'the kernel writes the spool').toBeDefined();
    await h.flush();
    const put = journal.put.bind(journal);
    let lines = 0;
    journal.put = (...args: Parameters<UploadJournal['put']>) => {
      lines++;
      return put(...args);
    };
    writeSync(spool!.fd, Buffer.from('k'), 0, 1, 0);
    spool!.end();
    await h.release();
    expect(await readAll(vfs, '/A/f')).toBe('k');
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('k');
    expect(lines, 'journal lines for the kernel\'s writes').toBe(1);
  });

  it('regression: a kill -9 after the delay sealed a file the kernel writes (passthrough) keeps what was acknowledged', async () => {
    // The model found it (seed 1310755361): the seal's record named the bytes and size read before the
    // kernel wrote on, and the SHA-1 of the spool after; replay found the spool matching neither and set
    // the file aside: the fsynced file was gone from the service. Timing decides whether the kernel writes
    // during the seal, so the sequence runs several times.
    for (let i = 0; i < 20; i++) {
      const { vfs, remote, dataDir } = await gateway();
      const h = await vfs.open('/A/f', { read: true, write: true, create: true });
      await h.fsync();
      const spool = await h.passthrough!();
      if (spool) writeSync(spool.fd, Buffer.from('Z'), 0, 1, 108);
      else await h.write(108, Buffer.from('Z'));
      // kill -9: the uploads stop; a seal under way ends first (a valid place for the kill).
      await vfs.writeBack.uploads.close();
      const sealing = (vfs.writeBack as unknown as { sealingAt: Map<string, Set<{ sealing?: Promise<void> }>> }).sealingAt;
      await Promise.all([...sealing.values()].flatMap((at) => [...at].map((v) => v.sealing?.catch(() => undefined))));
      const again = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 5, retryMaxMs: 20 } });
      cleanups.push(() => again.close());
      await again.flushAll();
      // What was acknowledged (the fsync's empty file), or what the delay sealed after it.
      expect(['', `${'\0'.repeat(108)}Z`], `run ${i}`).toContain(remote.paths().includes('f') ? remote.read('f').toString() : 'missing');
    }
  });

  it('regression: a flush of everything uploads the bytes the kernel wrote (passthrough) after the file\'s last flush', async () => {
    // The model found it (seed -1634597044): flushAll queued the version its flush had sealed, which the
    // kernel had written on in place; its upload then failed on the spool's new size, again and again.
    const { vfs, remote } = await gateway();
    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    const spool = await h.passthrough!();
    expect(spool, 'the kernel writes the spool').toBeDefined();
    await h.flush();
    writeSync(spool!.fd, Buffer.from('k'), 0, 1, 0);
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('k');
    spool!.end();
    await h.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('k');
  });

  for (const endFirst of [false, true]) {
    it(`regression: a file handed to the kernel (passthrough) and left unwritten leaves a replace at its close${endFirst ? ' (the hand-over ended first, as the mount does)' : ''}`, async () => {
      // The model found it (seed -1700023447): a version handed over and never flushed counted as written
      // by the kernel, so its close acknowledged it again, over the replace.
      const { vfs, remote } = await gateway();
      await (await vfs.open('/A/f', { read: true, write: true, create: true })).release();
      await vfs.flushAll();
      const h = await vfs.open('/A/f', { read: true, write: true });
      await vfs.writeFile('/A/f', Buffer.from('P'));
      const spool = await h.passthrough!();
      expect(spool, 'the kernel writes the spool').toBeDefined();
      if (endFirst) spool!.end();
      await h.release();
      spool!.end();
      expect(await readAll(vfs, '/A/f')).toBe('P');
      await vfs.flushAll();
      expect(remote.read('f').toString()).toBe('P');
    });
  }

  it('regression: a file the kernel wrote in an earlier open, opened again and left unwritten, leaves a replace', async () => {
    // The model found it (seed -79895027): the hand-over of the earlier open counted for the new one.
    const { vfs, remote } = await gateway();
    const h0 = await vfs.open('/A/f', { read: true, write: true, create: true });
    await h0.write(0, Buffer.from('old'));
    const spool = await h0.passthrough!();
    expect(spool, 'the kernel writes the spool').toBeDefined();
    spool!.end();
    await h0.release();
    const h1 = await vfs.open('/A/f', { read: true, write: true });
    await vfs.writeFile('/A/f', Buffer.from('P'));
    await h1.release();
    expect(await readAll(vfs, '/A/f')).toBe('P');
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('P');
  });

  it('regression: an fsync after a replace that reached the service makes the handle\'s bytes the path\'s', async () => {
    // The model found it (seed 1897479444): once uploaded, the replace was no longer the path's local
    // version, so the fsync took the file for unreplaced and kept it open; the close then acknowledged it.
    const { vfs, remote } = await gateway();
    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    await vfs.writeFile('/A/f', Buffer.from('put'));
    await waitFor('the replace on the service, its upload done', async () => (await remote.stat('f')) !== undefined && remote.read('f').toString() === 'put' && vfs.status().uploads.length === 0);
    await h.fsync();
    expect(await readAll(vfs, '/A/f')).toBe('');
    await h.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('');
  });

  it('regression: a replace after an fsync of a file kept open is what a crash leaves, not the fsynced bytes', async () => {
    // The model found it (seed -1878345823): the fsync's record outlived the replace, uploaded before the
    // crash, and was replayed over it after.
    const a = await gateway();
    const h = await a.vfs.open('/A/f', { read: true, write: true, create: true });
    await h.fsync();
    await a.vfs.writeFile('/A/f', Buffer.from([0]));
    // Crash with the handle open: the first gateway is abandoned, a second starts on the same data folder.
    await a.vfs.writeBack.uploads.close();
    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll();
    expect(await readAll(b.vfs, '/A/f')).toBe('\0');
    expect(a.remote.read('f')).toEqual(Buffer.from([0]));
  });

  it('regression: a truncating open of a file whose replace is already on the service empties it', async () => {
    for (let i = 0; i < 10; i++) {
      const { vfs } = await gateway();
      const first = await vfs.open('/A/f', { read: true, write: true, create: true });
      await vfs.writeFile('/A/f', Buffer.from([0]));
      await vfs.writeBack.uploads.settle();
      const second = await vfs.open('/A/f', { read: true, write: true, create: true, truncate: true });
      const r = await vfs.open('/A/f', { read: true });
      expect((await r.read(0, 100)).length).toBe(0);
      await r.release();
      await second.release();
      await first.release();
    }
  });

  it('regression: a truncating open while another handle\'s close seals the file opens it emptied, with no error', async () => {
    // Two mount writers of one file (O_TRUNC rewrites): the open of the second emptied the version the
    // first one's close was sealing, and answered EIO ("a journaled version cannot change").
    for (let i = 0; i < 12; i++) {
      const { vfs, remote } = await gateway();
      const first = await vfs.open('/A/f', { write: true, create: true, truncate: true });
      // Large enough to be sealed from its spool (hashed while the seal holds the version).
      await first.write(0, Buffer.alloc(4 * 1024 * 1024, 1));
      // The open at several points of the seal: each point a turn of the event loop, not a time.
      // eslint-disable-next-line no-restricted-syntax -- turns of the event loop, not a wait for work
      const later = async (ticks: number): Promise<void> => { for (let t = 0; t < ticks; t++) await new Promise((r) => setImmediate(r)); };
      const [, second] = await Promise.all([first.flush(), later(i).then(() => vfs.open('/A/f', { write: true, create: true, truncate: true }))]);
      await second.write(0, Buffer.from('second'));
      await first.release();
      await second.release();
      await vfs.flushAll();
      expect(remote.read('f').toString()).toBe('second');
    }
  });

  it('regression: a truncating open of a journaled file, joined and closed by another writer before it empties the new version: no error', async () => {
    // Mount writers at once (O_TRUNC rewrites) of a file journaled before: the first open installed the
    // new version, then let go of the journaled one (a slow close of its spool) before emptying it; the
    // second open joined, wrote and closed (sealing it) meanwhile, and the first open answered EIO ("a
    // journaled version cannot change (state journaled)").
    const { vfs, remote } = await gateway({ uploadDelayMs: 600_000 });
    await vfs.writeFile('/A/f', Buffer.alloc(4096, 1));
    const journaled = vfs.writeBack.current('A', 'f')!;
    expect(journaled.state).toBe('journaled');
    let slowCloseEnds!: () => void;
    const slow = new Promise<void>((resolve) => { slowCloseEnds = resolve; });
    const closeSpool = journaled.closeSpool.bind(journaled);
    const closing = vi.spyOn(journaled, 'closeSpool').mockImplementationOnce(async () => {
      await slow;
      await closeSpool();
    });
    const firstOpen = vfs.open('/A/f', { write: true, truncate: true });
    firstOpen.catch(() => undefined); // awaited below
    await waitFor('the first open letting go of the journaled version', () => closing.mock.calls.length > 0);
    const second = await vfs.open('/A/f', { write: true, truncate: true });
    await second.write(0, Buffer.from('second'));
    await second.release();
    slowCloseEnds();
    const first = await firstOpen;
    await first.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('second');
  });

  it('regression: a truncating open whose version another handle seals and writes on from before it is emptied: no error', async () => {
    // The open waited to empty the version; another handle's flush sealed it and that handle's next write
    // moved the session to a version made from it. The open answered EIO instead of emptying that one.
    const { vfs, remote } = await gateway();
    const a = await vfs.open('/A/f', { write: true, create: true });
    await a.write(0, Buffer.from('first'));
    const open = vfs.writeBack.current('A', 'f')!;
    let emptyingGoesOn!: () => void;
    const held = new Promise<void>((resolve) => { emptyingGoesOn = resolve; });
    const startEmpty = open.startEmpty.bind(open);
    const emptying = vi.spyOn(open, 'startEmpty').mockImplementationOnce(async () => {
      await held;
      await startEmpty();
    });
    const truncating = vfs.open('/A/f', { write: true, truncate: true });
    truncating.catch(() => undefined); // awaited below
    await waitFor('the truncating open emptying the version', () => emptying.mock.calls.length > 0);
    await a.flush();
    await a.write(0, Buffer.from('again'));
    expect(vfs.writeBack.current('A', 'f')).not.toBe(open);
    emptyingGoesOn();
    const b = await truncating;
    await b.write(0, Buffer.from('b'));
    await b.release();
    await a.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('b');
  });

  it('regression: a close while the file is being sealed after its fsync returns once it is journaled', async () => {
    // The seal of a file left unchanged after an fsync (delay 0) ran while the handles closed: the closes
    // and the flush of everything returned before it was journaled, and nothing was uploaded.
    for (let i = 0; i < 10; i++) {
      const { vfs, remote } = await gateway();
      const h0 = await vfs.open('/A/f', { read: true, write: true, create: true });
      await h0.fsync();
      const h1 = await vfs.open('/A/f', { read: true, write: true, create: true });
      await h1.write(1, Buffer.from([0]));
      await h0.fsync();
      await h0.release();
      await h1.release();
      await vfs.flushAll();
      expect(remote.read('f').toString('hex')).toBe('0000');
    }
  });

  it('a crash after an fsync of a file kept open keeps what was fsynced; one written off or unlinked afterwards leaves nothing', async () => {
    const a = await gateway({ uploadDelayMs: 600_000 });
    holdUploads(a.faulty);
    const kept = await a.vfs.open('/A/db', { write: true, create: true });
    await kept.write(0, Buffer.alloc(200 * 1024, 1)); // larger than a record carries
    await kept.fsync();
    await kept.write(0, Buffer.from('after'));
    await kept.fsync();
    const small = await a.vfs.open('/A/small', { write: true, create: true });
    await small.write(0, Buffer.from('v1'));
    await small.fsync();
    await small.write(0, Buffer.from('v2'));
    await small.fsync();
    const gone = await a.vfs.open('/A/journal-tmp', { write: true, create: true });
    await gone.write(0, Buffer.from('rollback'));
    await gone.fsync();
    await a.vfs.unlink('/A/journal-tmp');
    await a.vfs.writeBack.uploads.close(); // kill -9: nothing closed
    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll();
    const db = Buffer.alloc(200 * 1024, 1);
    db.write('after', 0);
    expect(a.remote.read('db').equals(db)).toBe(true);
    expect(a.remote.read('small').toString()).toBe('v2');
    expect(await a.remote.stat('journal-tmp')).toBeNull();
  });

  it('times never move back: the time a program saw stays after the upload, the feed and a restart', async () => {
    const a = await gateway();
    const h = await a.vfs.open('/A/f', { write: true, create: true });
    await h.write(0, Buffer.from('saved'));
    await h.release();
    const seen = (await a.vfs.stat('/A/f')).mtimeMs;
    await a.vfs.flushAll();
    a.vfs.cache.forget('A', 'f');
    expect((await a.vfs.stat('/A/f')).mtimeMs).toBe(seen);
    await a.vfs.close();
    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    expect((await b.vfs.stat('/A/f')).mtimeMs).toBe(seen);
    // A new version from anyone else shows its own time.
    const other = a.remote.putFile('f', Buffer.from('changed elsewhere'));
    b.vfs.cache.forget('A', 'f');
    expect((await b.vfs.stat('/A/f')).mtimeMs).toBe(other.mtimeMs);
  });

  it('a lock taken through one front end refuses the writers of the other; its holder writes as before', async () => {
    const { vfs, remote } = await gateway();
    remote.putFile('f', Buffer.from('locked'));
    const webdav = { lockHolder: 'webdav' };
    await vfs.setLocked('/A/f', true, webdav);
    expect(await vfsCode(vfs.open('/A/f', { write: true }))).toBe('ELOCKED');
    expect(await vfsCode(vfs.writeFile('/A/f', Buffer.from('mount')))).toBe('ELOCKED');
    expect(await vfsCode(vfs.unlink('/A/f'))).toBe('ELOCKED');
    expect(await vfsCode(vfs.rename('/A/f', '/A/g'))).toBe('ELOCKED');
    expect(await vfsCode(vfs.setLocked('/A/f', false))).toBe('ELOCKED');
    await vfs.writeFile('/A/f', Buffer.from('saved by the holder'), webdav);
    await vfs.setLocked('/A/f', false, webdav);
    await vfs.writeFile('/A/f', Buffer.from('mount again'));
    // The other way round, and a lock taken elsewhere on the service refuses the mount too.
    await vfs.setLocked('/A/f', true);
    expect(await vfsCode(vfs.writeFile('/A/f', Buffer.from('webdav'), webdav))).toBe('ELOCKED');
    await vfs.setLocked('/A/f', false);
    remote.putFile('g', Buffer.from('theirs'));
    await remote.lock('g', true);
    vfs.dropCaches(); // another client's change (no feed in this test)
    expect(await vfsCode(vfs.open('/A/g', { write: true }))).toBe('ELOCKED');
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('mount again');
  });

  it('a full disk: the write answers ENOSPC, nothing is listed or uploaded, no spool is left, the next write works', async () => {
    const { vfs, remote, dataDir, disk } = await gateway();
    // A copy that fails half way: what it wrote is never a version.
    const h = await vfs.open('/A/copy', { write: true, create: true });
    await h.write(0, Buffer.alloc(4096, 1));
    disk.fail('write', 'ENOSPC', 1);
    expect(await vfsCode(h.write(4096, Buffer.alloc(4096, 2)))).toBe('ENOSPC');
    expect(await vfsCode(h.release())).toBe('ENOSPC');
    expect(await vfsCode(vfs.stat('/A/copy'))).toBe('ENOENT');
    expect((await vfs.readdir('/A')).map((a) => a.name)).toEqual([]);
    // The journal entry cannot be written: same outcome, and an existing file keeps its version.
    remote.putFile('kept', Buffer.from('v1'));
    vfs.dropCaches(); // another client's change (no feed in this test)
    disk.fail('journal', 'ENOSPC', 1);
    expect(await vfsCode(vfs.writeFile('/A/kept', Buffer.from('v2')))).toBe('ENOSPC');
    expect(await readAll(vfs, '/A/kept')).toBe('v1');
    disk.fail('journal', 'EMFILE', 1);
    expect(await vfsCode(vfs.writeFile('/A/other', Buffer.from('x')))).toBe('EIO');
    await vfs.flushAll();
    expect(remote.commits).toEqual([]);
    expect(await spools(dataDir)).toEqual([]);
    // Space again: writes work.
    await vfs.writeFile('/A/copy', Buffer.from('whole'));
    await vfs.flushAll();
    expect(remote.read('copy').toString()).toBe('whole');
    expect(await spools(dataDir)).toEqual([]);
  });

  it('of several journal entries for one path, only the newest acknowledged one is uploaded after a crash', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    for (const v of ['one', 'two', 'three']) await a.vfs.writeFile('/A/f', Buffer.from(v));
    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll();
    expect(a.remote.read('f').toString()).toBe('three');
    expect(a.remote.commits.map((c) => c.data.toString())).toEqual(['three']);
  });

  it('a version being read stays readable when the path is replaced or deleted', async () => {
    const { vfs } = await gateway();
    await vfs.writeFile('/A/f', Buffer.from('first version'));
    const r = await vfs.open('/A/f', { read: true });
    await vfs.writeFile('/A/f', Buffer.from('second'));
    await vfs.unlink('/A/f');
    expect((await r.read(0, 100)).toString()).toBe('first version');
    await r.release();
  });

  it('the write-back delay: a closed file waits before its upload, an fsynced one too, a rewrite meanwhile is uploaded once; flushAll does not wait', async () => {
    const { vfs, remote } = await gateway({ uploadDelayMs: 600_000 });
    const write = async (path: string, text: string, fsync = false): Promise<void> => {
      const h = await vfs.open(path, { write: true, create: true, truncate: true });
      await h.write(0, Buffer.from(text));
      if (fsync) await h.fsync();
      await h.release();
    };
    await write('/A/f', 'first');
    await write('/A/f', 'second');
    expect(vfs.status().uploads).toEqual([]); // waiting: nothing queued yet
    await write('/A/g', 'fsynced', true);
    expect(vfs.status().uploads).toEqual([]);
    await vfs.flushAll();
    expect(remote.read('g').toString()).toBe('fsynced');
    expect(remote.read('f').toString()).toBe('second');
    expect(remote.commits.map((c) => c.fullpath).sort()).toEqual(['f', 'g']); // f once, with its last content
  });

  it('small new files wait in memory for their spools (bounded), carried by their journal entries; read, uploaded and replayed whole', async () => {
    const a = await gateway({ uploadDelayMs: 600_000, unwrittenSpoolBytes: 256 * 1024 }); // no upload asks for the spools meanwhile
    const write = async (path: string, data: Buffer): Promise<void> => {
      const h = await a.vfs.open(path, { write: true, create: true });
      await h.write(0, data);
      await h.release();
    };
    await write('/A/small', Buffer.from('in memory'));
    expect(await spools(a.dataDir)).toEqual([]); // no spool file written yet
    expect(await readAll(a.vfs, '/A/small')).toBe('in memory');
    // Past the bound (256 KiB here), the spools of the next ones are written at once.
    const piece = Buffer.alloc(64 * 1024, 5);
    for (let i = 0; i < 8; i++) await write(`/A/p${i}`, piece);
    await waitFor('four spools written', async () => (await spools(a.dataDir)).length, { until: (n) => n >= 4 });
    const written = (await spools(a.dataDir)).length;
    expect(written).toBeGreaterThanOrEqual(4);
    expect(written).toBeLessThan(10);
    // A crash now: every one of them comes back from the journal.
    await a.vfs.writeBack.uploads.close();
    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll();
    expect(a.remote.read('small').toString()).toBe('in memory');
    expect(a.remote.read('p7').equals(piece)).toBe(true);
    expect(a.remote.paths().length).toBe(9);
  });

  it('versions waiting for the service hold no file descriptor', async () => {
    const { vfs, faulty, dataDir } = await gateway();
    holdUploads(faulty);
    for (let i = 0; i < 50; i++) {
      const h = await vfs.open(`/A/f${i}`, { write: true, create: true });
      await h.write(0, Buffer.from(`file ${i}`));
      await h.release();
      await vfs.writeFile(`/A/p${i}`, Buffer.from(`put ${i}`));
    }
    expect(vfs.status().uploads.length).toBe(100);
    const spoolDir = join(dataDir, 'journal', 'spool');
    const held: string[] = [];
    for (const fd of await readdir('/proc/self/fd')) {
      const target = await readlink(join('/proc/self/fd', fd)).catch(() => '');
      if (target.startsWith(`${spoolDir}/`)) held.push(target); // the folder itself stays open for its fsyncs
    }
    expect(held).toEqual([]);
  });

  describe('durability', () => {
    /** A file fsynced, then one only closed (`closedBytes` of content; a small one is carried in its journal record). */
    const closeAndFsync = async (vfs: GatewayVfs, closedBytes?: number): Promise<void> => {
      const f = await vfs.open('/A/fsynced', { write: true, create: true });
      await f.write(0, Buffer.from('fsynced'));
      await f.fsync();
      await f.release();
      const c = await vfs.open('/A/closed', { write: true, create: true });
      await c.write(0, closedBytes === undefined ? Buffer.from('closed only') : Buffer.alloc(closedBytes, 7));
      await c.release();
    };

    /** Power loss: the log keeps only its durable bytes; `spools` says what becomes of spools not fsynced. */
    const powerLoss = async (setup: Setup, spools: 'lost' | 'kept'): Promise<void> => {
      const log = setup.vfs.writeBack.durableLog();
      for (const f of setup.vfs.writeBack.unsyncedFiles()) {
        if (f === log.path) await truncate(f, log.bytes);
        else if (spools === 'lost') await truncate(f, 0);
      }
      await setup.vfs.writeBack.uploads.close();
    };

    it('close is safe against a crash of the gateway; fsync against power loss; a power loss in the window never uploads a corrupt version', async () => {
      const a = await gateway({ durability: { groupCommitMs: 60_000 } });
      holdUploads(a.faulty);
      await closeAndFsync(a.vfs);
      const log = a.vfs.writeBack.durableLog().path;
      // The closed small file is carried in its record: only the log's tail is not durable.
      expect(a.vfs.writeBack.unsyncedFiles()).toEqual([log]);
      await powerLoss(a, 'lost');
      const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
      await b.vfs.flushAll();
      expect(a.remote.read('fsynced').toString()).toBe('fsynced');
      expect(await a.remote.stat('closed')).toBeNull();
      expect(a.remote.commits.map((c) => c.fullpath)).toEqual(['fsynced']);
    });

    it('a power loss that kept the record of a closed file but not its bytes: the file is dropped, never uploaded corrupt', async () => {
      const a = await gateway({ durability: { groupCommitMs: 60_000 } });
      holdUploads(a.faulty);
      await closeAndFsync(a.vfs, 100 * 1024); // larger than a record carries
      const log = a.vfs.writeBack.durableLog().path;
      const unsynced = a.vfs.writeBack.unsyncedFiles();
      expect(unsynced.length).toBe(2); // the closed file's spool and the log's tail
      expect(unsynced).toContain(log);
      // The worst case: the record made it to the disk, the spool's bytes did not.
      for (const f of unsynced) if (f !== log) await truncate(f, 0);
      await a.vfs.writeBack.uploads.close();
      const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
      await b.vfs.flushAll();
      expect(await a.remote.stat('closed')).toBeNull();
      expect(a.remote.commits.map((c) => c.fullpath)).toEqual(['fsynced']);
    });

    it('a power loss that kept the record of a closed small file but not its spool: the spool is written again from the record', async () => {
      const a = await gateway({ durability: { groupCommitMs: 60_000 } });
      holdUploads(a.faulty);
      await closeAndFsync(a.vfs);
      // The log reached the disk (an fsync of anything else, or the group commit), the spool did not.
      const other = await a.vfs.open('/A/other', { write: true, create: true });
      await other.fsync();
      await other.release();
      for (const name of await spools(a.dataDir)) await truncate(join(a.dataDir, 'journal', 'spool', name), 0);
      await a.vfs.writeBack.uploads.close();
      const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
      await b.vfs.flushAll();
      expect(a.remote.read('closed').toString()).toBe('closed only');
      expect(a.remote.read('fsynced').toString()).toBe('fsynced');
    });

    it('a crash with closed, not yet fsynced versions loses nothing', async () => {
      const a = await gateway({ durability: { groupCommitMs: 60_000 } });
      holdUploads(a.faulty);
      await closeAndFsync(a.vfs);
      await a.vfs.writeBack.uploads.close();
      const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
      await b.vfs.flushAll();
      expect(a.remote.read('closed').toString()).toBe('closed only');
      expect(a.remote.read('fsynced').toString()).toBe('fsynced');
    });

    it('the group commit fsyncs what was closed; an fsync of a closed file, flushAll and durability "close" at once', async () => {
      const a = await gateway({ durability: { groupCommitMs: 20 } });
      holdUploads(a.faulty);
      await closeAndFsync(a.vfs);
      await waitFor('the group commit to fsync every closed file', () => a.vfs.writeBack.unsyncedFiles(), { until: (files) => files.length === 0 });

      const b = await gateway({ durability: { groupCommitMs: 60_000 } });
      holdUploads(b.faulty);
      await closeAndFsync(b.vfs);
      const again = await b.vfs.open('/A/closed', { write: true });
      await again.fsync();
      await again.release();
      expect(b.vfs.writeBack.unsyncedFiles()).toEqual([]);
      await b.vfs.writeFile('/A/put', Buffer.from('put'));
      expect(b.vfs.writeBack.unsyncedFiles()).toEqual([b.vfs.writeBack.durableLog().path]); // a small file: in its record
      await b.vfs.flushAll({ timeoutMs: 100 }); // the uploads are held: it stops waiting, the journal is synced first
      expect(b.vfs.writeBack.unsyncedFiles()).toEqual([]);

      const c = await gateway({ durability: { mode: 'close', groupCommitMs: 60_000 } });
      holdUploads(c.faulty);
      await closeAndFsync(c.vfs);
      await c.vfs.writeFile('/A/put', Buffer.from('put'));
      expect(c.vfs.writeBack.unsyncedFiles()).toEqual([]);
    });
  });

  it('a file unlinked while a handle reads it stays readable through that handle, and goes from the service when it is closed', async () => {
    const a = await gateway();
    const data = Buffer.alloc(3 * 1024 * 1024);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7) & 0xff;
    a.remote.putFile('big.bin', data);
    const r = await a.vfs.open('/A/big.bin', { read: true });
    expect((await r.read(0, 1024 * 1024)).equals(data.subarray(0, 1024 * 1024))).toBe(true);
    await a.vfs.unlink('/A/big.bin');
    expect(await vfsCode(a.vfs.stat('/A/big.bin'))).toBe('ENOENT');
    expect((await a.vfs.readdir('/A')).map((x) => x.name)).not.toContain('big.bin');
    expect(await a.remote.stat('big.bin')).not.toBeNull(); // still readable where the handle reads
    expect((await r.read(1024 * 1024, 2 * 1024 * 1024)).equals(data.subarray(1024 * 1024))).toBe(true);
    await r.release();
    await waitFor('the deferred delete of big.bin', () => a.remote.stat('big.bin'), { until: (st) => st === null });

    // The deferred delete is journaled: a crash while the reader is open still deletes the file.
    a.remote.putFile('other.bin', data);
    a.vfs.dropCaches(); // another client's file (no feed in this test)
    const r2 = await a.vfs.open('/A/other.bin', { read: true });
    await r2.read(0, 10);
    await a.vfs.unlink('/A/other.bin');
    await a.vfs.writeBack.uploads.close();
    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await waitFor('the journaled delete of other.bin', () => a.remote.stat('other.bin'), { until: (st) => st === null });
    expect(await vfsCode(b.vfs.stat('/A/other.bin'))).toBe('ENOENT');
  });

  // Regressions found by the write-back model (write-back-model.test.ts), kept by name.

  it('regression: a handle that flushed, then a replace, then a write through the handle: the handle\'s bytes are uploaded', async () => {
    const { vfs, remote } = await gateway();
    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    await h.flush();
    await vfs.writeFile('/A/f', Buffer.alloc(0));
    await h.write(0, Buffer.from([0]));
    await h.release();
    await vfs.flushAll();
    expect([...remote.read('f')]).toEqual([0]);
  });

  it('regression: a handle closed after a replace makes its own content the path\'s (the last acknowledged)', async () => {
    const { vfs } = await gateway();
    const h = await vfs.open('/A/g', { read: true, write: true, create: true });
    await vfs.writeFile('/A/g', Buffer.from([0]));
    await h.release();
    expect(await readAll(vfs, '/A/g')).toBe('');
  });

  it('regression: a journaled version whose spool vanished reads as EIO, never as zeros', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    await a.vfs.writeFile('/A/f', Buffer.from('0123456789'));
    await a.vfs.writeBack.uploads.close();
    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    holdUploads(b.faulty);
    for (const name of await spools(a.dataDir)) await rm(join(a.dataDir, 'journal', 'spool', name));
    const r = await b.vfs.open('/A/f', { read: true });
    expect(await vfsCode(r.read(0, 10))).toBe('EIO');
    await r.release();
  });

  it('small files upload in a lane of their own, many at once, beside at most `concurrency` large ones', async () => {
    const { remote, vfs } = await heldLanes();
    await writeLaneFiles(vfs);
    // Every lane full: 5 small and 2 large commits under way, the rest waiting.
    await waitFor('five small and two large uploads under way', () => ({ ...remote.inFlight }), { until: (n) => n.small === 5 && n.large === 2 });
    remote.open();
    await vfs.flushAll();
    expect(remote.most).toEqual({ small: 5, large: 2 });
    expectLaneFiles(remote);
  });

  it('while applications are served, uploads go one a lane (starting one per 20 ms at most); a flush goes at full width', async () => {
    const { remote, vfs } = await heldLanes();
    // A front end serving requests without a pause (the last one "now", whenever now is).
    vfs.foreground.touch(Infinity);
    await writeLaneFiles(vfs);
    await waitFor('one small and one large upload under way', () => ({ ...remote.inFlight }), { until: (n) => n.small === 1 && n.large === 1 });
    // The claim is that time under load starts no second upload a lane: no event marks a start not made.
    // eslint-disable-next-line no-restricted-syntax -- time with the foreground busy is what is tested
    await pause(300);
    expect(remote.most).toEqual({ small: 1, large: 1 });
    // A flush asks for them: full width, the foreground busy or not.
    const flushed = vfs.flushAll();
    await waitFor('five small and two large uploads under way', () => ({ ...remote.inFlight }), { until: (n) => n.small === 5 && n.large === 2 });
    remote.open();
    await flushed;
    expectLaneFiles(remote);
  });

  it('a small file held in memory is uploaded from there: no spool file is ever written for it', async () => {
    /** Records whether each commit carried the bytes or named a file to read. */
    class RecordingRemote extends MemoryRemote {
      readonly sources: ('memory' | 'file')[] = [];
      override commit(...args: Parameters<MemoryRemote['commit']>): ReturnType<MemoryRemote['commit']> {
        this.sources.push(args[1].data ? 'memory' : 'file');
        return super.commit(...args);
      }
    }
    const remote = new RecordingRemote({ name: 'A', id: '1' });
    const { vfs, dataDir } = await gateway({ remote, uploadDelayMs: 60_000 });
    const h = await vfs.open('/A/small.txt', { write: true, create: true });
    await h.write(0, Buffer.from('kept in memory'));
    await h.release();
    expect(await spools(dataDir)).toEqual([]);
    const discards = vi.spyOn(UploadJournal.prototype, 'discardSpool');
    try {
      await vfs.flushAll();
      // Nor is a spool that was never made removed (an unlink through the thread pool, for nothing).
      expect(discards).not.toHaveBeenCalled();
    } finally {
      discards.mockRestore();
    }
    expect(remote.read('small.txt').toString()).toBe('kept in memory');
    expect(remote.sources).toEqual(['memory']);
    expect(await spools(dataDir)).toEqual([]);
  });

  it('a version waiting for its upload does not keep the context of the operation that made it', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const { vfs } = await gateway({ uploadDelayMs: 60_000 });
    let ref: WeakRef<object> | undefined;
    await (async () => {
      // What an operation hands the Vfs (the FUSE front end's carries its deadline's signal and more).
      const ctx = { operator: undefined, held: Buffer.alloc(1024 * 1024) };
      ref = new WeakRef(ctx);
      const h = await vfs.open('/A/kept.txt', { write: true, create: true }, ctx);
      await h.write(0, Buffer.from('waits for its upload'));
      await h.release();
    })();
    await waitFor('the operation\'s context collected', () => {
      gc();
      return ref!.deref() === undefined;
    });
    expect(vfs.status().localFiles).toBe(1);
  });
});
