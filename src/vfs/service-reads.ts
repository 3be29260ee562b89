/**
 * Reads of the service's files (those with no local version): RangeReaders over the block cache and the
 * optional content cache, streams of ranges, and a folder read file after file got ready ahead (a walk).
 */
import { Readable, Transform } from 'node:stream';
import type { Logger } from '../shared/log.js';
import type { BlockCache } from './block-cache.js';
import type { ContentCache } from './content-cache.js';
import type { MetadataCache } from './metadata-cache.js';
import { RangeReader, type ReadAheadBudget } from './range-reader.js';
import { parentOf, type RemoteEntry } from './remote.js';
import { RemoteReadHandle } from './remote-read-handle.js';
import { grantCacheFile } from './cache-file-grant.js';
import type { CacheFileGrant } from './engine-lease.js';
import { remoteCall, type Library } from './library-folders.js';
import type { UnlinkedWhileRead } from './unlinked-while-read.js';
import type { WriteBack } from './write-back/index.js';
import { VfsError, type Attr, type CallContext, type FileHandle } from './types.js';

/** Files after the one opened whose reads are prepared when a folder is read file after file. */
const WALK_AHEAD = 16;
/** Small files of a walk fetched at once, at most. */
const WALK_FETCHES = 16;

/** Ranges of a read stream larger than this are read with several windows in flight. */
const PARALLEL_STREAM_BYTES = 4 * 1024 * 1024;

export interface ServiceReadsOptions {
  blocks: BlockCache;
  disk: ContentCache | undefined;
  budget: ReadAheadBudget;
  /** Read-ahead windows (GatewayVfsOptions.readAhead). */
  readAhead?: { initial?: number; max?: number; streams?: number; bytes?: number };
  cache: MetadataCache;
  writeBack: WriteBack;
  unlinked: UnlinkedWhileRead;
  logger: Logger;
  /** Content being read is not evicted until the read ends (cache-budget.ts): answers its release. */
  hold?: (contentHash: string | undefined) => (() => void) | undefined;
  /** Whether a file is pinned: only a pinned file's cache file is granted to a kernel (cache-file-grant.ts). */
  pinned?: (library: string, fullpath: string) => boolean;
}

export class ServiceReads {
  /** Per library, the folder a service file was last opened for reading in (two in a row: a walk). */
  private readonly lastReadFolder = new Map<string, string>();
  /** Small files of a walk being fetched into the block cache, by content key. */
  private readonly walkFetches = new Map<string, Promise<void>>();

  constructor(private readonly opts: ServiceReadsOptions) {}

  /** A read handle on service file `e` (its reads follow the file once it is changed through the gateway). */
  async open(lib: Library, at: { path: string; fullpath: string }, e: RemoteEntry, attr: () => Attr, ctx?: CallContext): Promise<FileHandle> {
    this.walkAhead(lib, e, ctx);
    // Fetched ahead already (a walk): its bytes are on the way, no request of its own.
    await this.walkFetches.get(this.contentKey(lib, e));
    const unlinked = this.opts.unlinked.opened(lib.name, at.fullpath);
    const unhold = this.opts.hold?.(e.contentHash);
    const released = (): void => {
      unhold?.();
      unlinked();
    };
    const file = this.opts.writeBack.follow(lib.name, at.fullpath);
    const localFile = (): Promise<CacheFileGrant | undefined> => grantCacheFile(
      { disk: this.opts.disk, hold: this.opts.hold },
      { contentHash: e.contentHash, size: e.size, pinned: this.opts.pinned?.(lib.name, at.fullpath) ?? false, hasLocalVersion: () => file.version() !== undefined },
    );
    return new RemoteReadHandle(at.path, this.reader(lib, e, ctx), file, attr, released, localFile);
  }

  /** Bytes [start, end] of service file `entry` as a stream (through the content cache when it has them). */
  async stream(lib: Library, entry: RemoteEntry, start: number, end: number, ctx?: CallContext): Promise<Readable> {
    const disk = this.opts.disk;
    if (disk && entry.contentHash && disk.has(entry.contentHash, start, end + 1)) {
      return this.heldWhileRead(Readable.from(this.diskChunks(disk, entry.contentHash, start, end + 1)), entry.contentHash);
    }
    // A large range is read as a sequential streak (several ranged windows in flight); a small one is one request.
    if (end - start + 1 > PARALLEL_STREAM_BYTES) {
      const reader = this.reader(lib, entry, ctx, { startAt: start });
      // The first bytes before the stream is handed out: a failure to open is the call's, as for one request.
      const first = await reader.readParts(start, 1024 * 1024, ctx).catch((err: unknown) => { reader.close(); throw err; });
      return this.heldWhileRead(Readable.from(this.streakChunks(reader, first, start, end + 1, ctx)), entry.contentHash);
    }
    const stream = await lib.remote.openRange(entry.fullpath, start, end, { ...remoteCall(ctx), contentHash: entry.contentHash });
    if (!disk || !entry.contentHash) return stream;
    // What is streamed is kept in the content cache as it passes (read again later, or while offline).
    const hash = entry.contentHash;
    let at = start;
    const tee = new Transform({
      transform(chunk: Buffer, _enc, done) {
        void disk.write(hash, at, chunk);
        at += chunk.length;
        done(null, chunk);
      },
    });
    stream.on('error', (err) => tee.destroy(err));
    tee.on('close', () => stream.destroy());
    return this.heldWhileRead(stream.pipe(tee), hash);
  }

  /** The content of a stream being read is not evicted until the stream closes (cache-budget.ts). */
  private heldWhileRead(stream: Readable, hash: string | undefined): Readable {
    const release = this.opts.hold?.(hash);
    if (release) stream.once('close', release);
    return stream;
  }

  reader(lib: Library, e: RemoteEntry, ctx?: CallContext, extra: { startAt?: number; disk?: false; exactVersion?: boolean } = {}): RangeReader {
    const ra = this.opts.readAhead;
    return new RangeReader({
      remote: lib.remote, fullpath: e.fullpath, size: e.size, contentHash: e.contentHash,
      contentKey: this.contentKey(lib, e), blocks: this.opts.blocks, disk: extra.disk === false ? undefined : this.opts.disk,
      initialWindow: ra?.initial, maxWindow: ra?.max, streams: ra?.streams, aheadBytes: ra?.bytes, startAt: extra.startAt, budget: this.opts.budget,
      call: extra.exactVersion ? { ...remoteCall(ctx), exactVersion: true } : remoteCall(ctx), logger: this.opts.logger,
    });
  }

  /**
   * A folder being read file after file (`cat *`, `cp -r`, a backup): once two files of the same folder
   * are opened in a row, the next WALK_AHEAD files of its listing are got ready: a small one (one block
   * of the block cache at most) fetched whole into the block cache, at most WALK_FETCHES at once, so its
   * read needs no request; a larger one's download link fetched (the remote's prepareReads), so its
   * first read is one round trip instead of two.
   */
  private walkAhead(lib: Library, e: RemoteEntry, ctx?: CallContext): void {
    if (!lib.remote.prepareReads) return;
    const folder = parentOf(e.fullpath);
    const previous = this.lastReadFolder.get(lib.name);
    this.lastReadFolder.set(lib.name, folder);
    if (previous !== folder) return;
    const listing = this.opts.cache.getListing(lib.name, folder);
    if (!listing) return;
    const at = listing.findIndex((x) => x.fullpath === e.fullpath);
    if (at < 0) return;
    const links: { fullpath: string; contentHash?: string }[] = [];
    for (let i = at + 1, n = 0; i < listing.length && n < WALK_AHEAD; i++) {
      const x = listing[i]!;
      if (x.isDir || x.size === 0 || this.opts.writeBack.entry(lib.name, x.fullpath)) continue;
      n++;
      if (x.size <= this.opts.blocks.blockSize) this.fetchWhole(lib, x, ctx);
      else links.push({ fullpath: x.fullpath, contentHash: x.contentHash });
    }
    // Not tied to this call's signal: the links serve the reads after it.
    if (links.length > 0) lib.remote.prepareReads(links, { operator: ctx?.operator });
  }

  /** A small file fetched whole into the block cache (block 0), in the background; failures are forgotten. */
  private fetchWhole(lib: Library, e: RemoteEntry, ctx?: CallContext): void {
    const key = this.contentKey(lib, e);
    if (this.walkFetches.size >= WALK_FETCHES || this.walkFetches.has(key) || this.opts.blocks.peek(key, 0)) return;
    const fetching = (async () => {
      const stream = await lib.remote.openRange(e.fullpath, 0, e.size - 1, { operator: ctx?.operator, contentHash: e.contentHash });
      const chunks: Buffer[] = [];
      for await (const c of stream as AsyncIterable<Buffer>) chunks.push(c);
      const data = Buffer.concat(chunks);
      if (data.length === e.size) this.opts.blocks.set(key, 0, data);
    })().catch((err: unknown) => {
      this.opts.logger.debug({ path: e.fullpath, err: (err as Error).message }, 'fetching ahead failed; the read will ask again');
    }).finally(() => { this.walkFetches.delete(key); });
    this.walkFetches.set(key, fetching);
  }

  private contentKey(lib: Library, e: RemoteEntry): string {
    return e.contentHash ?? `${lib.name}\0${e.id}\0${e.size}\0${e.mtimeMs}`;
  }

  /**
   * Bytes [start, end) read in order through `reader` (the first ones already read: `first`), 1 MiB at a
   * time; the reader is closed at the end (or when the stream is destroyed).
   */
  private async *streakChunks(reader: RangeReader, first: Buffer[], start: number, end: number, ctx?: CallContext): AsyncGenerator<Buffer> {
    try {
      let at = start;
      for (const p of first) {
        at += p.length;
        yield p;
      }
      while (at < end) {
        const parts = await reader.readParts(at, Math.min(1024 * 1024, end - at), ctx);
        if (parts.length === 0) throw new VfsError('EIO', `range ended early at ${at}`);
        for (const p of parts) {
          at += p.length;
          yield p;
        }
      }
    } finally {
      reader.close();
    }
  }

  private async *diskChunks(disk: ContentCache, hash: string, start: number, end: number): AsyncGenerator<Buffer> {
    for (let at = start; at < end; at += 1024 * 1024) yield await disk.read(hash, at, Math.min(end, at + 1024 * 1024));
  }
}
