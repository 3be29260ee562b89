/**
 * The gateway against a far-away service: the embedded service (its own process, data in memory) behind
 * the latency proxy (support/latency-proxy.ts, its own process: BENCH_WAN_RTT_MS round trip, default 25,
 * and a BENCH_WAN_WINDOW_BYTES window per connection, default 1 MiB: one stream carries at most a window
 * per round trip, as one TCP stream does), with the service's public URL the proxy's so that links and
 * upload servers go through it too. The gateway (Vfs, FUSE mount, WebDAV) runs in this process; every
 * client is another process (dd, ls, cat, cp, curl). Figures, each against a baseline of the same run:
 * - sequential read of BENCH_WAN_BYTES (default 1 GiB) through the mount (dd) and WebDAV (curl) vs one
 *   single-stream download of the same file through the same proxy (curl on its link): target ≥ 2×;
 * - `ls -l` of an uncached BENCH_WAN_ENTRIES-entry folder (default 2,000) in round trips (one round trip
 *   measured as a small API call on a warm connection), less the same ls with the gateway's listing
 *   cached (the local cost: readdirplus requests) and less the listing at loopback speed (the service's
 *   own work), each part's least time over BENCH_WAN_LS_ROUNDS rounds (default 7): target ≤ 1 + 3; and
 *   the listing alone, as the
 *   gateway lists, and one page of 100 after another (a client paging at the spec's default), for
 *   comparison;
 * - reading 200 small files already listed (one `cat`): round trips per file (target ≤ 1);
 * - 1,000 files of 4 KiB copied into the mount (one `cp -r`) until all are on the service: files/s
 *   (target ≥ 100), with the gateway's default upload concurrency and write-back delay, vs the same copy with the service at
 *   loopback speed (what the work per upload allows). BENCH_WAN_UPLOAD_CONCURRENCY sets the Vfs's
 *   `upload.concurrency` instead of the default.
 * - BENCH_WAN_RSYNC_FILES (default 200) files of 4 KiB copied in by `rsync -a` (each written under a
 *   temporary name, then renamed): files/s and round trips per file of the rsync itself (its uploads wait
 *   for the write-back delay), with the calls made meanwhile.
 * Prints one JSON line per figure. Run: `node --import tsx scripts/bench/wan.ts` (or `npm run bench -- wan`).
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ServiceClient } from '../../src/api/client.js';
import { LibraryRemote } from '../../src/remote/library-remote.js';
import { uploadFile } from '../../src/api/upload.js';
import { mountVfs } from '../../src/fuse/index.js';
import { createWebdavServer } from '../../src/webdav/index.js';
import { silentLogger } from '../../src/shared/log.js';
import { tuneGarbageCollector } from '../../src/shared/gc-tuning.js';
import { startServiceProcess } from '../../test/support/service-process.js';
import { sh } from '../../test/e2e/fuse/harness.js';
import { createServiceVfs } from '../../src/remote/service-vfs.js';
import { freePort } from '../../test/support/free-port.js';
import { DEFAULT_UPLOAD_DELAY_MS } from '../../src/gateway/config.js';

tuneGarbageCollector(); // as the cloudlib command does

const RTT_MS = Number(process.env.BENCH_WAN_RTT_MS ?? 25);
const WINDOW = Number(process.env.BENCH_WAN_WINDOW_BYTES ?? 1024 * 1024);
const BYTES = Number(process.env.BENCH_WAN_BYTES ?? 1024 * 1024 * 1024);
const ENTRIES = Number(process.env.BENCH_WAN_ENTRIES ?? 2000);
/** Rounds of the uncached `ls -l` (the figure takes each part's least time over them). */
const LS_ROUNDS = Number(process.env.BENCH_WAN_LS_ROUNDS ?? 7);
const SMALL_READS = 200;
const SMALL_WRITES = Number(process.env.BENCH_WAN_SMALL_FILES ?? 1000);
const RSYNC_FILES = Number(process.env.BENCH_WAN_RSYNC_FILES ?? 200);
/** Uploads at once of the gateway's Vfs (`upload.concurrency`, `upload.smallConcurrency`); unset = the gateway's defaults (4, 16). */
const UPLOAD_CONCURRENCY = process.env.BENCH_WAN_UPLOAD_CONCURRENCY ? Number(process.env.BENCH_WAN_UPLOAD_CONCURRENCY) : undefined;
const SMALL_UPLOAD_CONCURRENCY = process.env.BENCH_WAN_SMALL_UPLOAD_CONCURRENCY ? Number(process.env.BENCH_WAN_SMALL_UPLOAD_CONCURRENCY) : undefined;
/** The write-back delay (`upload.delayMs`); unset = the gateway's default (`journal.upload_delay_ms`). */
const UPLOAD_DELAY_MS = Number(process.env.BENCH_WAN_UPLOAD_DELAY_MS ?? DEFAULT_UPLOAD_DELAY_MS);
const MiB = 1024 * 1024;

const round = (n: number, digits = 2): number => Number(n.toFixed(digits));
const MBps = (bytes: number, ms: number): number => round(bytes / 1e6 / (ms / 1000), 1);
function print(figure: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(figure) + '\n');
}
async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The proxy in a process of its own; `command` sends one line and waits for its answer. */
async function startProxy(): Promise<{ port: number; command(line: string): Promise<string>; stop(): void }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./support/latency-proxy.ts', import.meta.url)), '--delay-ms', String(RTT_MS / 2), '--window-bytes', String(WINDOW)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  const m = /^listening (\d+)$/.exec(String(first.value ?? ''));
  if (!m) throw new Error(`latency proxy: expected 'listening PORT', got ${JSON.stringify(first.value)}`);
  return {
    port: Number(m[1]),
    async command(line) {
      child.stdin.write(line + '\n');
      return String((await lines.next()).value ?? '');
    },
    stop() { child.kill('SIGTERM'); },
  };
}

/** A deterministic file of `total` bytes, 1 MiB blocks each stamped with its index (distinct, no big buffer). */
function bigSource(total: number): { size: number; open(start: number): Readable } {
  const base = randomBytes(MiB);
  return {
    size: total,
    open(start: number) {
      let at = start;
      return new Readable({
        read() {
          if (at >= total) return void this.push(null);
          const i = Math.floor(at / MiB);
          const b = Buffer.from(base);
          b.writeUInt32BE(i, 0);
          const piece = b.subarray(at - i * MiB, Math.min(MiB, total - i * MiB));
          at += piece.length;
          this.push(piece);
        },
      });
    },
  };
}

const busy = loadavg()[0]!;
const proxy = await startProxy();
const port = await freePort();
const svc = await startServiceProcess({ memoryData: true, listen: `127.0.0.1:${port}`, publicUrl: `http://127.0.0.1:${proxy.port}` });
await proxy.command(`target 127.0.0.1:${port}`);
const scratch = await mkdtemp(join(tmpdir(), 'cloudlib-bench-wan-'));
const mnt = join(scratch, 'mnt');
let unmount: (() => Promise<void>) | undefined;
let closeDav: (() => Promise<void>) | undefined;
try {
  print({ figure: 'wan.setup', rtt_ms: RTT_MS, window_bytes: WINDOW, bytes: BYTES, load_average_1m_at_start: round(busy), cores: (await import('node:os')).cpus().length });
  // Setup at loopback speed (new connections only), straight to the service's listener where it can.
  await proxy.command('link 0 1073741824');
  const setupClient = new ServiceClient({ baseUrl: `http://127.0.0.1:${port}`, credentials: svc.client.credentials, retries: 0 });
  const sha1 = (b: Buffer): string => createHash('sha1').update(b).digest('hex');
  await uploadFile(setupClient, bigSource(BYTES), { fullpath: 'big.bin' });
  const small = randomBytes(4096);
  for (let i = 0; i < ENTRIES; i++) {
    const data = Buffer.from(small);
    data.writeUInt32BE(i, 0);
    await setupClient.createFileWithContent({ fullpath: `many/f${String(i).padStart(5, '0')}`, filehash: sha1(data), filesize: data.length, overwrite: 1 }, data);
  }
  await setupClient.close();
  await proxy.command(`link ${RTT_MS / 2} ${WINDOW}`);

  // The gateway, through the proxy.
  // Every exchange counted by endpoint, per figure (what the round trips were spent on).
  const exchanges = new Map<string, number>();
  const client = new ServiceClient({ baseUrl: svc.baseUrl, credentials: svc.client.credentials, retries: 0, onExchange: (e) => exchanges.set(e.endpoint, (exchanges.get(e.endpoint) ?? 0) + 1) });
  const calls = (): Record<string, number> => {
    const out = Object.fromEntries(exchanges);
    exchanges.clear();
    return out;
  };
  const connections = async (): Promise<number> => (JSON.parse(await proxy.command('stats')) as { connections: number }).connections;
  const vfs = await createServiceVfs({ libraries: [{ name: 'Library', client }], dataDir: join(scratch, 'gateway'), upload: { concurrency: UPLOAD_CONCURRENCY, smallConcurrency: SMALL_UPLOAD_CONCURRENCY, delayMs: UPLOAD_DELAY_MS } });
  const mounted = await mountVfs({ vfs, mountpoint: mnt, logger: silentLogger, attrTimeoutS: 2 });
  unmount = async () => { await mounted.unmount(); await vfs.close(); };
  const dav = createWebdavServer({ vfs, users: [{ name: 'alice', password: 'secret' }], dataDir: join(scratch, 'webdav'), logger: silentLogger });
  const davUrl = await dav.listen('127.0.0.1', 0);
  closeDav = () => dav.close();

  // One round trip: a small call on a warm connection, through the proxy.
  const probes: number[] = [];
  for (let i = 0; i < 7; i++) probes.push((await timed(() => client.file.info({ fullpath: 'big.bin', attribute: 10 }))).ms);
  const rtt = median(probes.slice(2));
  print({ figure: 'wan.round_trip', configured_ms: RTT_MS, measured_ms: round(rtt, 1) });

  // ls -l of the uncached folder, LS_ROUNDS times: in each round the gateway's caches are dropped and the
  // kernel's names have expired (its attribute timeout, 2 s), then the same ls with the gateway's listing
  // cached (the kernel looks every name up again, the gateway answers from its cache: the ls's local cost,
  // one FUSE lookup per name), then the listing alone with the service at loopback speed (the service's and
  // the client's own work, which no latency adds to). The figure is least(uncached) − least(cached) −
  // least(loopback) over the rounds: on a busy machine other work only ever adds time to a part, so each
  // part's least time is the best estimate of its own cost (each round's own difference is printed too).
  const lsRounds: { ms: number; warmMs: number; loopbackMs: number; calls: Record<string, number>; connections: number }[] = [];
  let listed = 0;
  const loopClient = new ServiceClient({ baseUrl: svc.baseUrl, credentials: svc.client.credentials, retries: 0 });
  for (let round = 0; round < LS_ROUNDS; round++) {
    vfs.dropCaches();
    await new Promise((r) => setTimeout(r, 2_500));
    calls();
    const conns = await connections();
    const ls = await timed(() => sh('ls', ['-l', join(mnt, 'Library', 'many')], { timeoutMs: 120_000 }));
    const lsCalls = calls();
    const lsConnections = (await connections()) - conns;
    listed = ls.value.stdout.split('\n').filter((l) => l.startsWith('-')).length;
    await new Promise((r) => setTimeout(r, 2_500));
    const warm = await timed(() => sh('ls', ['-l', join(mnt, 'Library', 'many')], { timeoutMs: 120_000 }));
    await proxy.command('link 0 1073741824');
    const loopback = await timed(() => new LibraryRemote({ client: loopClient }).list('many'));
    await proxy.command(`link ${RTT_MS / 2} ${WINDOW}`);
    lsRounds.push({ ms: ls.ms, warmMs: warm.ms, loopbackMs: loopback.ms, calls: lsCalls, connections: lsConnections });
  }
  await loopClient.close();
  // For comparison: the listing alone, pages of 100 one after another (a client paging at the spec's
  // default), and as the gateway lists, on warm connections.
  const serialClient = client.withCredentials(client.credentials);
  const serial = await timed(() => new LibraryRemote({ client: serialClient, pageSize: 100, pageConcurrency: 1 }).list('many'));
  const parallel = await timed(() => new LibraryRemote({ client: serialClient }).list('many'));
  const beyond = lsRounds.map((r) => (r.ms - r.warmMs - r.loopbackMs) / rtt);
  const least = (pick: (r: (typeof lsRounds)[number]) => number): number => Math.min(...lsRounds.map(pick));
  const leastBeyond = (least((r) => r.ms) - least((r) => r.warmMs) - least((r) => r.loopbackMs)) / rtt;
  const med = (pick: (r: (typeof lsRounds)[number]) => number): number => round(median(lsRounds.map(pick)), 0);
  print({
    figure: 'wan.ls_l_uncached', entries: listed, rounds: LS_ROUNDS, least_ms: round(least((r) => r.ms), 0), median_ms: med((r) => r.ms),
    gateway_cached_least_ms: round(least((r) => r.warmMs), 0), listing_at_loopback_least_ms: round(least((r) => r.loopbackMs), 0),
    round_trips_beyond_local_work: round(leastBeyond, 1),
    beyond_one: round(leastBeyond - 1, 1), target_beyond_one: 3, beyond_one_each_round: beyond.map((b) => round(b - 1, 1)),
    listing_alone_warm_connections_ms: round(parallel.ms, 0), listing_alone_round_trips: round(parallel.ms / rtt, 1),
    calls: lsRounds[0]!.calls, new_connections: lsRounds.map((r) => r.connections), pages_one_after_another_ms: round(serial.ms, 0), pages_one_after_another_round_trips: round(serial.ms / rtt, 1), ratio: round(serial.ms / med((r) => r.ms)),
  });

  // 200 small files already listed, read one after another by one process.
  const names = (await readdir(join(mnt, 'Library', 'many'))).sort().slice(0, SMALL_READS).map((n) => join(mnt, 'Library', 'many', n));
  calls();
  let conns = await connections();
  const cat = await timed(() => sh('sh', ['-c', 'cat "$@" | wc -c', 'sh', ...names], { timeoutMs: 120_000 }));
  if (Number(cat.value.stdout.trim()) !== names.length * 4096) throw new Error(`cat: expected ${names.length * 4096} bytes, got ${cat.value.stdout.trim()}`);
  print({ figure: 'wan.read_small_listed', files: names.length, ms_per_file: round(cat.ms / names.length, 1), round_trips_per_file: round(cat.ms / names.length / rtt, 2), target: 1, calls: calls(), new_connections: (await connections()) - conns });

  // Sequential read of the big file: one stream on its link (the baseline), WebDAV, the mount.
  const { urls } = await client.file.downloadUrl({ fullpath: 'big.bin' });
  const single = await timed(() => sh('curl', ['-sS', '--fail', '-o', '/dev/null', urls[0]!], { timeoutMs: 1_800_000 }));
  const davGet = await timed(() => sh('curl', ['-sS', '--fail', '-u', 'alice:secret', '-o', '/dev/null', `${davUrl}Library/big.bin`], { timeoutMs: 1_800_000 }));
  const ddRead = await timed(() => sh('dd', [`if=${join(mnt, 'Library', 'big.bin')}`, 'of=/dev/null', 'bs=1M'], { timeoutMs: 1_800_000 }));
  print({
    figure: 'wan.seq_read', bytes: BYTES, single_stream_MBps: MBps(BYTES, single.ms),
    mount_MBps: MBps(BYTES, ddRead.ms), mount_ratio: round(single.ms / ddRead.ms),
    webdav_MBps: MBps(BYTES, davGet.ms), webdav_ratio: round(single.ms / davGet.ms), target: 2,
  });

  // 1,000 files of 4 KiB copied in by one process, until all are on the service.
  const src = join(scratch, 'small-src');
  await mkdir(src);
  for (let i = 0; i < SMALL_WRITES; i++) {
    const data = randomBytes(4096);
    await writeFile(join(src, `s${String(i).padStart(4, '0')}`), data);
  }
  calls();
  conns = await connections();
  const copy = await timed(async () => {
    await sh('cp', ['-r', src, join(mnt, 'Library', 'up')], { timeoutMs: 600_000 });
    const copied = performance.now();
    await vfs.flushAll({ timeoutMs: 600_000 });
    return copied;
  });
  const t0 = performance.now() - copy.ms;
  // The same copy with the service at loopback speed (new connections): what the gateway's local side allows.
  await proxy.command('link 0 1073741824');
  await vfs.flushAll();
  const local = await timed(async () => {
    await sh('cp', ['-r', src, join(mnt, 'Library', 'up-loopback')], { timeoutMs: 600_000 });
    await vfs.flushAll({ timeoutMs: 600_000 });
  });
  await proxy.command(`link ${RTT_MS / 2} ${WINDOW}`);
  const onService = await new LibraryRemote({ client: serialClient }).list('up');
  if (onService.length !== SMALL_WRITES) throw new Error(`expected ${SMALL_WRITES} files on the service, found ${onService.length}`);
  print({
    figure: 'wan.copy_4k_files', files: SMALL_WRITES, cp_s: round((copy.value - t0) / 1000, 2), until_on_service_s: round(copy.ms / 1000, 2),
    files_per_s: round(SMALL_WRITES / (copy.ms / 1000), 0), target: 100, loopback_files_per_s: round(SMALL_WRITES / (local.ms / 1000), 0), ratio_to_loopback: round(local.ms / copy.ms), small_upload_concurrency: SMALL_UPLOAD_CONCURRENCY ?? 'default (16)', upload_concurrency: UPLOAD_CONCURRENCY ?? 'default (4)', upload_delay_ms: UPLOAD_DELAY_MS,
    calls: calls(), new_connections: (await connections()) - conns,
  });
  // rsync -a of RSYNC_FILES of them into the mount: each written under a temporary name, then renamed.
  // A rename of a file whose upload has not started asks nothing of the service: the figure is the
  // local side's, with the calls made meanwhile (the feed's polls; uploads wait for the write-back delay).
  const rsyncSrc = join(scratch, 'rsync-src');
  await mkdir(rsyncSrc);
  for (let i = 0; i < RSYNC_FILES; i++) await writeFile(join(rsyncSrc, `r${String(i).padStart(4, '0')}`), randomBytes(4096));
  await vfs.flushAll();
  calls();
  const rsync = await timed(() => sh('rsync', ['-a', `${rsyncSrc}/`, `${join(mnt, 'Library', 'rsynced')}/`], { timeoutMs: 600_000 }));
  const rsyncCalls = calls();
  await vfs.flushAll({ timeoutMs: 600_000 });
  const rsynced = await new LibraryRemote({ client: serialClient }).list('rsynced');
  if (rsynced.length !== RSYNC_FILES || rsynced.some((e) => e.name.startsWith('.'))) throw new Error(`expected ${RSYNC_FILES} files on the service, found ${rsynced.map((e) => e.name).join(' ')}`);
  print({ figure: 'wan.rsync_4k_files', files: RSYNC_FILES, rsync_s: round(rsync.ms / 1000, 2), files_per_s: round(RSYNC_FILES / (rsync.ms / 1000), 0), round_trips_per_file: round(rsync.ms / RSYNC_FILES / rtt, 2), calls: rsyncCalls });
  await serialClient.close();
  await client.close();
  print({ figure: 'wan.load_average_1m_at_end', value: round(loadavg()[0]!) });
} finally {
  await closeDav?.().catch(() => undefined);
  await unmount?.().catch(() => undefined);
  await sh('fusermount', ['-uz', mnt]).catch(() => undefined);
  await svc.close();
  proxy.stop();
  await rm(scratch, { recursive: true, force: true });
}
