/**
 * Fault injection: an upload whose connection is cut at random points resumes from what upload_req
 * reports and still finishes with the right SHA-1, leaving no temporary files.
 */
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { crc32 } from '../../../../src/shared/crc32.js';
import { FakeUploadHost, listen } from './fake-host.js';
import { UploadWire } from './wire.js';
import { waitFor } from '../../../support/wait-for.js';

let host: FakeUploadHost;
let srv: Awaited<ReturnType<typeof listen>>;

beforeEach(async () => {
  host = await FakeUploadHost.create();
  srv = await listen(host);
});

afterEach(async () => {
  await srv.close();
  await host.dispose();
});

/** Sends `cutAfter` bytes of a block, then destroys the connection. */
async function cutBlock(url: string, session: string, start: number, block: Buffer, cutAfter: number): Promise<void> {
  await new Promise<void>((resolve) => {
    const req = httpRequest(`${url}/upload_part`, {
      method: 'PUT',
      headers: {
        'x-svc-upload-session': session,
        'x-svc-upload-range': `${start}-${start + block.length - 1}`,
        'x-svc-upload-crc': String(crc32(block)),
        'content-length': String(block.length),
      },
    });
    req.on('error', () => resolve());
    req.on('close', () => resolve());
    req.write(block.subarray(0, cutAfter), () => setTimeout(() => req.destroy(), 20));
  });
}

it('an upload cut at five random points finishes with the right SHA-1 and no leftover temporary files', { timeout: 60_000 }, async () => {
  const size = 64 * 1024 * 1024;
  const blockSize = 4 * 1024 * 1024;
  const content = randomBytes(size);
  const filehash = createHash('sha1').update(content).digest('hex');
  const cuts = Array.from({ length: 5 }, () => Math.floor(Math.random() * size)).sort((a, b) => a - b);
  const wire = new UploadWire(srv.url);
  const pathhash = host.createFile('big.bin', filehash, size);
  const init = await wire.init({ filename: 'big.bin', pathhash, filehash, filesize: size });
  const session = init.json.session as string;

  let offset = 0;
  let cutsDone = 0;
  let last = 0;
  while (offset < size) {
    const block = content.subarray(offset, Math.min(offset + blockSize, size));
    const cut = cuts[cutsDone];
    if (cut !== undefined && cut >= offset && cut < offset + block.length) {
      await cutBlock(srv.url, session, offset, block, cut - offset);
      cutsDone++;
      // resume from what the server committed (it may still be rolling the cut block back)
      offset = await waitFor('the server to roll the cut block back', async () => {
        const r = await wire.post('upload_req', session);
        expect(r.status).toBe(200);
        return Number(r.text);
      }, { until: (committed) => committed === offset, intervalMs: 10 });
      continue;
    }
    // 410 while the server still rolls a cut block back: sent again.
    const r = await waitFor('the server to take the block', () => wire.part(session, `${offset}-${offset + block.length - 1}`, block), { until: (res) => res.status !== 410, intervalMs: 10 });
    expect([200, 202]).toContain(r.status);
    last = r.status;
    offset += block.length;
  }
  expect(cutsDone).toBe(5);
  expect(last).toBe(202);
  const fin = await waitFor('upload_finish to answer other than 202', () => wire.post('upload_finish', session), { until: (res) => res.status !== 202, intervalMs: 10 });
  expect(fin).toMatchObject({ status: 200, json: { filehash, filesize: size } });
  const stored = await readFile(host.blobPath(filehash));
  expect(createHash('sha1').update(stored).digest('hex')).toBe(filehash);
  expect((await readdir(join(host.tempDir, 'sessions'))).filter((n) => n.endsWith('.part'))).toEqual([]);
});
