/**
 * WriteBack: the one owner of the gateway's local file versions — their spools, the upload journal and
 * the upload queue. The namespace (GatewayVfs) asks it what a path holds locally and hands it every
 * write; nothing else changes a version's state.
 *
 * Per path there is a slot:
 * - `session`: the open version shared by the path's write handles (POSIX: one file, many descriptors).
 *   What it holds becomes a version when a writer flushes, fsyncs or closes.
 * - `current`: what reads of the path see, the version of the last change or the last acknowledgement.
 * - `acked`: the newest acknowledged version the service does not have yet. Its journal entry is on disk.
 *
 * Rules (docs/semantics.md has each with its test):
 * - A journaled version is immutable. A change after it is made in a new version, cloned from it (reflink
 *   where the file system has one, else a copy) or empty when the change truncates.
 * - An older acknowledged version stays journaled until a newer one is (then its upload is cancelled and
 *   its entry removed): at any moment the journal holds the last acknowledged content of every path.
 * - A replace (WebDAV PUT, `writeFile`) writes a version of its own, invisible until complete; a cut-off
 *   source leaves nothing behind. The last complete one to be acknowledged wins.
 * - A version is uploaded when no writer has it open any more, or when one fsyncs it (or flushAll asks):
 *   an intermediate state nobody meant to keep (`echo x > f` flushes an empty file first) never reaches
 *   the service, yet every acknowledged state is in the journal.
 * - A failed write, truncate, fetch or journaling fails the version: it is never journaled, its spool is
 *   removed with its last user, and the path shows the last acknowledged version again (or nothing).
 *
 * Lock order: none. Every state change below happens on the event loop with no await between the decision
 * and the change (each such place says so), so an open from then on finds a consistent slot.
 */
import { createReadStream, statSync } from 'node:fs';
import { copyFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { Logger } from '../shared/log.js';
import type { FileHasher } from './file-hasher.js';
import type { ForegroundActivity } from './foreground-activity.js';
import { fsErrorOf } from './fs-errors.js';
import type { DiskFaults } from './disk-faults.js';
import { LocalVersion, UnwrittenSpools } from './local-version.js';
import type { RangeReader } from './range-reader.js';
import { baseName, isWithin, parentOf, type Remote, type RemoteEntry } from './remote.js';
import type { Sha1Stream, Sha1Streams } from './sha1-streams.js';
import { INLINE_MAX_BYTES, UploadJournal, orderOf, type JournalEntry } from './upload-journal.js';
import { UploadQueue, type UploadStatus } from './upload-queue.js';
import { baseAfter, baseOf, baseUploaded, ConflictKeeper, NEW_FILE, type Conflict, type ConflictBase } from './conflicts.js';
import { VfsError, type Attr, type CallContext, type DirectSpool, type EngineClose, type FileHandle, type LocalRange, type OpenFlags, type PassthroughSpool, type SideJournal } from './types.js';

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
}

export interface WriteBackOptions {
  journalDir: string;
  /**
   * When a version is safe against power loss. `group` (default): close() journals to the page cache
   * (safe against a crash of the gateway) and a group commit fsyncs within `groupCommitMs`; fsync,
   * flushAll and `ctl flush` fsync at once. `close`: every close fsyncs.
   */
  durability?: { mode?: 'group' | 'close'; groupCommitMs?: number };
  hasher: FileHasher;
  sha1Streams: Sha1Streams;
  /** `delayMs`: the write-back delay (see GatewayVfsOptions.upload). */
  upload?: { concurrency?: number; smallConcurrency?: number; retryBaseMs?: number; retryMaxMs?: number; delayMs?: number; refusedRetryMs?: number };
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

interface PathSlot {
  library: string;
  fullpath: string;
  /** What reads of the path see (the last change or acknowledgement), while there is a local version. */
  current?: LocalVersion;
  /** The newest acknowledged version the service does not have yet. */
  acked?: LocalVersion;
  /** The write handles' shared open version. */
  session?: WriteSession;
  /**
   * Read handles following the file (FollowedFile). While there are any, the slot stays, and so does the
   * last version it showed once the service has it: the path shows the service's version again (another
   * client may change it), the followers go on with that one (`followed`, pinned by the slot).
   */
  followers?: number;
  followed?: LocalVersion;
}

/** The open version of a path, shared by its write handles. */
interface WriteSession {
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
  /** Waiting for the version to stay unchanged after an fsync (uploadWhenQuiet). */
  quiet?: boolean;
}

export interface WriteBackStatus {
  uploads: UploadStatus[];
  stranded: { id: string; library: string; fullpath: string }[];
  localFiles: number;
  /** Conflicts found in this run (conflicts.ts). */
  conflicts: Conflict[];
}

export class WriteBack {
  private readonly journal: UploadJournal;
  readonly uploads: UploadQueue;
  private readonly conflicts: ConflictKeeper;
  private readonly slots = new Map<string, PathSlot>();
  /** Slots by folder (`library\0parent`), for listings: no scan of every slot per readdir. */
  private readonly byFolder = new Map<string, Set<PathSlot>>();
  private readonly stranded: JournalEntry[] = [];
  /** Folders made while their library was offline (`library\0fullpath`): journaled, made on the service when it is back. */
  private readonly pendingFolders = new Map<string, { id: string; library: string; entry: RemoteEntry }>();
  /** Deletes of files that handles still read (`library\0fullpath`): journaled, done when the last one closes. */
  private readonly pendingDeletes = new Map<string, { id: string; library: string; fullpath: string; objectId: string; ready: boolean; contentHash?: string }>();
  /** Paths whose deferred delete a new file cancelled: the content hash it replaces there without a conflict. */
  private readonly replacedObjects = new Map<string, string>();
  /** The folder creation under way per library (one at a time). */
  private readonly makingFolders = new Map<string, Promise<void>>();
  private lastSeq = 0;
  private readonly holdTimers = new Set<NodeJS.Timeout>();
  private readonly syncOnClose: boolean;
  private closed = false;
  /** Sealed small files whose spools wait in memory until needed (the upload, a reader), bounded. */
  private readonly unwritten: UnwrittenSpools;

  constructor(private readonly opts: WriteBackOptions) {
    this.journal = new UploadJournal(opts.journalDir, opts.durability?.groupCommitMs ?? 1000);
    this.syncOnClose = opts.durability?.mode === 'close';
    this.unwritten = new UnwrittenSpools(opts.unwrittenSpoolBytes ?? 16 * 1024 * 1024);
    this.conflicts = new ConflictKeeper({ logger: opts.logger, copied: (library, entry) => opts.host.uploaded(library, entry, entry.mtimeMs) });
    this.uploads = new UploadQueue({
      concurrency: opts.upload?.concurrency, smallConcurrency: opts.upload?.smallConcurrency, retryBaseMs: opts.upload?.retryBaseMs, retryMaxMs: opts.upload?.retryMaxMs, refusedRetryMs: opts.upload?.refusedRetryMs,
      hasher: opts.hasher, logger: opts.logger, foreground: opts.foreground,
      remoteFor: (name) => opts.host.remoteFor(name),
      onCommitted: (file, entry) => this.uploadedVersion(file as LocalVersion, entry),
      onMissingParent: (file) => opts.host.ensureParents(file.library, file.fullpath),
      commit: (file, remote, fullpath, source, o) => this.conflicts.commit(file as LocalVersion, remote, fullpath, source, o),
    });
  }

  async init(): Promise<void> {
    await this.journal.init();
  }

  /**
   * The journal, for a front end that answers a new small file's close once it has written the file's
   * record itself (Vfs.sideJournal); undefined with durability "close" (every close waits for its fsync).
   */
  sideJournal(): SideJournal | undefined {
    return this.syncOnClose || this.closed ? undefined : this.journal;
  }

  /**
   * Journal entries of a previous run, queued again: of several for one path, the newest acknowledged
   * wins and the others go. Entries of libraries not served are kept (stranded) until one is added.
   */
  async replay(served: (library: string) => boolean): Promise<void> {
    const entries = await this.journal.entries();
    let queued = 0;
    const newest = new Map<string, JournalEntry>();
    for (const e of entries) {
      this.lastSeq = Math.max(this.lastSeq, orderOf(e));
      newest.set(keyOf(e.library, e.fullpath), e); // sorted oldest first: the last one stays
    }
    for (const e of entries) {
      if (newest.get(keyOf(e.library, e.fullpath)) !== e) {
        this.opts.logger.info({ library: e.library, path: e.fullpath }, 'journal replay: an older acknowledged version superseded by a newer one, dropped');
        await this.journal.remove(e.id);
        continue;
      }
      if (!served(e.library)) {
        this.opts.logger.error({ library: e.library, path: e.fullpath }, 'journal entry for a library that is not configured: kept, not uploaded');
        this.stranded.push(e);
        continue;
      }
      if (await this.resume(e)) queued++;
    }
    // One line for a person, however many: each file's is at debug level.
    if (queued > 0) this.opts.logger.info({ files: queued }, `journal replay: ${queued} file(s) from the last run queued for upload again`);
  }

  /** Uploads what was kept for a library that is now served. */
  async resumeLibrary(library: string): Promise<number> {
    const kept = this.stranded.filter((e) => e.library === library);
    this.stranded.splice(0, this.stranded.length, ...this.stranded.filter((e) => e.library !== library));
    for (const e of kept) await this.resume(e);
    return kept.length;
  }

  /** Takes entry `e` up again; true when a file's upload was queued. */
  private async resume(e: JournalEntry): Promise<boolean> {
    if (e.kind === 'delete') {
      // Its readers went with the previous run: the delete happens now (or when the service is back).
      this.pendingDeletes.set(keyOf(e.library, e.fullpath), { id: e.id, library: e.library, fullpath: e.fullpath, objectId: e.objectId ?? '', ready: true, contentHash: typeof e.replaces?.[0] === 'string' ? e.replaces[0] : undefined });
      void this.performDeletes(e.library);
      return false;
    }
    if (e.kind === 'folder') {
      this.pendingFolders.set(keyOf(e.library, e.fullpath), { id: e.id, library: e.library, entry: folderEntry(e.id, e.fullpath, e.mtimeMs) });
      void this.makeFolders(e.library);
      return false;
    }
    const v = new LocalVersion(e.id, this.journal.spoolPath(e.id), e.library, e.fullpath, undefined, { baseSize: 0, mtimeMs: e.mtimeMs });
    try {
      await v.loadSize();
    } catch {
      this.opts.logger.error({ library: e.library, path: e.fullpath }, 'journal entry without its spool file: dropped');
      await this.journal.remove(e.id);
      return false;
    }
    if (e.sha1 !== undefined) {
      // Closed but not yet fsynced when the power went: the entry may have reached the disk and its bytes not.
      const h = await this.opts.hasher.hash(v.spoolPath).catch(() => undefined);
      if (!h || h.sha1 !== e.sha1 || h.size !== e.size) {
        this.opts.logger.error({ library: e.library, path: e.fullpath, size: h?.size, journaled: e.size }, 'journal replay: the bytes of this entry never reached the disk (lost before its group commit): dropped, never uploaded');
        await this.journal.remove(e.id);
        return false;
      }
    } else if (v.size !== e.size && !e.open) {
      this.opts.logger.warn({ library: e.library, path: e.fullpath, size: v.size, journaled: e.size }, 'journal replay: spool size differs from its entry');
    }
    v.operator = e.operator;
    v.replaces = Array.isArray(e.replaces) && e.replaces.every((h) => typeof h === 'string') ? e.replaces : undefined;
    v.generation = 1;
    v.sealed = true;
    v.state = 'journaled';
    v.seq = orderOf(e);
    const slot = this.slotFor(e.library, e.fullpath);
    slot.acked = v;
    slot.current = v;
    this.opts.logger.debug({ library: e.library, path: e.fullpath, size: v.size }, 'journal replay: upload queued again');
    this.schedule(slot);
    return true;
  }

  // ---- what the namespace asks ---------------------------------------------------------------------------

  // ---- folders made offline -------------------------------------------------------------------------------

  /** A folder made while the library is offline: journaled (fsynced), shown from now on, made on the service later. */
  async pendingFolder(library: string, fullpath: string): Promise<RemoteEntry> {
    const id = this.journal.newId();
    const now = Date.now();
    await this.journal.putRecord({ id, library, fullpath, size: 0, mtimeMs: now, createdMs: now, seq: this.nextSeq(), kind: 'folder' }).catch((err: unknown) => { throw fsErrorOf(err, `journaling the folder '${fullpath}'`); });
    const entry = folderEntry(id, fullpath, now);
    this.pendingFolders.set(keyOf(library, fullpath), { id, library, entry });
    return entry;
  }

  /** The library's service answers again: the waiting uploads start now, and folders made meanwhile are made. */
  online(library: string): void {
    this.uploads.retryNow(library);
    void this.makeFolders(library);
    void this.performDeletes(library);
  }

  // ---- deletes deferred while handles read the file ----------------------------------------------------------

  /**
   * A file unlinked while handles still read it: journaled (fsynced), removed on the service once the last
   * of them is closed (`performDeletes`), also after a crash.
   */
  async deferDelete(library: string, fullpath: string, objectId: string, contentHash?: string): Promise<void> {
    const id = this.journal.newId();
    const now = Date.now();
    await this.journal.putRecord({ id, library, fullpath, size: 0, mtimeMs: now, createdMs: now, seq: this.nextSeq(), kind: 'delete', objectId, replaces: contentHash ? [contentHash] : undefined }).catch((err: unknown) => { throw fsErrorOf(err, `journaling the delete of '${fullpath}'`); });
    this.pendingDeletes.set(keyOf(library, fullpath), { id, library, fullpath, objectId, ready: false, contentHash });
    // Gone from the path: its read handles no longer follow the path (a new file there is another file).
    await this.removed(library, fullpath);
  }

  /**
   * What a delete of the path is based on (conflicts.ts): the local version it shows and those it came
   * from, else `shown`, the service's version. Asked before `removed`.
   */
  deleteBase(library: string, fullpath: string, shown: RemoteEntry): ConflictBase {
    const v = this.slots.get(keyOf(library, fullpath))?.current;
    if (v) return baseAfter(v.replaces, v.currentSha1());
    if (shown.id.startsWith('local:')) return [NEW_FILE];
    return shown.contentHash ? [shown.contentHash] : undefined;
  }

  /** True when a delete based on `base` must leave the service's `current` be (ConflictKeeper.deleteKeeps). */
  deleteKeeps(library: string, fullpath: string, base: ConflictBase, current: RemoteEntry): boolean {
    return this.conflicts.deleteKeeps(library, fullpath, base, current);
  }

  /** A new file at a path whose delete was deferred replaces the object instead (its readers keep their version). */
  async cancelDelete(library: string, fullpath: string): Promise<void> {
    const d = this.pendingDeletes.get(keyOf(library, fullpath));
    if (!d) return;
    this.pendingDeletes.delete(keyOf(library, fullpath));
    if (d.contentHash) this.replacedObjects.set(keyOf(library, fullpath), d.contentHash);
    await this.journal.remove(d.id).catch(() => undefined);
  }

  /** The last reader of a path whose delete was deferred is gone: the delete may happen now. */
  async readersGone(library: string, fullpath: string): Promise<void> {
    const d = this.pendingDeletes.get(keyOf(library, fullpath));
    if (!d) return;
    d.ready = true;
    await this.performDeletes(library);
  }

  /** Removes on the service the deferred deletes that are ready (the object still at its path); an outage keeps them. */
  private async performDeletes(library: string): Promise<void> {
    const remote = this.opts.host.remoteFor(library);
    if (!remote) return;
    for (const [key, d] of [...this.pendingDeletes]) {
      if (d.library !== library || !d.ready || this.closed) continue;
      try {
        const e = await remote.stat(d.fullpath);
        if (e && !e.isDir && e.id === d.objectId) {
          if (d.contentHash !== undefined && this.conflicts.deleteKeeps(library, d.fullpath, [d.contentHash], e)) {
            this.pendingDeletes.delete(key);
            this.opts.host.uploaded(library, e, e.mtimeMs); // the other version is what the path shows
            await this.journal.remove(d.id).catch(() => undefined);
            continue;
          }
          await remote.remove(d.fullpath);
        }
      } catch (err) {
        if (err instanceof VfsError && err.unreachable) return; // again when the service is back
        this.opts.logger.error({ library, path: d.fullpath, err: (err as Error).message }, 'a delete deferred for open readers failed on the service');
      }
      if (this.pendingDeletes.get(key) !== d) continue;
      this.pendingDeletes.delete(key);
      this.opts.host.deleted(library, d.fullpath);
      await this.journal.remove(d.id).catch(() => undefined);
    }
  }

  /** Makes the library's pending folders on the service, parents first; stops at the first unreachable call. */
  private makeFolders(library: string): Promise<void> {
    const running = this.makingFolders.get(library);
    if (running) return running;
    const run = (async () => {
      const remote = this.opts.host.remoteFor(library);
      if (!remote) return;
      const mine = [...this.pendingFolders.entries()].filter(([, f]) => f.library === library)
        .sort(([, a], [, b]) => a.entry.fullpath.split('/').length - b.entry.fullpath.split('/').length);
      for (const [key, f] of mine) {
        if (this.closed) return;
        try {
          // ensureParents makes every missing folder above a path: above a child of this one, this one too.
          const made = (await remote.stat(f.entry.fullpath)) ?? (await this.opts.host.ensureParents(library, `${f.entry.fullpath}/-`).then(() => remote.stat(f.entry.fullpath)));
          if (made && !made.isDir) this.opts.logger.error({ library, path: f.entry.fullpath }, 'a folder made offline: a file of that name is on the service now; the folder is dropped');
          else if (made) this.opts.host.uploaded(library, made, f.entry.mtimeMs);
        } catch (err) {
          if (err instanceof VfsError && err.unreachable) return; // still away: again when it is back
          this.opts.logger.error({ library, path: f.entry.fullpath, err: (err as Error).message }, 'a folder made offline could not be made on the service; dropped');
        }
        this.pendingFolders.delete(key);
        await this.journal.remove(f.id).catch(() => undefined);
      }
    })().finally(() => this.makingFolders.delete(library));
    this.makingFolders.set(library, run);
    return run;
  }

  /** The local version reads of a path see, if any. */
  current(library: string, fullpath: string): LocalVersion | undefined {
    return this.slots.get(keyOf(library, fullpath))?.current;
  }

  /** The local entry of a path (what stat and listings show), if there is a local version or a folder made offline. */
  entry(library: string, fullpath: string): RemoteEntry | undefined {
    const v = this.current(library, fullpath);
    return v ? entryOf(v) : this.pendingFolders.get(keyOf(library, fullpath))?.entry;
  }

  /** Local entries directly inside a folder. */
  entriesIn(library: string, folder: string): RemoteEntry[] {
    const out: RemoteEntry[] = [];
    for (const slot of this.byFolder.get(keyOf(library, folder)) ?? []) if (slot.current) out.push(entryOf(slot.current));
    for (const f of this.pendingFolders.values()) if (f.library === library && parentOf(f.entry.fullpath) === folder) out.push(f.entry);
    return out;
  }

  /** True when a local version exists strictly below `folder`. */
  hasWithin(library: string, folder: string): boolean {
    return this.slotsWithin(library, folder).some((slot) => slot.current && slot.fullpath !== folder);
  }

  /** Paths of a library with local versions (open, written or pending). */
  busy(library: string): number {
    let n = 0;
    for (const slot of this.slots.values()) if (slot.library === library && (slot.current || slot.session || slot.acked)) n++;
    // Folders made offline and deletes waiting for readers are the library's pending work too.
    for (const f of this.pendingFolders.values()) if (f.library === library) n++;
    for (const d of this.pendingDeletes.values()) if (d.library === library) n++;
    return n;
  }

  /** True while the path's content is not yet all on the service. */
  dirty(library: string, fullpath: string): boolean {
    const slot = this.slots.get(keyOf(library, fullpath));
    return !!slot && (!!slot.acked || !!slot.current?.dirty);
  }

  // ---- writes --------------------------------------------------------------------------------------------

  /**
   * A write handle on a path: joins the path's open version, or starts one (from the local version, the
   * service's `base`, or empty). `truncate` empties it; a new file (`base` undefined, nothing local) starts
   * empty and is listed from now on.
   */
  async openWrite(library: string, fullpath: string, base: RemoteEntry | undefined, flags: OpenFlags, ctx?: CallContext): Promise<FileHandle> {
    const slot = base ? this.slotFor(library, fullpath) : this.slotForNew(library, fullpath);
    let session = slot.session;
    if (!session) {
      const start = slot.current;
      // From a local version: it is shared until the first change, then cloned (it may be journaled).
      const version = start ?? this.newVersion(library, fullpath, base, ctx, flags.journalId);
      if (!start && !base) version.unsent = true;
      session = { slot, version, writers: 0, handles: 0, deleted: false };
      if (!start && base) session.baseReader = this.opts.host.baseReader(library, base, ctx);
      version.pins++;
      slot.session = session;
    }
    session.handles++;
    session.writers++;
    // A second writer: the first one's direct writes end (they stay with one writer, whose order they keep).
    if (session.writers > 1) session.version.stopDirect();
    const s = session;
    try {
      // Handed to the kernel (passthrough): changed in place, as the kernel writes it.
      if (s.version.isLive) {
        if (flags.truncate) await s.version.truncateLive(0);
      } else if (!slot.current && !base) await this.change(s, { empty: true });
      // Also when the path shows another version with content (a replace made meanwhile, local or already
      // on the service): the truncate empties what it shows. An empty one shown is left as it is: nothing
      // changes, nothing to upload.
      else if (flags.truncate && (!isEmpty(s.version) || (slot.current ? slot.current !== s.version && !isEmpty(slot.current) : (base?.size ?? 0) > 0))) await this.change(s, { empty: true });
    } catch (err) {
      s.writers--;
      await this.closeHandle(s);
      throw err;
    }
    if (ctx?.operator) s.version.operator = ctx.operator;
    return new SessionHandle(gatewayPath(library, fullpath), s, { write: true, append: !!flags.append }, this);
  }

  /**
   * A read-only handle on the path's local version, if it has one: it follows the file (FollowedFile), and
   * the version it reads stays readable until it is released.
   */
  openRead(library: string, fullpath: string): FileHandle | undefined {
    if (!this.slots.get(keyOf(library, fullpath))?.current) return undefined;
    return new VersionReadHandle(gatewayPath(library, fullpath), this.follow(library, fullpath));
  }

  /**
   * The file at a path, followed by a read handle from now on: the path's local version if it has one,
   * else none (the handle reads the service's version) until the file is changed through the gateway.
   */
  follow(library: string, fullpath: string): FollowedFile {
    const slot = this.slotFor(library, fullpath);
    slot.followers = (slot.followers ?? 0) + 1;
    return new FollowedFile(slot, this);
  }

  /**
   * What `slot` shows its followers while the slot is the path's (not removed or replaced): its local
   * version, or the last one it showed, uploaded since.
   */
  shownTo(slot: PathSlot): LocalVersion | undefined {
    return this.slots.get(keyOf(slot.library, slot.fullpath)) === slot ? slot.current ?? slot.followed : undefined;
  }

  /** A follower of `slot` is done: `versions` are the ones it still pinned. */
  async unfollow(slot: PathSlot, versions: readonly LocalVersion[]): Promise<void> {
    slot.followers = (slot.followers ?? 1) - 1;
    for (const v of versions) await this.unpin(v);
    if (slot.followers > 0) return;
    const followed = slot.followed;
    slot.followed = undefined;
    if (followed) await this.unpin(followed);
    this.tidy(slot);
  }

  /** Bytes `[start, end]` of the path's local version, if any (the version stays readable until the stream ends). */
  async readStream(library: string, fullpath: string, start: number, end: number): Promise<Readable | undefined> {
    const v = this.current(library, fullpath);
    if (!v) return undefined;
    v.pins++;
    try {
      if (v.mutable) {
        await v.fillAll();
        await v.sync();
      } else await v.onDisk();
    } catch (err) {
      await this.unpin(v);
      throw err;
    }
    const stream = createReadStream(v.spoolPath, { start, end, highWaterMark: 1024 * 1024 });
    stream.once('close', () => void this.unpin(v));
    return stream;
  }

  /** Copies the path's local content to `dest` (a spool of the caller's); false when nothing is local. */
  async copyCurrent(library: string, fullpath: string, dest: string): Promise<boolean> {
    const v = this.current(library, fullpath);
    if (!v) return false;
    v.pins++;
    try {
      if (v.mutable) await v.fillAll();
      await v.onDisk();
      await v.exclusive(() => copyFile(v.spoolPath, dest).catch((err: unknown) => { throw fsErrorOf(err, `copying '${fullpath}'`); }));
      return true;
    } finally {
      await this.unpin(v);
    }
  }

  /**
   * Replaces the path's content with the source's bytes, atomically: the bytes go to a version of their
   * own, which becomes the path's version only once the source ended and the version is journaled. A
   * source that fails (a cut-off request body) leaves nothing behind. `holdUploadMs`: the upload waits
   * that long (an empty new file whose content usually follows at once).
   */
  async replace(library: string, fullpath: string, base: RemoteEntry | undefined, source: AsyncIterable<Buffer> | Buffer, ctx?: CallContext, opts: { holdUploadMs?: number } = {}): Promise<RemoteEntry> {
    const v = this.newVersion(library, fullpath, undefined, ctx);
    v.base = base;
    v.unsent = base === undefined;
    // Replacing a local version: what that one may replace, and itself; else the service's version read.
    const prior = this.slots.get(keyOf(library, fullpath))?.current;
    if (prior) v.replaces = baseAfter(prior.replaces, prior.currentSha1());
    else if (base) v.replaces = baseOf(base);
    v.pins++;
    try {
      await v.startEmpty();
      v.touch();
      if (Buffer.isBuffer(source)) {
        if (source.length > 0) await v.write(0, source);
      } else {
        // Each piece is written before the one after next is asked for: a source that reuses its
        // buffers (the WebDAV body) fills one while the other is being written.
        let position = 0;
        let writing: Promise<number> | undefined;
        for await (const chunk of source) {
          if (writing) await writing;
          writing = v.write(position, chunk);
          writing.catch(() => undefined); // awaited before the next piece or below
          position += chunk.length;
        }
        if (writing) await writing;
      }
      if (opts.holdUploadMs) v.holdUntilMs = Date.now() + opts.holdUploadMs;
      if (this.closed) throw new VfsError('EIO', 'the gateway is closing');
      await this.journalVersion(v, undefined, { upload: false, sync: this.syncOnClose }); // no writer has it open: queued unless held
      return entryOf(v);
    } catch (err) {
      v.failed ??= err instanceof VfsError ? err : fsErrorOf(err, `writing '${fullpath}'`);
      throw err;
    } finally {
      await this.unpin(v);
    }
  }

  /**
   * Sets the time programs see of the path's local versions; false when none is shown (the service's
   * version is what the path shows: the caller keeps the time for that one).
   */
  async setTimes(library: string, fullpath: string, mtimeMs: number): Promise<boolean> {
    const slot = this.slots.get(keyOf(library, fullpath));
    if (!slot) return false;
    for (const v of new Set([slot.current, slot.session?.version, slot.acked])) if (v) v.mtimeMs = mtimeMs;
    // A journaled version keeps its time across a restart too.
    if (slot.acked && slot.acked.state !== 'uploaded') await this.journal.rewrite(this.journalEntry(slot.acked)).catch((err: unknown) => { throw fsErrorOf(err, `recording the time of '${fullpath}'`); });
    // Once the service has the shown version, the caller keeps the time for the service's entry too.
    return !!slot.current && slot.current.state !== 'uploaded';
  }

  /** A local version shows the service's tags and lock of its base: kept current when the gateway changes them. */
  patchBase(library: string, fullpath: string, patch: Pick<RemoteEntry, 'tags'> | Pick<RemoteEntry, 'locked'>): void {
    const slot = this.slots.get(keyOf(library, fullpath));
    for (const v of new Set([slot?.current, slot?.session?.version, slot?.acked])) if (v?.base) v.base = { ...v.base, ...patch };
  }

  // ---- namespace changes -----------------------------------------------------------------------------------

  /**
   * Before a rename: uploads at and below `from` stop (an upload finishing now would land at the old path).
   * Follow with `moved()` once the service moved, or `resumeUploads()` when the rename failed.
   */
  async stopUploads(library: string, from: string): Promise<void> {
    for (const slot of this.slotsWithin(library, from)) {
      if (!slot.acked) continue;
      const v = slot.acked;
      await this.uploads.cancel(v.id);
      if (v.state === 'uploading') v.state = 'journaled';
      v.holdUntilMs = Number.MAX_SAFE_INTEGER; // held until moved() or resumeUploads()
    }
  }

  /**
   * True when the service has nothing of the file at `fullpath` from here: every local version of it was
   * made in this run from a new file and none was handed to the uploader (a rename then moves it here
   * only; after stopUploads, none can be handed over before moved()).
   */
  unsent(library: string, fullpath: string): boolean {
    const slot = this.slots.get(keyOf(library, fullpath));
    if (!slot?.current) return false;
    return this.versionsOf(slot).every((v) => v.unsent && v.base === undefined);
  }

  /** A rename that failed: the uploads stopped for it go on at their paths. */
  resumeUploads(library: string, from: string): void {
    for (const slot of this.slotsWithin(library, from)) {
      if (!slot.acked) continue;
      slot.acked.holdUntilMs = 0;
      this.schedule(slot);
    }
  }

  /** A rename on the service (or of what is only local): local versions at and below `from` move to `to`. */
  async moved(library: string, from: string, to: string): Promise<void> {
    const moving = this.slotsWithin(library, from);
    for (const slot of moving) if (slot.acked) await this.uploads.cancel(slot.acked.id);
    for (const slot of moving) {
      const fullpath = to + slot.fullpath.slice(from.length);
      // A slot already at the target (replaced by this rename) was removed by the caller first.
      this.unindex(slot);
      if (this.slots.get(keyOf(library, slot.fullpath)) === slot) this.slots.delete(keyOf(library, slot.fullpath));
      slot.fullpath = fullpath;
      this.slots.set(keyOf(library, fullpath), slot);
      for (const v of this.versionsOf(slot)) v.fullpath = fullpath;
      this.index(slot);
      const open = slot.session?.version;
      if (open?.openRecord && open.mutable) await this.journal.rewrite({ ...this.journalEntry(open), sha1: undefined, open: true });
      if (slot.acked) {
        slot.acked.state = 'journaled';
        slot.acked.holdUntilMs = 0;
        await this.journal.rewrite(this.journalEntry(slot.acked));
        this.schedule(slot);
      }
    }
  }

  /** An unlink or rmdir: local versions at and below `fullpath` are dropped (open handles keep theirs, never uploaded). */
  async removed(library: string, fullpath: string): Promise<void> {
    for (const slot of this.slotsWithin(library, fullpath)) {
      this.unindex(slot);
      this.slots.delete(keyOf(slot.library, slot.fullpath));
      const versions = this.versionsOf(slot);
      if (slot.session) {
        slot.session.deleted = true;
        slot.session.version.deleted = true;
        await this.dropOpenRecord(slot.session.version);
      }
      const acked = slot.acked;
      slot.acked = undefined;
      slot.current = undefined;
      if (acked) {
        await this.uploads.cancel(acked.id);
        acked.deleted = true;
        await this.journal.remove(acked.id, { keepSpool: true });
      }
      for (const v of versions) await this.dropIfUnused(v);
    }
  }

  // ---- lifecycle -----------------------------------------------------------------------------------------

  /**
   * Journals what open versions hold, uploads every acknowledged version (held or still open ones too) and
   * waits until the service has them. Throws when an upload failed meanwhile (it stays queued): ENOSPC
   * when the library is full, the failure's code otherwise.
   */
  async flushAll(opts: { timeoutMs?: number } = {}): Promise<void> {
    // Closes a front end answered itself are versions here first (they are closed, so flushed too).
    await this.journal.sideSettled();
    for (const slot of [...this.slots.values()]) {
      const s = slot.session;
      if (s?.version.journalingNow) await s.version.sealing?.catch(() => undefined);
      if (s && !s.deleted && s.version.mutable && s.version.generation > 0) await this.journalVersion(s.version, s, { upload: true, sync: true });
    }
    await this.journal.syncAll().catch((err: unknown) => { throw fsErrorOf(err, 'making the journal durable'); });
    for (const slot of [...this.slots.values()]) this.schedule(slot, { force: true });
    this.uploads.retryFailed();
    await this.uploads.settle(opts.timeoutMs);
    const failing = this.uploads.failedSinceMark();
    if (failing.length > 0) {
      const code = failing.some((f) => f.lastErrorCode === 'ENOSPC') ? 'ENOSPC' : failing.find((f) => f.lastErrorCode)?.lastErrorCode ?? 'EIO';
      const first = failing[0]!;
      throw new VfsError(code as 'EIO', `${failing.length} upload(s) failing, still queued (first: /${first.library}/${first.fullpath}: ${first.lastError ?? 'unknown error'})`);
    }
  }

  /** `copyGone`: see ConflictKeeper.list. */
  status(copyGone?: (library: string, fullpath: string) => boolean): WriteBackStatus {
    return {
      uploads: this.uploads.status(),
      stranded: this.stranded.map((e) => ({ id: e.id, library: e.library, fullpath: e.fullpath })),
      localFiles: [...this.slots.values()].filter((slot) => slot.current || slot.acked || slot.session).length,
      conflicts: this.conflicts.list(copyGone),
    };
  }

  /** Open versions are journaled (what was written stays); uploads stop, their entries stay. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.holdTimers) clearTimeout(t);
    for (const slot of [...this.slots.values()]) {
      const s = slot.session;
      if (s && !s.deleted && s.version.mutable && s.version.generation > 0) {
        await this.journalVersion(s.version, s, { upload: false, sync: true }).catch((err: Error) => this.opts.logger.error({ path: s.version.fullpath, err: err.message }, 'journaling on close failed'));
      }
    }
    await this.uploads.close();
    for (const slot of this.slots.values()) for (const v of this.versionsOf(slot)) await v.closeSpool().catch(() => undefined);
    await this.journal.close();
  }

  // ---- internals: sessions and handles ---------------------------------------------------------------------

  /**
   * Before a change through a session: its version is writable (a journaled one is cloned first; `empty`
   * starts from nothing instead), the path shows it, and small files have their content local.
   */
  async change(s: WriteSession, opts: { empty?: boolean } = {}): Promise<LocalVersion> {
    if (s.cloning) await s.cloning.catch(() => undefined);
    if (s.version.failed) throw s.version.failed;
    if (!s.version.mutable) {
      const from = s.version;
      // An empty version is not copied: the new one starts empty, as a new file does (held in memory, hashed as written).
      const empty = opts.empty || (from.size === 0 && from.baseReady);
      s.cloning = (async () => {
        const next = this.newVersion(from.library, from.fullpath, from.base, undefined);
        if (!empty) {
          const cloned = await from.derive(next.id, next.spoolPath, { fetchChunk: this.opts.partialFetch?.chunkBytes });
          cloned.deleted = s.deleted;
          cloned.unsent = from.unsent;
          return cloned;
        }
        next.unsent = from.unsent;
        next.operator = from.operator;
        next.ctimeMs = from.ctimeMs;
        next.replaces = baseAfter(from.replaces, from.currentSha1());
        return next;
      })();
      let next: LocalVersion;
      try {
        next = await s.cloning;
      } finally {
        s.cloning = undefined;
      }
      // No await from here to the assignment: the session moves to its new version at once.
      next.pins++;
      if (from.journalingNow) next.predecessor = from;
      s.version = next;
      s.baseReader?.close();
      s.baseReader = undefined;
      await this.unpin(from);
      if (empty) {
        await next.startEmpty();
        next.touch();
      }
    } else if (opts.empty) {
      s.baseReader?.close();
      s.baseReader = undefined;
      await s.version.startEmpty();
      s.version.touch();
    } else if (!s.version.baseReady && s.version.baseSize <= (this.opts.partialFetch?.wholeMaxBytes ?? 8 * 1024 * 1024)) {
      await s.version.fillAll();
    }
    if (!s.deleted) {
      s.slot.current = s.version;
      this.index(s.slot);
    }
    return s.version;
  }

  /**
   * Makes a change (`fn`) in the session's writable version. Another handle's flush or close (another front
   * end's, the write-back's own) may seal that version between `change` and the change itself: the change
   * then goes to the version made from it, as it would have had it come a moment later; only a failure of
   * the version itself reaches the writer.
   */
  async changing<T>(s: WriteSession, fn: (v: LocalVersion) => Promise<T>): Promise<T> {
    for (;;) {
      const v = await this.change(s);
      try {
        return await fn(v);
      } catch (err) {
        if (v.failed || v.mutable || s.deleted) throw err;
      }
    }
  }

  /**
   * A flush, fsync or close of a write handle: what the session holds becomes a journaled version (nothing
   * to do when unchanged since). `fsync`: durable against power loss before this resolves, and queued for
   * upload now even while other writers have it open; else durable against a crash of the gateway (the
   * group commit follows), unless the durability mode is `close`. `closed`: see FileHandle.flush.
   */
  async persist(s: WriteSession, opts: { fsync: boolean; closed?: EngineClose }): Promise<void> {
    if (s.cloning) await s.cloning.catch(() => undefined);
    // Being journaled already (another handle's flush, the seal of a file left unchanged after an fsync):
    // this flush returns once that is done, as its own would.
    if (s.version.journalingNow) await s.version.sealing?.catch(() => undefined);
    const v = s.version;
    if (v.failed) {
      this.failed(s.slot, v);
      throw v.failed;
    }
    if (s.deleted) return;
    v.refreshLive();
    if (v.liveChanged && v.state !== 'writing') {
      await this.rejournal(v, { sync: opts.fsync || this.syncOnClose });
      if (opts.fsync) this.schedule(s.slot, { force: true });
      return;
    }
    if (v.mutable && v.generation > 0) {
      if (opts.fsync && s.writers > 0) await this.keepOpen(s, v);
      else await this.journalVersion(v, s, { upload: opts.fsync, sync: opts.fsync || this.syncOnClose, closed: opts.closed });
      return;
    }
    if (opts.fsync) {
      // Journaled by an earlier close: the group commit may still owe it its fsync.
      if (v.state !== 'writing') await this.journal.sync(v.id).catch((err: unknown) => { throw fsErrorOf(err, `making '${v.fullpath}' durable`); });
      this.schedule(s.slot, { force: true });
    }
  }

  /**
   * An fsync of a version that writers keep open: its bytes are made durable and a record of it is written
   * (once), so a crash or a power loss from here keeps at least them; it stays writable (no seal, so no copy
   * of the spool at the next write). It becomes a version of the service only as a close would make it:
   * when its last writer closes it, or once it has stayed unchanged for the write-back delay.
   */
  private async keepOpen(s: WriteSession, v: LocalVersion): Promise<void> {
    try {
      await v.fillAll();
      v.changeMark();
      await this.opts.sizeCheck?.(v.library, v.fullpath, v.size, v.base?.size ?? 0);
      // A small file's bytes go in the record (written again at each fsync): no fsync of its spool.
      const inline = v.size <= INLINE_MAX_BYTES ? v.inlineContent() ?? await v.read(0, v.size) : undefined;
      if (!inline) await v.sync();
      if ((inline || v.openRecord !== 'spool') && v.mutable && !s.deleted) {
        this.opts.diskFaults?.check('journal', `journaling '${v.fullpath}'`);
        await v.recording;
        v.seq = this.nextSeq();
        v.openGeneration = v.changeMark();
        const entry: JournalEntry = { ...this.journalEntry(v), sha1: undefined, open: true };
        const written = this.journal.put(entry, { spoolSynced: true, sync: true, inline });
        v.recording = written.catch(() => undefined);
        await written;
        v.openRecord = inline ? 'bytes' : 'spool';
        // Renamed or unlinked while the record was written: it follows the file, or goes with it.
        if (s.deleted) await this.dropOpenRecord(v);
        else if (v.fullpath !== entry.fullpath) await this.journal.rewrite({ ...entry, fullpath: v.fullpath });
      }
    } catch (err) {
      throw this.journalingFailed(v, err, s.slot);
    }
    this.uploadWhenQuiet(s, v);
  }

  /** A write or truncate through `s` failed: when that failed its version, a record an fsync wrote of it goes at once. */
  async changeFailed(s: WriteSession): Promise<void> {
    if (s.version.failed) await this.dropOpenRecord(s.version).catch(() => undefined);
  }

  /**
   * `v` was acknowledged at `slot`: an open version there that an fsync recorded and that has not changed
   * since is older than `v`, and never becomes the path's version unless it changes again.
   */
  private overtake(slot: PathSlot, v: LocalVersion): void {
    const open = slot.session?.version;
    if (open && open !== v && open.openRecord && open.generation === open.openGeneration) open.overtakenAt = open.generation;
  }

  /** The record an fsync wrote of an open version that will never be one (failed, unlinked): it goes. */
  private async dropOpenRecord(v: LocalVersion): Promise<void> {
    if (!v.openRecord) return;
    v.openRecord = undefined;
    await this.journal.remove(v.id, { keepSpool: true });
  }

  /**
   * An fsynced version that writers keep open (a database, a log) is sealed and uploaded once it stayed
   * unchanged for the write-back delay: looked at again after each delay until then.
   */
  private uploadWhenQuiet(s: WriteSession, v: LocalVersion): void {
    if (s.quiet) return;
    const look = (mark: number): void => {
      const t = setTimeout(() => {
        this.holdTimers.delete(t);
        s.quiet = undefined;
        if (this.closed || this.uploads.stopped || s.deleted || s.version !== v || !v.mutable || s.writers === 0) return;
        const now = v.changeMark();
        if (now !== mark) {
          s.quiet = true;
          look(now);
          return;
        }
        this.journalVersion(v, s, { upload: true, sync: true }).catch((err: unknown) => this.opts.logger.warn({ path: v.fullpath, err: String(err) }, 'write-back: sealing a file kept open after its fsync failed'));
      }, this.opts.upload?.delayMs ?? 0);
      t.unref();
      this.holdTimers.add(t);
    };
    s.quiet = true;
    look(v.changeMark());
  }

  /** A handle of the session closed. The last writer's close queues the upload; the last handle ends the session. */
  async closeHandle(s: WriteSession, wasWriter = false): Promise<void> {
    if (wasWriter) s.writers--;
    s.handles--;
    if (s.writers === 0 && !s.deleted) this.schedule(s.slot);
    if (s.handles > 0) return;
    // No await before this: an open from now on starts a new session.
    if (s.slot.session === s) s.slot.session = undefined;
    s.baseReader?.close();
    s.baseReader = undefined;
    const v = s.version;
    if (v.failed) this.failed(s.slot, v);
    await this.unpin(v);
    this.tidy(s.slot);
  }

  /** A version's user is done with it; the spool goes when nobody needs it any more. */
  async unpin(v: LocalVersion): Promise<void> {
    v.pins--;
    await this.dropIfUnused(v);
    // Nobody has it open: its descriptor goes (a pending upload reads the spool by its path), so versions
    // waiting for the service hold no descriptor however many there are.
    if (v.pins === 0 && v.state !== 'retired') await v.closeSpool().catch(() => undefined);
  }

  /**
   * Journals `v` (sealing it: immutable from here) and makes it the path's acknowledged version, superseding
   * the previous one. The upload is queued as soon as the hash is known when `upload` says so or no writer
   * has it open; its confirmation waits for the entry.
   */
  private async journalVersion(v: LocalVersion, s: WriteSession | undefined, opts: { upload: boolean; sync: boolean; closed?: EngineClose }): Promise<void> {
    if (v.sealing) {
      // Another handle's flush or close is journaling it already: that covers this one's writes too.
      await v.sealing;
      if (opts.sync && v.state !== 'writing') await this.journal.sync(v.id).catch((err: unknown) => { throw fsErrorOf(err, `making '${v.fullpath}' durable`); });
      if (opts.upload) this.schedule(s?.slot ?? this.slotFor(v.library, v.fullpath), { force: true });
      return;
    }
    // Being journaled, it is in use: a clone made meanwhile (a write after its seal) must not drop its spool.
    v.journalingNow = true;
    const sealing = this.sealVersion(v, s, opts).finally(() => { v.journalingNow = false; });
    v.sealing = sealing;
    // Superseded, unlinked or failed meanwhile: its spool goes once nothing else uses it.
    sealing.catch(() => undefined).then(() => this.dropIfUnused(v)).catch(() => undefined);
    return sealing;
  }

  private async sealVersion(v: LocalVersion, s: WriteSession | undefined, opts: { upload: boolean; sync: boolean; closed?: EngineClose }): Promise<void> {
    // An fsync's record of it while open goes to the log before its seal's: the later line wins at replay.
    await v.recording;
    await v.fillAll();
    v.changeMark(); // a live spool's size as the kernel left it
    await this.opts.sizeCheck?.(v.library, v.fullpath, v.size, v.base?.size ?? 0).catch((err: unknown) => {
      throw this.journalingFailed(v, err, s?.slot);
    });
    let resolveEntry!: () => void;
    const entryWritten = new Promise<void>((resolve) => { resolveEntry = resolve; });
    v.journaling = entryWritten;
    try {
      // A close the front end journaled itself: its record is this version's when it names it, at its path.
      let closed = opts.closed && !opts.sync ? this.journal.sideRecordEntry(opts.closed.line) : undefined;
      if (closed && (closed.id !== v.id || closed.library !== v.library || closed.fullpath !== v.fullpath || v.operator)) closed = undefined;
      // A small file's bytes go in its journal record: its spool then needs no fsync of its own.
      let inline = closed ? undefined : v.inlineContent();
      await v.seal(this.opts.hasher, { sync: opts.sync && !inline && !closed, closed: closed && { size: closed.size, sha1: closed.sha1!, mtimeNs: opts.closed!.spoolMtimeNs } });
      if (closed && !v.sealedAs(closed.sha1!, closed.size)) {
        // The kernel wrote on meanwhile (another descriptor of the open file): sealed as the spool is now.
        closed = undefined;
        inline = v.reseal();
      }
      // Unchanged since an fsync recorded it: its place in the order is that fsync's.
      const asFsynced = v.openRecord !== undefined && v.generation === v.openGeneration;
      v.seq = closed ? this.seqOf(closed) : asFsynced ? v.seq : this.nextSeq();
      this.opts.diskFaults?.check('journal', `journaling '${v.fullpath}'`);
      const entry = closed ?? this.journalEntry(v);
      // Unchanged since an fsync made its spool durable: nothing of it is left to a group commit.
      const spoolSynced = (opts.sync && !inline) || v.syncedGeneration === v.generation;
      await this.journal.put(entry, { spoolSynced, sync: opts.sync, inline, line: closed && opts.closed!.line }).catch((err: unknown) => { throw fsErrorOf(err, `journaling '${v.fullpath}'`); });
    } catch (err) {
      resolveEntry();
      const failed = this.journalingFailed(v, err, s?.slot);
      await this.journal.remove(v.id, { keepSpool: true }).catch(() => undefined);
      throw failed;
    }
    resolveEntry();
    v.openRecord = undefined;
    if (v.deleted || s?.deleted) {
      // Unlinked while the entry was written: it must not be uploaded at the next start either.
      await this.journal.remove(v.id, { keepSpool: true });
      return;
    }
    if (v.superseded || v.overtakenAt === v.generation) {
      // A version made from it (a write after its seal) was acknowledged first: that one holds its bytes and
      // more. Or a newer one came to the path after the fsync that recorded it, with no change of it since.
      await this.journal.remove(v.id, { keepSpool: true, durable: false });
      return;
    }
    // No await from here to the end of the install: the slot changes in one step.
    const predecessor = v.predecessor;
    v.predecessor = undefined;
    if (predecessor?.journalingNow) predecessor.superseded = true;
    // A replace of nothing (no file at the path) makes a new file there.
    const slot = !s && !v.base ? this.slotForNew(v.library, v.fullpath) : this.slotFor(v.library, v.fullpath);
    const old = slot.acked;
    if (old && old.seq > v.seq) {
      // A newer version was acknowledged meanwhile: this one is superseded at once.
      await this.journal.remove(v.id, { keepSpool: true, durable: false });
      return;
    }
    v.state = 'journaled';
    // The write-back delay: uploaded a little after the last close (a rewrite meanwhile replaces it first).
    const delayMs = this.opts.upload?.delayMs ?? 0;
    if (!opts.upload && delayMs > 0) v.holdUntilMs = Math.max(v.holdUntilMs, Date.now() + delayMs);
    slot.acked = v;
    this.overtake(slot, v);
    // A session that changed on after this version was sealed shows its newer bytes; otherwise this version.
    if (!s || !(slot.current && slot.current !== v && slot.current.mutable)) slot.current = v;
    this.index(slot);
    if (old && old !== v) await this.supersede(old);
    this.schedule(slot, { force: opts.upload });
  }

  /**
   * New files a front end created, had written and closed by itself (Vfs.createClosed): each version is
   * installed closed at its path, sealed as its record says, the record appended to the journal as it is
   * (see `journalVersion` with `closed`), and queued for upload after the write-back delay. The records
   * of all of them go to the log in one write. For each, true once made; false, with nothing changed for
   * it, when its path has a local version or session, its record is not a put of its id at its path, or
   * its spool does not show the size and time the record was made from. A record that cannot be written
   * fails them all (none is made).
   */
  async createClosed(files: readonly { library: string; fullpath: string; id: string; closed: EngineClose }[]): Promise<boolean[]> {
    const made = files.map((f) => this.closedVersionOf(f.library, f.fullpath, f.id, f.closed));
    for (const m of made) if (m) this.opts.diskFaults?.check('journal', `journaling '${m.v.fullpath}'`);
    const puts: Promise<void>[] = [];
    made.forEach((m, i) => {
      if (m) puts.push(this.journal.put(m.entry, { sync: false, line: files[i]!.closed.line }));
    });
    // Issued together, the appends go out in one write.
    await Promise.all(puts).catch((err: unknown) => { throw fsErrorOf(err, `journaling '${files.length === 1 ? files[0]!.fullpath : `${files.length} files`}'`); });
    const delayMs = this.opts.upload?.delayMs ?? 0;
    const out: boolean[] = [];
    const superseded: LocalVersion[] = [];
    // Nothing awaited from here to the end of the installs: each slot changes in one step.
    for (const m of made) {
      if (!m) {
        out.push(false);
        continue;
      }
      const v = m.v;
      const slot = this.slotForNew(v.library, v.fullpath);
      if (slot.current || slot.acked || slot.session) {
        // Made meanwhile through another front end: that one is newer; this record is superseded at once.
        superseded.push(v);
        out.push(false);
        continue;
      }
      v.state = 'journaled';
      if (delayMs > 0) v.holdUntilMs = Date.now() + delayMs;
      slot.acked = v;
      slot.current = v;
      this.overtake(slot, v);
      this.index(slot);
      this.schedule(slot);
      out.push(true);
    }
    for (const v of superseded) await this.journal.remove(v.id, { keepSpool: true, durable: false });
    return out;
  }

  /**
   * The closed version `closed` makes of a new file (createClosed), sealed as its record says, with the
   * record's entry (the journal keeps it as the line has it); undefined when it cannot be made.
   */
  private closedVersionOf(library: string, fullpath: string, id: string, closed: EngineClose): { v: LocalVersion; entry: JournalEntry } | undefined {
    const entry = this.journal.sideRecordEntry(closed.line);
    if (!entry || entry.id !== id || entry.library !== library || entry.fullpath !== fullpath || !this.journal.freshId(id)) return undefined;
    const existing = this.slots.get(keyOf(library, fullpath));
    if (existing && (existing.current || existing.acked || existing.session)) return undefined;
    const spool = this.journal.spoolPath(id);
    // A spool just written, on local disk: looked at on the spot, as a live spool's fstat is.
    let st;
    try {
      st = statSync(spool, { bigint: true });
    } catch {
      return undefined;
    }
    if (st.size !== BigInt(entry.size) || st.mtimeNs !== closed.spoolMtimeNs) return undefined;
    const v = LocalVersion.closedSpool(id, spool, library, fullpath, { size: entry.size, mtimeMs: entry.mtimeMs, sha1: entry.sha1! });
    v.seq = this.seqOf(entry);
    return { v, entry };
  }

  /**
   * A journaled version the kernel changed in place after its seal (passthrough): its entry is written
   * again as the spool now is (the later line about the id wins at replay). The upload's confirmation
   * waits for it (`journaling`).
   */
  private async rejournal(v: LocalVersion, opts: { sync: boolean }): Promise<void> {
    if (v.superseded || v.deleted || v.state === 'retired' || v.state === 'writing') return;
    // An upload of what it held before (forced: an fsync, a flush of everything) is made again after.
    if (v.state === 'uploading') await this.uploads.cancel(v.id);
    try {
      await v.checkRoomForKernelWrites();
    } catch (err) {
      // The kernel's writes since its seal may miss what the disk refused: neither content is the file's.
      await this.journal.remove(v.id, { keepSpool: true }).catch(() => undefined);
      throw this.journalingFailed(v, err);
    }
    if (v.state !== 'journaled') {
      v.state = 'journaled';
      const slot = this.slots.get(keyOf(v.library, v.fullpath));
      if (slot && !slot.acked) slot.acked = v;
    }
    const inline = v.reseal();
    const written = this.journal.put(this.journalEntry(v), { spoolSynced: false, sync: opts.sync, inline })
      .catch((err: unknown) => { throw fsErrorOf(err, `journaling '${v.fullpath}'`); });
    v.journaling = written.catch(() => undefined);
    try {
      await written;
    } catch (err) {
      throw this.journalingFailed(v, err);
    }
  }

  /** `v` could not be journaled: it fails with that error (its first), and its path shows what it did before. */
  private journalingFailed(v: LocalVersion, err: unknown, slot = this.slots.get(keyOf(v.library, v.fullpath))): VfsError {
    v.failed ??= err instanceof VfsError ? err : fsErrorOf(err, `journaling '${v.fullpath}'`);
    if (slot) this.failed(slot, v);
    return v.failed;
  }

  /** The kernel is done with `v`'s spool (FileHandle.passthrough): a change it made after the last close is journaled, then the upload may go. */
  private passthroughEnded(s: WriteSession, v: LocalVersion): void {
    v.passthroughEnd();
    const due = v.liveChanged && v.state !== 'writing' && !v.superseded && !v.deleted;
    const written = due ? this.rejournal(v, { sync: this.syncOnClose }) : Promise.resolve();
    written.then(() => this.schedule(s.slot), (err: unknown) => this.opts.logger.error({ path: v.fullpath, err: String(err) }, 'write-back: journaling a file the kernel changed after its close failed'));
  }

  /** See FileHandle.passthrough (`adopt`: FileHandle.adoptSpool): `s`'s version handed to the kernel. */
  async passthrough(s: WriteSession, opts: { adopt?: boolean } = {}): Promise<PassthroughSpool | undefined> {
    const v = s.version;
    if (!v.mutable || s.writers !== 1 || s.deleted || s.cloning) return undefined;
    const fd = await (opts.adopt ? v.adoptSpool() : v.passthroughBegin());
    if (fd === undefined) return undefined;
    if (s.version !== v || s.deleted) {
      v.passthroughEnd();
      return undefined;
    }
    let ended = false;
    return {
      fd,
      end: () => {
        if (ended) return;
        ended = true;
        this.passthroughEnded(s, v);
      },
    };
  }

  /** An older acknowledged version that a newer one replaced: its upload stops, its entry goes. */
  private async supersede(old: LocalVersion): Promise<void> {
    old.superseded = true; // never uploaded from now on
    await this.uploads.cancel(old.id);
    if (old.state === 'uploaded') return; // the service has it already; the newer one follows
    // Not waiting for the disk: should a power loss keep this entry, replay keeps the newer one of the path.
    await this.journal.remove(old.id, { keepSpool: true, durable: false });
    await this.dropIfUnused(old);
  }

  /**
   * Queues the path's acknowledged version when nothing stops it: not while a writer still has it open
   * (unless forced: fsync, flushAll), not before its hold ends.
   */
  private schedule(slot: PathSlot, opts: { force?: boolean } = {}): void {
    const v = slot.acked;
    if (!v || v.state !== 'journaled' || this.closed) return;
    if (v.holdUntilMs === Number.MAX_SAFE_INTEGER) return; // a rename under way (stopUploads)
    // The kernel may still write it (passthrough): queued once it is done with the spool, unless forced
    // (a change it makes meanwhile is journaled again and uploaded after: see rejournal).
    if (v.isLive && !opts.force) return;
    if (!opts.force) {
      if (slot.session && slot.session.version === v && slot.session.writers > 0) return;
      const wait = v.holdUntilMs - Date.now();
      if (wait > 0) {
        const t = setTimeout(() => { this.holdTimers.delete(t); this.schedule(slot); }, wait);
        t.unref();
        this.holdTimers.add(t);
        return;
      }
    }
    v.state = 'uploading';
    v.unsent = false;
    void this.uploads.enqueue(v);
  }

  /** The service confirmed `v`. */
  private async uploadedVersion(v: LocalVersion, entry: RemoteEntry): Promise<void> {
    await v.journaling;
    this.opts.host.uploaded(v.library, entry, v.mtimeMs);
    if (v.deleted || v.superseded || v.state === 'retired') return;
    v.state = 'uploaded';
    v.base = entry;
    const slot = this.slots.get(keyOf(v.library, v.fullpath));
    // Versions of the path made from this one replace it on the service without a conflict.
    if (slot) for (const x of this.versionsOf(slot)) x.replaces = baseUploaded(x.replaces, entry.contentHash);
    v.replaces = baseUploaded(v.replaces, entry.contentHash);
    // Decided with no await before: an open from now on finds either this version or the service's.
    if (slot?.acked === v) slot.acked = undefined;
    await this.journal.remove(v.id, { keepSpool: true });
    await this.dropIfUnused(v);
    if (slot) this.tidy(slot);
  }

  /** A failed version: the path shows its last acknowledged version again (or nothing). */
  private failed(slot: PathSlot, v: LocalVersion): void {
    this.dropOpenRecord(v).catch((err: unknown) => this.opts.logger.error({ path: v.fullpath, err: String(err) }, 'write-back: removing the record of a failed version failed'));
    if (slot.current === v) slot.current = slot.acked !== v ? slot.acked : undefined;
    if (slot.acked === v) slot.acked = undefined;
    this.tidy(slot);
  }

  /**
   * Removes a version's spool once nothing uses it: no pin, not what the path shows or has acknowledged.
   * An uploaded version that the path still shows is let go of here too (reads then go to the service).
   */
  private async dropIfUnused(v: LocalVersion): Promise<void> {
    if (v.state === 'retired' || v.journalingNow) return;
    const slot = this.slots.get(keyOf(v.library, v.fullpath));
    if (slot?.acked === v) return;
    const shown = slot?.current === v;
    if (shown && v.state !== 'uploaded') return;
    if ((v.state === 'journaled' || v.state === 'uploading') && !v.deleted && !v.superseded && !v.failed) return;
    // No await before this: nothing finds the version after it.
    if (shown && (slot!.followers ?? 0) > 0 && slot!.session?.version !== v) {
      // On the service: the path shows the service's version again; the read handles following the file
      // go on with this one (pinned by the slot until they are gone).
      slot!.current = undefined;
      const before = slot!.followed;
      v.pins++;
      slot!.followed = v;
      if (before) await this.unpin(before);
      return;
    }
    if (v.pins > 0) return;
    if (shown) {
      slot!.current = undefined;
      this.tidy(slot!);
    }
    v.retire();
    await v.closeSpool().catch(() => undefined);
    // A file held in memory until it was uploaded never made its spool: no unlink to wait for.
    if (v.mayHaveSpool) await this.journal.discardSpool(v.id).catch(() => undefined);
  }

  /** `journalId`: the id a front end gave the version (it journals the version's record itself too). */
  private newVersion(library: string, fullpath: string, base: RemoteEntry | undefined, ctx?: CallContext, journalId?: string): LocalVersion {
    const id = journalId !== undefined && this.journal.freshId(journalId) ? journalId : this.journal.newId();
    const spool = this.journal.spoolPath(id);
    const v: LocalVersion = new LocalVersion(id, spool, library, fullpath, base, {
      baseSize: base?.size ?? 0, mtimeMs: base?.mtimeMs, fetchChunk: this.opts.partialFetch?.chunkBytes,
      sha1Stream: sha1StreamOf(this.opts.sha1Streams, spool), faults: this.opts.diskFaults, newSpool: true, unwritten: this.unwritten,
      // The base is wherever the file is now (a rename moves it on the service too), in the version it had.
      openBase: base ? (start, end) => {
        const remote = this.opts.host.remoteFor(v.library);
        if (!remote) throw new VfsError('EIO', `library '${v.library}' is no longer served`);
        return remote.openRange(v.fullpath, start, end, { operator: ctx?.operator, signal: ctx?.signal, contentHash: base.contentHash });
      } : undefined,
    });
    v.operator = ctx?.operator;
    const replaced = base ? undefined : this.replacedObjects.get(keyOf(library, fullpath));
    if (replaced) {
      v.replaces = [replaced];
      this.replacedObjects.delete(keyOf(library, fullpath));
    }
    return v;
  }

  private journalEntry(v: LocalVersion): JournalEntry {
    return { id: v.id, library: v.library, fullpath: v.fullpath, size: v.size, mtimeMs: v.mtimeMs, createdMs: Date.now(), seq: v.seq, sha1: v.currentSha1(), operator: v.operator, replaces: v.replaces?.slice() };
  }

  private nextSeq(): number {
    this.lastSeq = Math.max(this.lastSeq + 1, Date.now() * 1000);
    return this.lastSeq;
  }

  /** The order of a version whose record a side writer wrote (its number from the same clock): later ones follow it. */
  private seqOf(entry: JournalEntry): number {
    const seq = orderOf(entry);
    this.lastSeq = Math.max(this.lastSeq, seq);
    return seq;
  }

  private versionsOf(slot: PathSlot): LocalVersion[] {
    return [...new Set([slot.current, slot.acked, slot.session?.version, slot.followed].filter((v): v is LocalVersion => !!v))];
  }

  private slotFor(library: string, fullpath: string): PathSlot {
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
  private slotForNew(library: string, fullpath: string): PathSlot {
    const slot = this.slots.get(keyOf(library, fullpath));
    if (slot && (slot.followers ?? 0) > 0 && !slot.current && !slot.acked && !slot.session) {
      this.slots.delete(keyOf(library, fullpath));
      this.unindex(slot);
    }
    return this.slotFor(library, fullpath);
  }

  /** Forgets a slot that holds nothing any more. */
  private tidy(slot: PathSlot): void {
    if (slot.current || slot.acked || slot.session || (slot.followers ?? 0) > 0) return;
    const key = keyOf(slot.library, slot.fullpath);
    if (this.slots.get(key) === slot) this.slots.delete(key);
    this.unindex(slot);
  }

  /**
   * The slots at and below `fullpath` in `library`: the one at it, and those of every folder at or below
   * it, found through the folder index (a rename or delete of one file does not look at every slot).
   */
  private slotsWithin(library: string, fullpath: string): PathSlot[] {
    const found = new Set<PathSlot>();
    const at = this.slots.get(keyOf(library, fullpath));
    if (at) found.add(at);
    const prefix = keyOf(library, '');
    for (const [k, set] of this.byFolder) {
      if (k.startsWith(prefix) && isWithin(k.slice(prefix.length), fullpath)) for (const slot of set) found.add(slot);
    }
    return [...found];
  }

  private index(slot: PathSlot): void {
    const k = keyOf(slot.library, parentOf(slot.fullpath));
    let set = this.byFolder.get(k);
    if (!set) this.byFolder.set(k, (set = new Set()));
    set.add(slot);
  }

  private unindex(slot: PathSlot): void {
    const k = keyOf(slot.library, parentOf(slot.fullpath));
    const set = this.byFolder.get(k);
    set?.delete(slot);
    if (set?.size === 0) this.byFolder.delete(k);
  }

  /** A spool file for a copy through the gateway (removed at the next start if left behind). */
  scratchSpool(): { id: string; path: string } {
    const id = this.journal.newId();
    return { id, path: this.journal.spoolPath(id) };
  }

  async discardScratch(id: string): Promise<void> {
    await this.journal.discardSpool(id);
  }

  /** Attributes of a version, as the namespace shows them. */
  attrOf(v: LocalVersion): Attr {
    return this.opts.host.attrOf(v.library, entryOf(v));
  }

  /** Journal files written since their last fsync (what a power loss now could take). */
  unsyncedFiles(): string[] {
    return this.journal.unsyncedFiles();
  }

  /** The journal's log and how many of its bytes are durable (what a power loss now would keep). */
  durableLog(): { path: string; bytes: number } {
    return this.journal.durableLog();
  }


}

/** The entry of a folder made offline (its id says it is only local). */
function folderEntry(id: string, fullpath: string, mtimeMs: number): RemoteEntry {
  return { id: `local:${id}`, fullpath, name: baseName(fullpath), isDir: true, size: 0, mtimeMs, ctimeMs: mtimeMs };
}

/** The entry of a local version, as lookups and listings show it. */
function entryOf(v: LocalVersion): RemoteEntry {
  v.refreshLive();
  return {
    id: v.base?.id ?? `local:${v.id}`, fullpath: v.fullpath, name: baseName(v.fullpath), isDir: false,
    // Once journaled, the content's hash is known before the upload: entity tags stay the same across it.
    size: v.size, contentHash: v.mutable ? undefined : v.currentSha1() ?? (v.state === 'uploaded' ? v.base?.contentHash : undefined),
    mtimeMs: v.mtimeMs, ctimeMs: v.ctimeMs, tags: v.base?.tags, locked: v.base?.locked, lastModifiedBy: v.operator?.opName ?? v.base?.lastModifiedBy,
  };
}

function keyOf(library: string, fullpath: string): string {
  return `${library}\0${fullpath}`;
}

function gatewayPath(library: string, fullpath: string): string {
  return fullpath === '' ? `/${library}` : `/${library}/${fullpath}`;
}

/** A handle of a write session: reads and writes go to the session's version. */
class SessionHandle implements FileHandle {
  private releasedOnce = false;

  constructor(readonly path: string, private readonly s: WriteSession, private readonly mode: { write: boolean; append: boolean }, private readonly wb: WriteBack) {}

  async read(position: number, length: number, ctx?: CallContext): Promise<Buffer> {
    this.open();
    if (this.s.baseReader && this.s.version.generation === 0 && !this.s.version.baseReady) return this.s.baseReader.read(position, length, ctx);
    return this.s.version.read(position, length);
  }

  async readParts(position: number, length: number, ctx?: CallContext): Promise<Buffer[]> {
    this.open();
    if (this.s.baseReader && this.s.version.generation === 0 && !this.s.version.baseReady) return this.s.baseReader.readParts(position, length, ctx);
    return [await this.s.version.read(position, length)];
  }

  async write(position: number, data: Buffer): Promise<number> {
    this.open();
    if (!Number.isInteger(position) || position < 0) throw new VfsError('EINVAL', `expected a write position >= 0, got ${position}`);
    try {
      if (this.s.version.isLive) return await this.s.version.writeLive(this.mode.append ? this.s.version.size : position, data);
      return await this.wb.changing(this.s, (v) => v.write(this.mode.append ? v.size : position, data));
    } catch (err) {
      await this.wb.changeFailed(this.s);
      throw err;
    }
  }

  async truncate(size: number): Promise<void> {
    this.open();
    if (!Number.isInteger(size) || size < 0) throw new VfsError('EINVAL', `expected a size >= 0, got ${size}`);
    try {
      if (this.s.version.isLive) return await this.s.version.truncateLive(size);
      if (size === 0) {
        await this.wb.change(this.s, { empty: true });
        return;
      }
      await this.wb.changing(this.s, (v) => v.truncate(size));
    } catch (err) {
      await this.wb.changeFailed(this.s);
      throw err;
    }
  }

  async stat(): Promise<Attr> {
    return this.wb.attrOf(this.s.version);
  }

  directSpool(): DirectSpool | undefined {
    if (this.releasedOnce || !this.mode.write || this.mode.append || this.s.writers !== 1 || this.s.deleted) return undefined;
    return this.s.version.directSpool();
  }

  async passthrough(): Promise<PassthroughSpool | undefined> {
    if (this.releasedOnce || !this.mode.write) return undefined;
    return this.wb.passthrough(this.s);
  }

  async adoptSpool(): Promise<PassthroughSpool | undefined> {
    if (this.releasedOnce || !this.mode.write) return undefined;
    return this.wb.passthrough(this.s, { adopt: true });
  }

  localRange(position: number, length: number): LocalRange | undefined {
    if (this.releasedOnce) return undefined;
    if (this.s.baseReader && this.s.version.generation === 0 && !this.s.version.baseReady) return this.s.baseReader.localRange(position, length);
    return this.s.version.localRange(position, length);
  }

  async flush(closed?: EngineClose): Promise<void> {
    this.open();
    await this.wb.persist(this.s, { fsync: false, closed });
  }

  async fsync(): Promise<void> {
    this.open();
    await this.wb.persist(this.s, { fsync: true });
  }

  async release(): Promise<void> {
    if (this.releasedOnce) return;
    this.releasedOnce = true;
    try {
      await this.wb.persist(this.s, { fsync: false });
    } finally {
      await this.wb.closeHandle(this.s, this.mode.write);
    }
  }

  private open(): void {
    if (this.releasedOnce) throw new VfsError('EINVAL', `${this.path}: handle already released`);
  }
}

/**
 * The file a read handle reads, followed: the version it opened (a local one; none when the handle reads
 * the service's version itself) until the file is changed through the gateway, then the newest one its
 * path shows, as every descriptor of a local file sees the writes made through any other. A file removed
 * or replaced (unlinked, renamed over) is no longer followed: the handle reads on what it read last. A
 * change made by another client of the service is not followed either (the handle's version stays).
 * The version read is pinned; one left behind is let go of once no read of the handle is under way.
 */
export class FollowedFile {
  private v: LocalVersion | undefined;
  private left: LocalVersion[] = [];
  private reading = 0;
  private released = false;

  constructor(private readonly slot: PathSlot, private readonly wb: WriteBack) {
    this.version();
  }

  /** The local version reads go to now (undefined: the handle's own service version). */
  version(): LocalVersion | undefined {
    if (this.released) return this.v;
    const now = this.wb.shownTo(this.slot);
    if (now && now !== this.v) {
      // No await from the check to the pin: the version cannot go in between.
      now.pins++;
      if (this.v) this.left.push(this.v);
      this.v = now;
      if (this.reading === 0) this.letGo();
    }
    return this.v;
  }

  /** A read: from the local version followed now, else from `own` (the handle's service version). */
  async read<T>(local: (v: LocalVersion) => Promise<T>, own?: () => Promise<T>): Promise<T> {
    const v = this.version();
    this.reading++;
    try {
      if (v) return await local(v);
      if (!own) throw new VfsError('EIO', `${this.slot.fullpath}: no version to read`);
      return await own();
    } finally {
      if (--this.reading === 0) this.letGo();
    }
  }

  /** Attributes of the local version followed now (undefined: the handle's own). */
  attr(): Attr | undefined {
    const v = this.version();
    return v ? this.wb.attrOf(v) : undefined;
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    const versions = [...this.left, ...(this.v ? [this.v] : [])];
    this.left = [];
    await this.wb.unfollow(this.slot, versions);
  }

  /** Unpins the versions left behind (no read is using them). */
  private letGo(): void {
    for (const v of this.left.splice(0)) void this.wb.unpin(v).catch(() => undefined);
  }
}

/** A read-only handle on a local version, following the file (FollowedFile). */
class VersionReadHandle implements FileHandle {
  private releasedOnce = false;

  constructor(readonly path: string, private readonly file: FollowedFile) {}

  read(position: number, length: number): Promise<Buffer> {
    this.open();
    return this.file.read((v) => v.read(position, length));
  }

  localRange(position: number, length: number): LocalRange | undefined {
    return this.releasedOnce ? undefined : this.file.version()?.localRange(position, length);
  }

  async write(): Promise<number> { throw new VfsError('EACCES', `${this.path} was opened read-only`); }
  async truncate(): Promise<void> { throw new VfsError('EACCES', `${this.path} was opened read-only`); }

  async stat(): Promise<Attr> {
    return this.file.attr()!;
  }

  async flush(): Promise<void> {}
  async fsync(): Promise<void> {}

  async release(): Promise<void> {
    if (this.releasedOnce) return;
    this.releasedOnce = true;
    await this.file.release();
  }

  private open(): void {
    if (this.releasedOnce) throw new VfsError('EINVAL', `${this.path}: handle already released`);
  }
}

/** A version with no bytes, all of them local (nothing left to fetch). */
function isEmpty(v: LocalVersion): boolean {
  return v.size === 0 && v.baseReady;
}

/**
 * The version's hash stream opener, made outside newVersion: a closure made there would keep the whole
 * scope of the call (the operation's context and everything it holds) for as long as the version lives.
 */
function sha1StreamOf(streams: Sha1Streams, spool: string): () => Sha1Stream {
  return () => streams.open(spool);
}
