/**
 * A PreviewHost over a temporary folder of blobs named by their SHA-1, with an HTTP listener that
 * routes `/preview/*` to a PreviewServer the way the embedded service does. Traffic is recorded per
 * kind. For the preview tests (unit and e2e).
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { silentLogger, type Logger } from '../../../../src/shared/log.js';
import { PreviewServer, type ByteRange, type PreviewHost, type PreviewServerOptions, type TrafficKind } from '../../../../src/service/preview/index.js';

export class BlobFolderHost implements PreviewHost {
  readonly signingKey = randomBytes(32);
  readonly traffic: Record<TrafficKind, number> = { preview: 0, download: 0, link: 0 };
  readonly blobOpens: (ByteRange | undefined)[] = [];

  private constructor(readonly dir: string, readonly cacheDir: string) {}

  static async create(): Promise<BlobFolderHost> {
    const dir = await mkdtemp(join(tmpdir(), 'cloudlib-preview-'));
    return new BlobFolderHost(dir, join(dir, 'cache'));
  }

  /** Stores `content` as a blob; returns its SHA-1. */
  async put(content: Buffer | string): Promise<string> {
    const hash = createHash('sha1').update(content).digest('hex');
    await writeFile(join(this.dir, hash), content);
    return hash;
  }

  async openBlob(filehash: string, range?: ByteRange): Promise<Readable> {
    const path = join(this.dir, filehash);
    await stat(path);
    this.blobOpens.push(range);
    return createReadStream(path, range ? { start: range.start, end: range.end } : {});
  }

  countTraffic(_libraryId: number, kind: TrafficKind, bytes: number): void {
    this.traffic[kind] += bytes;
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** A PreviewServer over a BlobFolderHost behind a real HTTP listener on an ephemeral port. */
export class PreviewTestService {
  private constructor(readonly host: BlobFolderHost, readonly previews: PreviewServer, private readonly server: Server, readonly baseUrl: string) {}

  static async start(opts: Omit<PreviewServerOptions, 'host' | 'logger'> & { logger?: Logger } = {}): Promise<PreviewTestService> {
    const host = await BlobFolderHost.create();
    const previews = new PreviewServer({ host, logger: silentLogger, ...opts });
    const server = createServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      if (path.startsWith('/preview/')) void previews.handle(req, res, path.slice('/preview'.length));
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return new PreviewTestService(host, previews, server, `http://127.0.0.1:${port}`);
  }

  /** Stores `content` and issues the preview links of it as `filename`. */
  async file(filename: string, content: Buffer | string, extra: { watermark?: string; memberName?: string; thumbnail?: boolean } = {}) {
    const filehash = await this.host.put(content);
    const issued = this.previews.issue({
      libraryId: 1, fullpath: `docs/${filename}`, filehash, filename, filesize: Buffer.byteLength(content), baseUrl: this.baseUrl,
      watermark: extra.watermark !== undefined ? { text: extra.watermark } : undefined, memberName: extra.memberName, thumbnail: extra.thumbnail,
    });
    return { filehash, ...issued };
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await this.host.remove();
  }
}
