/**
 * The content cache through the FUSE mount, each figure against a baseline measured in the same run:
 * - a cold read (dd, 1 MiB blocks, the mount's page cache dropped) of a file of BENCH_CACHE_BYTES (default
 *   128 MiB) through a mount whose gateway keeps what it reads in the content cache (the file's cached
 *   content dropped first with `evict`) vs the same through a mount whose gateway has no content cache
 *   (target: the cache adds < 5 %); with what the cache kept of each read (its bytes written, and those
 *   it let go rather than hold up the reader), and the CPU time the gateway's process (all its threads,
 *   the cache's writes included) and its main thread (where the mount's reads are answered) took a read;
 * - the cache's copy alone: dd of as many bytes into a new local file, against the read without it;
 * - the same file pinned (all of it in the content cache), read through the mount (its page cache
 *   dropped) vs dd of the cache's own file on the local disk, the file the kernel reads itself with
 *   passthrough (else the engine answers the mount's reads from it) (target ≥ 0.9×): with that file in
 *   the page cache, and with it dropped too.
 * Two mounts side by side, each over an embedded service in a process of its own (data in memory), the
 * gateway's default write-back delay; BENCH_CACHE_ROUNDS (default 5) rounds, the sides in turn, each
 * timed window after the page cache was recycled (support/recycle-pages.ts); medians and every round are
 * printed (BENCH_CACHE_PINNED=0 leaves the pinned reads out; BENCH_CACHE_AA=1 runs both mounts without
 * the cache: the difference between the two sides when nothing differs, this machine's noise). Prints one JSON line per figure. Run: `npm run bench -- content-cache`.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sh, startMount, type MountHarness } from '../../test/e2e/fuse/harness.js';
import { recyclePages } from './support/recycle-pages.js';
import { cpuMsOf } from './support/process-cpu.js';

const BYTES = Number(process.env.BENCH_CACHE_BYTES ?? 128 * 1024 * 1024);
const ROUNDS = Number(process.env.BENCH_CACHE_ROUNDS ?? 5);
const MIB = 1024 * 1024;
/** Both mounts without the cache (the pinned reads left out): the noise between the two sides alone. */
const AA = process.env.BENCH_CACHE_AA === '1';
if (!(BYTES >= MIB && BYTES % MIB === 0)) throw new Error(`BENCH_CACHE_BYTES: expected a whole number of MiB, got ${BYTES}`);

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const round = (n: number, digits = 2): number => Number(n.toFixed(digits));
const print = (figure: Record<string, unknown>): void => void process.stdout.write(JSON.stringify(figure) + '\n');

/** Drops the page cache of `file` (FUSE or local: fadvise DONTNEED through dd). */
async function dropPages(file: string): Promise<void> {
  await sh('dd', [`if=${file}`, 'iflag=nocache', 'count=0'], { timeoutMs: 60_000 });
}

/** dd of `file` to /dev/null, 1 MiB blocks, after the page cache was recycled; ms. */
async function ddRead(file: string, scratch: string): Promise<number> {
  await recyclePages(scratch, BYTES * 2.5);
  const t0 = performance.now();
  await sh('dd', [`if=${file}`, 'of=/dev/null', 'bs=1M'], { timeoutMs: 600_000 });
  return performance.now() - t0;
}

/** CPU ms of the gateway's process (all its threads) and of its main thread (where reads are answered). */
async function gatewayCpu(h: MountHarness): Promise<{ process: number; main: number }> {
  const pid = h.child.pid!;
  return { process: await cpuMsOf(pid), main: await mainThreadCpuMs(pid) };
}

/** User + system CPU time of one thread (the main thread: its id is the process's) so far, ms. */
async function mainThreadCpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/task/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * MS_PER_TICK;
}

const MS_PER_TICK = 1000 / (Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100);

interface DiskStats { writtenBytes: number; skippedBytes: number }

async function diskStats(h: MountHarness): Promise<DiskStats> {
  const s = await h.call<{ disk?: DiskStats }>('vfsStatus');
  return { writtenBytes: s.disk?.writtenBytes ?? 0, skippedBytes: s.disk?.skippedBytes ?? 0 };
}

async function main(): Promise<void> {
  const scratch = await mkdtemp(join(tmpdir(), 'cloudlib-bench-cache-'));
  const cachedData = join(scratch, 'cached-gateway');
  const mounts: MountHarness[] = [];
  try {
    const start = async (env: Record<string, string>): Promise<MountHarness> => {
      const h = await startMount({ env: { FUSE_TEST_BACKEND: 'service-process', ...env } });
      mounts.push(h);
      return h;
    };
    const cached = await start({ FUSE_TEST_DISK_CACHE_BYTES: AA ? '0' : String(4 * BYTES), FUSE_TEST_DATA_DIR: cachedData });
    const plain = await start({ FUSE_TEST_DISK_CACHE_BYTES: '0' });
    // The same bytes in both, written through each mount and uploaded (untimed).
    const source = join(scratch, 'source.bin');
    await sh('dd', ['if=/dev/urandom', `of=${source}`, 'bs=1M', `count=${BYTES / MIB}`], { timeoutMs: 600_000 });
    for (const h of mounts) {
      await sh('cp', [source, join(h.mnt, 'Lib', 'big.bin')], { timeoutMs: 600_000 });
      await h.call('flushAll', { timeoutMs: 590_000 }, 600_000);
    }
    await rm(source);
    const file = (h: MountHarness): string => join(h.mnt, 'Lib', 'big.bin');

    // Cold reads, with the content cache and without, the sides in turn.
    const withCache: number[] = [];
    const without: number[] = [];
    const kept: number[] = [];
    const cpu = { with: [] as number[], withMain: [] as number[], without: [] as number[], withoutMain: [] as number[] };
    const readCached = async (): Promise<void> => {
      await cached.call('evict', { path: '/Lib/big.bin' });
      await dropPages(file(cached));
      const before = await diskStats(cached);
      const c0 = await gatewayCpu(cached);
      withCache.push(await ddRead(file(cached), scratch));
      const after = await eventuallyWritten(cached, before);
      // The cache's writes included (they may end after the reader).
      const c1 = await gatewayCpu(cached);
      cpu.with.push(c1.process - c0.process);
      cpu.withMain.push(c1.main - c0.main);
      kept.push(round((after.writtenBytes - before.writtenBytes) / BYTES));
    };
    const readPlain = async (): Promise<void> => {
      await dropPages(file(plain));
      const c0 = await gatewayCpu(plain);
      without.push(await ddRead(file(plain), scratch));
      const c1 = await gatewayCpu(plain);
      cpu.without.push(c1.process - c0.process);
      cpu.withoutMain.push(c1.main - c0.main);
    };
    // The cache's copy alone: the same bytes written into a new file's page cache on the local disk.
    const copies: number[] = [];
    const copyAlone = async (): Promise<void> => {
      const target = join(scratch, 'copy.bin');
      await recyclePages(scratch, BYTES * 2.5);
      const t0 = performance.now();
      await sh('dd', ['if=/dev/zero', `of=${target}`, 'bs=1M', `count=${BYTES / MIB}`], { timeoutMs: 600_000 });
      copies.push(performance.now() - t0);
      await rm(target);
    };
    for (let r = 0; r < ROUNDS; r++) {
      for (const side of r % 2 ? [readPlain, readCached] : [readCached, readPlain]) await side();
      await copyAlone();
    }
    const w = median(withCache);
    const o = median(without);
    const ms = (xs: number[]): number[] => xs.map((x) => Math.round(x));
    print({ figure: 'content_cache.cold_read_cpu', note: 'CPU ms of the gateway\'s process (all threads, the cache\'s writes included) and of its main thread, per read: medians', with_cache_ms: median(cpu.with), without_cache_ms: median(cpu.without), added: round(median(cpu.with) / median(cpu.without) - 1, 3), main_thread_with_cache_ms: median(cpu.withMain), main_thread_without_cache_ms: median(cpu.withoutMain), main_thread_added: round(median(cpu.withMain) / median(cpu.withoutMain) - 1, 3), rounds: cpu });
    print({ figure: 'content_cache.copy_alone', note: 'dd of the same bytes into a new local file (page cache): what keeping a copy of every byte read costs at least, against the read without the cache', bytes: BYTES, copy_ms: Math.round(median(copies)), ratio_to_read_without_cache: round(median(copies) / o, 3), rounds: ms(copies) });
    print({ figure: 'content_cache.cold_read_cost', bytes: BYTES, with_cache_ms: Math.round(w), without_cache_ms: Math.round(o), added: round(w / o - 1, 3), kept_share: kept, rounds: { with_cache_ms: ms(withCache), without_cache_ms: ms(without) }, target: 'added < 0.05' });

    if (process.env.BENCH_CACHE_PINNED === '0' || AA) return;
    // Pinned: all of it in the content cache; the mount vs the cache's own file on the local disk.
    await cached.call('pin', { path: '/Lib/big.bin' }, 600_000);
    const contentDir = join(cachedData, 'content');
    const data = (await readdir(contentDir)).filter((n) => n.endsWith('.data'));
    if (data.length !== 1) throw new Error(`expected one content in ${contentDir}, found ${data.length}`);
    const local = join(contentDir, data[0]!);
    for (const warm of [true, false]) {
      const viaMount: number[] = [];
      const viaDisk: number[] = [];
      const mountSide = async (): Promise<void> => {
        await dropPages(file(cached));
        if (!warm) await dropPages(local);
        viaMount.push(await ddRead(file(cached), scratch));
      };
      const diskSide = async (): Promise<void> => {
        if (!warm) await dropPages(local);
        viaDisk.push(await ddRead(local, scratch));
      };
      if (warm) await sh('dd', [`if=${local}`, 'of=/dev/null', 'bs=1M'], { timeoutMs: 60_000 }); // into the page cache
      for (let r = 0; r < ROUNDS; r++) {
        for (const side of r % 2 ? [diskSide, mountSide] : [mountSide, diskSide]) await side();
      }
      const m = median(viaMount);
      const d = median(viaDisk);
      print({ figure: `content_cache.read_pinned_${warm ? 'warm' : 'cold'}`, note: warm ? 'the cache file in the page cache, the mount\'s own pages dropped' : 'the cache file\'s pages dropped too: read from the disk', bytes: BYTES, mount_MBps: round(BYTES / 1e6 / (m / 1000), 0), local_disk_MBps: round(BYTES / 1e6 / (d / 1000), 0), ratio_vs_local_disk: round(d / m), rounds: { mount_ms: ms(viaMount), local_disk_ms: ms(viaDisk) }, target: 'ratio_vs_local_disk >= 0.9' });
    }
    const counters = await cached.call<{ fdReads?: number; passthroughReads?: number }>('mountCounters');
    print({ figure: 'content_cache.engine', note: 'reads the engine answered from the cache file\'s descriptor; opens answered with the cache file as their backing file (the kernel read it)', fd_reads: counters?.fdReads ?? null, passthrough_reads: counters?.passthroughReads ?? null });
  } finally {
    for (const h of mounts.reverse()) await h.stop().catch(() => undefined);
    await rm(scratch, { recursive: true, force: true });
  }
}

/** The cache's counters once its writes for the last read are done (what it kept stops moving). */
async function eventuallyWritten(h: MountHarness, before: DiskStats): Promise<DiskStats> {
  let last = await diskStats(h);
  for (let i = 0; i < 600; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const now = await diskStats(h);
    if (now.writtenBytes + now.skippedBytes - before.writtenBytes - before.skippedBytes >= BYTES) return now;
    if (now.writtenBytes === last.writtenBytes && now.skippedBytes === last.skippedBytes && i >= 10) return now;
    last = now;
  }
  return last;
}

main().catch((err: Error) => {
  process.stderr.write(`bench content-cache: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
