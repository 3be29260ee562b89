/**
 * Upload server throughput, against a baseline measured in the same run:
 * - baseline: writing the file to local disk (4 MiB writes, fsync at the end);
 * - chunked: create_file step + upload_init + sequential 10 MiB upload_part blocks with CRC + upload_finish;
 * - web: one multipart web_upload streaming the whole file.
 * Prints one JSON line per figure with its ratio to the baseline (target for chunked: ≥ 0.6).
 *
 * Size: BENCH_UPLOAD_BYTES (default 1 GiB). Run: `node --import tsx scripts/bench/upload-throughput.ts`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { request, Agent } from 'undici';
import { crc32 } from '../../src/shared/crc32.js';
import { FakeUploadHost, listen } from '../../test/unit/service/upload/fake-host.js';

const SIZE = Number(process.env.BENCH_UPLOAD_BYTES ?? 1024 * 1024 * 1024);
const BLOCK = 10 * 1024 * 1024;
const base = randomBytes(BLOCK);

/** Block `i` of the synthetic file: the base block stamped with its index (distinct content, no big buffer). */
function block(i: number): Buffer {
  const len = Math.min(BLOCK, SIZE - i * BLOCK);
  const b = Buffer.from(base.subarray(0, len));
  b.writeUInt32BE(i, 0);
  return b;
}
const blocks = Math.ceil(SIZE / BLOCK);

function* chunks(): Generator<Buffer> {
  for (let i = 0; i < blocks; i++) yield block(i);
}

const mibps = (bytes: number, ms: number) => bytes / 1024 / 1024 / (ms / 1000);

async function baseline(dir: string): Promise<number> {
  const path = join(dir, 'baseline.bin');
  const t0 = performance.now();
  const fh = await open(path, 'w');
  for (const b of chunks()) {
    for (let off = 0; off < b.length; off += 4 << 20) await fh.write(b, off, Math.min(4 << 20, b.length - off));
  }
  await fh.sync();
  await fh.close();
  const ms = performance.now() - t0;
  await rm(path);
  return mibps(SIZE, ms);
}

async function main(): Promise<void> {
  const host = await FakeUploadHost.create();
  host.verifyOnIngest = false;
  const srv = await listen(host);
  const dispatcher = new Agent({ connections: 1 });
  try {
    const hash = createHash('sha1');
    for (const b of chunks()) hash.update(b);
    const filehash = hash.digest('hex');
    const disk = await baseline(host.root);
    console.log(JSON.stringify({ bench: 'upload.baseline_local_disk', bytes: SIZE, mib_per_s: +disk.toFixed(1) }));

    const t0 = performance.now();
    const pathhash = host.createFile('bench.bin', filehash, SIZE);
    const init = await request(`${srv.url}/upload_init?org_client_id=oc_test`, {
      method: 'POST', dispatcher,
      headers: { 'x-svc-upload-filename': 'bench.bin', 'x-svc-upload-pathhash': pathhash, 'x-svc-upload-filehash': filehash, 'x-svc-upload-filesize': String(SIZE) },
    });
    const { session } = (await init.body.json()) as { session: string };
    for (let i = 0; i < blocks; i++) {
      const b = block(i);
      const start = i * BLOCK;
      const res = await request(`${srv.url}/upload_part`, {
        method: 'PUT', dispatcher, body: b,
        headers: { 'x-svc-upload-session': session, 'x-svc-upload-range': `${start}-${start + b.length - 1}`, 'x-svc-upload-crc': String(crc32(b)) },
      });
      await res.body.dump();
      if (res.statusCode !== 200 && res.statusCode !== 202) throw new Error(`upload_part answered ${res.statusCode}`);
    }
    for (;;) {
      const fin = await request(`${srv.url}/upload_finish`, { method: 'POST', dispatcher, headers: { 'x-svc-upload-session': session } });
      await fin.body.dump();
      if (fin.statusCode === 200) break;
      if (fin.statusCode !== 202) throw new Error(`upload_finish answered ${fin.statusCode}`);
    }
    const chunked = mibps(SIZE, performance.now() - t0);
    console.log(JSON.stringify({ bench: 'upload.chunked', bytes: SIZE, block: BLOCK, mib_per_s: +chunked.toFixed(1), ratio_to_disk: +(chunked / disk).toFixed(2), target: 0.6 }));
    await rm(host.blobPath(filehash));

    const boundary = `----bench${randomBytes(8).toString('hex')}`;
    const key = (await srv.server.issueWebUploadKey({ libraryId: 1, fullpath: '', timeoutSec: 600, serverUrl: srv.url })).key;
    async function* form(): AsyncGenerator<Buffer> {
      const field = (n: string, v: string) => `--${boundary}\r\nContent-Disposition: form-data; name="${n}"\r\n\r\n${v}\r\n`;
      yield Buffer.from(field('org_client_id', 'oc_test') + field('key', key) + field('path', '') + field('name', 'web.bin') + field('filefield', 'file')
        + `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="web.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
      for (const b of chunks()) yield b;
      yield Buffer.from(`\r\n--${boundary}--\r\n`);
    }
    const t1 = performance.now();
    const web = await request(`${srv.url}/2/web_upload`, {
      method: 'POST', dispatcher, body: Readable.from(form()), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    const webBody = (await web.body.json()) as { filesize?: number };
    if (web.statusCode !== 200 || webBody.filesize !== SIZE) throw new Error(`web_upload answered ${web.statusCode} ${JSON.stringify(webBody)}`);
    const webRate = mibps(SIZE, performance.now() - t1);
    console.log(JSON.stringify({ bench: 'upload.web', bytes: SIZE, mib_per_s: +webRate.toFixed(1), ratio_to_disk: +(webRate / disk).toFixed(2) }));
  } finally {
    await dispatcher.close();
    await srv.close();
    await host.dispose();
  }
}

await main();
