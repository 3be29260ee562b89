/**
 * WebDAV front end figures, each against a baseline measured in the same run:
 * - over the embedded service (its own process, data in memory), with curl as the client: GET and PUT of
 *   BENCH_WEBDAV_BYTES through WebDAV vs the same read / write through the Vfs directly (target ≥ 0.9×),
 *   median of BENCH_WEBDAV_ROUNDS (default 4; each way goes first in every other round);
 * - over an in-memory-backed Vfs with a disk-backed upload journal (no service: the front end's own cost):
 * - PUT of BENCH_WEBDAV_BYTES (default 1 GiB) through WebDAV vs Vfs.writeFile directly (target ≥ 0.9×);
 * - GET of the same file through WebDAV vs Vfs.createReadStream directly (target ≥ 0.9×);
 * - PROPFIND depth 1 of a BENCH_WEBDAV_ENTRIES-entry folder (default 10,000), warm (target < 300 ms).
 * Prints one JSON line per figure. Run: `node --import tsx scripts/bench/webdav.ts`.
 */
import { request } from 'node:http';
import { Readable } from 'node:stream';
import { startMemoryDav } from '../../test/support/serve-memory-dav.js';
import { basicAuth } from '../../test/support/dav-http.js';
import { serviceAvailable } from '../../test/support/vfs.js';
import { startServiceProcess } from '../../test/support/service-process.js';
import { execFile } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { pipeline } from 'node:stream/promises';
import { createWebdavServer } from '../../src/webdav/index.js';
import { silentLogger } from '../../src/shared/log.js';
import { join } from 'node:path';
import { tuneGarbageCollector } from '../../src/shared/gc-tuning.js';
import { recyclePages } from './support/recycle-pages.js';
import { createServiceVfs } from '../../src/remote/service-vfs.js';

tuneGarbageCollector(); // as the cloudlib command does

const BYTES = Number(process.env.BENCH_WEBDAV_BYTES ?? 1024 * 1024 * 1024);
const ENTRIES = Number(process.env.BENCH_WEBDAV_ENTRIES ?? 10_000);
const CHUNK = 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_WEBDAV_ROUNDS ?? 4);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** curl with the bench user, failing on an HTTP error. */
function curl(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('curl', ['-sS', '--fail', '-u', 'alice:secret', ...args], (err, _out, stderr) => (err ? reject(new Error(`curl ${args.join(' ')}: ${stderr || err.message}`)) : resolve()));
  });
}

const round = (n: number, digits = 2): number => Number(n.toFixed(digits));
const mbps = (bytes: number, ms: number): number => round(bytes / 1e6 / (ms / 1000), 1);
function print(figure: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(figure) + '\n');
}

/** A deterministic stream of `total` bytes in 1 MiB chunks (one buffer reused: no memory growth). */
function source(total: number): Readable {
  const block = Buffer.alloc(CHUNK, 0x5a);
  let left = total;
  return new Readable({
    read() {
      if (left <= 0) return void this.push(null);
      const n = Math.min(left, CHUNK);
      left -= n;
      this.push(n === CHUNK ? block : block.subarray(0, n));
    },
  });
}

async function drain(stream: AsyncIterable<Buffer>): Promise<number> {
  let n = 0;
  for await (const c of stream) n += c.length;
  return n;
}

function http(method: string, url: string, opts: { body?: Readable; headers?: Record<string, string> } = {}): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers: { authorization: basicAuth(), ...(opts.headers ?? {}) } }, (res) => {
      drain(res).then((bytes) => resolve({ status: res.statusCode ?? 0, bytes }), reject);
    });
    req.on('error', reject);
    if (opts.body) opts.body.pipe(req);
    else req.end();
  });
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

const d = await startMemoryDav({ emptyCreateGraceMs: 0 });
// Over the embedded service in a process of its own (data in memory: see test/support/service-process.ts).
const svc = (await serviceAvailable()) ? await startServiceProcess({ memoryData: process.env.BENCH_SERVICE_DISK !== '1' }) : undefined;
const svcDir = svc ? await mkdtemp(join(tmpdir(), 'cloudlib-bench-dav-')) : undefined;
const svcVfs = svc && svcDir ? await createServiceVfs({ libraries: [{ name: 'Library', client: svc.client }], dataDir: join(svcDir, 'gateway'), feedIntervalMs: 0 }) : undefined;
const serviceDav = svcVfs && svcDir ? createWebdavServer({ vfs: svcVfs, users: [{ name: 'alice', password: 'secret' }], dataDir: join(svcDir, 'webdav'), logger: silentLogger, emptyCreateGraceMs: 0 }) : undefined;
const serviceUrl = serviceDav ? await serviceDav.listen('127.0.0.1', 0) : undefined;
try {
  // Over the service, with curl as the client (another process, as every real client is): both ways
  // read ranges from the service and write into the journal; each figure is the median of ROUNDS.
  if (svcVfs && serviceUrl && svcDir) {
    const file = join(svcDir, 'put.bin');
    await pipeline(source(BYTES), createWriteStream(file));
    const get: { vfs: number; dav: number }[] = [];
    const put: { vfs: number; dav: number }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Each way goes first in every other round: what one leaves behind weighs on both alike.
      // Each PUT writes a new spool: the memory it takes is recycled first (see support/recycle-pages.ts).
      const putDirect = async (): Promise<number> => {
        await recyclePages(svcDir, BYTES * 2);
        const t = await timed(() => svcVfs.writeFile('/Library/direct.bin', createReadStream(file, { highWaterMark: CHUNK })));
        await svcVfs.flushAll();
        return t.ms;
      };
      const putDav = async (): Promise<number> => {
        await recyclePages(svcDir, BYTES * 2);
        const t = await timed(() => curl(['-T', file, `${serviceUrl}Library/dav.bin`]));
        await svcVfs.flushAll();
        return t.ms;
      };
      const getDirect = async (): Promise<number> => {
        svcVfs.dropCaches();
        const t = await timed(async () => drain((await svcVfs.createReadStream('/Library/direct.bin')) as AsyncIterable<Buffer>));
        if (t.value !== BYTES) throw new Error(`Vfs read ${t.value} bytes, expected ${BYTES}`);
        return t.ms;
      };
      const getDav = async (): Promise<number> => {
        svcVfs.dropCaches();
        return (await timed(() => curl(['-o', '/dev/null', `${serviceUrl}Library/direct.bin`]))).ms;
      };
      if (round % 2 === 0) {
        const vfs = await putDirect();
        put.push({ vfs, dav: await putDav() });
        const rv = await getDirect();
        get.push({ vfs: rv, dav: await getDav() });
      } else {
        const dav = await putDav();
        put.push({ vfs: await putDirect(), dav });
        const rd = await getDav();
        get.push({ vfs: await getDirect(), dav: rd });
      }
    }
    for (const [figure, xs] of [['webdav_get_throughput_service', get], ['webdav_put_throughput_service', put]] as const) {
      const vfsMs = median(xs.map((x) => x.vfs));
      const davMs = median(xs.map((x) => x.dav));
      print({ figure, bytes: BYTES, rounds: ROUNDS, client: 'curl', vfs_mb_s: mbps(BYTES, vfsMs), webdav_mb_s: mbps(BYTES, davMs), ratio: round(vfsMs / davMs), ratios: xs.map((x) => round(x.vfs / x.dav)), target: '>= 0.9' });
    }
  }
  // Writes: the Vfs directly, then through WebDAV (each then read back the same two ways).
  const direct = await timed(() => d.vfs.writeFile('/Library/direct.bin', source(BYTES)));
  const viaDav = await timed(() => http('PUT', `${d.url}Library/dav.bin`, { body: source(BYTES), headers: { 'content-length': String(BYTES) } }));
  if (viaDav.value.status >= 300) throw new Error(`PUT answered ${viaDav.value.status}`);
  print({ figure: 'webdav_put_throughput', bytes: BYTES, vfs_mb_s: mbps(BYTES, direct.ms), webdav_mb_s: mbps(BYTES, viaDav.ms), ratio: round(direct.ms / viaDav.ms), target: '>= 0.9' });

  const readDirect = await timed(async () => drain((await d.vfs.createReadStream('/Library/direct.bin')) as AsyncIterable<Buffer>));
  const readDav = await timed(() => http('GET', `${d.url}Library/direct.bin`));
  if (readDav.value.bytes !== BYTES || readDirect.value !== BYTES) throw new Error(`GET read ${readDav.value.bytes} / ${readDirect.value} bytes, expected ${BYTES}`);
  print({ figure: 'webdav_get_throughput_memory', note: 'baseline is a zero-copy in-memory buffer', bytes: BYTES, vfs_mb_s: mbps(BYTES, readDirect.ms), webdav_mb_s: mbps(BYTES, readDav.ms), ratio: round(readDirect.ms / readDav.ms), target: '>= 0.9' });
  await d.vfs.unlink('/Library/direct.bin');
  await d.vfs.unlink('/Library/dav.bin');

  // A large folder, put on the library behind the gateway's back, then listed.
  const remote = d.remotes.get('Library')!;
  await remote.mkdir('big');
  for (let i = 0; i < ENTRIES; i++) remote.putFile(`big/f${String(i).padStart(5, '0')}.txt`, Buffer.from(String(i)));
  const body = '<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>';
  const propfind = (): Promise<{ status: number; bytes: number }> =>
    new Promise((resolve, reject) => {
      const req = request(`${d.url}Library/big/`, { method: 'PROPFIND', headers: { authorization: basicAuth(), depth: '1', 'content-type': 'application/xml', 'content-length': String(body.length) } }, (res) => {
        drain(res).then((bytes) => resolve({ status: res.statusCode ?? 0, bytes }), reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  const cold = await timed(propfind);
  const warm: number[] = [];
  for (let i = 0; i < 5; i++) warm.push((await timed(propfind)).ms);
  warm.sort((a, b) => a - b);
  const readdir = await timed(() => d.vfs.readdir('/Library/big'));
  print({
    figure: 'webdav_propfind_depth1', entries: ENTRIES, status: cold.value.status, body_bytes: cold.value.bytes,
    cold_ms: round(cold.ms, 1), warm_median_ms: round(warm[2]!, 1), vfs_readdir_warm_ms: round(readdir.ms, 1), target_ms: '< 300',
  });
} finally {
  await serviceDav?.close();
  await svcVfs?.close();
  await svc?.close();
  if (svcDir) await rm(svcDir, { recursive: true, force: true });
  await d.close();
}
