import { describe, it, expect, afterEach, vi } from 'vitest';
import { appendFile, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { GatewayVfs } from '../../../../src/vfs/gateway-vfs.js';
import { MemoryRemote } from '../../../../src/vfs/memory-remote.js';
import { FaultyRemote } from '../../../../src/vfs/faulty-remote.js';
import { UploadJournal } from '../../../../src/vfs/write-back/upload-journal.js';
import { closeRecordEntry, decodeCloseRecord, encodeCloseRecord } from '../../../../src/vfs/write-back/engine-close-record.js';
import { nameLibraries } from '../../../../src/vfs/library-set.js';
import { MetadataCache } from '../../../../src/vfs/metadata-cache.js';
import { silentLogger } from '../../../../src/shared/log.js';
import { waitFor } from '../../../support/wait-for.js';
import { ManualClock } from '../../../support/manual-clock.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'journal-'));
  dirs.push(d);
  return d;
}

describe('UploadJournal and replay', { timeout: 15_000 }, () => {
  it('data acknowledged by close survives a stop before upload and is uploaded by the next start', async () => {
    const dataDir = await tempDir();
    const inner = new MemoryRemote({ name: 'L', id: '7' });
    const down = new FaultyRemote(inner);
    down.inject({ kind: 'fail', methods: ['commit'] });
    const first = await GatewayVfs.open({ libraries: [{ name: 'L', id: '7', remote: down }], dataDir, feedIntervalMs: 0, logger: silentLogger, upload: { retryBaseMs: 10_000 } });
    await first.writeFile('/L/kept.txt', Buffer.from('acknowledged'));
    expect(first.status().uploads).toHaveLength(1);
    await first.close();
    expect(inner.paths()).toEqual([]);
    const entries = await new UploadJournal(join(dataDir, 'journal')).entries();
    expect(entries.map((e) => [e.library, e.fullpath, e.size])).toEqual([['L', 'kept.txt', 12]]);

    const second = await GatewayVfs.open({ libraries: [{ name: 'L', id: '7', remote: inner }], dataDir, feedIntervalMs: 0, logger: silentLogger });
    expect((await second.stat('/L/kept.txt')).size).toBe(12);
    await second.flushAll();
    expect(inner.read('kept.txt').toString()).toBe('acknowledged');
    await second.close();
    expect(await new UploadJournal(join(dataDir, 'journal')).entries()).toEqual([]);
    expect(await readdir(join(dataDir, 'journal', 'spool'))).toEqual([]);
  });

  it('entries of a library no longer configured are kept (stranded), not dropped', async () => {
    const dataDir = await tempDir();
    const journal = new UploadJournal(join(dataDir, 'journal'));
    await journal.init();
    const id = journal.newId();
    await writeFile(journal.spoolPath(id), 'x');
    await journal.put({ id, library: 'Gone', fullpath: 'f', size: 1, mtimeMs: 1, createdMs: 1 });
    const vfs = await GatewayVfs.open({ libraries: [{ name: 'L', id: '1', remote: new MemoryRemote() }], dataDir, feedIntervalMs: 0, logger: silentLogger });
    expect(vfs.status().stranded).toEqual([{ id, library: 'Gone', fullpath: 'f' }]);
    await vfs.close();
    expect((await journal.entries()).map((e) => e.id)).toEqual([id]);
  });

  it('put and remove work alike before and after close() (folders kept open, then opened each time)', async () => {
    const dataDir = await tempDir();
    const journal = new UploadJournal(join(dataDir, 'journal'));
    await journal.init();
    const ids = [journal.newId(), journal.newId()];
    await writeFile(journal.spoolPath(ids[0]!), 'a');
    await journal.put({ id: ids[0]!, library: 'L', fullpath: 'a', size: 1, mtimeMs: 1, createdMs: 1 });
    await journal.close();
    await writeFile(journal.spoolPath(ids[1]!), 'b');
    await journal.put({ id: ids[1]!, library: 'L', fullpath: 'b', size: 1, mtimeMs: 1, createdMs: 2 }, { spoolSynced: false });
    expect((await journal.entries()).map((e) => e.fullpath)).toEqual(['a', 'b']);
    await journal.remove(ids[0]!);
    expect((await journal.entries()).map((e) => e.fullpath)).toEqual(['b']);
    expect(await readdir(journal.spoolDir)).toEqual([ids[1]]);
  });

  it('the spool pool: spools nobody needs are emptied into it once started (removed before); it is filled with empty files; entries() leaves it', { timeout: 90_000 }, async () => {
    const dataDir = await tempDir();
    const journal = new UploadJournal(join(dataDir, 'journal'));
    await journal.init();
    const [a, b, c] = [journal.newId(), journal.newId(), journal.newId()];
    for (const id of [a, b, c]) {
      await writeFile(journal.spoolPath(id!), `content of ${id}`);
      await journal.put({ id: id!, library: 'L', fullpath: id!, size: 27, mtimeMs: 1, createdMs: 1 });
    }
    await journal.remove(a!);
    expect(await readdir(journal.spoolDir)).not.toContain(a);
    expect(await readdir(journal.spoolDir)).not.toContain('.pool');
    await journal.startSpoolPool();
    // Filled in the background with empty files.
    await waitFor('the spool pool filled', async () => (await readdir(journal.poolDir)).length, { until: (n) => n === 4096, timeoutMs: 60_000, intervalMs: 25 });
    await journal.remove(b!);
    await journal.discardSpool(c!);
    expect((await readdir(journal.spoolDir)).sort()).toEqual(['.pool']);
    // Full: the spools went (the pool keeps 4,096 at most: it was counted full just now), every file there empty.
    const pooled = await readdir(journal.poolDir);
    expect(pooled.length).toBe(4096);
    for (const name of pooled.slice(0, 20)) expect((await readFile(join(journal.poolDir, name))).length).toBe(0);
    // Taken from (as a front end does, by a rename) and then recycled: the spool comes back emptied.
    const taken = journal.spoolPath(journal.newId());
    await rename(join(journal.poolDir, pooled[0]!), taken);
    await writeFile(taken, 'written by the kernel');
    const [d] = [journal.newId()];
    await rename(taken, journal.spoolPath(d));
    await journal.put({ id: d, library: 'L', fullpath: 'd', size: 21, mtimeMs: 1, createdMs: 2 });
    for (const name of (await readdir(journal.poolDir)).slice(0, 64)) await rm(join(journal.poolDir, name));
    // A pool that looks full is counted again at most once a second: the clock moved on past it.
    const now = Date.now();
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(now + 1100);
    try {
      await journal.remove(d);
    } finally {
      vi.useRealTimers();
    }
    // The pool looked full (its count knew nothing of what was taken): counted again, it takes the spool.
    const after = await readdir(journal.poolDir);
    expect(after.length).toBe(4096 - 65 + 1);
    for (const name of after) expect((await readFile(join(journal.poolDir, name))).length).toBe(0);
    // Replay's clean-up of spools without an entry leaves the pool alone.
    await journal.entries();
    expect((await readdir(journal.poolDir)).length).toBe(4096 - 65 + 1);
    await journal.close();
  });

  it('a small append is written on the calling thread; after one slower than the bound, appends go through the thread pool', async () => {
    const dataDir = await tempDir();
    const fast = new UploadJournal(join(dataDir, 'fast'));
    await fast.init();
    // An append slower than 1 s never happens here: every append is written on the calling thread.
    const put = (j: UploadJournal, name: string, n: number) => j.put({ id: j.newId(), library: 'L', fullpath: name, size: 1, mtimeMs: 1, createdMs: n }, { inline: Buffer.from('x'), sync: false });
    for (let i = 0; i < 3; i++) await put(fast, `f${i}`, i);
    expect(fast.appendCounts).toEqual({ inline: 3, pooled: 0 });
    // Every append counts as slow: the first is written on the calling thread, the ones after it are not.
    const slow = new UploadJournal(join(dataDir, 'slow'), 1000, { slowAppendMs: -1 });
    await slow.init();
    for (let i = 0; i < 3; i++) await put(slow, `s${i}`, i);
    expect(slow.appendCounts).toEqual({ inline: 1, pooled: 2 });
    // Either way the records are in the log, in order.
    expect((await slow.entries()).map((e) => e.fullpath)).toEqual(['s0', 's1', 's2']);
    await fast.close();
    await slow.close();
  });

  it('the group commit waits on the journal\'s clock: a put without sync is fsynced once groupCommitMs has passed on it', async () => {
    const clock = new ManualClock();
    const journal = new UploadJournal(join(await tempDir(), 'journal'), 60_000, { clock });
    await journal.init();
    const id = journal.newId();
    await writeFile(journal.spoolPath(id), 'not durable yet');
    await journal.put({ id, library: 'L', fullpath: 'f', size: 15, mtimeMs: 1, createdMs: 1 }, { sync: false });
    const owed = [journal.spoolPath(id), journal.durableLog().path];
    expect(journal.unsyncedFiles()).toEqual(owed);
    // One timer, a minute long on the clock (real time never brings it): not due a millisecond before.
    expect(clock.pending).toBe(1);
    clock.advance(59_999);
    expect(clock.pending).toBe(1);
    expect(journal.unsyncedFiles()).toEqual(owed);
    clock.advance(1);
    expect(clock.pending).toBe(0);
    await waitFor('the group commit to fsync the spool and the log', () => journal.unsyncedFiles(), { until: (f) => f.length === 0 });
    await journal.close();
  });

  it('a record torn by a power loss (or a failed write) is skipped; the records around it stay', async () => {
    const dataDir = await tempDir();
    const journal = new UploadJournal(join(dataDir, 'journal'));
    await journal.init();
    const ids = [journal.newId(), journal.newId()];
    await writeFile(journal.spoolPath(ids[0]!), 'a');
    await journal.put({ id: ids[0]!, library: 'L', fullpath: 'a', size: 1, mtimeMs: 1, createdMs: 1 });
    const log = journal.durableLog().path;
    await appendFile(log, 'ffffffffffff {"rm":"' + ids[0]! + '"}\n'); // a whole line whose check does not match
    await writeFile(journal.spoolPath(ids[1]!), 'b');
    await journal.put({ id: ids[1]!, library: 'L', fullpath: 'b', size: 1, mtimeMs: 1, createdMs: 2 });
    await appendFile(log, '0123456789ab {"put":{"id":"'); // the start of a record, cut off
    await journal.close();
    const again = new UploadJournal(join(dataDir, 'journal'));
    expect((await again.entries()).map((e) => e.fullpath)).toEqual(['a', 'b']);
  });

  it('a small file\'s bytes travel in its record: a spool lost to a power loss is written again at start-up', async () => {
    const dataDir = await tempDir();
    const journal = new UploadJournal(join(dataDir, 'journal'));
    await journal.init();
    const id = journal.newId();
    await writeFile(journal.spoolPath(id), 'small content');
    await journal.put({ id, library: 'L', fullpath: 's', size: 13, mtimeMs: 1, createdMs: 1 }, { inline: Buffer.from('small content') });
    await journal.close();
    await rm(journal.spoolPath(id));
    const again = new UploadJournal(join(dataDir, 'journal'));
    expect((await again.entries()).map((e) => e.fullpath)).toEqual(['s']);
    expect(await readFile(again.spoolPath(id), 'utf8')).toBe('small content');
    // The log rewritten at that start keeps the line carrying the bytes, also after a rewrite of the entry.
    await again.rewrite({ id, library: 'L', fullpath: 'renamed', size: 13, mtimeMs: 2, createdMs: 1 });
    await again.close();
    await rm(again.spoolPath(id));
    const third = new UploadJournal(join(dataDir, 'journal'));
    expect((await third.entries()).map((e) => e.fullpath)).toEqual(['renamed']);
    expect(await readFile(third.spoolPath(id), 'utf8')).toBe('small content');
  });

  it('a record is one line: a check (the first 12 hex digits of its JSON\'s SHA-1), a space, the JSON; names and bytes of any kind come back', async () => {
    const dataDir = await tempDir();
    const journal = new UploadJournal(join(dataDir, 'journal'));
    await journal.init();
    const bytes = Buffer.from([0, 255, 10, 34, 92, 0xe2, 0x82, 0xac, 7]);
    const entries = [
      { id: journal.newId(), library: 'Bücher', fullpath: 'naïve "quoted"\\back\nslash €/日本.txt', size: bytes.length, mtimeMs: 5, createdMs: 6, seq: 7 },
      { id: journal.newId(), library: 'L', fullpath: 'empty', size: 0, mtimeMs: 1, createdMs: 1 },
      { id: journal.newId(), library: 'L', fullpath: 'spooled', size: 3, mtimeMs: 1, createdMs: 1, sha1: 'a'.repeat(40) },
    ];
    for (const e of entries.slice(0, 2)) await journal.put(e, { inline: e.size === 0 ? Buffer.alloc(0) : bytes });
    await writeFile(journal.spoolPath(entries[2]!.id), 'abc');
    await journal.put(entries[2]!);
    await journal.close();
    const lines = (await readFile(journal.durableLog().path, 'utf8')).split('\n');
    expect(lines.pop()).toBe('');
    const records = [{ put: entries[0], data: bytes.toString('base64') }, { put: entries[1], data: '' }, { put: entries[2] }];
    expect(lines).toEqual(records.map((r) => {
      const json = JSON.stringify(r);
      return `${createHash('sha1').update(json).digest('hex').slice(0, 12)} ${json}`;
    }));
    // The small files' spools were never written (a power loss took them): replay writes them from the lines.
    const again = new UploadJournal(join(dataDir, 'journal'));
    expect((await again.entries()).map((e) => [e.library, e.fullpath, e.size])).toEqual(entries.map((e) => [e.library, e.fullpath, e.size]));
    expect(await readFile(again.spoolPath(entries[0]!.id))).toEqual(bytes);
    await again.close();
  });

  it('the log is rewritten with only the live entries: at start-up, and once it holds mostly removed ones', async () => {
    const dataDir = await tempDir();
    const journal = new UploadJournal(join(dataDir, 'journal'));
    await journal.init();
    const lines = async (): Promise<number> => (await readFile(journal.durableLog().path, 'utf8')).split('\n').filter(Boolean).length;
    const keep = journal.newId();
    await writeFile(journal.spoolPath(keep), 'k');
    await journal.put({ id: keep, library: 'L', fullpath: 'kept', size: 1, mtimeMs: 1, createdMs: 1 }, { sync: false });
    for (let i = 0; i < 1500; i++) {
      const id = journal.newId();
      await journal.put({ id, library: 'L', fullpath: `f${i}`, size: 0, mtimeMs: 1, createdMs: 2 }, { sync: false, inline: Buffer.alloc(0) });
      await journal.remove(id, { durable: false });
    }
    expect(await lines()).toBeLessThan(2100); // rewritten on the way: never more than the live entries and 2,000 removed ones
    await journal.close();
    const again = new UploadJournal(join(dataDir, 'journal'));
    expect((await again.entries()).map((e) => e.fullpath)).toEqual(['kept']);
    expect(await lines()).toBe(1);
    expect(await readdir(again.spoolDir)).toEqual([keep]);
  });

  it('entries that keep two lines each (bytes, then a rename) do not make every append rewrite the log', async () => {
    const dataDir = await tempDir();
    const journal = new UploadJournal(join(dataDir, 'journal'));
    await journal.init();
    // 2,100 small files, each renamed after its close (an rsync): the line with its bytes and its last line
    // stay at every rewrite, 4,200 lines for 2,100 live entries; their uploads wait.
    const entries = [];
    for (let i = 0; i < 2100; i++) {
      const e = { id: journal.newId(), library: 'L', fullpath: `.f${i}.tmp`, size: 1, mtimeMs: 1, createdMs: 1 };
      await journal.put(e, { sync: false, inline: Buffer.from('x') });
      entries.push(e);
    }
    for (const e of entries) await journal.rewrite({ ...e, fullpath: e.fullpath.slice(1, -4) });
    // Their uploads end one by one, each removing its entry.
    const before = journal.logRewrites;
    for (const e of entries.slice(0, 300)) await journal.remove(e.id, { durable: false });
    // Each rewrite reads and writes every line kept: one is due only once as many records came since.
    expect(journal.logRewrites - before).toBeLessThanOrEqual(1);
    await journal.close();
    const again = new UploadJournal(join(dataDir, 'journal'));
    const paths = (await again.entries()).map((e) => e.fullpath);
    expect(paths).toHaveLength(1800);
    expect(paths).toContain('f2099');
    expect(paths).not.toContain('f0');
    expect(paths).not.toContain('.f2099.tmp');
  });

  it('entries of the earlier layout (a file each) are read at start-up and moved into the log', async () => {
    const dataDir = await tempDir();
    const journal = new UploadJournal(join(dataDir, 'journal'));
    await journal.init();
    const id = journal.newId();
    await writeFile(journal.spoolPath(id), 'old');
    await mkdir(join(dataDir, 'journal', 'entries'));
    await writeFile(join(dataDir, 'journal', 'entries', `${id}.json`), JSON.stringify({ id, library: 'L', fullpath: 'old.txt', size: 3, mtimeMs: 1, createdMs: 1 }));
    expect((await journal.entries()).map((e) => e.fullpath)).toEqual(['old.txt']);
    expect(await readdir(join(dataDir, 'journal'))).not.toContain('entries');
    const again = new UploadJournal(join(dataDir, 'journal'));
    expect((await again.entries()).map((e) => [e.id, e.fullpath])).toEqual([[id, 'old.txt']]);
  });

  it('spool files without an entry (never acknowledged) are removed on start', async () => {
    const dataDir = await tempDir();
    const journal = new UploadJournal(join(dataDir, 'journal'));
    await journal.init();
    await writeFile(journal.spoolPath(journal.newId()), 'half written');
    expect(await journal.entries()).toEqual([]);
    expect(await readdir(journal.spoolDir)).toEqual([]);
  });
});

/** A close record as the FUSE engine writes it to a side log (its own format: engine-close-record.ts). */
function sideLine(e: { id: string; library: string; fullpath: string; seq: number }, data: Buffer): Buffer {
  return encodeCloseRecord({ ...e, mtimeNs: 5_000_000n, createdMs: 5, data });
}

/** Puts and removes entries until the log is rewritten (it holds mostly removed ones). */
async function churn(journal: UploadJournal, count = 1500): Promise<void> {
  for (let i = 0; i < count; i++) {
    const id = journal.newId();
    await journal.put({ id, library: 'L', fullpath: `churn${i}`, size: 0, mtimeMs: 1, createdMs: 2 }, { sync: false, inline: Buffer.alloc(0) });
    await journal.remove(id, { durable: false });
  }
}

/** A journal in a new data folder, ready for puts. */
async function freshJournal(): Promise<{ dir: string; journal: UploadJournal }> {
  const dir = join(await tempDir(), 'journal');
  const journal = new UploadJournal(dir);
  await journal.init();
  return { dir, journal };
}

describe('UploadJournal side logs (closes the FUSE engine answers)', { timeout: 15_000 }, () => {
  const sideLogs = async (dir: string): Promise<string[]> => (await readdir(dir)).filter((n) => n.startsWith('closes.')).sort();

  it('a side record the journal has no line of comes back at start-up; the journal\'s own lines about an id supersede its side record; the side logs go', async () => {
    const { dir, journal } = await freshJournal();
    const [pending, renamed, uploaded] = [journal.newId(), journal.newId(), journal.newId()];
    const bytes = Buffer.from('closed through the mount "ñ"\n');
    await writeFile(join(dir, `closes.${journal.newId()}.log`), Buffer.concat([
      sideLine({ id: pending, library: 'L', fullpath: 'd/pending "q".txt', seq: 10 }, bytes),
      sideLine({ id: renamed, library: 'L', fullpath: 'd/before.txt', seq: 11 }, Buffer.from('r')),
      sideLine({ id: uploaded, library: 'L', fullpath: 'd/up.txt', seq: 12 }, Buffer.from('u')),
    ]));
    // What the Vfs journaled of two of them meanwhile: one renamed since, one uploaded (removed).
    await journal.put({ id: renamed, library: 'L', fullpath: 'd/after.txt', size: 1, mtimeMs: 6, createdMs: 6, seq: 20 }, { inline: Buffer.from('r') });
    await journal.put({ id: uploaded, library: 'L', fullpath: 'd/up.txt', size: 1, mtimeMs: 6, createdMs: 6, seq: 21 }, { inline: Buffer.from('u') });
    await journal.remove(uploaded);
    await journal.close();

    const again = new UploadJournal(dir);
    const entries = await again.entries();
    expect(entries.map((e) => [e.id, e.fullpath])).toEqual([[pending, 'd/pending "q".txt'], [renamed, 'd/after.txt']]);
    expect(await readFile(again.spoolPath(pending))).toEqual(bytes);
    expect(await sideLogs(dir)).toEqual([]);
    await again.close();
    // Moved into the journal's own log: a third start finds the same.
    const third = new UploadJournal(dir);
    expect((await third.entries()).map((e) => e.fullpath)).toEqual(['d/pending "q".txt', 'd/after.txt']);
    await third.close();
  });

  it('a side record cut short (a crash mid-write, a write the disk refused part of) is ignored; the whole records before and after it come back', async () => {
    const { dir, journal } = await freshJournal();
    const [before, cut, after, tail] = [journal.newId(), journal.newId(), journal.newId(), journal.newId()];
    const cutShort = sideLine({ id: cut, library: 'L', fullpath: 'cut.txt', seq: 2 }, Buffer.alloc(300, 1));
    const torn = sideLine({ id: tail, library: 'L', fullpath: 'tail.txt', seq: 4 }, Buffer.from('tail'));
    await writeFile(join(dir, `closes.${journal.newId()}.log`), Buffer.concat([
      sideLine({ id: before, library: 'L', fullpath: 'before.txt', seq: 1 }, Buffer.from('b')),
      cutShort.subarray(0, 200),
      sideLine({ id: after, library: 'L', fullpath: 'after.txt', seq: 3 }, Buffer.from('a')),
      torn.subarray(0, torn.length - 1),
    ]));
    expect((await journal.entries()).map((e) => [e.id, e.fullpath])).toEqual([[before, 'before.txt'], [after, 'after.txt']]);
    expect(await readFile(journal.spoolPath(after), 'utf8')).toBe('a');
    await journal.close();
  });

  it('a side log an earlier version of the engine wrote (the journal\'s own put lines) is still read at start-up', async () => {
    const { dir, journal } = await freshJournal();
    const id = journal.newId();
    const bytes = Buffer.from('closed before the upgrade');
    const json = `{"put":{"id":"${id}","library":"L","fullpath":"old.txt","size":${bytes.length},"mtimeMs":5,"createdMs":5,"seq":7,"sha1":"${createHash('sha1').update(bytes).digest('hex')}"},"data":"${bytes.toString('base64')}"}`;
    await writeFile(join(dir, `closes.${journal.newId()}.log`), `${createHash('sha1').update(json).digest('hex').slice(0, 12)} ${json}\n`);
    expect((await journal.entries()).map((e) => [e.id, e.fullpath])).toEqual([[id, 'old.txt']]);
    expect(await readFile(journal.spoolPath(id))).toEqual(bytes);
    await journal.close();
  });

  it('with a side writer, a rewrite of the log first moves it to a new side log, drops the earlier ones and keeps the removals of its records that are gone', async () => {
    const { dir, journal } = await freshJournal();
    const paths: string[] = [];
    const gone = journal.newId();
    const writer = {
      settle: async (): Promise<void> => undefined,
      async switchTo(path: string): Promise<void> {
        paths.push(path);
        if (paths.length !== 2) return;
        // While the writer moves, a file closed into the new side log is journaled, uploaded and settled.
        await appendFile(path, sideLine({ id: gone, library: 'L', fullpath: 'gone.txt', seq: 30 }, Buffer.from('g')));
        await journal.put({ id: gone, library: 'L', fullpath: 'gone.txt', size: 1, mtimeMs: 1, createdMs: 1, seq: 31 }, { sync: false, inline: Buffer.from('g') });
        await journal.remove(gone, { durable: false });
        await journal.sideRecordSettled(gone);
      },
    };
    await journal.attachSideWriter(writer);
    expect(paths).toHaveLength(1);
    await appendFile(paths[0]!, sideLine({ id: journal.newId(), library: 'L', fullpath: 'settled.txt', seq: 1 }, Buffer.from('s')));
    await churn(journal);
    await waitFor('the first side log dropped', async () => paths.length === 2 && !(await sideLogs(dir)).includes(paths[0]!.split('/').pop()!));
    expect(await sideLogs(dir)).toEqual([paths[1]!.split('/').pop()]);
    journal.detachSideWriter(writer);
    await journal.close(); // after the rewrite under way
    // A crash now: the side log being written still has the record of the file that is gone; the
    // rewritten log's removal line keeps it from coming back.
    const again = new UploadJournal(dir);
    expect(await again.entries()).toEqual([]);
    await again.close();
  });

  it('the Vfs offers its journal for answered closes unless closes wait for their fsync, the gateway is read-only, or the library checks each new file per member', async () => {
    const remote = new MemoryRemote({ name: 'L', id: '7' });
    const checked = Object.assign(new MemoryRemote({ name: 'M', id: '8' }), { checkWrite: async () => undefined });
    const open = async (opts: { durability?: { mode: 'close' }; readOnly?: boolean } = {}): Promise<GatewayVfs> =>
      GatewayVfs.open({ libraries: [{ name: 'L', id: '7', remote }, { name: 'M', id: '8', remote: checked }], dataDir: await tempDir(), feedIntervalMs: 0, logger: silentLogger, ...opts });
    const vfs = await open();
    expect(vfs.sideJournal()).toBeDefined();
    expect(vfs.answeredClosesIn('/L')).toEqual({ library: 'L', fullpath: '' });
    expect(vfs.answeredClosesIn('/L/a/b')).toEqual({ library: 'L', fullpath: 'a/b' });
    expect(vfs.answeredClosesIn('/')).toBeUndefined();
    expect(vfs.answeredClosesIn('/M/a')).toBeUndefined();
    await vfs.close();
    expect(vfs.sideJournal()).toBeUndefined();
    for (const opts of [{ durability: { mode: 'close' as const } }, { readOnly: true }]) {
      const other = await open(opts);
      expect(other.sideJournal()).toBeUndefined();
      await other.close();
    }
  });

  it('a side record journaled from what it decodes to: the journal\'s own put line, its bytes back at the next start after the side log went', async () => {
    const { dir, journal } = await freshJournal();
    const id = journal.newId();
    const bytes = Buffer.from('closed by the engine');
    const line = sideLine({ id, library: 'L', fullpath: 'd/taken "q".txt', seq: 40 }, bytes);
    await writeFile(join(dir, `closes.${journal.newId()}.log`), line);
    const record = decodeCloseRecord(line)!;
    const entry = closeRecordEntry(record);
    expect(entry).toEqual({ id, library: 'L', fullpath: 'd/taken "q".txt', size: bytes.length, mtimeMs: 5, createdMs: 5, seq: 40, sha1: createHash('sha1').update(bytes).digest('hex') });
    await journal.put(entry, { sync: false, inline: record.data });
    // The journal's log holds a line of its own format (check, space, JSON), never the engine's bytes.
    await journal.syncAll();
    const own = await readFile(join(dir, 'journal.log'));
    expect(own.includes(line)).toBe(false);
    expect(own.toString()).toMatch(/^[0-9a-f]{12} \{"put":\{"id":"[0-9a-f]{16}".*\}\n$/);
    await journal.sideRecordSettled(id);
    await churn(journal);
    // Settled: the side log goes with the rewrite, the journal's own copy of the line stays.
    await waitFor('the side log dropped', async () => (await sideLogs(dir)).length === 0);
    await journal.close();
    const again = new UploadJournal(dir);
    expect((await again.entries()).map((e) => [e.id, e.fullpath, e.seq])).toEqual([[id, 'd/taken "q".txt', 40]]);
    await rm(again.spoolPath(id), { force: true }); // lost to a power loss: written again from the line
    await again.close();
    const third = new UploadJournal(dir);
    expect(await third.entries()).toHaveLength(1);
    expect(await readFile(third.spoolPath(id))).toEqual(bytes);
    await third.close();
  });

  it('regression: a version held by its side record (the log took no line: a full disk) keeps its side log through rewrites of the log; its line is written at a group commit once the log takes appends', async () => {
    const dir = join(await tempDir(), 'journal');
    const clock = new ManualClock();
    const journal = new UploadJournal(dir, 1000, { clock });
    await journal.init();
    const id = journal.newId();
    const bytes = Buffer.from('held by its record');
    const line = sideLine({ id, library: 'L', fullpath: 'held.txt', seq: 7 }, bytes);
    await writeFile(join(dir, `closes.${journal.newId()}.log`), line);
    // The log refuses every append (a folder in its place, as a full disk would).
    await mkdir(join(dir, 'journal.log'));
    journal.holdSideRecord(closeRecordEntry(decodeCloseRecord(line)!), bytes);
    await journal.syncAll().catch(() => undefined);
    expect(journal.heldBySideRecords).toBe(1);
    await rm(join(dir, 'journal.log'), { recursive: true });
    // Rewrites of the log come due meanwhile: none drops the side log of the held version.
    await churn(journal);
    expect(await sideLogs(dir)).toHaveLength(1);
    // The next group commit writes its line; then the side log may go.
    clock.advance(1000);
    await waitFor('the held version\'s line written', async () => journal.heldBySideRecords, { until: (n) => n === 0 });
    expect(await readFile(join(dir, 'journal.log'), 'utf8')).toContain(id);
    await churn(journal);
    await waitFor('the side log dropped', async () => (await sideLogs(dir)).length === 0);
    await journal.close();
    const again = new UploadJournal(dir);
    expect((await again.entries()).map((e) => [e.id, e.fullpath])).toEqual([[id, 'held.txt']]);
    expect(await readFile(again.spoolPath(id), 'utf8')).toBe('held by its record');
    await again.close();
  });

  it('a side record the Vfs could not apply is kept (a put line of the journal\'s own): through rewrites of the log, back at the next start', async () => {
    const { dir, journal } = await freshJournal();
    const id = journal.newId();
    const line = sideLine({ id, library: 'L', fullpath: 'refused.txt', seq: 3 }, Buffer.from('kept bytes'));
    await writeFile(join(dir, `closes.${journal.newId()}.log`), line);
    await journal.keepSideRecord(line);
    await journal.sideRecordSettled(journal.newId()); // one that went: a removal line, no entry
    await churn(journal);
    // No side writer: every side log is settled and goes with the rewrite.
    await waitFor('the side logs dropped', async () => (await sideLogs(dir)).length === 0);
    await journal.close();
    const again = new UploadJournal(dir);
    expect((await again.entries()).map((e) => [e.id, e.fullpath])).toEqual([[id, 'refused.txt']]);
    expect(await readFile(again.spoolPath(id), 'utf8')).toBe('kept bytes');
    await again.close();
  });
});

describe('library folder names', () => {
  it('collisions get a stable suffix from the library id; the smallest id keeps the name', () => {
    const named = nameLibraries([
      { wanted: 'Team', id: '12' }, { wanted: 'Docs', id: '3' }, { wanted: 'Team', id: '4' },
    ]);
    expect(named.map((l) => l.name)).toEqual(['Team (12)', 'Docs', 'Team']);
    const reordered = nameLibraries([{ wanted: 'Team', id: '4' }, { wanted: 'Team', id: '12' }]);
    expect(reordered.map((l) => l.name)).toEqual(['Team', 'Team (12)']);
  });
});

describe('MetadataCache', () => {
  it('is bounded by count, keeps negative entries, and invalidates a moved folder below', () => {
    const cache = new MetadataCache({ maxEntries: 10 });
    for (let i = 0; i < 50; i++) cache.setEntry('L', `f${i}`, { id: `i${i}`, fullpath: `f${i}`, name: `f${i}`, isDir: false, size: 1, mtimeMs: 0, ctimeMs: 0 });
    expect(cache.stats().entries).toBe(10);
    cache.setEntry('L', 'missing', null);
    expect(cache.getEntry('L', 'missing')).toBeNull();
    cache.setEntry('L', 'd', { id: 'D', fullpath: 'd', name: 'd', isDir: true, size: 0, mtimeMs: 0, ctimeMs: 0 });
    cache.setListing('L', 'd', [{ id: 'X', fullpath: 'd/x', name: 'x', isDir: false, size: 1, mtimeMs: 0, ctimeMs: 0 }]);
    expect(cache.getEntry('L', 'd/x')!.id).toBe('X');
    cache.upsert('L', { id: 'D', fullpath: 'e', name: 'e', isDir: true, size: 0, mtimeMs: 0, ctimeMs: 0 });
    expect(cache.getEntry('L', 'd')).toBeNull();
    expect(cache.getListing('L', 'd')).toBeUndefined();
    expect(cache.getEntry('L', 'd/x')).toBeUndefined();
  });

  it('is bounded by memory', () => {
    const cache = new MetadataCache({ maxBytes: 100_000 });
    for (let i = 0; i < 5000; i++) cache.setEntry('L', `f${i}`, { id: `i${i}`, fullpath: `f${i}`, name: `f${i}`, isDir: false, size: 1, mtimeMs: 0, ctimeMs: 0 });
    expect(cache.stats().bytes).toBeLessThanOrEqual(100_000);
    expect(cache.stats().entries).toBeLessThan(5000);
  });
});
