import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { crc32 } from '../../../../src/shared/crc32.js';
import { FakeUploadHost, listen } from './fake-host.js';
import { UploadWire } from './wire.js';
import { waitFor } from '../../../support/wait-for.js';

const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');

let host: FakeUploadHost;
let srv: Awaited<ReturnType<typeof listen>>;
let wire: UploadWire;

// upload_finish waits this long for the commit before it answers 202: long enough that a commit on a
// busy machine still answers 200 where a test expects it; the tests of 202 hold the commit with a gate.
async function start(opts: Parameters<typeof listen>[1] = {}) {
  srv = await listen(host, { maxBlock: 64 * 1024, finishWaitMs: 3_000, ...opts });
  wire = new UploadWire(srv.url);
}

/** create_file + upload_init for `content`; returns the session id. */
async function openSession(content: Buffer, fullpath = 'docs/a.bin'): Promise<{ session: string; pathhash: string }> {
  const pathhash = host.createFile(fullpath, sha1(content), content.length);
  const r = await wire.init({ filename: fullpath.split('/').pop(), pathhash, filehash: sha1(content), filesize: content.length });
  expect(r.status).toBe(200);
  return { session: r.json.session as string, pathhash };
}

async function sendAll(session: string, content: Buffer, block: number, from = 0): Promise<number[]> {
  const statuses: number[] = [];
  for (let off = from; off < content.length; off += block) {
    const chunk = content.subarray(off, Math.min(off + block, content.length));
    statuses.push((await wire.part(session, `${off}-${off + chunk.length - 1}`, chunk)).status);
  }
  return statuses;
}

const sessionFiles = async () => readdir(join(host.tempDir, 'sessions'));

beforeEach(async () => {
  host = await FakeUploadHost.create();
  await start();
});

afterEach(async () => {
  await srv.close();
  await host.dispose();
});

describe('chunked upload: happy path', () => {
  it('init 200, parts 200 then 202 on the completing block, finish 200 commits the verified blob', { timeout: 10_000 }, async () => {
    const content = randomBytes(150_000);
    const { session } = await openSession(content);
    expect(session).toMatch(/^[0-9a-f]{32}$/);
    const statuses = await sendAll(session, content, 64 * 1024);
    expect(statuses).toEqual([200, 200, 202]);
    const req = await wire.post('upload_req', session);
    expect(req).toMatchObject({ status: 200, text: String(content.length) });
    const fin = await wire.post('upload_finish', session);
    expect(fin.status).toBe(200);
    expect(fin.json).toMatchObject({ fullpath: 'docs/a.bin', filesize: content.length, filehash: sha1(content) });
    expect((await readFile(host.blobPath(sha1(content)))).equals(content)).toBe(true);
    // a repeated finish answers the same result; no temporary content is left
    expect((await wire.post('upload_finish', session)).status).toBe(200);
    expect((await sessionFiles()).filter((n) => n.endsWith('.part'))).toEqual([]);
  });

  it('accepts the user token header instead of org_client_id', { timeout: 10_000 }, async () => {
    const content = randomBytes(1000);
    const pathhash = host.createFile('t.bin', sha1(content), content.length);
    const user = new UploadWire(srv.url, { token: 'tok_test' });
    const r = await user.init({ filename: 't.bin', pathhash, filehash: sha1(content), filesize: content.length });
    expect(r.status).toBe(200);
    expect((await user.part(r.json.session as string, `0-999`, content)).status).toBe(202);
    expect((await user.post('upload_finish', r.json.session as string)).status).toBe(200);
    const bad = await new UploadWire(srv.url, { token: 'nope' }).init({ filename: 't.bin', pathhash, filehash: sha1(content), filesize: 1000 });
    expect(bad).toMatchObject({ status: 401, json: { error_code: 40101 } });
  });

  it('answers 202 at init when the content is already stored, and no session is opened', { timeout: 10_000 }, async () => {
    const content = randomBytes(5000);
    const first = await openSession(content, 'one.bin');
    await sendAll(first.session, content, 64 * 1024);
    expect((await wire.post('upload_finish', first.session)).status).toBe(200);
    const pathhash = host.createFile('two.bin', sha1(content), content.length);
    const r = await wire.init({ filename: 'two.bin', pathhash, filehash: sha1(content), filesize: content.length });
    expect(r.status).toBe(202);
    expect(host.files.get('two.bin')).toMatchObject({ filehash: sha1(content) });
    expect(await srv.server.openSessions()).toBe(0);
  });

  it('an empty file finishes without blocks', { timeout: 10_000 }, async () => {
    const { session } = await openSession(Buffer.alloc(0), 'empty.txt');
    expect((await wire.post('upload_finish', session)).status).toBe(200);
    expect(host.files.get('empty.txt')).toMatchObject({ filesize: 0 });
  });

  it('a second init for the same create_file step resumes the open session', { timeout: 10_000 }, async () => {
    const content = randomBytes(3000);
    const { session, pathhash } = await openSession(content);
    const again = await wire.init({ filename: 'a.bin', pathhash, filehash: sha1(content), filesize: content.length });
    expect(again).toMatchObject({ status: 200, json: { session } });
  });
});

describe('chunked upload: upload_req while a block is written', () => {
  it('answers the bytes before the block: the first block, one after a stored block, one after a refused block', { timeout: 20_000 }, async () => {
    const MiB = 1024 * 1024;
    await srv.close();
    await start({ maxBlock: 4 * MiB });
    const content = randomBytes(6 * MiB + 10);
    const { session } = await openSession(content);
    const part = join(host.tempDir, 'sessions', `${session}.part`);
    /** Sends the 2 MiB block at `from`, holding its second half until upload_req answered while the first is written. */
    const heldBlock = async (from: number): Promise<number> => {
      const block = content.subarray(from, from + 2 * MiB);
      let release!: () => void;
      const gate = new Promise<void>((resolve) => { release = resolve; });
      const body = Readable.from((async function* () {
        yield block.subarray(0, 1.5 * MiB);
        await gate;
        yield block.subarray(1.5 * MiB);
      })());
      const headers = { 'x-svc-upload-session': session, 'x-svc-upload-range': `${from}-${from + 2 * MiB - 1}`, 'x-svc-upload-crc': String(crc32(block)) };
      const sent = request(`${srv.url}/upload_part`, { method: 'PUT', headers, body });
      try {
        // the server writes a block in 1 MiB batches: the file grows once the first is written
        await waitFor(`the first MiB of the block at ${from} in the staged file`, async () => (await stat(part)).size > from, { intervalMs: 5 });
        expect(await wire.post('upload_req', session)).toMatchObject({ status: 200, text: String(from) });
      } finally {
        release();
      }
      const res = await sent;
      await res.body.text();
      return res.statusCode;
    };
    expect(await heldBlock(0)).toBe(200);
    const bad = await wire.part(session, `${2 * MiB}-${4 * MiB - 1}`, content.subarray(2 * MiB, 4 * MiB), { crc: 1 });
    expect(bad).toMatchObject({ status: 400, json: { error_code: 40001 } });
    expect(await heldBlock(2 * MiB)).toBe(200);
    expect(await heldBlock(4 * MiB)).toBe(200);
    expect((await wire.part(session, `${6 * MiB}-${6 * MiB + 9}`, content.subarray(6 * MiB))).status).toBe(202);
    expect((await wire.post('upload_finish', session)).json).toMatchObject({ filesize: content.length, filehash: sha1(content) });
  });
});

describe('chunked upload: refusals', () => {
  it('upload_init: 400 for each missing header and bad values, 401 for an unknown org_client_id, 404 for an unknown pathhash', { timeout: 10_000 }, async () => {
    const content = randomBytes(10);
    const pathhash = host.createFile('x', sha1(content), 10);
    const full = { filename: 'x', pathhash, filehash: sha1(content), filesize: 10 };
    for (const drop of ['filename', 'pathhash', 'filehash', 'filesize'] as const) {
      const r = await wire.init({ ...full, [drop]: undefined });
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ error_code: 40003 });
      expect(r.json.error_msg).toContain(`x-svc-upload-${drop}`);
    }
    expect((await wire.init({ ...full, filesize: '-1' })).status).toBe(400);
    expect((await wire.init({ ...full, filehash: 'abc' })).status).toBe(400);
    expect((await wire.init({ ...full, filesize: 11 })).json.error_msg).toMatch(/expected .* 10/);
    expect((await new UploadWire(srv.url, {}).init(full)).status).toBe(400);
    expect(await new UploadWire(srv.url, { orgClientId: 'oc_other' }).init(full)).toMatchObject({ status: 401, json: { error_code: 40103 } });
    expect(await wire.init({ ...full, pathhash: 'unknown' })).toMatchObject({ status: 404, json: { error_code: 40403 } });
    expect(await srv.server.openSessions()).toBe(0);
  });

  it('upload_init: 403/40321 before any byte is stored when the library would exceed its capacity', { timeout: 10_000 }, async () => {
    host.capacity = 1000;
    const content = randomBytes(1001);
    const pathhash = host.createFile('big', sha1(content), content.length);
    const r = await wire.init({ filename: 'big', pathhash, filehash: sha1(content), filesize: content.length });
    expect(r).toMatchObject({ status: 403, json: { error_code: 40321 } });
    expect(await sessionFiles()).toEqual([]);
  });

  it('upload_part: 400 without session header, 401 for an unknown session', { timeout: 10_000 }, async () => {
    const b = randomBytes(10);
    expect(await wire.part(undefined, '0-9', b)).toMatchObject({ status: 400, json: { error_code: 40003 } });
    expect(await wire.part('f'.repeat(32), '0-9', b)).toMatchObject({ status: 401, json: { error_code: 40104 } });
    for (const op of ['upload_req', 'upload_finish', 'upload_abort'] as const) {
      expect((await wire.post(op, 'nope')).status).toBe(401);
      expect((await wire.post(op, undefined)).status).toBe(400);
    }
  });

  it('upload_part: 400/40001 on CRC mismatch with received and expected; the block is not kept', { timeout: 10_000 }, async () => {
    const content = randomBytes(2000);
    const { session } = await openSession(content);
    const r = await wire.part(session, '0-999', content.subarray(0, 1000), { crc: 12345 });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error_code: 40001, received: 12345, expected: crc32(content.subarray(0, 1000)) });
    expect(r.json.error_msg).toContain('12345');
    expect((await wire.post('upload_req', session)).text).toBe('0');
    expect((await wire.part(session, '0-999', content.subarray(0, 1000), { crc: 'x1' })).json).toMatchObject({ error_code: 40003 });
    // without a CRC header the block is accepted
    expect((await wire.part(session, '0-999', content.subarray(0, 1000), { crc: false })).status).toBe(200);
  });

  it('upload_part: 400/40002 when the body is shorter or longer than the range', { timeout: 10_000 }, async () => {
    const content = randomBytes(2000);
    const { session } = await openSession(content);
    const short = await wire.part(session, '0-999', content.subarray(0, 900));
    expect(short).toMatchObject({ status: 400, json: { error_code: 40002, received: 900, expected: 1000 } });
    const long = await wire.part(session, '0-999', content.subarray(0, 1100));
    expect(long).toMatchObject({ status: 400, json: { error_code: 40002, expected: 1000 } });
    expect((await wire.post('upload_req', session)).text).toBe('0');
  });

  it('upload_part: 409/40900 with expect when the block does not start at the committed length', { timeout: 10_000 }, async () => {
    const content = randomBytes(3000);
    const { session } = await openSession(content);
    expect((await wire.part(session, '0-999', content.subarray(0, 1000))).status).toBe(200);
    const r = await wire.part(session, '2000-2999', content.subarray(2000));
    expect(r).toMatchObject({ status: 409, json: { error_code: 40900, expect: 1000 } });
    const dup = await wire.part(session, '0-999', content.subarray(0, 1000));
    expect(dup.json.expect).toBe(1000);
  });

  it('upload_part: 416 on a malformed range or one outside the file, 413 on a block over the maximum', { timeout: 10_000 }, async () => {
    const content = randomBytes(200_000);
    const { session } = await openSession(content);
    for (const range of ['abc', '5-2', '0-200000', '-1-5']) {
      expect(await wire.part(session, range, content.subarray(0, 10))).toMatchObject({ status: 416, json: { error_code: 41600 } });
    }
    expect((await wire.part(session, undefined, content.subarray(0, 10))).status).toBe(400);
    const big = await wire.part(session, `0-${64 * 1024}`, content.subarray(0, 64 * 1024 + 1));
    expect(big).toMatchObject({ status: 413, json: { error_code: 41300 } });
    expect((await wire.post('upload_req', session)).text).toBe('0');
  });

  it('upload_finish: 409 with expect while data is incomplete', { timeout: 10_000 }, async () => {
    const content = randomBytes(3000);
    const { session } = await openSession(content);
    await wire.part(session, '0-999', content.subarray(0, 1000));
    expect(await wire.post('upload_finish', session)).toMatchObject({ status: 409, json: { expect: 1000 } });
  });

  it('upload_finish: 202 while the commit runs, 410 for a block meanwhile, then 200', { timeout: 10_000 }, async () => {
    await srv.close();
    await start({ finishWaitMs: 200 });
    const content = randomBytes(3000);
    const { session } = await openSession(content);
    await sendAll(session, content, 64 * 1024);
    let release!: () => void;
    host.gate = new Promise<void>((r) => { release = r; });
    expect((await wire.post('upload_finish', session)).status).toBe(202);
    expect((await wire.post('upload_finish', session)).status).toBe(202);
    expect(await wire.part(session, '0-9', content.subarray(0, 10))).toMatchObject({ status: 410, json: { error_code: 41000 } });
    expect((await wire.post('upload_abort', session)).status).toBe(410);
    release();
    const done = await wire.post('upload_finish', session);
    expect(done.status).toBe(200);
    expect(host.completeCalls).toBe(1);
  });

  it('upload_finish: a SHA-1 mismatch fails with 400/40004, commits nothing and removes the temporary file', { timeout: 10_000 }, async () => {
    const declared = randomBytes(2000);
    const actual = randomBytes(2000);
    const pathhash = host.createFile('bad.bin', sha1(declared), 2000);
    const r = await wire.init({ filename: 'bad.bin', pathhash, filehash: sha1(declared), filesize: 2000 });
    const session = r.json.session as string;
    expect((await wire.part(session, '0-1999', actual)).status).toBe(202);
    const fin = await wire.post('upload_finish', session);
    expect(fin).toMatchObject({ status: 400, json: { error_code: 40004, received: sha1(actual), expected: sha1(declared) } });
    expect(host.completeCalls).toBe(0);
    expect(host.files.size).toBe(0);
    expect(await readdir(host.blobDir)).toEqual([]);
    expect(await sessionFiles()).toEqual([]);
    expect((await wire.post('upload_req', session)).status).toBe(401);
  });

  it('upload_abort: 200, then the session is gone with its temporary file', { timeout: 10_000 }, async () => {
    const content = randomBytes(3000);
    const { session } = await openSession(content);
    await wire.part(session, '0-999', content.subarray(0, 1000));
    expect((await wire.post('upload_abort', session)).status).toBe(200);
    expect((await wire.post('upload_req', session)).status).toBe(401);
    expect(await sessionFiles()).toEqual([]);
  });

  it('upload_req and upload_finish: 500 when the temporary file is gone (not initialised)', { timeout: 10_000 }, async () => {
    const content = randomBytes(3000);
    const { session } = await openSession(content);
    await rm(join(host.tempDir, 'sessions', `${session}.part`));
    expect(await wire.post('upload_req', session)).toMatchObject({ status: 500, json: { error_code: 50002 } });
    expect((await wire.post('upload_finish', session)).status).toBe(500);
  });
});

describe('chunked upload: persistence and expiry', () => {
  it('a session survives a restart of the upload server and the upload resumes', { timeout: 10_000 }, async () => {
    const content = randomBytes(200_000);
    const { session } = await openSession(content);
    await sendAll(session, content.subarray(0, 128 * 1024), 64 * 1024);
    await srv.close();
    await start();
    expect((await wire.post('upload_req', session)).text).toBe(String(128 * 1024));
    expect(await sendAll(session, content, 64 * 1024, 128 * 1024)).toEqual([200, 202]);
    const fin = await wire.post('upload_finish', session);
    expect(fin).toMatchObject({ status: 200, json: { filehash: sha1(content) } });
  });

  it('abandoned sessions expire and their temporary files are removed', { timeout: 10_000 }, async () => {
    let now = Date.now();
    await srv.close();
    await start({ clock: () => now, sessionTtlMs: 60_000 });
    const content = randomBytes(3000);
    const { session } = await openSession(content);
    await wire.part(session, '0-999', content.subarray(0, 1000));
    now += 30_000;
    await srv.server.sweep();
    expect((await wire.post('upload_req', session)).status).toBe(200);
    now += 61_000;
    await srv.server.sweep();
    expect((await wire.post('upload_req', session)).status).toBe(401);
    expect(await sessionFiles()).toEqual([]);
  });

  it('a temporary file without journal (the process died inside upload_init) goes after 10 minutes, not 24 h', { timeout: 10_000 }, async () => {
    let now = Date.now();
    await srv.close();
    await start({ clock: () => now });
    const stray = `${'ab'.repeat(16)}.part`;
    await writeFile(join(host.tempDir, 'sessions', stray), Buffer.alloc(1000));
    now = Date.now() + 5 * 60_000;
    await srv.server.sweep();
    expect(await sessionFiles()).toContain(stray);
    now += 6 * 60_000;
    await srv.server.sweep();
    expect(await sessionFiles()).not.toContain(stray);
  });
});

describe('chunked upload: two upload servers on one store and staging folder (two processes)', () => {
  it('init on one, parts on the other, finish on the first; the first forgets a session the other ended at its sweep', { timeout: 20_000 }, async () => {
    const other = await listen(host, { maxBlock: 64 * 1024, finishWaitMs: 3_000 });
    try {
      const onOther = new UploadWire(other.url);
      const content = randomBytes(150_000);
      const { session } = await openSession(content);
      expect(await sendAll(session, content.subarray(0, 64 * 1024), 64 * 1024)).toEqual([200]);
      expect((await onOther.part(session, `${64 * 1024}-${128 * 1024 - 1}`, content.subarray(64 * 1024, 128 * 1024))).status).toBe(200);
      expect((await onOther.part(session, `${128 * 1024}-${content.length - 1}`, content.subarray(128 * 1024))).status).toBe(202);
      expect(await wire.post('upload_req', session)).toMatchObject({ status: 200, text: String(content.length) });
      expect(await wire.post('upload_finish', session)).toMatchObject({ status: 200, json: { filehash: sha1(content) } });
      expect(await onOther.post('upload_finish', session)).toMatchObject({ status: 200, json: { filehash: sha1(content) } });

      // a session aborted through the other server: this one answers 401 and its cache lets go at the sweep
      const second = await openSession(randomBytes(1000), 'docs/b.bin');
      expect((await wire.post('upload_req', second.session)).status).toBe(200);
      expect((await onOther.post('upload_abort', second.session)).status).toBe(200);
      const cached = (srv.server as unknown as { sessions: Map<string, unknown> }).sessions;
      expect(cached.has(session)).toBe(true);
      await srv.server.sweep();
      expect(cached.has(second.session)).toBe(false);
      expect((await wire.post('upload_req', second.session)).status).toBe(401);
    } finally {
      await other.close();
    }
  });
});
