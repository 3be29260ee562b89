/**
 * FUSE passthrough in the engine (docs/fuse.md, Passthrough): negotiated at INIT instead of the writeback
 * cache, a backing file registered with the kernel, and opens answered with it, after which the kernel
 * reads and writes that local file itself. Driven through the null mount of the benchmarks (one file,
 * `f`, in a process of its own): everything here is async I/O, the mount is always stopped.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { sh } from './harness.js';

const T = 60_000;
const NULL_MOUNT = fileURLToPath(new URL('../../../scripts/bench/support/fuse-null-mount.ts', import.meta.url));
const SIZE = 4 * 1024 * 1024;

interface Served {
  passthrough: boolean;
  backingId: number;
  backingError: number;
  opens: number;
  writes: number;
  reads: number;
}

/** Passthrough needs Linux 6.9 and CAP_SYS_ADMIN (to register a backing file): root here. */
const [major, minor] = release().split('.').map(Number) as [number, number];
const granted = (major > 6 || (major === 6 && minor >= 9)) && process.getuid?.() === 0;

const stops: Array<() => Promise<Served | undefined>> = [];
afterEach(async () => {
  while (stops.length) await stops.pop()!();
});

/** Starts the null mount on a fresh folder; `stop` unmounts it and answers what it served. */
async function nullMount(args: string[]): Promise<{ mnt: string; spool: string; stop: () => Promise<Served | undefined> }> {
  const base = await mkdtemp(join(tmpdir(), 'cloudlib-passthrough-'));
  const mnt = join(base, 'mnt');
  const spool = join(base, 'spool.bin');
  const child = spawn(process.execPath, ['--import', 'tsx', NULL_MOUNT, mnt, String(SIZE), spool, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  let printed = '';
  child.stdout.on('data', (c: Buffer) => { printed += c.toString(); });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stopped: Promise<Served | undefined> | undefined;
  const stop = (): Promise<Served | undefined> => (stopped ??= (async () => {
    child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    await sh('fusermount', ['-uz', mnt]).catch(() => undefined);
    child.kill('SIGKILL');
    await rm(base, { recursive: true, force: true });
    const line = printed.split('\n').find((l) => l.startsWith('served '));
    return line ? (JSON.parse(line.slice('served '.length)) as Served) : undefined;
  })());
  stops.push(stop);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the null mount did not come up in 30 s')), 30_000);
    child.stdout.on('data', () => {
      if (printed.includes('mounted')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the null mount exited with ${code}`));
    });
  });
  return { mnt, spool, stop };
}

/** Writes `data` at `offset` of the mount's file and reads it back, each through its own open. */
async function writeAndRead(file: string, data: Buffer, offset: number): Promise<Buffer> {
  const w = await open(file, 'r+');
  try {
    await w.write(data, 0, data.length, offset);
    await w.sync();
  } finally {
    await w.close();
  }
  const r = await open(file, 'r');
  try {
    const back = Buffer.alloc(data.length);
    await r.read(back, 0, back.length, offset);
    return back;
  } finally {
    await r.close();
  }
}

describe('FUSE passthrough', () => {
  it.runIf(granted)('answers opens with a backing file: the kernel writes and reads it, no request reaches the engine', async () => {
    const m = await nullMount(['passthrough']);
    const data = randomBytes(3 * 1024 * 1024 + 123);
    const back = await writeAndRead(join(m.mnt, 'f'), data, 4096);
    expect(back.equals(data)).toBe(true);
    // Two handles open at once share the inode's one backing file.
    const a = await open(join(m.mnt, 'f'), 'r');
    const b = await open(join(m.mnt, 'f'), 'r+');
    await b.write(Buffer.from('both'), 0, 4, 0);
    const both = Buffer.alloc(4);
    await a.read(both, 0, 4, 0);
    await a.close();
    await b.close();
    expect(both.toString()).toBe('both');
    const spool = await readFile(m.spool);
    const served = await m.stop();
    expect(spool.subarray(4096, 4096 + data.length).equals(data)).toBe(true);
    expect(spool.subarray(0, 4).toString()).toBe('both');
    expect(served).toMatchObject({ passthrough: true, backingError: 0, opens: 4, writes: 0, reads: 0 });
    expect(served!.backingId).toBeGreaterThan(0);
  }, T);

  it('asks for no passthrough unless told: writes and reads reach the engine', async () => {
    const m = await nullMount([]);
    const data = randomBytes(64 * 1024);
    const back = await writeAndRead(join(m.mnt, 'f'), data, 0);
    // The null mount answers reads with zeros: what it read shows the read reached it.
    expect(back.equals(Buffer.alloc(data.length))).toBe(true);
    const served = await m.stop();
    expect(served).toMatchObject({ passthrough: false, backingId: 0 });
    expect(served!.writes).toBeGreaterThan(0);
    expect(served!.reads).toBeGreaterThan(0);
  }, T);

  it.runIf(!granted)('falls back without passthrough where the kernel does not grant it', async () => {
    const m = await nullMount(['passthrough']);
    await writeAndRead(join(m.mnt, 'f'), randomBytes(4096), 0);
    const served = await m.stop();
    // The kernel refuses a backing file on a connection without passthrough (EOPNOTSUPP).
    expect(served).toMatchObject({ passthrough: false, backingId: 0, backingError: 95 });
    expect(served!.writes).toBeGreaterThan(0);
  }, T);
});
