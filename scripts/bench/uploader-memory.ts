/**
 * The uploader's memory is flat whatever the file's size: peak RSS while `uploadFile` sends a generated
 * 2 GiB stream (chunked protocol, 8 MiB blocks) to a local sink upload server running in a child process
 * (so only the uploader's memory is measured). Baseline, measured in the same run: the peak RSS of one
 * plain streaming pass over the same source (SHA-1 only). Prints one JSON line per figure, with the
 * ratios upload/baseline for peak RSS growth and throughput.
 *
 * Size: BENCH_UPLOADER_BYTES (default 2 GiB). Run: `node --import tsx scripts/bench/uploader-memory.ts`.
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { ServiceClient } from '../../src/api/client.js';
import { sha1Of, uploadFile, type UploadSource } from '../../src/api/upload.js';
import { FakeUploadServer } from '../../test/support/fake-upload-server.js';

const SIZE = Number(process.env.BENCH_UPLOADER_BYTES ?? 2 * 1024 * 1024 * 1024);
const MiB = 1024 * 1024;

if (process.argv[2] === 'sink') {
  const sink = await new FakeUploadServer({ keepBytes: false }).start();
  process.send?.({ url: sink.url });
  process.on('message', (m) => {
    if (m === 'stop') void sink.close().then(() => process.exit(0));
  });
} else {
  await main();
}

/** A generated source: byte p is pattern[p mod 1 MiB]; streams are slices of one buffer (no copies). */
function generatedSource(size: number): UploadSource {
  const pattern = randomBytes(MiB);
  return {
    size,
    open(start: number) {
      return Readable.from((function* () {
        for (let p = start; p < size;) {
          const at = p % MiB;
          const n = Math.min(MiB - at, size - p);
          yield pattern.subarray(at, at + n);
          p += n;
        }
      })());
    },
  };
}

/** Samples RSS every 20 ms while `fn` runs; the peak growth over the RSS at the start. */
async function measure<T>(fn: () => Promise<T>): Promise<{ result: T; peakGrowthMiB: number; peakMiB: number; seconds: number }> {
  global.gc?.();
  const start = process.memoryUsage.rss();
  let peak = start;
  const timer = setInterval(() => { peak = Math.max(peak, process.memoryUsage.rss()); }, 20);
  const t0 = performance.now();
  try {
    const result = await fn();
    peak = Math.max(peak, process.memoryUsage.rss());
    return { result, peakGrowthMiB: round((peak - start) / MiB), peakMiB: round(peak / MiB), seconds: (performance.now() - t0) / 1000 };
  } finally {
    clearInterval(timer);
  }
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

async function main(): Promise<void> {
  const child = fork(fileURLToPath(import.meta.url), ['sink'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`sink exited with ${code}`)));
  });
  const client = new ServiceClient({ baseUrl: url, credentials: { library: { org_client_id: 'bench', org_client_secret: 'bench-secret' } }, timeoutMs: 120_000 });
  try {
    const source = generatedSource(SIZE);
    const hashPass = await measure(() => sha1Of(source));
    const filehash = hashPass.result;
    const upload = await measure(() => uploadFile(client, { ...source, filehash }, { fullpath: 'bench/2gib.bin' }));
    if (upload.result.instant || upload.result.filesize !== SIZE) throw new Error(`unexpected result ${JSON.stringify(upload.result)}`);
    const mb = SIZE / MiB;
    const line = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);
    line({ figure: 'baseline: streaming SHA-1 pass', bytes: SIZE, peakRssGrowthMiB: hashPass.peakGrowthMiB, peakRssMiB: hashPass.peakMiB, MiBps: round(mb / hashPass.seconds) });
    line({ figure: 'uploadFile (chunked, 8 MiB blocks, known SHA-1)', bytes: SIZE, peakRssGrowthMiB: upload.peakGrowthMiB, peakRssMiB: upload.peakMiB, MiBps: round(mb / upload.seconds) });
    line({
      figure: 'ratios upload/baseline',
      peakRssGrowthDeltaMiB: round(upload.peakGrowthMiB - hashPass.peakGrowthMiB),
      peakRssRatio: round(upload.peakMiB / hashPass.peakMiB),
      throughputRatio: round(hashPass.seconds / upload.seconds),
    });
  } finally {
    await client.close();
    child.send('stop');
    await new Promise((resolve) => child.once('exit', resolve));
  }
}
