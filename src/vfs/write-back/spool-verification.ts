/**
 * Replay's check of a sealed version: before a journaled version is uploaded again, its spool must be
 * what its record names, size and SHA-1 both (hashed streaming, in a worker: memory stays bounded). A
 * spool that is not (its bytes lost to a power loss, or changed after its record) is never uploaded as
 * that version.
 */
import type { JournalEntry } from './journal-entry.js';

interface Hasher { hash(path: string): Promise<{ sha1: string; size: number }> }

/** The spool at `path` holds the content `entry` names (its size and SHA-1); false when unreadable. */
export async function spoolMatches(hasher: Hasher, path: string, entry: Pick<JournalEntry, 'size' | 'sha1'>): Promise<boolean> {
  if (entry.sha1 === undefined) return false;
  const h = await hasher.hash(path).catch(() => undefined);
  return h !== undefined && h.size === entry.size && h.sha1 === entry.sha1;
}
