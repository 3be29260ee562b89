/**
 * A small in-memory UploadHost over a real temporary directory: one library (org_client_id `oc_test`,
 * mount 11, reachable with the token `tok_test`), blobs stored by SHA-1 on disk. Enough to drive the
 * upload server over real HTTP.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { metadataStoreAt } from '../../../../src/service/store/metadata-location.js';
import type { MetadataStore } from '../../../../src/service/store/metadata-store.js';
import { UploadServer, type UploadServerOptions } from '../../../../src/service/upload/upload-server.js';
import type { PendingUpload, UploadCaller, UploadHost, UploadedFile, VerifiedContent, WebUploadTarget } from '../../../../src/service/upload/types.js';

export class HostError extends Error {
  constructor(readonly status: number, readonly code: number, message: string) {
    super(message);
  }
}

export class FakeUploadHost implements UploadHost {
  readonly pending = new Map<string, PendingUpload>();
  readonly files = new Map<string, UploadedFile>();
  capacity = Infinity;
  used = 0;
  completeCalls = 0;
  /** Re-read ingested content to check its SHA-1 (off in benchmarks, where only the upload path is measured). */
  verifyOnIngest = true;
  /** When set, completeUpload waits for it (to hold a finish in progress). */
  gate: Promise<void> | undefined;

  constructor(readonly root: string, readonly tempDir: string, readonly blobDir: string) {}

  /** The metadata store of the upload sessions (SQLite in the host's folder; kept across upload servers). */
  db!: MetadataStore;

  static async create(): Promise<FakeUploadHost> {
    const root = await mkdtemp(join(tmpdir(), 'cloudlib-upload-'));
    await mkdir(join(root, 'tmp'));
    await mkdir(join(root, 'blobs'));
    const host = new FakeUploadHost(root, join(root, 'tmp'), join(root, 'blobs'));
    host.db = await metadataStoreAt(undefined, root);
    return host;
  }

  async authorizeLibrary(orgClientId: string): Promise<UploadCaller> {
    if (orgClientId !== 'oc_test') throw new HostError(401, 40103, 'client id not found');
    return { kind: 'library', libraryId: 1, orgClientId };
  }

  async authorizeToken(token: string): Promise<UploadCaller> {
    if (token !== 'tok_test') throw new HostError(401, 40101, 'access token invalid');
    return { kind: 'user', memberId: 7, token };
  }

  async libraryOfMount(_caller: UploadCaller, mountId: number): Promise<number> {
    if (mountId !== 11) throw new HostError(404, 40401, 'library missing');
    return 1;
  }

  /** Registers a create_file step (state 0) and returns its hash. */
  createFile(fullpath: string, filehash: string, filesize: number): string {
    const pathhash = randomBytes(8).toString('hex');
    this.pending.set(pathhash, { libraryId: 1, fullpath, filehash, filesize });
    return pathhash;
  }

  async pendingUpload(_caller: UploadCaller, pathhash: string): Promise<PendingUpload | undefined> {
    return this.pending.get(pathhash);
  }

  blobPath(sha1: string): string {
    return join(this.blobDir, sha1);
  }

  async blobExists(sha1: string): Promise<boolean> {
    return stat(this.blobPath(sha1)).then(() => true, () => false);
  }

  async remainingCapacity(): Promise<number> {
    return this.capacity - this.used;
  }

  private async ingest(content: VerifiedContent): Promise<void> {
    if (this.verifyOnIngest) {
      const actual = createHash('sha1');
      for await (const chunk of createReadStream(content.tempFilePath)) actual.update(chunk as Buffer);
      if (actual.digest('hex') !== content.sha1) throw new Error('host received content that does not match its SHA-1');
    }
    await rename(content.tempFilePath, this.blobPath(content.sha1));
    this.used += content.size;
  }

  async completeUpload(pathhash: string, content: VerifiedContent | null): Promise<UploadedFile> {
    this.completeCalls++;
    if (this.gate) await this.gate;
    const p = this.pending.get(pathhash);
    if (!p) throw new HostError(404, 40402, 'upload no longer pending');
    if (content) await this.ingest(content);
    this.pending.delete(pathhash);
    const rec = { hash: pathhash, fullpath: p.fullpath, filesize: p.filesize, filehash: p.filehash };
    this.files.set(p.fullpath, rec);
    return rec;
  }

  async webUpload(_caller: UploadCaller, target: WebUploadTarget, content: VerifiedContent): Promise<UploadedFile> {
    const fullpath = target.folder ? `${target.folder}/${target.name}` : target.name;
    if (this.files.has(fullpath) && !target.overwrite) throw new HostError(409, 40901, 'name already exists');
    await this.ingest(content);
    const rec = { hash: randomBytes(8).toString('hex'), fullpath, filesize: content.size, filehash: content.sha1 };
    this.files.set(fullpath, rec);
    return rec;
  }

  async dispose(): Promise<void> {
    await this.db.close();
    await rm(this.root, { recursive: true, force: true });
  }
}

/** An UploadServer on a real HTTP listener (ephemeral port), mounted at `/upload`. */
export async function listen(host: FakeUploadHost, opts: Partial<UploadServerOptions> = {}): Promise<{ server: UploadServer; url: string; close: () => Promise<void> }> {
  const server = new UploadServer(host, { db: host.db, ...opts });
  await server.open();
  const http: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    void server.handle(req, res, path.replace(/^\/upload/, ''));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/upload`;
  return {
    server,
    url,
    close: async () => {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
      await server.close();
    },
  };
}
