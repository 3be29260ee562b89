/**
 * Direct spool writes (LeasedHandle.directSpool): a front end that receives writes off the main thread
 * writes a handle's data into its version's spool itself and reports each write; the version keeps its
 * size, times, failure and (when the writer kept one) its hash from those reports. Here the writer is
 * the test, with the file's descriptor (as the FUSE engine does from C).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createHash } from 'node:crypto';
import { readSync, writeSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, MemoryRemote } from '../../../../src/vfs/index.js';
import { FileHasher } from '../../../../src/vfs/write-back/file-hasher.js';
import type { Vfs } from '../../../../src/vfs/types.js';
import type { DirectSpool, DirectWritesDone, LeasedHandle } from '../../../../src/vfs/engine-lease.js';
import { vfsCode } from '../../../support/vfs.js';
import { waitFor } from '../../../support/wait-for.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function gateway(opts: { maxFileBytes?: number } = {}) {
  const remote = new MemoryRemote({ name: 'A', id: '1' });
  const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-direct-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, feedIntervalMs: 0, maxFileBytes: opts.maxFileBytes });
  cleanups.push(() => vfs.close());
  return { vfs, remote };
}

const MiB = 1024 * 1024;
const sha1 = (b: Buffer): string => createHash('sha1').update(b).digest('hex');

/** The version of /A/`name` holds `data` (its content hash), and the service has it after the uploads. */
async function expectCommitted(vfs: Vfs, remote: MemoryRemote, name: string, data: Buffer): Promise<void> {
  expect((await vfs.stat(`/A/${name}`)).contentHash).toBe(sha1(data));
  await vfs.flushAll();
  expect(remote.read(name).equals(data)).toBe(true);
}

/** A writer as the engine is one: writes at the descriptor, keeps a hash while the writes continue it. */
class TestWriter {
  count = 0;
  end = 0;
  errno = 0;
  stopped = 0;
  /** Set: the writer's hash is still being computed when it stops (as the engine's hash thread may be). */
  sha1Later: Promise<string | undefined> | undefined;
  private hash = createHash('sha1');
  private hashed = 0;
  private hashing = true;

  constructor(readonly spool: DirectSpool, private readonly content: Buffer) {
    // The bytes already there, read from the content the test wrote (the engine reads them back).
    if (spool.hashFrom < 0) this.hashing = false;
    else {
      this.hash.update(content.subarray(0, spool.hashFrom));
      this.hashed = spool.hashFrom;
    }
    spool.begin(() => this.stop());
  }

  write(data: Buffer, offset: number, report = true): void {
    writeSync(this.spool.fd, data, 0, data.length, offset);
    if (this.hashing && offset === this.hashed) {
      this.hash.update(data);
      this.hashed += data.length;
    } else this.hashing = false;
    this.count++;
    this.end = Math.max(this.end, offset + data.length);
    if (report) this.spool.wrote(offset, data.length, 0);
  }

  fail(errno: number): void {
    this.errno = errno;
    this.spool.wrote(0, 0, errno);
  }

  private stop(): DirectWritesDone {
    this.stopped++;
    const sha1 = this.hashing ? this.hash.digest('hex') : undefined;
    if (this.sha1Later) return { count: this.count, end: this.end, errno: this.errno, hashed: this.hashed, sha1Later: this.sha1Later };
    return { count: this.count, end: this.end, errno: this.errno, hashed: this.hashed, sha1 };
  }
}

function content(bytes: number, seed: number): Buffer {
  const b = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) b[i] = (i * 7 + seed) & 0xff;
  return b;
}

describe('direct spool writes', () => {
  it('a file past the in-memory size hands out its spool; the writer\'s writes and hash make the version', async () => {
    const { vfs, remote } = await gateway();
    const data = content(5 * MiB + 17, 1);
    const h: LeasedHandle = await vfs.open('/A/big', { write: true, create: true });
    await h.write(0, data.subarray(0, MiB));
    const spool = h.directSpool!();
    expect(spool).toBeDefined();
    expect(spool!.hashFrom).toBe(MiB);
    const writer = new TestWriter(spool!, data);
    for (let at = MiB; at < data.length; at += MiB) writer.write(data.subarray(at, Math.min(data.length, at + MiB)), at);
    expect((await h.stat()).size).toBe(data.length);
    await h.release();
    expect(writer.stopped).toBe(1);
    await expectCommitted(vfs, remote, 'big', data);
  });

  it('a hash the writer is still finishing when it stops: the close waits for it and the version takes it', async () => {
    const { vfs, remote } = await gateway();
    const data = content(3 * MiB + 5, 8);
    const h = await vfs.open('/A/f', { write: true, create: true });
    await h.write(0, data.subarray(0, MiB));
    const writer = new TestWriter(h.directSpool!()!, data);
    let finish!: (sha1: string | undefined) => void;
    writer.sha1Later = new Promise((resolve) => (finish = resolve));
    writer.write(data.subarray(MiB), MiB);
    const spoolHashes = vi.spyOn(FileHasher.prototype, 'hash');
    let closed = false;
    const release = h.release().then(() => (closed = true));
    await waitFor('the writer stopped by the close', () => writer.stopped, { until: (n) => n === 1 });
    expect(closed).toBe(false); // the seal waits for the writer's hash
    finish(sha1(data));
    await release;
    expect(spoolHashes).not.toHaveBeenCalled(); // no pass over the spool
    await expectCommitted(vfs, remote, 'f', data);
  });

  it('a hash the writer could not finish: the seal hashes the spool', async () => {
    const { vfs, remote } = await gateway();
    const data = content(2 * MiB, 9);
    const h = await vfs.open('/A/f', { write: true, create: true });
    await h.write(0, data.subarray(0, MiB));
    const writer = new TestWriter(h.directSpool!()!, data);
    writer.sha1Later = Promise.resolve(undefined);
    writer.write(data.subarray(MiB), MiB);
    const spoolHashes = vi.spyOn(FileHasher.prototype, 'hash');
    await h.release();
    expect(spoolHashes).toHaveBeenCalledTimes(1);
    await expectCommitted(vfs, remote, 'f', data);
  });

  it('writes not reported yet when the writer stops are taken from its answer', async () => {
    const { vfs, remote } = await gateway();
    const data = content(3 * MiB, 2);
    const h = await vfs.open('/A/f', { write: true, create: true });
    await h.write(0, data.subarray(0, MiB));
    const writer = new TestWriter(h.directSpool!()!, data);
    writer.write(data.subarray(MiB, 2 * MiB), MiB);
    writer.write(data.subarray(2 * MiB), 2 * MiB, false);
    await h.fsync();
    expect((await h.stat()).size).toBe(3 * MiB);
    await h.release();
    await vfs.flushAll();
    expect(remote.read('f').equals(data)).toBe(true);
  });

  it('a direct write past the largest file allowed fails the close with EFBIG: nothing journaled, listed or uploaded', async () => {
    // The 3-byte write at 100 GiB the mount took: no handle's write saw it, the seal refuses it.
    const { vfs, remote } = await gateway({ maxFileBytes: 4 * MiB });
    const h = await vfs.open('/A/sparse', { write: true, create: true });
    await h.write(0, Buffer.alloc(MiB, 1));
    const writer = new TestWriter(h.directSpool!()!, Buffer.alloc(0));
    writer.write(Buffer.from('END'), 100 * MiB);
    await expect(h.flush()).rejects.toMatchObject({ code: 'EFBIG' });
    await h.release().catch(() => undefined);
    await expect(vfs.stat('/A/sparse')).rejects.toMatchObject({ code: 'ENOENT' });
    await vfs.flushAll();
    expect(await remote.stat('sparse')).toBeNull();
  });

  it('out of order: the writer keeps no hash and the seal hashes the spool', async () => {
    const { vfs, remote } = await gateway();
    const data = content(4 * MiB, 3);
    const h = await vfs.open('/A/f', { write: true, create: true });
    await h.write(0, data.subarray(0, MiB));
    const writer = new TestWriter(h.directSpool!()!, data);
    writer.write(data.subarray(3 * MiB), 3 * MiB);
    writer.write(data.subarray(MiB, 3 * MiB), MiB);
    const spoolHashes = vi.spyOn(FileHasher.prototype, 'hash');
    await h.release();
    expect(spoolHashes).toHaveBeenCalled(); // a pass over the spool
    await expectCommitted(vfs, remote, 'f', data);
  });

  it('a second writer, a truncate or a flush stops the writer first; later changes go the usual way', async () => {
    const { vfs, remote } = await gateway();
    const data = content(2 * MiB, 4);
    const a = await vfs.open('/A/f', { write: true, create: true });
    await a.write(0, data.subarray(0, MiB));
    const writer = new TestWriter(a.directSpool!()!, data);
    writer.write(data.subarray(MiB), MiB);
    const b = await vfs.open('/A/f', { write: true });
    expect(writer.stopped).toBe(1);
    expect(a.directSpool!()).toBeUndefined(); // two writers: none is handed the spool
    await b.write(0, Buffer.from('B'));
    await b.release();
    // b's close journaled the version: it no longer changes, so the spool is not handed out until a's next
    // write has made the new version.
    expect(a.directSpool!()).toBeUndefined();
    await a.write(1, Buffer.from('a'));
    const again = new TestWriter(a.directSpool!()!, Buffer.concat([Buffer.from('Ba'), data.subarray(2)]));
    await a.truncate(MiB + 10);
    expect(again.stopped).toBe(1);
    await a.release();
    await vfs.flushAll();
    expect(remote.read('f').equals(Buffer.concat([Buffer.from('Ba'), data.subarray(2, MiB + 10)]))).toBe(true);
  });

  it('a failed write fails the flush with its errno and drops the version whole', async () => {
    const { vfs, remote } = await gateway();
    remote.putFile('f', Buffer.from('old content'));
    const h = await vfs.open('/A/f', { write: true, truncate: true });
    await h.write(0, content(MiB, 5));
    const writer = new TestWriter(h.directSpool!()!, content(MiB, 5));
    writer.fail(28);
    expect(await vfsCode(h.flush())).toBe('ENOSPC');
    await h.release().catch(() => undefined);
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('old content');
    expect(vfs.status().localFiles).toBe(0);
  });

  it('localRange: where a read finds its bytes in the spool, only while they are all there as they are', async () => {
    const { vfs, remote } = await gateway();
    const small = await vfs.open('/A/small', { write: true, create: true });
    await small.write(0, Buffer.from('tiny'));
    expect(small.localRange!(0, 4)).toBeUndefined(); // held in memory
    await small.release();
    const data = content(2 * MiB + 5, 7);
    const h = await vfs.open('/A/big', { read: true, write: true, create: true });
    await h.write(0, data);
    const at = h.localRange!(MiB, MiB);
    expect(at).toMatchObject({ position: MiB, length: MiB });
    const back = Buffer.alloc(MiB);
    expect(readSync(at!.fd, back, 0, MiB, at!.position)).toBe(MiB);
    expect(back.equals(data.subarray(MiB, 2 * MiB))).toBe(true);
    // Clipped to the size; nothing at or past the end.
    expect(h.localRange!(2 * MiB, MiB)).toMatchObject({ position: 2 * MiB, length: 5 });
    expect(h.localRange!(data.length, 10)).toBeUndefined();
    // Not while anything of the spool is under way or waiting (here a read of its own).
    const reading = h.read(0, 10);
    expect(h.localRange!(0, 10)).toBeUndefined();
    await reading;
    expect(h.localRange!(0, 1)).toMatchObject({ length: 1 });
    await h.release();
    // A large file of the service changed in the middle (past what is fetched whole at the first change):
    // base bytes not fetched yet are not there.
    remote.putFile('based', content(10 * MiB, 8));
    const based = await vfs.open('/A/based', { read: true, write: true });
    await based.write(MiB, Buffer.from('middle'));
    expect(based.localRange!(0, 100)).toBeUndefined();
    await based.read(0, 100);
    const fetched = based.localRange!(0, 100);
    expect(fetched).toMatchObject({ position: 0, length: 100 });
    const head = Buffer.alloc(100);
    readSync(fetched!.fd, head, 0, 100, 0);
    expect(head.equals(content(10 * MiB, 8).subarray(0, 100))).toBe(true);
    await based.release();
    expect(based.localRange!(0, 100)).toBeUndefined(); // released
  });

  it('is not handed out for a small file held in memory, an appending handle or a second writer', async () => {
    const { vfs } = await gateway();
    const small = await vfs.open('/A/small', { write: true, create: true });
    await small.write(0, Buffer.from('tiny'));
    expect(small.directSpool!()).toBeUndefined();
    await small.release();
    const big = await vfs.open('/A/big', { write: true, create: true });
    await big.write(0, content(MiB, 6));
    const appending = await vfs.open('/A/big', { write: true, append: true });
    expect(appending.directSpool!()).toBeUndefined();
    expect(big.directSpool!()).toBeUndefined();
    await appending.release();
    await big.release();
  });
});
