/**
 * A new file a front end created with a spool of its own (the FUSE engine with passthrough: the kernel
 * writes that spool) is given the spool's id, to take the spool over. Another writer that joins the file
 * before the takeover must not make the version's spool at that path: the file would have two owners of
 * one spool (regression: the version spilled or wrote out its bytes over the kernel's).
 */
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';
import { readAll } from '../../../support/vfs.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function gateway(unwrittenSpoolBytes?: number): Promise<{ vfs: GatewayVfs; remote: MemoryRemote }> {
  const remote = new MemoryRemote({ name: 'A', id: '1' });
  const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-lent-spool-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, feedIntervalMs: 0, upload: { delayMs: 600_000 }, unwrittenSpoolBytes });
  cleanups.push(() => vfs.close());
  return { vfs, remote };
}

describe('a spool a front end made for a new file', () => {
  // A sealed small file's spool is written at once when no bytes may wait in memory.
  for (const [what, bytes, unwritten] of [['spills past memory', 3 * 1024 * 1024, undefined], ['is small, its spool written at its seal', 100, 0]] as const) {
    it(`regression: a writer that joins before the takeover and ${what} leaves the front end's spool alone`, async () => {
      const { vfs, remote } = await gateway(unwritten);
      const id = randomBytes(8).toString('hex');
      const spool = join(vfs.sideJournal()!.spoolFolderPath(), id);
      await writeFile(spool, 'the kernel wrote this');
      const engine = await vfs.open('/A/new.bin', { write: true, create: true, exclusive: true, journalId: id, spoolMade: true });
      // Another front end's writer joins first, writes and closes.
      const other = await vfs.open('/A/new.bin', { write: true });
      const data = Buffer.alloc(bytes, 7);
      await other.write(0, data);
      await other.release();
      expect(await engine.adoptSpool!(), 'no takeover once another writer joined').toBeUndefined();
      expect((await readFile(spool, 'utf8')), 'the front end\'s spool').toBe('the kernel wrote this');
      expect((await readAll(vfs, '/A/new.bin')).length).toBe(bytes);
      await engine.release();
      await vfs.flushAll();
      expect(remote.read('new.bin').equals(data), 'on the service').toBe(true);
      expect((await readFile(spool, 'utf8')), 'the front end\'s spool, after the upload').toBe('the kernel wrote this');
    });
  }

  it('a journal id with no spool made by the front end: the version makes its own there, past memory too', async () => {
    const { vfs, remote } = await gateway();
    const id = randomBytes(8).toString('hex');
    const h = await vfs.open('/A/own.bin', { write: true, create: true, exclusive: true, journalId: id });
    const data = Buffer.alloc(20 * 1024 * 1024, 5);
    await h.write(0, data);
    await h.release();
    await vfs.flushAll();
    expect(remote.read('own.bin').equals(data), 'on the service').toBe(true);
  });
});
