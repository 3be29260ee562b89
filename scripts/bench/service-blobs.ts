/**
 * The service's content stores side by side, measured in one run: an upload through the chunked upload
 * protocol (create_file → upload server → ingest) and a download through download_url, of the same file
 * (default 256 MiB; BENCH_BLOBS_BYTES), with the content in a local folder and in an S3-compatible store
 * (OpenStack Swift with s3api, started by scripts/s3-server on this machine), then `ls` on a folder of
 * 1 000 entries with the content in either store (the listing reads metadata only). The S3 store runs
 * with the metadata in SQLite and in PostgreSQL (a cluster of Debian's server started for the run, as the
 * tests start it), so the last row is the service as it runs beyond one machine. Client and service in one
 * process. Runs standalone: `node --import tsx scripts/bench/service-blobs.ts`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { fileSource, uploadFile } from '../../src/api/upload.js';
import { startTestService } from '../../test/support/service.js';
import { startS3Server } from '../../test/support/s3-server.js';
import { startPostgres } from '../../test/support/postgres.js';

const MiB = 1024 * 1024;

export async function benchServiceBlobs(bytes = Number(process.env.BENCH_BLOBS_BYTES ?? 256 * MiB)): Promise<Record<string, unknown>[]> {
  const results: Record<string, unknown>[] = [];
  const print = (r: Record<string, unknown>) => { results.push(r); process.stdout.write(JSON.stringify(r) + '\n'); };
  const scratch = await mkdtemp(join(tmpdir(), 'cloudlib-bench-blobs-'));
  const s3 = await startS3Server();
  const pg = await startPostgres().catch(async (err: unknown) => {
    await s3.stop();
    throw err;
  });
  process.env.AWS_ACCESS_KEY_ID = s3.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = s3.secretAccessKey;
  try {
    const file = join(scratch, 'payload.bin');
    const sha1 = await writeRandom(file, bytes);
    const stores = [
      { store: 'folder', blobs: undefined, metadata: 'sqlite' },
      { store: 's3 (swift)', blobs: `s3://bench-blobs?endpoint=${s3.endpoint}`, metadata: 'sqlite' },
      { store: 's3 (swift)', blobs: `s3://bench-blobs-pg?endpoint=${s3.endpoint}`, metadata: 'postgresql' },
    ];
    for (const { store, blobs, metadata } of stores) {
      const svc = await startTestService({
        ...(blobs ? { blobs } : {}),
        ...(metadata === 'postgresql' ? { metadata: await pg.createDatabase('bench_blobs') } : {}),
      });
      try {
        const uploadMs = await timed(async () => {
          const r = await uploadFile(svc.client, await fileSource(file, sha1), { fullpath: 'bench/payload.bin', overwrite: true, finishWaitMs: 50 });
          if (r.instant) throw new Error('upload: the content was already stored');
        });
        const { urls } = await svc.client.file.downloadUrl({ fullpath: 'bench/payload.bin' });
        let received = 0;
        const downloadMs = await timed(async () => {
          const res = await request(urls[0]!, { dispatcher: svc.client.dispatcher });
          for await (const chunk of res.body) received += (chunk as Buffer).length;
        });
        if (received !== bytes) throw new Error(`download: expected ${bytes} bytes, got ${received}`);
        const ranged = await timed(async () => {
          for (let i = 0; i < 20; i++) {
            const start = Math.floor(Math.random() * (bytes - MiB));
            const res = await request(urls[0]!, { dispatcher: svc.client.dispatcher, headers: { range: `bytes=${start}-${start + 65_535}` } });
            await res.body.arrayBuffer();
          }
        });
        for (let i = 0; i < 1000; i += 100) {
          await Promise.all(Array.from({ length: 100 }, (_, j) => svc.client.file.createFolder({ fullpath: `wide/f-${String(i + j).padStart(4, '0')}` })));
        }
        const samples: number[] = [];
        for (let i = 0; i < 200; i++) samples.push(await timed(() => svc.client.file.ls({ fullpath: 'wide', start: (i % 10) * 100, size: 100 })));
        samples.sort((a, b) => a - b);
        print({
          bench: 'service.blobs', store, metadata, bytes,
          upload_mib_s: round(bytes / MiB / (uploadMs / 1000)), download_mib_s: round(bytes / MiB / (downloadMs / 1000)),
          range_64k_ms: round(ranged / 20, 2), ls_p50_ms: round(samples[100]!, 2), ls_p99_ms: round(samples[198]!, 2),
        });
      } finally {
        await svc.close();
      }
    }
  } finally {
    await pg.stop();
    await s3.stop();
    await rm(scratch, { recursive: true, force: true });
  }
  return results;
}

/** A file of `bytes` random bytes (4 MiB blocks, never one big buffer); returns its SHA-1. */
export async function writeRandom(file: string, bytes: number): Promise<string> {
  const hash = createHash('sha1');
  const out = createWriteStream(file);
  const block = randomBytes(4 * MiB);
  for (let written = 0; written < bytes; written += block.length) {
    const piece = block.subarray(0, Math.min(block.length, bytes - written));
    hash.update(piece);
    if (!out.write(piece)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return hash.digest('hex');
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await benchServiceBlobs();
