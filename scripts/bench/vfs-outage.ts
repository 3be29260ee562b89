/**
 * The outage scenario at full length: a file of BENCH_OUTAGE_BYTES (default 64 MiB) is written through
 * the gateway and its upload starts; the service becomes unreachable for BENCH_OUTAGE_MS (default
 * 20 000 ms) in the middle of the upload, then comes back. The upload must finish, with the right
 * content, without the application doing anything. Prints one JSON line: the outage, the time from close
 * to confirmation, the failed attempts, and whether the service's content hash matches.
 *
 * The outage is made by the gateway's fault injection (every call to the service fails as if it were
 * unreachable, including the upload in flight). Run: `node --import tsx scripts/bench/vfs-outage.ts`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { startTestService } from '../../test/support/vfs.js';
import { type FaultyRemote } from '../../src/vfs/index.js';
import { createServiceVfs } from '../../src/remote/service-vfs.js';

const SIZE = Number(process.env.BENCH_OUTAGE_BYTES ?? 64 * 1024 * 1024);
const OUTAGE_MS = Number(process.env.BENCH_OUTAGE_MS ?? 20_000);

async function main(): Promise<void> {
  const svc = await startTestService();
  const tmp = await mkdtemp(join(tmpdir(), 'cloudlib-bench-outage-'));
  const vfs = await createServiceVfs({
    libraries: [{ name: 'Library', client: svc.client }], dataDir: tmp, feedIntervalMs: 2000, faults: true,
    upload: { retryBaseMs: 500, retryMaxMs: 5000 },
  });
  const faulty = vfs.remoteOf('Library') as FaultyRemote;
  try {
    const hash = createHash('sha1');
    const h = await vfs.open('/Library/outage.bin', { write: true, create: true });
    const block = randomBytes(1024 * 1024);
    for (let at = 0; at < SIZE; at += block.length) {
      const piece = block.subarray(0, Math.min(block.length, SIZE - at));
      piece.writeUInt32BE(at / block.length, 0);
      hash.update(piece);
      await h.write(at, piece);
    }
    await h.release();
    const closed = performance.now();
    // Cut the service off while the upload is under way (or right after it starts).
    for (let i = 0; i < 200 && vfs.status().uploads[0]?.state !== 'uploading'; i++) await new Promise((r) => setTimeout(r, 10));
    faulty.down(OUTAGE_MS, { cutInFlight: true });
    await vfs.flushAll({ timeoutMs: OUTAGE_MS + 120_000 });
    while (vfs.status().uploads.length > 0 && performance.now() - closed < OUTAGE_MS + 120_000) await new Promise((r) => setTimeout(r, 200));
    const confirmedMs = performance.now() - closed;
    const info = await svc.client.file.info({ fullpath: 'outage.bin', attribute: 10 });
    process.stdout.write(JSON.stringify({
      bench: 'vfs.outage_mid_upload', bytes: SIZE, outage_ms: OUTAGE_MS, close_to_confirmed_ms: Math.round(confirmedMs),
      failed_attempts: faulty.injected.fail + faulty.injected.cut, pending_after: vfs.status().uploads.length,
      content_matches: info.filehash === hash.digest('hex'),
    }) + '\n');
  } finally {
    await vfs.close();
    await svc.close();
    await rm(tmp, { recursive: true, force: true });
  }
}

await main();
