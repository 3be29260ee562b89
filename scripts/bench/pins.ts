/**
 * Pinned fetch vs `rclone copy`, both from the embedded service (its own process, data in memory):
 * - a folder of BENCH_PINS_FILES small files (default 1,000 of 4 KiB): `pin` of the folder on a gateway
 *   with a cold cache until every file is on its disk (the walk included), vs `rclone copy` of the same
 *   folder from the gateway's WebDAV (rclone's defaults, a cold gateway without a disk cache, so both read
 *   every byte from the service) into a local folder (target ≥ 0.8× of rclone's speed);
 * - one file of BENCH_PINS_LARGE_BYTES (default 256 MiB; 0 skips it), the same two ways;
 * - that file, once pinned, read through the gateway's Vfs (createReadStream, what WebDAV GET reads:
 *   served from the content cache) vs reading the cache's own file from the local disk (target ≥ 0.9×);
 * - a cold read of that file through a fresh gateway with the content cache (its bytes written to disk as
 *   they pass, under the budget) vs one without (the cache's cost on a cold read; target < 5 %).
 * Each figure is the median of BENCH_PINS_ROUNDS (default 3), the two sides made in turn. Prints one JSON
 * line per figure. Run: `node --import tsx scripts/bench/pins.ts`.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServiceVfs } from '../../src/remote/service-vfs.js';
import { silentLogger } from '../../src/shared/log.js';
import { createWebdavServer } from '../../src/webdav/index.js';
import { startServiceProcess } from '../../test/support/service-process.js';

const FILES = Number(process.env.BENCH_PINS_FILES ?? 1000);
const LARGE = Number(process.env.BENCH_PINS_LARGE_BYTES ?? 256 * 1024 * 1024);
const ROUNDS = Number(process.env.BENCH_PINS_ROUNDS ?? 3);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => (err ? reject(new Error(`${cmd} ${args[0]}: ${stderr || err.message}`)) : resolve(stdout)));
  });
}

const svc = await startServiceProcess({ memoryData: true });
const scratch = await mkdtemp(join(tmpdir(), 'cloudlib-bench-pins-'));
try {
  // The folders, written through a gateway of their own and uploaded.
  const writer = await createServiceVfs({ libraries: [{ name: 'Library', client: svc.client }], dataDir: join(scratch, 'writer'), feedIntervalMs: 0 });
  await writer.mkdir('/Library/small');
  for (let i = 0; i < FILES; i++) await writer.writeFile(`/Library/small/f${String(i).padStart(5, '0')}.bin`, randomBytes(4096));
  if (LARGE > 0) {
    await writer.mkdir('/Library/large');
    await writer.writeFile('/Library/large/big.bin', (async function* () {
      const block = randomBytes(1024 * 1024);
      for (let at = 0; at < LARGE; at += block.length) yield block.subarray(0, Math.min(block.length, LARGE - at));
    })());
  }
  await writer.flushAll();
  await writer.close();
  const pass = (await run('rclone', ['obscure', 'secret'])).trim();

  /** `pin` of a folder on a fresh gateway (cold cache) until all of it is on disk, ms. */
  const pinned = async (folder: string, round: number): Promise<number> => {
    const vfs = await createServiceVfs({ libraries: [{ name: 'Library', client: svc.client }], dataDir: join(scratch, `pin-${folder}-${round}`), feedIntervalMs: 0, cache: { diskBytes: 2 * Math.max(LARGE, 64 * 1024 * 1024) } });
    try {
      const t0 = performance.now();
      await vfs.setPinned(`/Library/${folder}`, true);
      await vfs.pinsFetched();
      const ms = performance.now() - t0;
      const s = vfs.status().pins!;
      if (s.pendingFiles > 0 || s.errors.length > 0) throw new Error(`pin of ${folder}: ${s.pendingFiles} files not fetched, errors ${JSON.stringify(s.errors.slice(0, 3))}`);
      return ms;
    } finally {
      await vfs.close();
    }
  };

  /** `rclone copy` of a folder from a fresh gateway's WebDAV (no disk cache) into a local folder, ms. */
  const rcloneCopy = async (folder: string, round: number): Promise<number> => {
    const dir = join(scratch, `dav-${folder}-${round}`);
    const vfs = await createServiceVfs({ libraries: [{ name: 'Library', client: svc.client }], dataDir: join(dir, 'gateway'), feedIntervalMs: 0 });
    const dav = createWebdavServer({ vfs, users: [{ name: 'alice', password: 'secret' }], dataDir: join(dir, 'webdav'), logger: silentLogger });
    const url = await dav.listen('127.0.0.1', 0);
    try {
      const t0 = performance.now();
      await run('rclone', ['copy', `:webdav:/Library/${folder}`, join(dir, 'copy'), '--webdav-url', url, '--webdav-user', 'alice', '--webdav-pass', pass]);
      return performance.now() - t0;
    } finally {
      await dav.close();
      await vfs.close();
    }
  };

  const figure = async (bench: string, folder: string, extra: Record<string, number>): Promise<void> => {
    const pin: number[] = [];
    const rclone: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // Each side goes first in every other round.
      if (r % 2 === 0) { pin.push(await pinned(folder, r)); rclone.push(await rcloneCopy(folder, r)); }
      else { rclone.push(await rcloneCopy(folder, r)); pin.push(await pinned(folder, r)); }
    }
    const p = median(pin);
    const c = median(rclone);
    process.stdout.write(JSON.stringify({ bench, ...extra, pin_ms: Math.round(p), rclone_copy_ms: Math.round(c), ratio_vs_rclone: Number((c / p).toFixed(2)), target: 0.8 }) + '\n');
  };

  await figure('pins.fetch_small_files', 'small', { files: FILES, bytes_each: 4096 });
  if (LARGE > 0) {
    await figure('pins.fetch_large_file', 'large', { bytes: LARGE });
    // Pinned content read back: through the Vfs vs the cache's file straight from the local disk (both warm).
    const dataDir = join(scratch, 'read-pinned');
    const vfs = await createServiceVfs({ libraries: [{ name: 'Library', client: svc.client }], dataDir, feedIntervalMs: 0, cache: { diskBytes: 2 * LARGE } });
    try {
      await vfs.setPinned('/Library/large', true);
      await vfs.pinsFetched();
      const data = (await readdir(join(dataDir, 'content'))).find((n) => n.endsWith('.data'))!;
      const drain = async (stream: AsyncIterable<Buffer>): Promise<number> => {
        const t0 = performance.now();
        let n = 0;
        for await (const c of stream) n += c.length;
        if (n !== LARGE) throw new Error(`read ${n} bytes of ${LARGE}`);
        return performance.now() - t0;
      };
      const viaVfs: number[] = [];
      const local: number[] = [];
      for (let r = 0; r < ROUNDS + 1; r++) {
        const a = await drain(await vfs.createReadStream('/Library/large/big.bin') as AsyncIterable<Buffer>);
        const b = await drain(createReadStream(join(dataDir, 'content', data), { highWaterMark: 1024 * 1024 }));
        if (r > 0) { viaVfs.push(a); local.push(b); } // the first round warms the page cache
      }
      const v = median(viaVfs);
      const l = median(local);
      // A cold read with and without the content cache, each on a fresh gateway.
      const cold = async (diskBytes: number, r: number): Promise<number> => {
        const g = await createServiceVfs({ libraries: [{ name: 'Library', client: svc.client }], dataDir: join(scratch, `cold-${diskBytes}-${r}`), feedIntervalMs: 0, cache: { diskBytes } });
        try {
          return await drain(await g.createReadStream('/Library/large/big.bin') as AsyncIterable<Buffer>);
        } finally {
          await g.close();
        }
      };
      const withCache: number[] = [];
      const without: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        if (r % 2 === 0) { withCache.push(await cold(2 * LARGE, r)); without.push(await cold(0, r)); }
        else { without.push(await cold(0, r)); withCache.push(await cold(2 * LARGE, r)); }
      }
      const w = median(withCache);
      const o = median(without);
      process.stdout.write(JSON.stringify({ bench: 'pins.cold_read_cache_cost', bytes: LARGE, with_cache_ms: Math.round(w), without_cache_ms: Math.round(o), added: Number((w / o - 1).toFixed(3)), target: '< 0.05' }) + '\n');
      process.stdout.write(JSON.stringify({ bench: 'pins.read_pinned_large_file', bytes: LARGE, vfs_ms: Math.round(v), local_disk_ms: Math.round(l), ratio_vs_local_disk: Number((l / v).toFixed(2)), target: 0.9 }) + '\n');
    } finally {
      await vfs.close();
    }
  }
} finally {
  await svc.close();
  await rm(scratch, { recursive: true, force: true });
}
