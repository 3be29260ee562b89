/**
 * BlockCache: fixed-size blocks of remote content kept in memory, LRU, bounded by bytes. Keyed by a
 * content key (the content hash, or id + size + time when the hash is unknown) and the block index, so a
 * changed file never hits blocks of its former content.
 */
import { LRUCache } from 'lru-cache';

export interface BlockCacheOptions {
  /** Bytes kept at most. Default 64 MiB. */
  maxBytes?: number;
  /** Block size, bytes. Default 64 KiB. */
  blockSize?: number;
}

export class BlockCache {
  readonly blockSize: number;
  private readonly lru: LRUCache<string, Buffer>;
  readonly counters = { hits: 0, misses: 0 };

  constructor(opts: BlockCacheOptions = {}) {
    this.blockSize = opts.blockSize ?? 64 * 1024;
    const maxBytes = opts.maxBytes ?? 64 * 1024 * 1024;
    if (!Number.isInteger(this.blockSize) || this.blockSize < 512) throw new TypeError(`blockSize: expected a whole number of bytes >= 512, got ${opts.blockSize}`);
    if (!Number.isFinite(maxBytes) || maxBytes < 0) throw new TypeError(`maxBytes: expected a number of bytes >= 0, got ${opts.maxBytes}`);
    this.lru = new LRUCache<string, Buffer>({ maxSize: Math.max(1, maxBytes), sizeCalculation: (b) => Math.max(1, b.length) });
  }

  get(content: string, index: number): Buffer | undefined {
    const b = this.lru.get(`${content}:${index}`);
    if (b) this.counters.hits++;
    else this.counters.misses++;
    return b;
  }

  /** The block when held (counted, and kept fresh, as `get`); a miss is not counted. */
  peek(content: string, index: number): Buffer | undefined {
    const b = this.lru.get(`${content}:${index}`);
    if (b) this.counters.hits++;
    return b;
  }

  set(content: string, index: number, block: Buffer): void {
    this.lru.set(`${content}:${index}`, block);
  }

  clear(): void {
    this.lru.clear();
  }

  stats(): { blocks: number; bytes: number; hits: number; misses: number } {
    return { blocks: this.lru.size, bytes: this.lru.calculatedSize, ...this.counters };
  }
}
