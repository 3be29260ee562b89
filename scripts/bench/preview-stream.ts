/**
 * Preview figures, each against a baseline measured in the same run:
 * - streaming a BENCH_PREVIEW_BYTES file (default 1 GiB) through the viewer's content address
 *   (`/preview/c/<token>`: token check, headers, traffic counting) vs a bare HTTP server piping the
 *   same blob file; peak RSS while it streams (memory stays bounded);
 * - 1 MiB Range requests at random offsets (a video player seeking), requests/s, vs the bare server;
 * - a 256 px thumbnail of a 4000×3000 JPEG: first request (rendered) vs later requests (cached).
 * Prints one JSON line per figure. Run: `node --import tsx scripts/bench/preview-stream.ts`.
 */
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import sharp from 'sharp';
import { request } from 'undici';
import { PreviewTestService } from '../../test/unit/service/preview/blob-folder-host.js';

const BYTES = Number(process.env.BENCH_PREVIEW_BYTES ?? 1024 * 1024 * 1024);
const SEEKS = Number(process.env.BENCH_PREVIEW_SEEKS ?? 300);
const MiB = 1024 * 1024;
const round = (n: number, digits = 2): number => Number(n.toFixed(digits));
const print = (figure: Record<string, unknown>): void => { process.stdout.write(JSON.stringify(figure) + '\n'); };

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function drain(url: string, headers: Record<string, string> = {}): Promise<number> {
  const res = await request(url, { headers });
  let n = 0;
  for await (const chunk of res.body) n += (chunk as Buffer).length;
  if (res.statusCode >= 300) throw new Error(`${url}: HTTP ${res.statusCode}`);
  return n;
}

const svc = await PreviewTestService.start();
try {
  // a blob of BYTES written in 8 MiB pieces
  const piece = Buffer.alloc(8 * MiB);
  for (let i = 0; i < piece.length; i += 4) piece.writeUInt32LE((i * 2654435761) >>> 0, i);
  const filehash = 'f'.repeat(40);
  const fh = await open(join(svc.host.dir, filehash), 'w');
  for (let written = 0; written < BYTES; written += piece.length) await fh.write(piece, 0, Math.min(piece.length, BYTES - written));
  await fh.close();
  const { url } = svc.previews.issue({ libraryId: 1, fullpath: 'big.mp4', filehash, filename: 'big.mp4', filesize: BYTES, baseUrl: svc.baseUrl });
  const page = await (await request(url)).body.text();
  const content = `${svc.baseUrl}/preview/c/${/"\.\.\/c\/([^"]+)"/.exec(page)![1]}`;

  const bare = createServer((req, res) => {
    const m = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? '');
    const range = m ? { start: Number(m[1]), end: Number(m[2]) } : {};
    res.writeHead(m ? 206 : 200);
    void pipeline(createReadStream(join(svc.host.dir, filehash), range), res).catch(() => undefined);
  });
  await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));
  const bareUrl = `http://127.0.0.1:${(bare.address() as AddressInfo).port}/`;

  let peakRss = 0;
  const sampler = setInterval(() => { peakRss = Math.max(peakRss, process.memoryUsage.rss()); }, 50);
  const baseMs = await timed(() => drain(bareUrl));
  const rssBefore = process.memoryUsage.rss();
  peakRss = rssBefore;
  const previewMs = await timed(() => drain(content));
  clearInterval(sampler);
  const mbps = (ms: number) => round(BYTES / MiB / (ms / 1000), 0);
  print({ figure: 'stream whole file', bytes: BYTES, preview_MiB_s: mbps(previewMs), baseline_MiB_s: mbps(baseMs), ratio: round(baseMs / previewMs), peak_rss_growth_MiB: round((peakRss - rssBefore) / MiB, 1) });

  const offsets = Array.from({ length: SEEKS }, (_v, i) => Math.floor(((i * 7919) % 1000) / 1000 * (BYTES - MiB)));
  const seek = async (u: string) => { for (const o of offsets) await drain(u, { range: `bytes=${o}-${o + MiB - 1}` }); };
  const seekBase = await timed(() => seek(bareUrl));
  const seekPreview = await timed(() => seek(content));
  print({ figure: '1 MiB range requests', requests: SEEKS, preview_per_s: round(SEEKS / (seekPreview / 1000), 0), baseline_per_s: round(SEEKS / (seekBase / 1000), 0), ratio: round(seekBase / seekPreview) });
  bare.closeAllConnections();
  bare.close();

  const jpeg = await sharp({ create: { width: 4000, height: 3000, channels: 3, background: '#808080' } })
    .composite([{ input: Buffer.from('<svg width="4000" height="3000"><circle cx="2000" cy="1500" r="1200" fill="#c33"/></svg>') }]).jpeg({ quality: 90 }).toBuffer();
  const photo = await svc.file('photo.jpg', jpeg, { thumbnail: true });
  const cold = await timed(() => drain(photo.thumbnail!));
  const warm = await timed(async () => { for (let i = 0; i < 20; i++) await drain(photo.thumbnail!); }) / 20;
  print({ figure: 'thumbnail 4000x3000 JPEG -> 256 px WebP', jpeg_bytes: jpeg.length, first_ms: round(cold, 0), cached_ms: round(warm, 1), ratio: round(cold / warm, 0) });
} finally {
  await svc.stop();
}
