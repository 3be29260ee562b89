/**
 * Embedded service figures, measured in one run:
 * - download throughput of a large file (default 1 GiB; BENCH_SERVICE_BYTES) through download_url, as a
 *   ratio to reading the same blob file from local disk (target ≥ 0.8×);
 * - `ls` latency p50/p99 for pages of 100 on a folder of 10 000 entries (target p50 < 5 ms);
 * - updates paging rate over 100 000 changes (mode compare, pages of 100).
 * Runs standalone: `node --import tsx scripts/bench/service.ts`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { startTestService } from '../../test/support/service.js';
import { writeRandom } from './service-blobs.js';

const MiB = 1024 * 1024;

export interface ServiceBenchOptions {
  /** Size of the downloaded file (bytes). Default 1 GiB. */
  bytes?: number;
  /** Entries in the listed folder. Default 10 000. */
  folderEntries?: number;
  /** Changes in the updates feed. Default 100 000. */
  changes?: number;
  /** Samples of `ls`. Default 500. */
  lsSamples?: number;
}

export async function benchService(opts: ServiceBenchOptions = {}): Promise<Record<string, unknown>[]> {
  const bytes = opts.bytes ?? Number(process.env.BENCH_SERVICE_BYTES ?? 1024 * MiB);
  const folderEntries = opts.folderEntries ?? 10_000;
  const changes = opts.changes ?? 100_000;
  const lsSamples = opts.lsSamples ?? 500;
  const results: Record<string, unknown>[] = [];
  const print = (r: Record<string, unknown>) => { results.push(r); process.stdout.write(JSON.stringify(r) + '\n'); };
  const svc = await startTestService();
  const { tree, content } = svc.service.parts;
  const libraryId = svc.service.credentials.library.org_id;
  const op = { id: 0, name: 'bench' };
  const scratch = await mkdtemp(join(tmpdir(), 'cloudlib-bench-svc-'));
  try {
    // 1. A large file, written to the service's temp folder and ingested like a finished upload.
    const temp = content.blobs.tempPath();
    const sha1 = await writeRandom(temp, bytes);
    await content.ingest(libraryId, { tempFilePath: temp, sha1, size: bytes }, async (c) => tree.placeContent(libraryId, 'bench/large.bin', c, true, op));
    const diskMs = await timed(async () => { for await (const _ of content.blobs.read(sha1)) { /* drain */ } });
    const { urls } = await svc.client.file.downloadUrl({ fullpath: 'bench/large.bin' });
    let received = 0;
    const httpMs = await timed(async () => {
      const res = await request(urls[0]!, { dispatcher: svc.client.dispatcher });
      for await (const chunk of res.body) received += (chunk as Buffer).length;
    });
    if (received !== bytes) throw new Error(`download: expected ${bytes} bytes, got ${received}`);
    const disk = bytes / MiB / (diskMs / 1000);
    const http = bytes / MiB / (httpMs / 1000);
    print({ bench: 'service.download', bytes, disk_mib_s: round(disk), download_mib_s: round(http), ratio: round(http / disk, 2), target_ratio: 0.8 });
    // The same download by a client in another process (curl), as a real client runs.
    const curlMs = await timed(() => new Promise<void>((resolve, reject) => {
      const c = spawn('curl', ['-sf', '-o', '/dev/null', urls[0]!]);
      c.on('error', reject);
      c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`curl exited ${code}`))));
    })).catch(() => undefined);
    if (curlMs !== undefined) {
      const curl = bytes / MiB / (curlMs / 1000);
      print({ bench: 'service.download_other_process', bytes, disk_mib_s: round(disk), download_mib_s: round(curl), ratio: round(curl / disk, 2), target_ratio: 0.8 });
    }

    // 2. ls on a folder of `folderEntries` entries.
    await tree.tx(async () => {
      const parent = await tree.ensureFolder(libraryId, 'wide', op);
      for (let i = 0; i < folderEntries; i++) await tree.insert(libraryId, parent, `wide/entry-${String(i).padStart(6, '0')}`, { dir: i % 10 === 0 ? 1 : 0, content: i % 10 === 0 ? undefined : { sha1, size: bytes } }, op);
    });
    const samples: number[] = [];
    for (let i = 0; i < lsSamples; i++) {
      const start = Math.floor(Math.random() * (folderEntries / 100)) * 100;
      samples.push(await timed(() => svc.client.file.ls({ fullpath: 'wide', start, size: 100 })));
    }
    samples.sort((a, b) => a - b);
    print({ bench: 'service.ls', entries: folderEntries, page: 100, samples: lsSamples, p50_ms: round(pct(samples, 0.5), 2), p99_ms: round(pct(samples, 0.99), 2), target_p50_ms: 5 });

    // 3. The updates feed over `changes` changes, paged by a client.
    await tree.tx(async () => {
      const parent = await tree.ensureFolder(libraryId, 'feed', op);
      for (let i = 0; i < changes; i++) await tree.insert(libraryId, parent, `feed/c-${i}`, { dir: 1 }, op);
    });
    let items = 0;
    let pages = 0;
    const feedMs = await timed(async () => {
      for (let cursor = 0; ;) {
        const page = await svc.client.file.updates({ mode: 'compare', fetch_dateline: cursor });
        if (page.list.length === 0) break;
        items += page.list.length;
        pages++;
        cursor = page.fetch_dateline;
      }
    });
    print({ bench: 'service.updates', changes: items, pages, items_per_s: Math.round(items / (feedMs / 1000)), pages_per_s: Math.round(pages / (feedMs / 1000)), ms_per_page: round(feedMs / pages, 2) });
  } finally {
    await svc.close();
    await rm(scratch, { recursive: true, force: true });
  }
  return results;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await benchService();
