/**
 * ThumbnailStore: WebP thumbnails of images, made with sharp (libvips, off the event loop) from the
 * blob stream and cached on disk by content hash and size as `<cacheDir>/thumbnails/<filehash>-<size>.webp`.
 * Concurrent requests for the same thumbnail share one rendering; a rendering is written to a
 * temporary file and renamed into place, so a reader never sees a partial file.
 */
import { mkdir, stat } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import { replaceFile } from '../../shared/atomic-file.js';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** Thumbnail sizes offered (longest side, pixels). */
export const THUMBNAIL_SIZES = [64, 128, 256, 512] as const;
export type ThumbnailSize = (typeof THUMBNAIL_SIZES)[number];
export const DEFAULT_THUMBNAIL_SIZE: ThumbnailSize = 256;

/** Input images above this many pixels are refused (a decompression bomb guard). */
const MAX_INPUT_PIXELS = 100_000_000;

type SharpFactory = typeof import('sharp').default;

export class ThumbnailStore {
  private readonly dir: string;
  private readonly inFlight = new Map<string, Promise<string>>();
  private sharp: Promise<SharpFactory | undefined> | undefined;

  constructor(cacheDir: string) {
    this.dir = join(cacheDir, 'thumbnails');
  }

  /** Whether thumbnails can be made here (sharp loads). */
  async available(): Promise<boolean> {
    return (await this.loadSharp()) !== undefined;
  }

  /**
   * Path of the thumbnail of the image `filehash`, rendering it from `open()` when not cached.
   * Throws when sharp is unavailable or the image cannot be decoded.
   */
  async path(filehash: string, size: ThumbnailSize, open: () => Promise<Readable>): Promise<string> {
    const file = join(this.dir, `${filehash}-${size}.webp`);
    const cached = await stat(file).then(() => true, () => false);
    if (cached) return file;
    const key = `${filehash}-${size}`;
    let job = this.inFlight.get(key);
    if (!job) {
      job = this.render(file, size, open).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, job);
    }
    return job;
  }

  private async render(file: string, size: ThumbnailSize, open: () => Promise<Readable>): Promise<string> {
    const sharp = await this.loadSharp();
    if (!sharp) throw new Error('thumbnails are not supported: the image library (sharp) is not available');
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const transform = sharp({ limitInputPixels: MAX_INPUT_PIXELS, failOn: 'error' })
      .rotate()
      .resize(size, size, { fit: 'inside', withoutEnlargement: true })
      .webp({ quality: 80 });
    // A cache: a thumbnail lost to a power loss is made again.
    await replaceFile(file, async (_fh, temp) => { await pipeline(await open(), transform, createWriteStream(temp, { mode: 0o600 })); }, { durability: 'rename', mode: 0o600 });
    return file;
  }

  private loadSharp(): Promise<SharpFactory | undefined> {
    this.sharp ??= import('sharp').then((m) => m.default, () => undefined);
    return this.sharp;
  }
}
