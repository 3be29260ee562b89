/**
 * Sets of byte ranges `[start, end)`, kept sorted and merged: which parts of a file are present in a
 * local copy (ContentCache, LocalFile). And bytes held as a list of pieces (as they arrived from the
 * network), walked without joining them.
 */
export type ByteRange = [start: number, end: number];

/** True when `[start, end)` lies inside one range of the set. */
export function covers(ranges: readonly ByteRange[], start: number, end: number): boolean {
  if (end <= start) return true;
  return ranges.some(([s, e]) => s <= start && e >= end);
}

/** The set with `[start, end)` added. */
export function addRange(ranges: readonly ByteRange[], start: number, end: number): ByteRange[] {
  if (end <= start) return ranges.map(([s, e]) => [s, e]);
  const all = [...ranges, [start, end] as ByteRange].sort((a, b) => a[0] - b[0]);
  const out: ByteRange[] = [];
  for (const r of all) {
    const last = out[out.length - 1];
    if (last && r[0] <= last[1]) last[1] = Math.max(last[1], r[1]);
    else out.push([r[0], r[1]]);
  }
  return out;
}

/** The set cut at `size` (nothing at or after it). */
export function clipRanges(ranges: readonly ByteRange[], size: number): ByteRange[] {
  return ranges.filter(([s]) => s < size).map(([s, e]) => [s, Math.min(e, size)]);
}

/** The parts of `[start, end)` not in the set, in order. */
export function gaps(ranges: readonly ByteRange[], start: number, end: number): ByteRange[] {
  const out: ByteRange[] = [];
  let at = start;
  for (const [s, e] of ranges) {
    if (e <= at) continue;
    if (s >= end) break;
    if (s > at) out.push([at, Math.min(s, end)]);
    at = Math.max(at, e);
    if (at >= end) break;
  }
  if (at < end) out.push([at, end]);
  return out;
}

/** Total bytes in the set. */
export function rangeBytes(ranges: readonly ByteRange[]): number {
  return ranges.reduce((n, [s, e]) => n + (e - s), 0);
}

/** The pieces less their first `n` bytes. */
export function skipBytes(parts: readonly Buffer[], n: number): Buffer[] {
  const out: Buffer[] = [];
  for (const p of parts) {
    if (n >= p.length) { n -= p.length; continue; }
    out.push(n > 0 ? p.subarray(n) : p);
    n = 0;
  }
  return out;
}
