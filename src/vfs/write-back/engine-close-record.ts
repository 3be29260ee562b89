/**
 * The FUSE engine's close record: the one codec of the records the engine writes to its side logs before
 * it answers a close itself (native/fuse3/src/close_record.c writes them; the upload journal reads them
 * here and writes lines of its own from them). Golden records: test/fixtures/engine-close-records/.
 *
 * Format, version 1. Integers little-endian; lengths in bytes.
 *
 *   offset  size  field
 *   0       4     magic: 'E' 'C' 'R' and the format's version (0x01)
 *   4       1     kind: 1 = an answered close (the whole content of a new file)
 *   5       1     0
 *   6       2     L: the library's name length
 *   8       2     P: the path's length
 *   10      2     0
 *   12      4     D: the content's length (the file's size; at most 64 KiB)
 *   16      16    the journal id of the file's version: 16 lowercase hex digits (ASCII)
 *   32      8     the file's modification time, ns since the epoch (signed)
 *   40      8     when the record was made, ms since the epoch
 *   48      8     seq: the order of acknowledgement (µs, as the journal draws them)
 *   56      20    SHA-1 of the content
 *   76      L     the library's name (UTF-8)
 *   76+L    P     the library-relative path (UTF-8)
 *   76+L+P  D     the content
 *   then    8     check: the first 8 bytes of the SHA-1 of every byte above, from the magic on
 *
 * A record that does not match its check (cut short by a crash, or part of it refused by the disk) is
 * skipped; reading goes on at the next magic whose record matches its check.
 */
import { open } from 'node:fs/promises';
import { hash } from 'node:crypto';
import type { JournalEntry } from './journal-entry.js';

export interface EngineCloseRecord {
  id: string;
  library: string;
  fullpath: string;
  /** The file's modification time, ns since the epoch. */
  mtimeNs: bigint;
  createdMs: number;
  seq: number;
  /** SHA-1 of `data`, hex. */
  sha1: string;
  data: Buffer;
}

const MAGIC = Buffer.from('ECR\x01', 'latin1');
const KIND_CLOSE = 1;
const HEAD = 76;
const CHECK = 8;
/** Largest content a record carries (the engine answers the closes of files up to this size). */
export const CLOSE_RECORD_CONTENT_MAX = 64 * 1024;
const ID_RE = /^[0-9a-f]{16}$/;
/** Bytes read from a side log at once. */
const READ_CHUNK = 1024 * 1024;

/** The record's bytes for `r` (`sha1` is computed): as the engine writes it. For tests and fixtures. */
export function encodeCloseRecord(r: Omit<EngineCloseRecord, 'sha1'>): Buffer {
  const library = Buffer.from(r.library, 'utf8');
  const fullpath = Buffer.from(r.fullpath, 'utf8');
  if (library.length > 0xffff || fullpath.length > 0xffff || r.data.length > CLOSE_RECORD_CONTENT_MAX || !ID_RE.test(r.id)) {
    throw new RangeError('engine close record: a field does not fit the record');
  }
  const out = Buffer.alloc(HEAD + library.length + fullpath.length + r.data.length + CHECK);
  MAGIC.copy(out, 0);
  out[4] = KIND_CLOSE;
  out.writeUInt16LE(library.length, 6);
  out.writeUInt16LE(fullpath.length, 8);
  out.writeUInt32LE(r.data.length, 12);
  out.write(r.id, 16, 'latin1');
  out.writeBigInt64LE(r.mtimeNs, 32);
  out.writeBigUInt64LE(BigInt(r.createdMs), 40);
  out.writeBigUInt64LE(BigInt(r.seq), 48);
  hash('sha1', r.data, 'buffer').copy(out, 56);
  let at = HEAD;
  at += library.copy(out, at);
  at += fullpath.copy(out, at);
  at += r.data.copy(out, at);
  hash('sha1', out.subarray(0, at), 'buffer').copy(out, at, 0, CHECK);
  return out;
}

/**
 * The record at `at` in `buf`: `record` and its length when one whole record matching its check starts
 * there; `short` when `buf` ends before the record its header announces would (more bytes may complete
 * it); undefined when none starts there.
 */
function recordAt(buf: Buffer, at: number): { record: EngineCloseRecord; length: number } | 'short' | undefined {
  if (buf.length - at < MAGIC.length) return MAGIC.subarray(0, buf.length - at).equals(buf.subarray(at)) ? 'short' : undefined;
  if (buf.compare(MAGIC, 0, MAGIC.length, at, at + MAGIC.length) !== 0) return undefined;
  if (buf.length - at < HEAD) return 'short';
  if (buf[at + 4] !== KIND_CLOSE) return undefined;
  const libLen = buf.readUInt16LE(at + 6);
  const pathLen = buf.readUInt16LE(at + 8);
  const size = buf.readUInt32LE(at + 12);
  if (size > CLOSE_RECORD_CONTENT_MAX) return undefined;
  const end = at + HEAD + libLen + pathLen + size;
  if (buf.length < end + CHECK) return 'short';
  if (!hash('sha1', buf.subarray(at, end), 'buffer').subarray(0, CHECK).equals(buf.subarray(end, end + CHECK))) return undefined;
  const id = buf.toString('latin1', at + 16, at + 32);
  const createdMs = Number(buf.readBigUInt64LE(at + 40));
  const seq = Number(buf.readBigUInt64LE(at + 48));
  if (!ID_RE.test(id) || !Number.isSafeInteger(createdMs) || !Number.isSafeInteger(seq)) return undefined;
  const data = Buffer.from(buf.subarray(end - size, end));
  const sha1 = buf.toString('hex', at + 56, at + 76);
  if (hash('sha1', data, 'hex') !== sha1) return undefined;
  const record: EngineCloseRecord = {
    id,
    library: buf.toString('utf8', at + HEAD, at + HEAD + libLen),
    fullpath: buf.toString('utf8', at + HEAD + libLen, at + HEAD + libLen + pathLen),
    mtimeNs: buf.readBigInt64LE(at + 32),
    createdMs,
    seq,
    sha1,
    data,
  };
  return { record, length: end + CHECK - at };
}

/** The one record `buf` holds, exactly; undefined when it is not one whole record matching its check. */
export function decodeCloseRecord(buf: Buffer): EngineCloseRecord | undefined {
  const found = recordAt(buf, 0);
  return typeof found === 'object' && found.length === buf.length ? found.record : undefined;
}

/**
 * The records of `buf`, in order, and how many bytes at its end may be the start of a record not yet
 * whole (`rest`). Bytes that start no record are skipped up to the next magic.
 */
export function decodeCloseRecords(buf: Buffer, final: boolean): { records: EngineCloseRecord[]; rest: number } {
  const records: EngineCloseRecord[] = [];
  let at = 0;
  while (at < buf.length) {
    const found = recordAt(buf, at);
    if (found === 'short' && !final) return { records, rest: buf.length - at };
    if (typeof found === 'object') {
      records.push(found.record);
      at += found.length;
      continue;
    }
    // No record here (a torn one): on at the next magic.
    const next = buf.indexOf(MAGIC.subarray(0, 1), at + 1);
    at = next < 0 ? buf.length : next;
  }
  return { records, rest: 0 };
}

/** The records of side log `path`, in order, read in pieces (memory stays within a piece and a record). */
export async function* readCloseRecords(path: string): AsyncGenerator<EngineCloseRecord> {
  let fh;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  try {
    let pending = Buffer.alloc(0);
    for (;;) {
      const chunk = Buffer.allocUnsafe(READ_CHUNK);
      const { bytesRead } = await fh.read(chunk, 0, READ_CHUNK, null);
      const final = bytesRead === 0;
      const buf = pending.length > 0 ? Buffer.concat([pending, chunk.subarray(0, bytesRead)]) : chunk.subarray(0, bytesRead);
      const { records, rest } = decodeCloseRecords(buf, final);
      for (const r of records) yield r;
      if (final) return;
      pending = Buffer.from(buf.subarray(buf.length - rest));
    }
  } finally {
    await fh.close();
  }
}

/** The journal's entry of the version a record closed (its bytes are the record's `data`). */
export function closeRecordEntry(r: EngineCloseRecord): JournalEntry {
  return { id: r.id, library: r.library, fullpath: r.fullpath, size: r.data.length, mtimeMs: Number(r.mtimeNs / 1_000_000n), createdMs: r.createdMs, seq: r.seq, sha1: r.sha1 };
}
