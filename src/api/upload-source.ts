/**
 * What an upload reads from: a size, perhaps a known SHA-1, and fresh streams of the bytes from any
 * offset (a resumed upload reopens at the offset the upload server expects). Plus the two streaming
 * readers the uploader needs: the SHA-1 of a whole source, and fixed-size blocks off one stream.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Readable } from 'node:stream';

export interface UploadSource {
  /** Size in bytes. */
  size: number;
  /** SHA-1 hex (40 lowercase characters) if already known. */
  filehash?: string;
  /** A fresh stream of the bytes from `start` to the end. */
  open(start: number): Readable;
}

const SHA1_RE = /^[0-9a-f]{40}$/;

/** Checks a SHA-1 hex text; returns it lowercased. */
export function checkSha1(text: string, what = 'filehash'): string {
  const lower = text.toLowerCase();
  if (!SHA1_RE.test(lower)) throw new TypeError(`${what}: expected a SHA-1 of 40 hex characters, got ${JSON.stringify(text)}`);
  return lower;
}

/** An UploadSource over a regular file. The size is the file's size now; a file that changes while it is read fails the upload. */
export async function fileSource(path: string, knownSha1?: string): Promise<UploadSource> {
  const filehash = knownSha1 === undefined ? undefined : checkSha1(knownSha1, 'knownSha1');
  const st = await stat(path);
  if (!st.isFile()) throw new TypeError(`upload source: expected a regular file, got ${st.isDirectory() ? 'a directory' : 'another kind of file'}`);
  // Reads of up to 1 MiB; a small file in one read of its size (plus one byte, to see that it grew).
  const highWaterMark = Math.min(1 << 20, Math.max(16 * 1024, st.size + 1));
  return {
    size: st.size,
    filehash,
    open: (start: number) => createReadStream(path, { start, highWaterMark }),
  };
}

/** An UploadSource over bytes held in memory (a small file the caller already has whole). */
export function bufferSource(data: Buffer, knownSha1?: string): UploadSource {
  const filehash = knownSha1 === undefined ? undefined : checkSha1(knownSha1, 'knownSha1');
  return { size: data.length, filehash, open: (start: number) => Readable.from([data.subarray(start)], { objectMode: false }) };
}

/** The SHA-1 of a source, streamed (never held in memory). Fails when the stream's length is not `source.size`. */
export async function sha1Of(source: UploadSource, signal?: AbortSignal): Promise<string> {
  const hash = createHash('sha1');
  let length = 0;
  const stream = source.open(0);
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      signal?.throwIfAborted();
      hash.update(chunk);
      length += chunk.length;
      if (length > source.size) break;
    }
  } finally {
    stream.destroy();
  }
  if (length !== source.size) throw new SourceChangedError(source.size, length);
  return hash.digest('hex');
}

/** The source's bytes are not what it declared (the file changed while being uploaded). */
export class SourceChangedError extends Error {
  constructor(readonly expected: number, readonly got: number) {
    super(`upload source changed while being read: expected ${expected} bytes, got ${got > expected ? 'more' : got}`);
    this.name = 'SourceChangedError';
  }
}

/**
 * Reads consecutive blocks of a stream into one reused buffer: the memory of an upload is one block,
 * whatever the file's size. A block is valid until the next `read`.
 */
export class BlockReader {
  private readonly iterator: AsyncIterator<Buffer>;
  private rest: Buffer | undefined;
  private readonly buffer: Buffer;

  constructor(private readonly stream: Readable, blockSize: number) {
    this.iterator = (stream as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
    this.buffer = Buffer.allocUnsafe(blockSize);
  }

  /** The next `length` bytes (at most the block size); fewer only when the stream ended. */
  async read(length: number): Promise<Buffer> {
    if (length > this.buffer.length) throw new RangeError(`block length: expected at most ${this.buffer.length}, got ${length}`);
    let filled = 0;
    while (filled < length) {
      let chunk = this.rest;
      this.rest = undefined;
      if (!chunk) {
        const next = await this.iterator.next();
        if (next.done) break;
        chunk = next.value;
      }
      const take = Math.min(chunk.length, length - filled);
      chunk.copy(this.buffer, filled, 0, take);
      filled += take;
      if (take < chunk.length) this.rest = chunk.subarray(take);
    }
    return this.buffer.subarray(0, filled);
  }

  /** True when bytes remain past what was read (used to notice a source that grew). */
  async hasMore(): Promise<boolean> {
    if (this.rest && this.rest.length > 0) return true;
    const next = await this.iterator.next();
    if (next.done) return false;
    this.rest = next.value;
    return next.value.length > 0 || this.hasMore();
  }

  close(): void {
    this.stream.destroy();
  }
}
