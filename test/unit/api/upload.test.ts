import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ServiceClient } from '../../../src/api/client.js';
import { ServiceError } from '../../../src/api/errors.js';
import { fileSource, sha1Of, uploadFile, SourceChangedError, type UploadSource } from '../../../src/api/upload.js';
import { crc32 } from '../../../src/shared/crc32.js';
import { sign } from '../../../src/shared/sign.js';
import { FakeUploadServer } from '../../support/fake-upload-server.js';

const SECRET = 'lib-secret-Qw3rty9';
const USER_SECRET = 'app-secret-Zx8vbn7';
const TOKEN = 'user-token-Tk55aa';

/** A source over a buffer, streamed in odd-sized chunks (blocks straddle them). */
function memorySource(data: Buffer, opts: { filehash?: string; chunk?: number } = {}): UploadSource & { opens: number[] } {
  const opens: number[] = [];
  return {
    size: data.length,
    filehash: opts.filehash,
    opens,
    open(start: number) {
      opens.push(start);
      const step = opts.chunk ?? 7001;
      const parts: Buffer[] = [];
      for (let i = start; i < data.length; i += step) parts.push(data.subarray(i, Math.min(data.length, i + step)));
      return Readable.from(parts);
    },
  };
}

const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');

describe('uploadFile', { timeout: 15_000 }, () => {
  let fake: FakeUploadServer;
  let client: ServiceClient;

  beforeAll(async () => {
    fake = await new FakeUploadServer().start();
    client = new ServiceClient({
      baseUrl: fake.url, retryBaseMs: 1, timeoutMs: 5_000,
      credentials: { library: { org_client_id: 'oc_1', org_client_secret: SECRET }, user: { token: TOKEN, client_secret: USER_SECRET } },
    });
  });
  afterAll(async () => {
    await client.close();
    await fake.close();
  });
  afterEach(() => {
    fake.requests.length = 0;
    fake.partFaults.length = 0;
    fake.finishProcessing = 0;
  });

  it('instant upload: create_file state 1 ends it; filehash and filesize are sent but not signed', async () => {
    const data = randomBytes(5000);
    fake.known.add(sha1(data));
    const progress: [number, number][] = [];
    const res = await uploadFile(client, memorySource(data), { fullpath: 'docs/a.bin', onProgress: (s, t) => progress.push([s, t]) });
    expect(res).toEqual({ hash: expect.stringMatching(/^h\d+$/), fullpath: 'docs/a.bin', filehash: sha1(data), filesize: 5000, instant: true });
    expect(fake.requests.map((r) => r.path)).toEqual(['/m-open/1/file/create_file']);
    const form = fake.requests[0]!.form;
    expect(form).toMatchObject({ fullpath: 'docs/a.bin', filehash: sha1(data), filesize: '5000', overwrite: '1', org_client_id: 'oc_1' });
    const { sign: sent, filehash: _h, filesize: _s, ...signed } = form;
    expect(sent).toBe(sign(SECRET, signed));
    expect(progress).toEqual([[5000, 5000]]);
  });

  it('upload_init 202 is an instant upload: no block is sent', async () => {
    const data = randomBytes(3000);
    fake.initInstant.add(sha1(data));
    const res = await uploadFile(client, memorySource(data), { fullpath: 'b.bin' });
    expect(res.instant).toBe(true);
    expect(fake.calls('/upload_part')).toHaveLength(0);
    expect(fake.files.get('b.bin')?.filehash).toBe(sha1(data));
  });

  it('chunked upload: blocks with range and CRC headers, the protocol headers, progress to the total', async () => {
    const data = randomBytes(100_000);
    const progress: number[] = [];
    const res = await uploadFile(client, memorySource(data), {
      fullpath: 'dir/Quarterly (draft)! 报告.bin', blockSize: 16 * 1024, overwrite: false, operator: { op_name: 'Ana' },
      onProgress: (sent, total) => { expect(total).toBe(100_000); progress.push(sent); },
    });
    expect(res.instant).toBe(false);
    expect(fake.files.get('dir/Quarterly (draft)! 报告.bin')?.content?.equals(data)).toBe(true);
    const create = fake.calls('/create_file')[0]!;
    expect(create.form).toMatchObject({ overwrite: '0', op_name: 'Ana' });
    const init = fake.calls('/upload_init')[0]!;
    expect(init.query).toEqual({ org_client_id: 'oc_1' });
    expect(init.headers['x-svc-upload-filename']).toBe('Quarterly%20%28draft%29%21%20%E6%8A%A5%E5%91%8A.bin');
    expect(init.headers['x-svc-upload-pathhash']).toBe(res.hash);
    expect(init.headers['x-svc-upload-filehash']).toBe(sha1(data));
    expect(init.headers['x-svc-upload-filesize']).toBe('100000');
    expect(init.headers['x-svc-token']).toBeUndefined();
    const parts = fake.calls('/upload_part');
    expect(parts).toHaveLength(7);
    parts.forEach((p, i) => {
      const start = i * 16384;
      const end = Math.min(100_000, start + 16384) - 1;
      expect(p.method).toBe('PUT');
      expect(p.headers['x-svc-upload-range']).toBe(`${start}-${end}`);
      expect(p.headers['x-svc-upload-crc']).toBe(String(crc32(data.subarray(start, end + 1))));
    });
    expect(fake.maxBlock).toBeLessThanOrEqual(16 * 1024);
    expect(progress).toEqual([0, 16384, 32768, 49152, 65536, 81920, 98304, 100000]);
    expect(fake.calls('/upload_finish')).toHaveLength(1);
  });

  it('409 with expect: resumes at the offset the server expects (the stream reopens there)', async () => {
    const data = randomBytes(50_000);
    fake.partFaults.push(undefined, undefined, 'lose-last-block');
    const src = memorySource(data);
    await uploadFile(client, src, { fullpath: 'r409.bin', blockSize: 10_000 });
    expect(fake.files.get('r409.bin')?.content?.equals(data)).toBe(true);
    const ranges = fake.calls('/upload_part').map((p) => p.headers['x-svc-upload-range']);
    expect(ranges).toEqual(['0-9999', '10000-19999', '20000-29999', '10000-19999', '20000-29999', '30000-39999', '40000-49999']);
    expect(src.opens).toEqual([0, 0, 10000]); // hash pass, first send, resume
  });

  it('500 after the block was stored: asks upload_req and goes on from its offset without resending', async () => {
    const data = randomBytes(40_000);
    fake.partFaults.push(undefined, 'store-then-500');
    await uploadFile(client, memorySource(data), { fullpath: 'r500.bin', blockSize: 10_000 });
    expect(fake.files.get('r500.bin')?.content?.equals(data)).toBe(true);
    expect(fake.calls('/upload_req')).toHaveLength(1);
    expect(fake.calls('/upload_part').map((p) => p.headers['x-svc-upload-range'])).toEqual(['0-9999', '10000-19999', '20000-29999', '30000-39999']);
  });

  it('500 before storing, a 410 and dropped connections: upload_req, then the same block again', async () => {
    const data = randomBytes(40_000);
    fake.partFaults.push('500', undefined, '410', 'drop', undefined, 'store-then-drop');
    await uploadFile(client, memorySource(data), { fullpath: 'drops.bin', blockSize: 10_000 });
    expect(fake.files.get('drops.bin')?.content?.equals(data)).toBe(true);
    expect(fake.calls('/upload_req')).toHaveLength(4);
  });

  it('CRC rejection: the block is sent again; a CRC rejected every time gives up with upload_abort', async () => {
    const data = randomBytes(30_000);
    fake.partFaults.push(undefined, 'crc');
    await uploadFile(client, memorySource(data), { fullpath: 'crc.bin', blockSize: 10_000 });
    expect(fake.files.get('crc.bin')?.content?.equals(data)).toBe(true);
    expect(fake.calls('/upload_part').map((p) => p.headers['x-svc-upload-range'])).toEqual(['0-9999', '10000-19999', '10000-19999', '20000-29999']);

    fake.requests.length = 0;
    fake.partFaults.push('crc', 'crc', 'crc');
    const err = await uploadFile(client, memorySource(randomBytes(30_000)), { fullpath: 'crc2.bin', blockSize: 10_000, retries: 2 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect(err).toMatchObject({ status: 400, code: 40001, endpoint: 'upload.upload_part' });
    expect(fake.calls('/upload_abort')).toHaveLength(1);
    expect(fake.files.has('crc2.bin')).toBe(false);
  });

  it('upload_finish 202: polled with the injected wait until 200; past the poll limit it gives up', async () => {
    const data = randomBytes(20_000);
    fake.finishProcessing = 3;
    const t0 = Date.now();
    await uploadFile(client, memorySource(data), { fullpath: 'fin.bin', blockSize: 10_000, finishWaitMs: 30 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(85);
    expect(fake.calls('/upload_finish')).toHaveLength(4);

    fake.requests.length = 0;
    fake.finishProcessing = 100;
    const err = await uploadFile(client, memorySource(randomBytes(2000)), { fullpath: 'fin2.bin', finishWaitMs: 1, finishPolls: 4 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 202, endpoint: 'upload.upload_finish' });
    expect(fake.calls('/upload_finish')).toHaveLength(5);
    expect(fake.calls('/upload_abort')).toHaveLength(1);
  });

  it('gives up after the retry budget of failures in a row, and aborts the session', async () => {
    fake.partFaults.push('500', '500', '500', '500');
    const err = await uploadFile(client, memorySource(randomBytes(20_000)), { fullpath: 'fail.bin', blockSize: 10_000, retries: 3 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 500, endpoint: 'upload.upload_part' });
    expect(fake.calls('/upload_part')).toHaveLength(4);
    expect(fake.calls('/upload_abort')).toHaveLength(1);
    const session = String(fake.calls('/upload_abort')[0]!.headers['x-svc-upload-session']);
    expect(session).toBe(String(fake.calls('/upload_part')[0]!.headers['x-svc-upload-session']));
    expect(fake.sessions.has(session)).toBe(false);
  });

  it('an aborted signal stops the upload and aborts the session', async () => {
    const ac = new AbortController();
    const err = await uploadFile(client, memorySource(randomBytes(50_000)), {
      fullpath: 'abort.bin', blockSize: 10_000, signal: ac.signal, onProgress: (sent) => { if (sent >= 20_000) ac.abort(new Error('stop')); },
    }).catch((e: unknown) => e);
    expect((err as Error).message).toBe('stop');
    expect(fake.calls('/upload_part')).toHaveLength(2);
    expect(fake.calls('/upload_abort')).toHaveLength(1);
    expect(fake.files.has('abort.bin')).toBe(false);
  });

  it('an abort while upload_finish is processing waits for it: the file lands and the upload resolves', async () => {
    const ac = new AbortController();
    const data = randomBytes(20_000);
    fake.finishProcessing = 2;
    const res = await uploadFile(client, memorySource(data), {
      fullpath: 'late.bin', blockSize: 10_000, finishWaitMs: 30, signal: ac.signal,
      onProgress: (sent, total) => { if (sent === total) setTimeout(() => ac.abort(new Error('stop')), 5); },
    });
    expect(ac.signal.aborted).toBe(true);
    expect(res.instant).toBe(false);
    expect(fake.files.has('late.bin')).toBe(true);
    expect(fake.calls('/upload_finish').length).toBe(3);
    expect(fake.calls('/upload_abort')).toHaveLength(0);
  });

  it('an abort before create_file sends nothing; create_file itself is never cut', async () => {
    const ac = new AbortController();
    ac.abort(new Error('stop'));
    const data = randomBytes(1000);
    await expect(uploadFile(client, memorySource(data, { filehash: sha1(data) }), { fullpath: 'never.bin', signal: ac.signal })).rejects.toThrow('stop');
    expect(fake.calls('/create_file')).toHaveLength(0);
  });

  it('user-token API: /m-api/2/file/create_file with mount_id, the token header on upload_init', async () => {
    const data = randomBytes(12_000);
    const res = await uploadFile(client, memorySource(data), { fullpath: 'u/x.txt', mountId: 7, blockSize: 5000 });
    expect(fake.files.get('u/x.txt')?.content?.equals(data)).toBe(true);
    expect(res.instant).toBe(false);
    const create = fake.calls('/create_file')[0]!;
    expect(create.path).toBe('/m-api/2/file/create_file');
    expect(create.form).toMatchObject({ mount_id: '7', token: TOKEN, overwrite: '1' });
    const init = fake.calls('/upload_init')[0]!;
    expect(init.query).toEqual({});
    expect(init.headers['x-svc-token']).toBe(TOKEN);
  });

  it('a source shorter or longer than declared fails with SourceChangedError', async () => {
    const data = randomBytes(30_000);
    const short: UploadSource = { size: 40_000, filehash: sha1(data), open: (s) => Readable.from([data.subarray(s)]) };
    await expect(uploadFile(client, short, { fullpath: 'short.bin', blockSize: 10_000 })).rejects.toBeInstanceOf(SourceChangedError);
    expect(fake.calls('/upload_abort')).toHaveLength(1);
    const long: UploadSource = { size: 20_000, open: (s) => Readable.from([data.subarray(s)]) };
    await expect(uploadFile(client, long, { fullpath: 'long.bin' })).rejects.toBeInstanceOf(SourceChangedError);
  });

  it('bad options are refused before any request', async () => {
    const src = memorySource(randomBytes(10));
    await expect(uploadFile(client, src, { fullpath: 'x', blockSize: 10 * 1024 * 1024 + 1 })).rejects.toThrow(/blockSize: expected an integer from 1 to 10485760 bytes, got 10485761/);
    await expect(uploadFile(client, src, { fullpath: '' })).rejects.toThrow(/fullpath: expected/);
    await expect(uploadFile(client, { ...src, filehash: 'nothex' }, { fullpath: 'x' })).rejects.toThrow(/expected a SHA-1/);
    await expect(uploadFile(client, src, { fullpath: 'x', mountId: 1, operator: { op_name: 'A' } })).rejects.toThrow(/operator: not supported/);
    expect(fake.requests).toHaveLength(0);
  });
});

describe('fileSource and sha1Of', { timeout: 10_000 }, () => {
  it('streams a file: size from stat, SHA-1 equal to the whole-buffer digest, ranges from any offset', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cloudlib-upload-'));
    try {
      const data = randomBytes(3 * 1024 * 1024 + 17);
      const path = join(dir, 'f.bin');
      await writeFile(path, data);
      const src = await fileSource(path);
      expect(src.size).toBe(data.length);
      expect(src.filehash).toBeUndefined();
      expect(await sha1Of(src)).toBe(sha1(data));
      const tail: Buffer[] = [];
      for await (const c of src.open(data.length - 100) as AsyncIterable<Buffer>) tail.push(c);
      expect(Buffer.concat(tail).equals(data.subarray(data.length - 100))).toBe(true);
      expect((await fileSource(path, sha1(data).toUpperCase())).filehash).toBe(sha1(data));
      await expect(fileSource(path, 'abc')).rejects.toThrow(/knownSha1: expected a SHA-1 of 40 hex characters, got "abc"/);
      await expect(fileSource(dir)).rejects.toThrow(/expected a regular file, got a directory/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
