/**
 * What the preview pages need from the rest of the embedded service. The service implements
 * `PreviewHost`; the preview modules own the signed links, the pages, the media streaming and the
 * thumbnails.
 */
import type { Readable } from 'node:stream';

/** An inclusive byte range of a blob. */
export interface ByteRange {
  /** First byte, from 0. */
  start: number;
  /** Last byte, inclusive. */
  end: number;
}

/** Traffic kinds of the daily statistics (`ent_daily_stats`: download, link, preview). */
export type TrafficKind = 'preview' | 'download' | 'link';

export interface PreviewHost {
  /**
   * The content with this SHA-1 as a stream, the whole blob or an inclusive `range` of it. May return
   * the stream directly or a promise of it; a missing blob rejects (or the stream errors) with an
   * error whose `code` is 'ENOENT'.
   */
  openBlob(filehash: string, range?: ByteRange): Readable | Promise<Readable>;
  /** Key of the HMAC that signs preview links (at least 16 bytes; keep it across restarts). */
  readonly signingKey: Buffer;
  /** Adds `bytes` sent for `libraryId` to the day's traffic statistics of this kind. */
  countTraffic(libraryId: number, kind: TrafficKind, bytes: number): void;
  /** Directory for thumbnails and other rendered artefacts (under the service's data dir). */
  readonly cacheDir: string;
}

/** What `PreviewServer.issue` needs to know about the file being previewed. */
export interface PreviewTarget {
  libraryId: number;
  fullpath: string;
  /** Content SHA-1 (the blob to show). */
  filehash: string;
  filename: string;
  /** Size in bytes. */
  filesize: number;
  /** Draws `text` (and `memberName`, when given) over the page. */
  watermark?: { text: string };
  /** The viewer's name, shown in the watermark. */
  memberName?: string;
  /** Also returns a thumbnail link (image files only). */
  thumbnail?: boolean;
  /** Public address of the service (scheme, host, port); links are `${baseUrl}/preview/...`. */
  baseUrl: string;
}

export interface IssuedPreview {
  /** The preview page, valid 10 minutes. */
  url: string;
  /** A thumbnail image, for image files when asked for. */
  thumbnail?: string;
}
