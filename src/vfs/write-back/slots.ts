/**
 * WriteBackSlots: the state the write-back's layers share, and its path slots — what each path holds
 * locally (see write-back.ts for the layers and their rules) — indexed by folder for listings.
 */
import { ConflictKeeper, type Conflict } from './conflicts.js';
import { keyOf } from './path-key.js';
import type { Logger } from '../../shared/log.js';
import type { FileHasher } from './file-hasher.js';
import type { ForegroundActivity } from '../foreground-activity.js';
import type { DiskFaults } from '../disk-faults.js';
import { LocalVersion, UnwrittenSpools } from './local-version.js';
import type { RangeReader } from '../range-reader.js';
import { baseName, isWithin, parentOf, type Remote, type RemoteEntry } from '../remote.js';
import type { Sha1Streams } from './sha1-streams.js';
import { UploadJournal } from './upload-journal.js';
import type { JournalEntry } from './journal-entry.js';
import { UploadQueue, type UploadStatus } from './upload-queue.js';
import type { Attr, CallContext } from '../types.js';
import { systemClock, type Clock, type ClockTimer } from '../clock.js';


export interface WriteBackHost {
  remoteFor(library: string): Remote | undefined;
  /** A reader of a service version (read-ahead), for reads through a write handle before any change. */
  baseReader(library: string, base: RemoteEntry, ctx?: CallContext): RangeReader;
  /** The service confirmed a version: its entry is shown from now on, with the time programs saw. */
  uploaded(library: string, entry: RemoteEntry, mtimeMs: number): void;
  /** Recreates missing parent folders of a pending upload. */
  ensureParents(library: string, fullpath: string): Promise<void>;
  /** A deferred delete was done on the service: the path's cached entry goes. */
  deleted(library: string, fullpath: string): void;
  /** Attributes of a local entry, as the namespace shows them. */
  attrOf(library: string, entry: RemoteEntry): Attr;
  /** A file that stays on the gateway (an Office lock file): one found in the journal is never uploaded. */
  gatewayOnly?(library: string, fullpath: string): boolean;
}

export interface WriteBackOptions {
  journalDir: string;
  /** The time of versions, journal entries and the write-back delay. Default the real one. */
  clock?: Clock;
  /**
   * When a version is safe against power loss. `group` (default): close() journals to the page cache
   * (safe against a crash of the gateway) and a group commit fsyncs within `groupCommitMs`; fsync,
   * flushAll and `ctl flush` fsync at once. `close`: every close fsyncs.
   */
  durability?: { mode?: 'group' | 'close'; groupCommitMs?: number };
  hasher: FileHasher;
  sha1Streams: Sha1Streams;
  /** `delayMs`: the write-back delay (see GatewayVfsOptions.upload). */
  upload?: { concurrency?: number; smallConcurrency?: number; retryBaseMs?: number; retryMaxMs?: number; delayMs?: number; refusedRetryMs?: number; answerWaitMs?: number };
  /** While applications are served, the uploads give way (UploadQueueOptions.foreground). */
  foreground?: Pick<ForegroundActivity, 'busy'>;
  /** See GatewayVfsOptions.unwrittenSpoolBytes. Default 16 MiB. */
  unwrittenSpoolBytes?: number;
  /** Existing files opened for writing: up to `wholeMaxBytes` fetched whole at the first change; larger ones on demand. */
  partialFetch?: { wholeMaxBytes?: number; chunkBytes?: number };
  host: WriteBackHost;
  logger: Logger;
  /** Injected disk failures (tests). */
  diskFaults?: DiskFaults;
  /**
   * Refuses (throws EFBIG / ENOSPC) a version of `size` bytes where the service's had `oldSize`: asked
   * before a version is sealed or an fsync records it, so bytes no handle's write saw (the FUSE engine's,
   * the kernel's) are held to the same limits; the version then fails whole.
   */
  sizeCheck?: (library: string, fullpath: string, size: number, oldSize: number) => Promise<void>;
}

export interface PathSlot {
  library: string;
  fullpath: string;
  /** What reads of the path see (the last change or acknowledgement), while there is a local version. */
  current?: LocalVersion;
  /** The newest acknowledged version the service does not have yet. */
  acked?: LocalVersion;
  /**
   * The place in the order of the newest version installed here, uploaded or not: one sealed later with an
   * earlier place (a seal the write-back decided before a replace) is superseded at once.
   */
  newestSeq?: number;
  /** The write handles' shared open version. */
  session?: WriteSession;
  /**
   * Read handles following the file (FollowedFile). While there are any, the slot stays, and so does the
   * last version it showed once the service has it: the path shows the service's version again (another
   * client may change it), the followers go on with that one (`followed`, pinned by the slot).
   */
  followers?: number;
  followed?: LocalVersion;
  /**
   * A version of the path was handed to the uploader in this run: the service may have some of its
   * lineage, whatever the versions made since say (one made from a version still held by the write-back
   * delay was made unsent, and stays so when that one is sent). Moves with the slot on a rename.
   */
  sent?: boolean;
}

/** The open version of a path, shared by its write handles. */
export interface WriteSession {
  slot: PathSlot;
  /** What the handles read and write; replaced by a clone when it was journaled and is changed again. */
  version: LocalVersion;
  writers: number;
  /** Handles open (readers of the session included). */
  handles: number;
  /** Unlinked while open: what is written is never journaled. */
  deleted: boolean;
  /** A change waiting for the clone of a journaled version (concurrent writes wait for the same one). */
  cloning?: Promise<LocalVersion>;
  /** Reads of the service version while nothing is changed (read-ahead). */
  baseReader?: RangeReader;
  /** The next look at whether the version stayed unchanged after an fsync (uploadWhenQuiet). */
  quiet?: ClockTimer;
  /** Changed since a writer's last flush, fsync or close (a seal of the write-back's own is none). */
  unflushed?: boolean;
  /**
   * Another version (a replace) was acknowledged at the path since the session's last change. The path
   * shows that one, or nothing local once it is uploaded: the writers' next flush acknowledges theirs after it.
   */
  replaced?: boolean;
  /**
   * The version this session handed to the kernel (passthrough) and its generation at the writers' last
   * flush, fsync or close (before any: at the hand-over): the kernel's writes since, which pass through no
   * change(), are unflushed too, also once the hand-over ended.
   */
  flushedLive?: { version: LocalVersion; generation: number };
  /**
   * The journaling of the kernel's last writes that the end of its hand-over started (passthroughEnded):
   * the writers' flush or close that follows waits for it, and finds those writes journaled.
   */
  handOverEnded?: Promise<void>;
}

export interface WriteBackStatus {
  uploads: UploadStatus[];
  stranded: { id: string; library: string; fullpath: string }[];
  localFiles: number;
  /** Conflicts found in this run (conflicts.ts). */
  conflicts: Conflict[];
}

export abstract class WriteBackSlots {
  /** The service confirmed version `v` (WriteBackSeals). */
  protected abstract uploadedVersion(v: LocalVersion, entry: RemoteEntry): Promise<void>;
  /** The service answered a commit of `v` after its upload was cancelled (WriteBackSeals). */
  protected abstract committedAfterCancel(v: LocalVersion, entry: RemoteEntry, snapshot: { generation: number; fullpath: string }): Promise<void>;

  protected readonly journal: UploadJournal;
  readonly uploads: UploadQueue;
  protected readonly conflicts: ConflictKeeper;
  protected readonly slots = new Map<string, PathSlot>();
  /** Replaces whose bytes are still being written (`library\0fullpath`): not yet in a slot, yet of its lineage. */
  protected readonly replacing = new Map<string, Set<LocalVersion>>();
  /**
   * Versions being journaled (`library\0fullpath`, from journalVersion to their install or drop). A seal
   * the write-back delay decided before a replace is ordered before it; the replace's entry stays until
   * such a seal ended (uploadedVersion).
   */
  protected readonly sealingAt = new Map<string, Set<LocalVersion>>();
  /** Slots by folder (`library\0parent`), for listings: no scan of every slot per readdir. */
  protected readonly byFolder = new Map<string, Set<PathSlot>>();
  protected readonly stranded: JournalEntry[] = [];
  /** Folders made while their library was offline (`library\0fullpath`): journaled, made on the service when it is back. */
  protected readonly pendingFolders = new Map<string, { id: string; library: string; entry: RemoteEntry }>();
  /** Deletes of files that handles still read (`library\0fullpath`): journaled, done when the last one closes. */
  protected readonly pendingDeletes = new Map<string, { id: string; library: string; fullpath: string; objectId: string; ready: boolean; contentHash?: string }>();
  /** Paths whose deferred delete a new file cancelled: the content hash it replaces there without a conflict. */
  protected readonly replacedObjects = new Map<string, string>();
  /** The folder creation under way per library (one at a time). */
  protected readonly makingFolders = new Map<string, Promise<void>>();
  protected lastSeq = 0;
  /** Timers of the write-back delay (on `clock`), cancelled at close. */
  protected readonly holdTimers = new Set<ClockTimer>();
  /** The time of versions, entries and the write-back delay (WriteBackOptions.clock). */
  protected readonly clock: Clock;
  protected readonly syncOnClose: boolean;
  protected closed = false;
  /** Sealed small files whose spools wait in memory until needed (the upload, a reader), bounded. */
  protected readonly unwritten: UnwrittenSpools;

  constructor(protected readonly opts: WriteBackOptions) {
    this.clock = opts.clock ?? systemClock;
    this.journal = new UploadJournal(opts.journalDir, opts.durability?.groupCommitMs ?? 1000, { clock: this.clock });
    this.syncOnClose = opts.durability?.mode === 'close';
    this.unwritten = new UnwrittenSpools(opts.unwrittenSpoolBytes ?? 16 * 1024 * 1024);
    this.conflicts = new ConflictKeeper({ logger: opts.logger, now: () => this.clock.now(), copied: (library, entry) => opts.host.uploaded(library, entry, entry.mtimeMs) });
    this.uploads = new UploadQueue({
      concurrency: opts.upload?.concurrency, smallConcurrency: opts.upload?.smallConcurrency, retryBaseMs: opts.upload?.retryBaseMs, retryMaxMs: opts.upload?.retryMaxMs, refusedRetryMs: opts.upload?.refusedRetryMs, answerWaitMs: opts.upload?.answerWaitMs,
      hasher: opts.hasher, logger: opts.logger, foreground: opts.foreground, clock: this.clock,
      remoteFor: (name) => opts.host.remoteFor(name),
      onCommitted: (file, entry) => this.uploadedVersion(file as LocalVersion, entry),
      onCommittedAfterCancel: (file, entry, snapshot) => this.committedAfterCancel(file as LocalVersion, entry, snapshot),
      onMissingParent: (file) => opts.host.ensureParents(file.library, file.fullpath),
      commit: (file, remote, fullpath, source, o, retry) => {
        const v = file as LocalVersion;
        // A commit sent before (this upload's failed attempt, or one cancelled by a rename) may have landed.
        const sent = retry || v.commitSent;
        v.commitSent = true;
        return this.conflicts.commit(v, remote, fullpath, source, o, { retry: sent });
      },
    });
  }

  /**
   * What `slot` shows its followers while the slot is the path's (not removed or replaced): its local
   * version, or the last one it showed, uploaded since.
   */
  shownTo(slot: PathSlot): LocalVersion | undefined {
    return this.slots.get(keyOf(slot.library, slot.fullpath)) === slot ? slot.current ?? slot.followed : undefined;
  }

  protected versionsOf(slot: PathSlot): LocalVersion[] {
    return [...new Set([slot.current, slot.acked, slot.session?.version, slot.followed].filter((v): v is LocalVersion => !!v))];
  }

  protected slotFor(library: string, fullpath: string): PathSlot {
    const key = keyOf(library, fullpath);
    let slot = this.slots.get(key);
    if (!slot) {
      slot = { library, fullpath };
      this.slots.set(key, slot);
      this.index(slot);
    }
    return slot;
  }

  /**
   * The slot of a path where a new file is made (no file was there): read handles of an earlier file at
   * that path (deleted by another client of the service) do not follow the new one.
   */
  protected slotForNew(library: string, fullpath: string): PathSlot {
    const slot = this.slots.get(keyOf(library, fullpath));
    if (slot && (slot.followers ?? 0) > 0 && !slot.current && !slot.acked && !slot.session) {
      this.slots.delete(keyOf(library, fullpath));
      this.unindex(slot);
    }
    return this.slotFor(library, fullpath);
  }

  /** Forgets a slot that holds nothing any more. */
  protected tidy(slot: PathSlot): void {
    if (slot.current || slot.acked || slot.session || (slot.followers ?? 0) > 0) return;
    const key = keyOf(slot.library, slot.fullpath);
    if (this.slots.get(key) === slot) this.slots.delete(key);
    this.unindex(slot);
  }

  /**
   * The slots at and below `fullpath` in `library`: the one at it, and those of every folder at or below
   * it, found through the folder index (a rename or delete of one file does not look at every slot).
   */
  protected slotsWithin(library: string, fullpath: string): PathSlot[] {
    const found = new Set<PathSlot>();
    const at = this.slots.get(keyOf(library, fullpath));
    if (at) found.add(at);
    const prefix = keyOf(library, '');
    for (const [k, set] of this.byFolder) {
      if (k.startsWith(prefix) && isWithin(k.slice(prefix.length), fullpath)) for (const slot of set) found.add(slot);
    }
    return [...found];
  }

  protected index(slot: PathSlot): void {
    const k = keyOf(slot.library, parentOf(slot.fullpath));
    let set = this.byFolder.get(k);
    if (!set) this.byFolder.set(k, (set = new Set()));
    set.add(slot);
  }

  protected unindex(slot: PathSlot): void {
    const k = keyOf(slot.library, parentOf(slot.fullpath));
    const set = this.byFolder.get(k);
    set?.delete(slot);
    if (set?.size === 0) this.byFolder.delete(k);
  }
}

/** The entry of a folder made offline (its id says it is only local). */
export function folderEntry(id: string, fullpath: string, mtimeMs: number): RemoteEntry {
  return { id: `local:${id}`, fullpath, name: baseName(fullpath), isDir: true, size: 0, mtimeMs, ctimeMs: mtimeMs };
}

/** The entry of a local version, as lookups and listings show it. */
export function entryOf(v: LocalVersion): RemoteEntry {
  v.refreshLive();
  return {
    id: v.base?.id ?? `local:${v.id}`, fullpath: v.fullpath, name: baseName(v.fullpath), isDir: false,
    // Once journaled, the content's hash is known before the upload: entity tags stay the same across it.
    size: v.size, contentHash: v.mutable ? undefined : v.currentSha1() ?? (v.state === 'uploaded' ? v.base?.contentHash : undefined),
    mtimeMs: v.mtimeMs, ctimeMs: v.ctimeMs, tags: v.base?.tags, locked: v.base?.locked, lastModifiedBy: v.operator?.opName ?? v.base?.lastModifiedBy,
  };
}

export { keyOf };

export function gatewayPath(library: string, fullpath: string): string {
  return fullpath === '' ? `/${library}` : `/${library}/${fullpath}`;
}

/** A version with no bytes, all of them local (nothing left to fetch). */
/** A version was installed at the slot's path after `v` (a replace): `v` is no longer its newest. */
export function installedSince(slot: PathSlot, v: LocalVersion): boolean {
  return (slot.newestSeq ?? 0) > v.seq;
}

export function isEmpty(v: LocalVersion): boolean {
  return v.size === 0 && v.baseReady;
}
