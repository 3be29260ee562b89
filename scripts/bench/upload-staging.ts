/**
 * Where a chunked upload waits for its finish, with content in an S3-compatible store (Swift from
 * scripts/s3-server on this machine), measured in one run on the same bytes (default 256 MiB;
 * BENCH_STAGING_BYTES) in blocks of the client's default size (8 MiB; BENCH_STAGING_BLOCK):
 * - folder staging: blocks appended to a local `.part` file, then the verified file sent to the bucket
 *   (PutObject or multipart upload streamed from it): what a process with a local staging folder does;
 * - bucket staging: each block one object of the bucket (S3StagedUploads), then the blob's object
 *   assembled by server-side copies: what the service does with `--blobs s3://…`;
 * - bucket staging with the finish on another process: the same, the SHA-1 computed by reading the
 *   staged blocks back first.
 * Each row gives receive and finish time and the whole as MiB/s, and its ratio to the folder staging.
 * Rows run in the order folder, bucket, bucket with read-back, BENCH_STAGING_ROUNDS times (default 1).
 * Runs standalone: `node --import tsx scripts/bench/upload-staging.ts`.
 */
import { createHash, randomBytes, type Hash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { crc32 } from '../../src/shared/crc32.js';
import { metadataStoreAt } from '../../src/service/store/metadata-location.js';
import { S3BlobStore } from '../../src/service/store/s3-blob-store.js';
import { FolderStagedUploads, sha1OfStaged, type StagedUploads } from '../../src/service/store/staged-uploads.js';
import { startS3Server } from '../../test/support/s3-server.js';
import { stageBlock } from '../../src/service/upload/block-receiver.js';

const MiB = 1024 * 1024;

export async function benchUploadStaging(): Promise<Record<string, unknown>[]> {
  const bytes = Number(process.env.BENCH_STAGING_BYTES ?? 256 * MiB);
  const blockSize = Number(process.env.BENCH_STAGING_BLOCK ?? 8 * MiB);
  const rounds = Number(process.env.BENCH_STAGING_ROUNDS ?? 1);
  const results: Record<string, unknown>[] = [];
  const print = (r: Record<string, unknown>) => { results.push(r); process.stdout.write(JSON.stringify(r) + '\n'); };
  const scratch = await mkdtemp(join(tmpdir(), 'cloudlib-bench-staging-'));
  const s3 = await startS3Server();
  process.env.AWS_ACCESS_KEY_ID = s3.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = s3.secretAccessKey;
  const db = await metadataStoreAt(undefined, scratch);
  const store = new S3BlobStore({ bucket: 'bench-staging', endpoint: s3.endpoint, tempDir: join(scratch, 'tmp') });
  try {
    await store.open();
    const base = randomBytes(blockSize);
    // Block i: the base block stamped with its index and the round (distinct content, one block in memory).
    const block = (round: number, i: number): Buffer => {
      const b = Buffer.from(base.subarray(0, Math.min(blockSize, bytes - i * blockSize)));
      b.writeUInt32BE(i, 0);
      b.writeUInt32BE(round, 4);
      return b;
    };
    const blocks = Math.ceil(bytes / blockSize);
    const folder = new FolderStagedUploads(join(scratch, 'staging'));
    await folder.open();
    const bucket = store.stagedUploads(db);
    for (let round = 0; round < rounds; round++) {
      let folderMs = 0;
      for (const kind of ['folder staging', 'bucket staging', 'bucket staging, finish reads back'] as const) {
        const staging: StagedUploads = kind === 'folder staging' ? folder : bucket;
        // each row stores distinct content, so no row finds its blob already stored
        const tag = round * 3 + ['folder staging', 'bucket staging', 'bucket staging, finish reads back'].indexOf(kind);
        const session = randomBytes(16).toString('hex');
        await staging.create(session);
        const t0 = performance.now();
        let hash: Hash = createHash('sha1');
        for (let i = 0; i < blocks; i++) {
          const b = block(tag, i);
          hash = await stageBlock(staging, session, Readable.from([b]), { start: i * blockSize, length: b.length, crc: crc32(b) }, hash);
        }
        const t1 = performance.now();
        if (kind === 'bucket staging, finish reads back') hash = await sha1OfStaged(staging, session, bytes);
        const sha1 = hash.digest('hex');
        const content = await staging.finished(session, sha1, bytes);
        if ('staged' in content) await content.staged.place();
        else await store.ingest(content.tempFilePath, sha1, bytes);
        const t2 = performance.now();
        if ((await store.sizeOf(sha1)) !== bytes) throw new Error(`${kind}: the blob is not stored with ${bytes} bytes`);
        await staging.remove(session);
        await store.remove(sha1);
        if (kind === 'folder staging') folderMs = t2 - t0;
        print({
          bench: 'upload.staging', kind, bytes, block: blockSize, round,
          receive_ms: Math.round(t1 - t0), finish_ms: Math.round(t2 - t1), mib_per_s: round1(bytes / MiB / ((t2 - t0) / 1000)),
          ratio_to_folder_staging: Math.round((folderMs / (t2 - t0)) * 100) / 100,
        });
      }
    }
  } finally {
    store.close();
    await db.close();
    await s3.stop();
    await rm(scratch, { recursive: true, force: true });
  }
  return results;
}

function round1(n: number): number {
  return Math.round(n * 10) / 10;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await benchUploadStaging();
