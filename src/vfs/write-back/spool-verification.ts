/**
 * Replay's check of a sealed version: before a journaled version is uploaded again, its spool must be
 * what its record names. A record names its content by size and SHA-1 (hashed streaming, in a worker:
 * memory stays bounded), or, for a file the kernel wrote itself (passthrough), by size and the spool's
 * mark (`SpoolMark`: its mtime and ctime in ns and its inode, read by one fstat at the seal, no byte read,
 * so a close never waits for a pass over a large file). A write to a file moves its ctime (and its mtime),
 * and Linux gives the change after a stat of the file a time of its own (multigrain timestamps), so a
 * spool changed after its seal no longer shows its mark. A spool that is not what its record names (its
 * bytes lost to a power loss, or changed after its record) is never uploaded as that version.
 */
import { readFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { JournalEntry } from './journal-entry.js';

interface Hasher { hash(path: string): Promise<{ sha1: string; size: number }> }

/**
 * A spool as one fstat showed it (decimal strings: JSON has no 64-bit integers). `boot`: the boot its
 * record was written in while the spool's bytes were not durable yet (unsynced-marks.ts).
 */
export interface SpoolMark {
  mtimeNs: string;
  ctimeNs: string;
  ino: string;
  boot?: string;
}

let bootId: string | undefined;

/** This boot of the machine (Linux's boot_id); `unknown` where there is none (never matches a record's). */
export function currentBootId(): string {
  if (bootId === undefined) {
    try {
      bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || 'unknown';
    } catch {
      bootId = 'unknown';
    }
  }
  return bootId;
}

/** The mark of what a bigint stat of a spool shows. */
export function spoolMarkOf(st: { mtimeNs: bigint; ctimeNs: bigint; ino: bigint }): SpoolMark {
  return { mtimeNs: String(st.mtimeNs), ctimeNs: String(st.ctimeNs), ino: String(st.ino) };
}

/** A record's mark, when it is one (records are read from disk: anything else is none). */
export function validSpoolMark(m: unknown): SpoolMark | undefined {
  if (typeof m !== 'object' || m === null) return undefined;
  const { mtimeNs, ctimeNs, ino, boot } = m as Record<string, unknown>;
  const digits = (x: unknown): x is string => typeof x === 'string' && /^[0-9]{1,24}$/.test(x);
  if (!digits(mtimeNs) || !digits(ctimeNs) || !digits(ino)) return undefined;
  if (boot === undefined) return { mtimeNs, ctimeNs, ino };
  return typeof boot === 'string' ? { mtimeNs, ctimeNs, ino, boot } : undefined;
}

/** How replay can tell `entry`'s content: its SHA-1, its spool's mark, or nothing (an fsync's record of an open file). */
export function verifiableBy(entry: Pick<JournalEntry, 'sha1' | 'spoolMark' | 'open'>): 'sha1' | 'mark' | undefined {
  if (entry.sha1 !== undefined) return 'sha1';
  if (entry.open) return undefined;
  return entry.spoolMark !== undefined ? 'mark' : undefined;
}

/**
 * The spool at `path` holds the content `entry` names: its size and SHA-1 when the record has one, else
 * its size and mark, a mark of a spool not durable yet only in the boot it was written in (`boot`: this
 * one); a record without either matches nothing; false when unreadable.
 */
export async function spoolMatches(hasher: Hasher, path: string, entry: Pick<JournalEntry, 'size' | 'sha1' | 'spoolMark'>, boot = currentBootId()): Promise<boolean> {
  if (entry.sha1 !== undefined) {
    const h = await hasher.hash(path).catch(() => undefined);
    return h !== undefined && h.size === entry.size && h.sha1 === entry.sha1;
  }
  const mark = validSpoolMark(entry.spoolMark);
  if (!mark || (mark.boot !== undefined && mark.boot !== boot)) return false;
  const st = await stat(path, { bigint: true }).catch(() => undefined);
  if (!st || st.size !== BigInt(entry.size)) return false;
  const now = spoolMarkOf(st);
  return now.mtimeNs === mark.mtimeNs && now.ctimeNs === mark.ctimeNs && now.ino === mark.ino;
}
