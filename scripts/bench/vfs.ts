/**
 * Gateway core figures against the embedded service, each against a baseline measured in the same run:
 * - sequential read of BENCH_VFS_BYTES (default 1 GiB) through a Vfs handle in 128 KiB reads (what FUSE
 *   asks, with readParts as FUSE reads; read() too, for reference) vs one plain ranged download of the
 *   same file (target ≥ 0.9×);
 * - random 4 KiB reads per second through a Vfs handle (BENCH_VFS_RANDOM_S seconds, default 5);
 * - write + commit of BENCH_VFS_BYTES through the Vfs (open, 1 MiB writes, close, until the service
 *   confirmed) vs the client's uploader alone on a file of the same size (target ≥ 0.9×), alternated for
 *   BENCH_VFS_ROUNDS rounds (default 6, each side first in every other one), median;
 * - peak RSS of a fresh gateway process streaming BENCH_VFS_STREAM_BYTES (default 4 GiB) through Vfs reads
 *   (target < 200 MB).
 * The embedded service runs in a process of its own, as beside a production gateway, with its data in
 * memory (BENCH_SERVICE_DISK=1: on disk): a service elsewhere does not write to the gateway's disk, and on
 * the same disk every upload is written twice to it (spool, then blob), which measures the disk.
 * Prints one JSON line per figure. Run: `node --import tsx scripts/bench/vfs.ts`.
 */
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ServiceClient } from '../../src/api/client.js';
import { startServiceProcess } from '../../test/support/service-process.js';
import { fileSource, uploadFile } from '../../src/api/upload.js';
import { tuneGarbageCollector } from '../../src/shared/gc-tuning.js';
import { recyclePages } from './support/recycle-pages.js';
import { createServiceVfs } from '../../src/remote/service-vfs.js';

tuneGarbageCollector(); // as the cloudlib command does

const MiB = 1024 * 1024;
const SIZE = Number(process.env.BENCH_VFS_BYTES ?? 1024 * MiB);
const RANDOM_S = Number(process.env.BENCH_VFS_RANDOM_S ?? 5);
const STREAM = Number(process.env.BENCH_VFS_STREAM_BYTES ?? 4 * 1024 * MiB);
const BLOCK = 4 * MiB;
const ROUNDS = Number(process.env.BENCH_VFS_ROUNDS ?? 6);
const READ_ROUNDS = 5;
/** Memory recycled before each write window, in transfer sizes: the Vfs side allocates two (spool, the service's copy). */
const RECYCLE = 6;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const seedBlock = randomBytes(BLOCK);

function print(figure: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(figure) + '\n');
}
const round = (n: number, digits = 2): number => Number(n.toFixed(digits));
const mibs = (bytes: number, ms: number): number => round(bytes / MiB / (ms / 1000), 1);

/**
 * Block `i` of synthetic file `tag`: distinct content per file and block, stamped into one of two reused
 * buffers (valid until the next-but-one call), so neither side's time includes making the data.
 */
const blockBuffers = [Buffer.from(seedBlock), Buffer.from(seedBlock)];
function block(tag: number, i: number, size: number): Buffer {
  const len = Math.min(BLOCK, size - i * BLOCK);
  const b = blockBuffers[i % 2]!.subarray(0, len);
  b.writeUInt32BE(i, 0);
  b.writeUInt32BE(tag, 4);
  return b;
}

async function makeFile(path: string, tag: number, size: number): Promise<void> {
  const fh = await open(path, 'w');
  try {
    for (let i = 0; i * BLOCK < size; i++) await fh.write(block(tag, i, size));
  } finally {
    await fh.close();
  }
}


/** Child mode: a gateway process that only streams STREAM bytes of bench-read.bin and reports its peak RSS. */
async function streamChild(): Promise<void> {
  const { baseUrl, library } = JSON.parse(process.env.BENCH_VFS_STREAM_CHILD!) as { baseUrl: string; library: { org_client_id: string; org_client_secret: string } };
  const client = new ServiceClient({ baseUrl, credentials: { library } });
  const tmp = await mkdtemp(join(tmpdir(), 'cloudlib-bench-stream-'));
  const vfs = await createServiceVfs({ libraries: [{ name: 'Library', client }], dataDir: tmp, feedIntervalMs: 2000 });
  try {
    const size = (await vfs.stat('/Library/bench-read.bin')).size;
    let peak = process.memoryUsage().rss;
    const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss); }, 50);
    const rssBefore = process.memoryUsage().rss;
    let streamed = 0;
    const t0 = performance.now();
    while (streamed < STREAM) {
      const h = await vfs.open('/Library/bench-read.bin', { read: true });
      for (let pos = 0; pos < size && streamed < STREAM; pos += 128 * 1024) streamed += (await h.read(pos, 128 * 1024)).length;
      await h.release();
    }
    clearInterval(sampler);
    peak = Math.max(peak, process.memoryUsage().rss);
    print({ bench: 'vfs.stream_peak_rss', bytes: streamed, mib_per_s: mibs(streamed, performance.now() - t0), rss_before_mb: round(rssBefore / MiB, 0), peak_rss_mb: round(peak / MiB, 0), target_mb: 200 });
  } finally {
    await vfs.close();
    await client.close();
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Runs streamChild() in a new process of this script and returns its figure. */
async function streamInChild(baseUrl: string, credentials: ServiceClient['credentials']): Promise<Record<string, unknown>> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    env: { ...process.env, BENCH_VFS_STREAM_CHILD: JSON.stringify({ baseUrl, library: credentials.library }) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`streaming child exited with ${code}`);
  return JSON.parse(out.trim().split('\n').pop()!) as Record<string, unknown>;
}

async function main(): Promise<void> {
  const svc = await startServiceProcess({ memoryData: process.env.BENCH_SERVICE_DISK !== '1' });
  const tmp = await mkdtemp(join(tmpdir(), 'cloudlib-bench-vfs-'));
  const vfs = await createServiceVfs({ libraries: [{ name: 'Library', client: svc.client }], dataDir: join(tmp, 'gateway'), feedIntervalMs: 2000 });
  try {
    // Write + commit, alternating with the baseline (the client's uploader alone on a file of the same
    // size) for ROUNDS rounds; each side writes other content every time, so no upload is instant.
    // The ratio is of the medians; `ratios` pairs each round's two runs.
    const src = join(tmp, 'source.bin');
    const baseMs: number[] = [];
    const vfsMs: number[] = [];
    const closeMs: number[] = [];
    const writeMs: number[] = [];
    const writeSysMs: number[] = [];
    const baseline = async (round: number): Promise<void> => {
      await makeFile(src, 100 + round, SIZE);
      await recyclePages(tmp, SIZE * RECYCLE);
      const t0 = performance.now();
      await uploadFile(svc.client, await fileSource(src), { fullpath: 'bench-read.bin', overwrite: true });
      baseMs.push(performance.now() - t0);
    };
    const throughVfs = async (round: number): Promise<void> => {
      await recyclePages(tmp, SIZE * RECYCLE);
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const wh = await vfs.open('/Library/bench-write.bin', { write: true, create: true, truncate: true });
      for (let i = 0; i * BLOCK < SIZE; i++) {
        const b = block(200 + round, i, SIZE);
        for (let at = 0; at < b.length; at += MiB) await wh.write(i * BLOCK + at, b.subarray(at, at + MiB));
      }
      writeMs.push(performance.now() - t0);
      writeSysMs.push(process.cpuUsage(cpu0).system / 1000);
      await wh.release();
      closeMs.push(performance.now() - t0);
      await vfs.flushAll();
      vfsMs.push(performance.now() - t0);
      if (vfs.status().uploads.length > 0) throw new Error(`upload not confirmed: ${JSON.stringify(vfs.status().uploads)}`);
    };
    // Each side goes first in every other round: what one leaves behind (memory the service just took,
    // pages being written back) weighs on both alike.
    for (let round = 0; round < ROUNDS; round++) {
      if (round % 2 === 0) { await baseline(round); await throughVfs(round); }
      else { await throughVfs(round); await baseline(round); }
    }
    const baseUpMs = median(baseMs);
    const vfsUpMs = median(vfsMs);
    print({ bench: 'vfs.baseline_uploader', bytes: SIZE, rounds: ROUNDS, mib_per_s: mibs(SIZE, baseUpMs), total_ms: round(baseUpMs, 0) });
    print({
      bench: 'vfs.write_commit', bytes: SIZE, rounds: ROUNDS, mib_per_s: mibs(SIZE, vfsUpMs),
      writes_done_ms: round(median(writeMs), 0), writes_sys_cpu_ms: round(median(writeSysMs), 0), close_returned_ms: round(median(closeMs), 0), total_ms: round(vfsUpMs, 0),
      ratio_to_uploader: round(baseUpMs / vfsUpMs), ratios: baseMs.map((b, i) => round(b / vfsMs[i]!)), target: 0.9,
    });

    // Baseline read: one plain ranged download. Against it, a sequential read through the Vfs in 128 KiB
    // reads as the FUSE front end makes them (readParts: the pieces as they arrived, copied by the caller
    // into its buffer), and with read() (one joined buffer per call); each Vfs read on a fresh handle with
    // the caches dropped. READ_ROUNDS rounds, the order turning each round, medians.
    const plainDownload = async (): Promise<number> => {
      const { urls } = await svc.client.file.downloadUrl({ fullpath: 'bench-read.bin' });
      const t = performance.now();
      const res = await request(urls[0], { headers: { range: `bytes=0-${SIZE - 1}` }, dispatcher: svc.client.dispatcher });
      let n = 0;
      for await (const c of res.body) n += (c as Buffer).length;
      if (n !== SIZE) throw new Error(`plain download: expected ${SIZE} bytes, got ${n}`);
      return performance.now() - t;
    };
    const sequential = async (parts: boolean): Promise<number> => {
      vfs.dropCaches();
      const t = performance.now();
      const h = await vfs.open('/Library/bench-read.bin', { read: true });
      let n = 0;
      for (let pos = 0; pos < SIZE; pos += 128 * 1024) {
        if (parts) for (const p of await h.readParts!(pos, 128 * 1024)) n += p.length;
        else n += (await h.read(pos, 128 * 1024)).length;
      }
      await h.release();
      if (n !== SIZE) throw new Error(`vfs read: expected ${SIZE} bytes, got ${n}`);
      return performance.now() - t;
    };
    const readMs: Record<'plain' | 'parts' | 'joined', number[]> = { plain: [], parts: [], joined: [] };
    const ways = [['plain', plainDownload], ['parts', () => sequential(true)], ['joined', () => sequential(false)]] as const;
    for (let round = 0; round < READ_ROUNDS; round++) {
      for (let i = 0; i < ways.length; i++) {
        const [name, run] = ways[(i + round) % ways.length]!;
        readMs[name].push(await run());
      }
    }
    const baseReadMs = median(readMs.plain);
    const partsMs = median(readMs.parts);
    const joinedMs = median(readMs.joined);
    print({ bench: 'vfs.baseline_ranged_download', bytes: SIZE, rounds: READ_ROUNDS, mib_per_s: mibs(SIZE, baseReadMs) });
    print({
      bench: 'vfs.sequential_read', bytes: SIZE, rounds: READ_ROUNDS, read_size: 128 * 1024, mib_per_s: mibs(SIZE, partsMs), ratio_to_ranged_download: round(baseReadMs / partsMs), target: 0.9,
      read_joined_mib_per_s: mibs(SIZE, joinedMs), read_joined_ratio: round(baseReadMs / joinedMs),
    });
    const rh = await vfs.open('/Library/bench-read.bin', { read: true });

    // Random 4 KiB reads.
    let reads = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < RANDOM_S * 1000) {
      const pos = Math.floor(Math.random() * (SIZE - 4096) / 4096) * 4096;
      await rh.read(pos, 4096);
      reads++;
    }
    const randomMs = performance.now() - t0;
    await rh.release();
    print({ bench: 'vfs.random_4k_reads', reads, per_s: round(reads / (randomMs / 1000), 0) });

    // Peak RSS while streaming STREAM bytes: a fresh gateway process (nothing else in its memory).
    print(await streamInChild(svc.baseUrl, svc.client.credentials));
  } finally {
    await vfs.close();
    await svc.close();
    await rm(tmp, { recursive: true, force: true });
  }
}

if (process.env.BENCH_VFS_STREAM_CHILD) await streamChild();
else await main();
