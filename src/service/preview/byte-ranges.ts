/** The `Range` request header of a single byte range (RFC 9110 §14), as media players and pdf.js send it. */
import type { ByteRange } from './types.js';

/**
 * The range a `Range` header asks of a `size`-byte body: `undefined` to answer the whole body (no
 * header, another unit, or several ranges, which a server may ignore), `'unsatisfiable'` for a range
 * outside the body (416), else the inclusive range clipped to the body.
 */
export function requestedRange(header: string | undefined, size: number): ByteRange | 'unsatisfiable' | undefined {
  if (!header) return undefined;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m) return /^\s*bytes\s*=.*,/i.test(header) || !/^\s*bytes\s*=/i.test(header) ? undefined : 'unsatisfiable';
  const [, a, b] = m as unknown as [string, string, string];
  if (a === '' && b === '') return 'unsatisfiable';
  if (a === '') {
    // suffix: the last b bytes
    const n = Number(b);
    if (n === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  if (start >= size || (b !== '' && Number(b) < start)) return 'unsatisfiable';
  return { start, end };
}
