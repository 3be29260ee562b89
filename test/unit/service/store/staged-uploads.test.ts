/**
 * FolderStagedUploads, the staging of chunked uploads beside a folder blob store: the contract every
 * StagedUploads keeps (test/support/staged-uploads-contract.ts), and what is the folder's own (one
 * `<session>.part` file, renamed into the blob folder at finish).
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FolderBlobStore } from '../../../../src/service/store/folder-blob-store.js';
import type { FolderStagedUploads } from '../../../../src/service/store/staged-uploads.js';
import { stagedUploadsContract } from '../../../support/staged-uploads-contract.js';

let root: string;
let blobs: FolderBlobStore;
let staging: FolderStagedUploads;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'cloudlib-staged-'));
  blobs = new FolderBlobStore({ root: join(root, 'blobs'), tempDir: join(root, 'tmp') });
  await blobs.open();
  staging = blobs.stagedUploads(undefined);
  await staging.open();
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const stagedSessions = async () => (await readdir(staging.dir)).filter((n) => n.endsWith('.part')).map((n) => n.slice(0, -'.part'.length));

describe('FolderStagedUploads', () => {
  stagedUploadsContract(() => ({ staging, blobs, stagedSessions }), { bigBlocks: false });

  it('stages in <tempDir>/upload/sessions by default, or in the folder given; a session is one .part file', async () => {
    expect(staging.dir).toBe(join(root, 'tmp', 'upload', 'sessions'));
    expect(blobs.stagedUploads(undefined, join(root, 'elsewhere')).dir).toBe(join(root, 'elsewhere'));
    await staging.create('a'.repeat(32));
    expect(await readdir(staging.dir)).toContain(`${'a'.repeat(32)}.part`);
    await staging.remove('a'.repeat(32));
  });

  it('hands a finished upload over as its file, which the blob store renames into place', async () => {
    const session = 'b'.repeat(32);
    await staging.create(session);
    const finished = await staging.finished(session, 'da39a3ee5e6b4b0d3255bfef95601890afd80709', 0);
    expect(finished).toEqual({ tempFilePath: join(staging.dir, `${session}.part`), sha1: 'da39a3ee5e6b4b0d3255bfef95601890afd80709', size: 0 });
    await blobs.ingest(join(staging.dir, `${session}.part`), 'da39a3ee5e6b4b0d3255bfef95601890afd80709', 0);
    expect(await stagedSessions()).not.toContain(session);
    expect(await blobs.sizeOf('da39a3ee5e6b4b0d3255bfef95601890afd80709')).toBe(0);
  });

  it('a session never created has no staged bytes', async () => {
    expect(await staging.receivedBytes('c'.repeat(32))).toBeUndefined();
  });
});
