/**
 * The preview pages' view of the service: blobs by SHA-1, the key that signs preview links (kept in the
 * service's database, so links survive a restart), traffic counting, and a cache folder for thumbnails.
 */
import type { Readable } from 'node:stream';
import type { BlobStore } from '../store/blob-store.js';
import type { ByteRange, PreviewHost, TrafficKind } from '../preview/index.js';

export class LibraryPreviewHost implements PreviewHost {
  readonly signingKey: Buffer;

  constructor(
    private readonly blobs: BlobStore,
    signingSecret: string,
    readonly cacheDir: string,
    private readonly traffic: (libraryId: number, kind: TrafficKind, bytes: number) => void,
  ) {
    this.signingKey = Buffer.from(signingSecret, 'utf8');
  }

  openBlob(filehash: string, range?: ByteRange): Readable {
    return this.blobs.read(filehash, range ? { start: range.start, end: range.end } : {});
  }

  countTraffic(libraryId: number, kind: TrafficKind, bytes: number): void {
    this.traffic(libraryId, kind, bytes);
  }
}
