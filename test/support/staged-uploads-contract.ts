/**
 * What every StagedUploads (store/staged-uploads.ts) does, as tests run against each implementation: the
 * folder one (test/unit/service/store/staged-uploads.test.ts) and the bucket one on a real Swift
 * (test/integration/service/s3-blobs.test.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { expect, it } from 'vitest';
import { crc32 } from '../../src/shared/crc32.js';
import { stageBlock } from '../../src/service/upload/block-receiver.js';
import type { BlobStore } from '../../src/service/store/blob-store.js';
import { sha1OfStaged, type FinishedUpload, type StagedUploads } from '../../src/service/store/staged-uploads.js';

export interface StagedUploadsFixture {
  staging: StagedUploads;
  /** The blob store the staging belongs to (finished uploads are placed there). */
  blobs: BlobStore;
  /** Session ids whose staged bytes exist in the store, whatever records say (folder files, bucket keys). */
  stagedSessions(): Promise<string[]>;
}

const MiB = 1024 * 1024;
const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');
const newId = () => randomBytes(16).toString('hex');

async function drain(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Appends `blocks` one after the other; returns the SHA-1 over them. */
async function appendAll(staging: StagedUploads, session: string, blocks: Buffer[]): Promise<string> {
  let hash = createHash('sha1');
  let at = 0;
  for (const b of blocks) {
    hash = await stageBlock(staging, session, Readable.from([b]), { start: at, length: b.length, crc: crc32(b) }, hash);
    at += b.length;
  }
  return hash.digest('hex');
}

/** Places finished content as its blob, as LibraryContent does. */
async function place(blobs: BlobStore, content: FinishedUpload): Promise<void> {
  if ('staged' in content) await content.staged.place();
  else await blobs.ingest(content.tempFilePath, content.sha1, content.size);
}

export function stagedUploadsContract(fixture: () => StagedUploadsFixture, opts: { bigBlocks: boolean }): void {
  it('appends blocks at the count received, reads them back, and places the verified content as its blob', async () => {
    const { staging, blobs } = fixture();
    const session = newId();
    await staging.create(session);
    expect(await staging.receivedBytes(session)).toBe(0);
    const blocks = [randomBytes(70_000), randomBytes(1), randomBytes(40_000)];
    const all = Buffer.concat(blocks);
    const running = await appendAll(staging, session, blocks);
    expect(running).toBe(sha1(all));
    expect(await staging.receivedBytes(session)).toBe(all.length);
    expect(await drain(staging.read(session, all.length))).toEqual(all);
    expect(await drain(staging.read(session, 70_000))).toEqual(all.subarray(0, 70_000));
    expect((await sha1OfStaged(staging, session, all.length)).digest('hex')).toBe(sha1(all));
    await place(blobs, await staging.finished(session, sha1(all), all.length));
    expect(await drain(blobs.read(sha1(all)))).toEqual(all);
    await staging.remove(session);
    expect(await fixture().stagedSessions()).not.toContain(session);
    await blobs.remove(sha1(all));
  });

  it('keeps nothing of a block with a wrong CRC, a short body or a long body', async () => {
    const { staging } = fixture();
    const session = newId();
    await staging.create(session);
    const first = randomBytes(1000);
    await appendAll(staging, session, [first]);
    const block = randomBytes(500);
    const hash = createHash('sha1');
    await expect(stageBlock(staging, session, Readable.from([block]), { start: 1000, length: 500, crc: (crc32(block) + 1) >>> 0 }, hash))
      .rejects.toMatchObject({ status: 400, code: 40001 });
    await expect(stageBlock(staging, session, Readable.from([block.subarray(0, 499)]), { start: 1000, length: 500 }, hash))
      .rejects.toMatchObject({ status: 400, code: 40002 });
    await expect(stageBlock(staging, session, Readable.from([block, Buffer.from('x')]), { start: 1000, length: 500 }, hash))
      .rejects.toMatchObject({ status: 400, code: 40002 });
    expect(await staging.receivedBytes(session)).toBe(1000);
    expect(await drain(staging.read(session, 1000))).toEqual(first);
    await staging.remove(session);
  });

  it('keeps nothing of a block whose body fails midway (a cut connection)', async () => {
    const { staging } = fixture();
    const session = newId();
    await staging.create(session);
    await appendAll(staging, session, [Buffer.from('kept')]);
    const cut = Readable.from((async function* () {
      yield Buffer.from('half');
      throw new Error('connection reset');
    })());
    await expect(stageBlock(staging, session, cut, { start: 4, length: 8 }, createHash('sha1'))).rejects.toThrow(/connection reset/);
    expect(await staging.receivedBytes(session)).toBe(4);
    await staging.remove(session);
  });

  if (opts.bigBlocks) {
    it('places content of blocks of at least 5 MiB, and of many small blocks, byte for byte', { timeout: 120_000 }, async () => {
      const { staging, blobs } = fixture();
      for (const blocks of [[randomBytes(5 * MiB), randomBytes(5 * MiB + 3), randomBytes(1000)], [...Array.from({ length: 6 }, () => randomBytes(MiB)), randomBytes(5 * MiB), randomBytes(10)]]) {
        const session = newId();
        await staging.create(session);
        const all = Buffer.concat(blocks);
        await appendAll(staging, session, blocks);
        await place(blobs, await staging.finished(session, sha1(all), all.length));
        expect(sha1(await drain(blobs.read(sha1(all))))).toBe(sha1(all));
        await staging.remove(session);
        await blobs.remove(sha1(all));
      }
    });
  }

  it('removes staged bytes of no session once still for the grace, and keeps those of known sessions', async () => {
    const { staging } = fixture();
    const [orphan, live] = [newId(), newId()];
    for (const s of [orphan, live]) {
      await staging.create(s);
      await appendAll(staging, s, [Buffer.from(`bytes of ${s}`)]);
    }
    const known = async (s: string) => s === live;
    expect(await staging.removeStrays(known, Date.now(), 600_000)).toBe(0); // within the grace
    expect(await fixture().stagedSessions()).toEqual(expect.arrayContaining([orphan, live]));
    // well past the grace: an object store's modification times may be rounded up to the next second
    expect(await staging.removeStrays(known, Date.now() + 660_000, 600_000)).toBe(1);
    const left = await fixture().stagedSessions();
    expect(left).toContain(live);
    expect(left).not.toContain(orphan);
    await staging.remove(live);
    expect(await fixture().stagedSessions()).not.toContain(live);
  });
}
