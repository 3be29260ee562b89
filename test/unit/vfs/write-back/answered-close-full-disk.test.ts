/**
 * A close the FUSE engine answered itself, applied once the data folder is full: the engine's close record
 * is in its side log already, so applying it needs no new disk space. The file stays shown and saved (its
 * record stands for it until the journal can write its own line), across a crash too.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { statSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, DiskFaults, FaultyRemote, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';
import { encodeCloseRecord } from '../../../../src/vfs/write-back/engine-close-record.js';
import type { SideLogWriter } from '../../../../src/vfs/engine-lease.js';
import { readAll } from '../../../support/vfs.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

interface Gateway { vfs: GatewayVfs; remote: MemoryRemote; faulty: FaultyRemote; disk: DiskFaults; dataDir: string; sideLog: () => string }

/**
 * A gateway over one MemoryRemote with a side writer attached, as the engine's (it appends records to the
 * side log it is switched to). A group commit far away: what a crash finds is what was written, not synced.
 */
async function gateway(opts: { dataDir?: string; remote?: MemoryRemote } = {}): Promise<Gateway> {
  const remote = opts.remote ?? new MemoryRemote({ name: 'A', id: '1' });
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'cloudlib-full-close-')));
  if (!opts.dataDir) cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const faulty = new FaultyRemote(remote);
  const disk = new DiskFaults();
  const vfs = await createVfs({ libraries: [{ name: 'A', remote: faulty }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 20, retryMaxMs: 100 }, diskFaults: disk, durability: { groupCommitMs: 600_000 } });
  cleanups.push(() => vfs.close());
  let path = '';
  const writer: SideLogWriter = {
    switchTo: (p) => {
      path = p;
      return Promise.resolve();
    },
    settle: () => Promise.resolve(),
  };
  await vfs.sideJournal()!.attachSideWriter(writer);
  return { vfs, remote, faulty, disk, dataDir, sideLog: () => path };
}

/**
 * The engine's three steps for a file it created with passthrough: the create (exclusive, its journal id),
 * the spool it made handed to the kernel, which writes `data`; the close record appended to the side log.
 * Answers the handle, the spool's end and the close to apply.
 */
async function engineCreated(g: Gateway, fullpath: string, data: Buffer): Promise<{ flush: () => Promise<void>; done: () => Promise<void>; id: string }> {
  const id = randomBytes(8).toString('hex');
  const spool = join(g.vfs.sideJournal()!.spoolFolderPath(), id);
  await writeFile(spool, '');
  const h = await g.vfs.open(`/A/${fullpath}`, { write: true, create: true, exclusive: true, journalId: id, spoolMade: true });
  const handed = await h.adoptSpool!();
  expect(handed, 'the spool handed to the kernel').toBeDefined();
  writeSync(handed!.fd, data, 0, data.length, 0);
  const mtimeNs = statSync(spool, { bigint: true }).mtimeNs;
  const record = encodeCloseRecord({ id, library: 'A', fullpath, mtimeNs, createdMs: Date.now(), seq: Date.now() * 1000, data });
  await appendFile(g.sideLog(), record);
  return {
    id,
    flush: () => h.flush({ record, spoolMtimeNs: mtimeNs }),
    done: async () => {
      handed!.end();
      await h.release();
    },
  };
}

describe('a close the engine answered, applied on a full disk', { timeout: 20_000 }, () => {
  it('regression: applied when the journal cannot write its line, the file stays shown, is uploaded, and its line is written later', async () => {
    const g = await gateway();
    const data = Buffer.from('answered by the engine before the disk filled\n');
    const c = await engineCreated(g, 'c', data);
    // The next step filled the disk: the journal's line of the close cannot be written.
    g.disk.fail('journal', 'ENOSPC', 1);
    await c.flush();
    await c.done();
    expect(await readAll(g.vfs, '/A/c')).toBe(data.toString());
    expect((await g.vfs.readdir('/A')).map((e) => e.name)).toEqual(['c']);
    // Room again: the next group commit writes the journal's own line (flushAll runs one), and it is uploaded.
    await g.vfs.flushAll({ timeoutMs: 10_000 });
    expect(g.remote.read('c').equals(data)).toBe(true);
    expect(await readFile(join(g.dataDir, 'journal', 'journal.log'), 'utf8'), 'the journal\'s own line of the close').toContain(c.id);
  });

  it('regression: a crash while the file is held by its close record alone brings it back at the next start, whole', async () => {
    const first = await gateway();
    first.faulty.inject({ kind: 'delay', methods: ['commit'], delayMs: 600_000 });
    const data = Buffer.from('saved, then the gateway was killed\n');
    const c = await engineCreated(first, 'kept.txt', data);
    first.disk.fail('journal', 'ENOSPC', 1);
    await c.flush();
    await c.done();
    // kill -9: nothing closed, no group commit; a second gateway on the same data folder.
    const second = await gateway({ dataDir: first.dataDir, remote: first.remote });
    expect(await readAll(second.vfs, '/A/kept.txt')).toBe(data.toString());
    await second.vfs.flushAll({ timeoutMs: 10_000 });
    expect(first.remote.read('kept.txt').equals(data)).toBe(true);
  });

  it('regression: a close the engine answered of a file whose writes it answered too (no passthrough), applied when the journal cannot write its line, keeps the file', async () => {
    const g = await gateway();
    const data = Buffer.from('written and closed through the engine, applied by JavaScript after\n');
    const id = randomBytes(8).toString('hex');
    // The engine's answered create and writes, applied; then its close, with the record it wrote.
    const h = await g.vfs.open('/A/mem.txt', { write: true, create: true, exclusive: true, journalId: id });
    await h.write(0, data.subarray(0, 10));
    await h.write(10, data.subarray(10));
    const record = encodeCloseRecord({ id, library: 'A', fullpath: 'mem.txt', mtimeNs: BigInt(Date.now()) * 1_000_000n, createdMs: Date.now(), seq: Date.now() * 1000, data });
    await appendFile(g.sideLog(), record);
    g.disk.fail('journal', 'ENOSPC', 1);
    await h.flush({ record });
    await h.release();
    expect(await readAll(g.vfs, '/A/mem.txt')).toBe(data.toString());
    await g.vfs.flushAll({ timeoutMs: 10_000 });
    expect(g.remote.read('mem.txt').equals(data)).toBe(true);
  });

  it('a record that is not the content sealed (written on since) stands for nothing: the full disk fails the close', async () => {
    const g = await gateway();
    const id = randomBytes(8).toString('hex');
    const h = await g.vfs.open('/A/other.txt', { write: true, create: true, exclusive: true, journalId: id });
    await h.write(0, Buffer.from('what the handle holds'));
    const record = encodeCloseRecord({ id, library: 'A', fullpath: 'other.txt', mtimeNs: 1n, createdMs: Date.now(), seq: Date.now() * 1000, data: Buffer.from('something else') });
    g.disk.fail('journal', 'ENOSPC', 1);
    await expect(h.flush({ record })).rejects.toMatchObject({ code: 'ENOSPC' });
    await h.release().catch(() => undefined);
  });

  it('regression: files the engine made closed all by itself (createClosed) are made on a full disk, held by their records', async () => {
    const g = await gateway();
    const files = await Promise.all(['x', 'y'].map(async (name) => {
      const data = Buffer.from(`file ${name}\n`);
      const id = randomBytes(8).toString('hex');
      const spool = join(g.vfs.sideJournal()!.spoolFolderPath(), id);
      await writeFile(spool, data);
      const spoolMtimeNs = statSync(spool, { bigint: true }).mtimeNs;
      const record = encodeCloseRecord({ id, library: 'A', fullpath: name, mtimeNs: spoolMtimeNs, createdMs: Date.now(), seq: Date.now() * 1000, data });
      await appendFile(g.sideLog(), record);
      return { path: `/A/${name}`, journalId: id, closed: { record, spoolMtimeNs }, data };
    }));
    g.disk.fail('journal', 'ENOSPC', 2);
    expect(await g.vfs.createClosed(files.map(({ path, journalId, closed }) => ({ path, journalId, closed })))).toEqual([true, true]);
    for (const f of files) expect(await readAll(g.vfs, f.path)).toBe(f.data.toString());
    await g.vfs.flushAll({ timeoutMs: 10_000 });
    expect(g.remote.read('x').toString()).toBe('file x\n');
    expect(g.remote.read('y').toString()).toBe('file y\n');
  });
});
