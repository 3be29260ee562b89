/**
 * The grant of a content cache file to a front end whose kernel reads it itself (LeasedHandle.localFile,
 * FUSE passthrough of read-only opens): the rules are the Vfs's, the front end only asks. A read handle
 * gets one only when
 * - it reads the service's version of the file (no local version: nothing written here is pending),
 * - the file is pinned (kept on this machine), and that version's content is wholly on disk in the
 *   content cache (a write open of the file is refused while the kernel reads it: the kernel takes every
 *   open of an inode through its one backing file; pins keep that to files the user chose),
 * - the cache keeps what it holds (a budget: the grant holds the content, so it is never evicted while the
 *   kernel reads it; a complete content's file is never written again, and a new version of the file is
 *   another content, another file).
 * A change made elsewhere later makes new opens read the new version; the grant keeps what was opened.
 */
import type { ContentCache } from './content-cache.js';
import type { CacheFileGrant } from './engine-lease.js';

export interface CacheFileGrantSource {
  disk: ContentCache | undefined;
  /** Holds a content against eviction until the answer is called (CacheBudget.hold); undefined: nothing can hold it. */
  hold: ((contentHash: string) => (() => void) | undefined) | undefined;
}

/** What is asked about the handle's file when the grant is decided. */
export interface GrantedVersion {
  contentHash: string | undefined;
  size: number;
  /** The file is pinned (PinnedContent). */
  pinned: boolean;
  /** True when the file has a local version (written here, pending or being written). */
  hasLocalVersion: () => boolean;
}

/** The cache file `file` may be read from in place of its handle, held; undefined when the rules say no. */
export async function grantCacheFile(src: CacheFileGrantSource, file: GrantedVersion): Promise<CacheFileGrant | undefined> {
  const hash = file.contentHash;
  if (!src.disk || !src.hold || !hash || !file.pinned || !(file.size > 0) || file.hasLocalVersion()) return undefined;
  // Held before the file is looked at: from here on no eviction takes it.
  const unhold = src.hold(hash);
  if (!unhold) return undefined;
  let fd: number | undefined;
  try {
    fd = await src.disk.wholeFile(hash, file.size);
  } catch {
    fd = undefined;
  }
  if (fd === undefined || file.hasLocalVersion()) {
    unhold();
    return undefined;
  }
  let ended = false;
  return {
    fd,
    content: hash,
    end: () => {
      if (ended) return;
      ended = true;
      unhold();
    },
  };
}
