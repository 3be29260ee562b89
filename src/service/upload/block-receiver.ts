/**
 * Streams one upload block from a request body into the temporary file at its offset, computing its
 * CRC-32 and continuing the file's SHA-1 on the way. Memory stays bounded by one write batch. On any
 * failure (short or long body, CRC mismatch, cut connection) the file is truncated back to the block's
 * start, so the temporary file only ever holds accepted blocks.
 */
import type { Hash } from 'node:crypto';
import { open } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { crc32 } from '../../shared/crc32.js';
import { UploadError, UploadErrorCode } from './errors.js';
import type { StagedUploads } from '../store/staged-uploads.js';

export interface BlockSpec {
  /** Offset of the block's first byte (= current length of the temporary file). */
  start: number;
  /** Length the `upload-range` header declares. */
  length: number;
  /** CRC-32 the client declared, if any. */
  crc?: number;
}

/** Bytes gathered before one positional write (fewer system calls than one write per socket chunk). */
const WRITE_BATCH = 1 << 20;

/**
 * Receives the block; returns the SHA-1 state continued over it (the `hash` given is not modified).
 * Throws UploadError 40001/40002 on a bad block; rethrows the body's error when the connection is cut.
 */
export async function receiveBlock(body: Readable, partPath: string, block: BlockSpec, hash: Hash): Promise<Hash> {
  const next = hash.copy();
  const fh = await open(partPath, 'r+');
  let received = 0;
  let crc = 0;
  let ok = false;
  try {
    let batch: Buffer[] = [];
    let batchBytes = 0;
    let position = block.start;
    const flush = async () => {
      if (batchBytes === 0) return;
      await fh.writev(batch, position);
      position += batchBytes;
      batch = [];
      batchBytes = 0;
    };
    for await (const chunk of body) {
      const buf = chunk as Buffer;
      received += buf.length;
      if (received > block.length) break;
      crc = crc32(buf, crc);
      next.update(buf);
      batch.push(buf);
      batchBytes += buf.length;
      if (batchBytes >= WRITE_BATCH) await flush();
    }
    if (received !== block.length) {
      throw new UploadError(400, UploadErrorCode.RangeLengthMismatch,
        `range length mismatch: received ${received > block.length ? `more than ${block.length}` : received} bytes, expected ${block.length}`,
        { received, expected: block.length });
    }
    if (block.crc !== undefined && block.crc !== crc) {
      throw new UploadError(400, UploadErrorCode.CrcMismatch, `CRC mismatch: received ${block.crc}, expected ${crc} (computed from the block)`,
        { received: block.crc, expected: crc });
    }
    await flush();
    ok = true;
    return next;
  } finally {
    if (!ok) await fh.truncate(block.start).catch(() => undefined);
    await fh.close();
  }
}

/** Stages the block read from `body` for `session` (received and checked as receiveBlock does); returns `hash` continued over it. */
export function stageBlock(staging: StagedUploads, session: string, body: Readable, block: BlockSpec, hash: Hash): Promise<Hash> {
  return staging.append(session, block.start, block.length, (file, at) => receiveBlock(body, file, { ...block, start: at }, hash));
}
