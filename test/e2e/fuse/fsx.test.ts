/**
 * fsx-style data integrity: thousands of random writes, reads, truncates and reopen cycles on a file in
 * the mount and on a reference copy on local disk; every read and every flush is compared. The seed is
 * printed on failure (FSX_SEED=… replays it).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { release } from 'node:os';
import { join } from 'node:path';
import { startMount, type MountHarness } from './harness.js';

/** mulberry32: small seeded PRNG so a failing run can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MAX_SIZE = 1024 * 1024;
/** Passthrough needs Linux 6.9 and CAP_SYS_ADMIN: elsewhere that mount writes through the engine. */
const [major, minor] = release().split('.').map(Number) as [number, number];
const granted = (major > 6 || (major === 6 && minor >= 9)) && process.getuid?.() === 0;
const OPS = Number(process.env.FSX_OPS ?? 3000);

async function readAll(fh: FileHandle): Promise<Buffer> {
  const { size } = await fh.stat();
  const buf = Buffer.alloc(size);
  let done = 0;
  while (done < size) {
    const { bytesRead } = await fh.read(buf, done, size - done, done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return buf.subarray(0, done);
}

/**
 * Over the in-memory Vfs; and over the gateway's Vfs and an embedded service with the file opened
 * O_DIRECT (past the kernel's page cache: every write and read reaches the mount, and reads of bytes in
 * the spool are answered from its descriptor by the engine), the reads made through a second, read-only
 * descriptor opened before the writes and kept across the writer's reopens (it must see every write).
 */
describe.each([
  { backend: 'memory', ops: OPS, direct: false, writeMode: 'writeback' },
  { backend: 'service', ops: Math.ceil(OPS / 2), direct: true, writeMode: 'writeback' },
  // Passthrough (docs/fuse.md): the file, created empty, is handed to the kernel, which writes, reads and
  // truncates its spool itself until the first close; fsyncs journal it as it is meanwhile. Reopened, it
  // is written through the engine.
  { backend: 'service', ops: Math.ceil(OPS / 2), direct: false, writeMode: 'passthrough' },
])('fsx-style exerciser over the $backend backend ($writeMode)', ({ backend, ops, direct, writeMode }) => {
  let h: MountHarness;
  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 1, writeMode }, env: { FUSE_TEST_BACKEND: backend } });
  }, 60_000);
  afterAll(async () => {
    await h?.stop();
  }, 60_000);

  it(`${ops} random operations leave the mount identical to a local reference`, async () => {
    const seed = Number(process.env.FSX_SEED ?? Date.now() % 1_000_000);
    const rand = prng(seed);
    const int = (n: number): number => Math.floor(rand() * n);
    const mountPath = join(h.mnt, 'Lib', 'fsx.dat');
    const refPath = join(h.local, 'fsx.ref');
    const DIRECT = direct ? constants.O_DIRECT : 0;
    let m = await open(mountPath, constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC | DIRECT);
    let r = await open(refPath, 'w+');
    const reader = direct ? await open(mountPath, constants.O_RDONLY | DIRECT) : undefined;
    const fdReadsBefore = direct ? (await h.call<{ fdReads: number }>('mountCounters')).fdReads : 0;
    const history: string[] = [];
    const fail = (what: string): never => {
      throw new Error(`fsx seed ${seed}: ${what}\nlast operations:\n${history.slice(-15).join('\n')}`);
    };
    const compareAll = async (): Promise<void> => {
      const [a, b] = await Promise.all([readAll(m), readAll(r)]);
      if (a.length !== b.length) fail(`size ${a.length}, reference ${b.length}`);
      const at = a.findIndex((v, i) => v !== b[i]);
      if (at >= 0) fail(`first difference at byte ${at}`);
    };
    try {
      for (let i = 0; i < ops; i++) {
        const size = (await r.stat()).size;
        const kind = rand();
        if (kind < 0.45) {
          const len = 1 + int(64 * 1024);
          const pos = int(Math.min(MAX_SIZE - len, size + 64 * 1024));
          const data = Buffer.alloc(len);
          for (let j = 0; j < len; j++) data[j] = (j * 131 + i * 17 + (j >> 8)) & 0xff;
          history.push(`${i} write ${pos}+${len}`);
          const [wm, wr] = await Promise.all([m.write(data, 0, len, pos), r.write(data, 0, len, pos)]);
          if (wm.bytesWritten !== wr.bytesWritten) fail(`write wrote ${wm.bytesWritten}, reference ${wr.bytesWritten}`);
        } else if (kind < 0.8) {
          const pos = int(size + 1024);
          const len = 1 + int(128 * 1024);
          history.push(`${i} read ${pos}+${len}`);
          const a = Buffer.alloc(len);
          const b = Buffer.alloc(len);
          const [rm, rr] = await Promise.all([(reader ?? m).read(a, 0, len, pos), r.read(b, 0, len, pos)]);
          if (rm.bytesRead !== rr.bytesRead) fail(`read got ${rm.bytesRead} bytes, reference ${rr.bytesRead}`);
          if (!a.subarray(0, rm.bytesRead).equals(b.subarray(0, rr.bytesRead))) fail(`read ${pos}+${len} differs`);
        } else if (kind < 0.9) {
          const to = int(MAX_SIZE);
          history.push(`${i} truncate ${to}`);
          await Promise.all([m.truncate(to), r.truncate(to)]);
        } else if (kind < 0.95) {
          history.push(`${i} fsync + compare`);
          await m.sync();
          await compareAll();
        } else {
          history.push(`${i} close + reopen + compare`);
          await m.close();
          await r.close();
          m = await open(mountPath, constants.O_RDWR | DIRECT);
          r = await open(refPath, 'r+');
          await compareAll();
        }
      }
      await compareAll();
      if (direct) expect((await h.call<{ fdReads: number }>('mountCounters')).fdReads).toBeGreaterThan(fdReadsBefore);
      if (writeMode === 'passthrough' && granted) expect((await h.call<{ passthroughFiles: number }>('mountCounters')).passthroughFiles).toBeGreaterThan(0);
    } finally {
      await m.close().catch(() => undefined);
      await r.close().catch(() => undefined);
      await reader?.close().catch(() => undefined);
    }
    await h.call('flushAll');
    const remote = Buffer.from(await h.call<string>('remoteRead', { path: '/Lib/fsx.dat' }), 'base64');
    const ref = await open(refPath, 'r');
    try {
      expect(remote.equals(await readAll(ref))).toBe(true);
    } finally {
      await ref.close();
    }
  }, 120_000);
});
