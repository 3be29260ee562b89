/**
 * GatewayStatus: what the gateway is doing, in one object (the control socket's `status`, the status
 * page): each library online or offline and its uploads waiting, the uploads, journal entries of
 * libraries not served, open conflicts, the feeds, the caches and the pins.
 */
import type { BlockCache } from './block-cache.js';
import type { ContentCache } from './content-cache.js';
import type { Connectivity, LibraryConnectivity } from './connectivity.js';
import type { LibraryFolders } from './library-folders.js';
import type { MetadataCache } from './metadata-cache.js';
import type { PinnedContent, PinStatus } from './pinned-content.js';
import type { UpdatesFeedStatus } from './updates-feed.js';
import type { Conflict, UploadStatus, WriteBack } from './write-back/index.js';

export interface GatewayStatus {
  /** Per library: online, or offline since when (serving what it has), and its uploads waiting. */
  libraries: (LibraryConnectivity & { pendingUploads: number })[];
  uploads: UploadStatus[];
  /** Journal entries whose library is not configured (kept, not uploaded). */
  stranded: { id: string; library: string; fullpath: string }[];
  /** Open conflicts found in this run: the other side kept as a copy (until it is removed or renamed), or a file deleted elsewhere brought back (conflicts.ts). */
  conflicts: Conflict[];
  feeds: UpdatesFeedStatus[];
  localFiles: number;
  metadata: ReturnType<MetadataCache['stats']>;
  blocks: ReturnType<BlockCache['stats']>;
  disk?: ReturnType<ContentCache['stats']>;
  /** Files kept on this machine (pins): bytes, what is still being fetched, errors. */
  pins?: PinStatus;
}

/** The parts of a gateway its status is read from. */
export interface GatewayParts {
  writeBack: WriteBack;
  cache: MetadataCache;
  libs: LibraryFolders;
  connectivity: Connectivity;
  blocks: BlockCache;
  disk: ContentCache | undefined;
  pins: PinnedContent | undefined;
}

export function gatewayStatus(p: GatewayParts): GatewayStatus {
  // A conflict copy known gone (removed or renamed) closes its conflict.
  const wb = p.writeBack.status((name, fullpath) => p.cache.getEntry(name, fullpath) === null);
  return {
    libraries: p.libs.all().map((l) => ({ ...p.connectivity.of(l.name), pendingUploads: wb.uploads.filter((u) => u.library === l.name).length })),
    uploads: wb.uploads,
    stranded: wb.stranded,
    pins: p.pins?.status(),
    conflicts: wb.conflicts,
    feeds: p.libs.feedStatus(),
    localFiles: wb.localFiles,
    metadata: p.cache.stats(),
    blocks: p.blocks.stats(),
    disk: p.disk?.stats(),
  };
}
