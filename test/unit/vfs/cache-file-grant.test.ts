/**
 * The grant of a content cache file to a front end's kernel (LeasedHandle.localFile, cache-file-grant.ts):
 * given to a read-only handle of a pinned file with no local version whose content is wholly cached, never
 * otherwise; held against eviction until it ends; a change made elsewhere leaves the
 * grant's bytes as they were opened, and new opens get the new version's.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { readSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { openVfs, MemoryRemote } from '../../../src/vfs/index.js';
import type { CacheFileGrant, LeasedHandle } from '../../../src/vfs/engine-lease.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function gateway(remote: MemoryRemote) {
  const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-grant-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const vfs = await openVfs({ libraries: [{ name: 'A', id: '1', remote }], dataDir, feedIntervalMs: 3_600_000, cache: { diskBytes: 64 * 1024 * 1024, minFreePercent: 0 } });
  cleanups.push(() => vfs.close());
  return vfs;
}

/** The whole file as the granted descriptor has it. */
function readGranted(grant: CacheFileGrant, size: number): Buffer {
  const buf = Buffer.alloc(size);
  let done = 0;
  while (done < size) {
    const n = readSync(grant.fd, buf, done, size - done, done);
    if (n === 0) break;
    done += n;
  }
  return buf.subarray(0, done);
}

describe('cache file grants (LeasedHandle.localFile)', () => {
  it('a pinned file read-only: granted, byte-exact, held against free-up-space until it ends', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    const data = randomBytes(300_000);
    remote.putFile('p.bin', data);
    const vfs = await gateway(remote);
    await vfs.setPinned('/A/p.bin', true);
    await vfs.pinsFetched();
    const h = await vfs.open('/A/p.bin', {}) as LeasedHandle;
    const grant = await h.localFile!();
    expect(grant).toBeDefined();
    await vfs.setPinned('/A/p.bin', false); // only the grant's hold keeps it from here
    await h.release(); // the handle goes; the kernel may still read through the grant
    expect(readGranted(grant!, data.length).equals(data)).toBe(true);
    expect(await vfs.evict('/A/p.bin')).toEqual({ files: 0, bytes: 0 });
    grant!.end();
    grant!.end(); // once
    expect((await vfs.evict('/A/p.bin')).files).toBe(1);
  });

  it('not granted: content not wholly cached, an empty file, a released handle, a file not pinned', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('cold.bin', randomBytes(100_000));
    remote.putFile('empty', Buffer.alloc(0));
    const vfs = await gateway(remote);
    const cold = await vfs.open('/A/cold.bin', {}) as LeasedHandle;
    expect(await cold.localFile!()).toBeUndefined();
    await cold.release();
    const empty = await vfs.open('/A/empty', {}) as LeasedHandle;
    expect(await empty.localFile?.()).toBeUndefined();
    await empty.release();
    await vfs.setPinned('/A/cold.bin', true);
    await vfs.pinsFetched();
    const released = await vfs.open('/A/cold.bin', {}) as LeasedHandle;
    await released.release();
    expect(await released.localFile!()).toBeUndefined();
    // Wholly cached but no longer pinned: not granted (a write open would be refused while the kernel reads it).
    await vfs.setPinned('/A/cold.bin', false);
    const unpinned = await vfs.open('/A/cold.bin', {}) as LeasedHandle;
    expect(await unpinned.localFile!()).toBeUndefined();
    await unpinned.release();
    await vfs.setPinned('/A/cold.bin', true);
    await vfs.pinsFetched();
    const pinned = await vfs.open('/A/cold.bin', {}) as LeasedHandle;
    const grant = await pinned.localFile!();
    expect(grant).toBeDefined();
    grant!.end();
    await pinned.release();
  });

  it('not granted to a file with a local version (written here), nor to a write open', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('w.txt', Buffer.from('service version'));
    const vfs = await gateway(remote);
    await vfs.setPinned('/A/w.txt', true);
    await vfs.pinsFetched();
    const reader = await vfs.open('/A/w.txt', {}) as LeasedHandle;
    const writer = await vfs.open('/A/w.txt', { write: true }) as LeasedHandle;
    expect(writer.localFile).toBeUndefined();
    await writer.write(0, Buffer.from('LOCAL'));
    // The reader follows the local version now: no cache file stands for it.
    expect(await reader.localFile!()).toBeUndefined();
    await writer.flush();
    await writer.release();
    const after = await vfs.open('/A/w.txt', {}) as LeasedHandle;
    expect(await after.localFile?.()).toBeUndefined();
    await after.release();
    await reader.release();
  });

  it('a change made elsewhere: the grant keeps the bytes opened, a new open is granted the new version', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    const v1 = randomBytes(50_000);
    const v2 = randomBytes(60_000);
    remote.putFile('c.bin', v1);
    const vfs = await gateway(remote);
    await vfs.setPinned('/A/c.bin', true);
    await vfs.pinsFetched();
    const h1 = await vfs.open('/A/c.bin', {}) as LeasedHandle;
    const g1 = await h1.localFile!();
    remote.putFile('c.bin', v2);
    await vfs.refresh();
    await vfs.pinsFetched();
    const h2 = await vfs.open('/A/c.bin', {}) as LeasedHandle;
    const g2 = await h2.localFile!();
    expect(g2!.content).not.toBe(g1!.content);
    expect(readGranted(g1!, v1.length).equals(v1)).toBe(true);
    expect(readGranted(g2!, v2.length).equals(v2)).toBe(true);
    g1!.end();
    g2!.end();
    await h1.release();
    await h2.release();
  });
});
