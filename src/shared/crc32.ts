/**
 * CRC-32 (IEEE 802.3, the zlib/PNG polynomial) of upload blocks, as the unsigned 32-bit integer the
 * upload protocol's `x-svc-upload-crc` header carries. Shared by the client (which sends it) and the
 * embedded upload server (which checks it). Backed by zlib's native implementation (Node ≥ 20.15).
 */
import { crc32 as zlibCrc32 } from 'node:zlib';

/**
 * CRC-32 of `data`, continuing from `previous` (the CRC of the bytes before it; 0 to start), so a block
 * that arrives in chunks is checked without being held in memory whole.
 */
export function crc32(data: Uint8Array, previous = 0): number {
  return zlibCrc32(data, previous) >>> 0;
}

/** Parses a CRC header value: decimal text of an unsigned 32-bit integer. Undefined when malformed. */
export function parseCrc32(text: string): number | undefined {
  const t = text.trim();
  if (!/^\d{1,10}$/.test(t)) return undefined;
  const n = Number(t);
  return n <= 0xffffffff ? n : undefined;
}
