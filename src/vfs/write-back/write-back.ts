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
 * The package, one idea a file; WriteBack's layers extend one another in this order:
 *   slots.ts            WriteBackSlots     the state the layers share; path slots, indexed by folder
 *   seals.ts            WriteBackSeals     write sessions, changes, seals, upload scheduling
 *   write-back-lease.ts WriteBackLease     what the FUSE engine is lent: the side journal, closed creates,
 *                                          versions whose spool the kernel writes (passthrough)
 *   replay.ts           WriteBackReplay    the journal of the last run taken up again
 *   pending-folders.ts  WriteBackFolders   folders made offline, deletes deferred while files are read
 *   write-back.ts       WriteBack          what the namespace asks: opens, reads, replaces, moves, flushes
 *   handles.ts          the handles it gives; local-version.ts a version; upload-journal.ts the journal
 *                       (journal-entry.ts its entries, journal-lines.ts the one codec of its lines,
 *                       journal-log.ts the log file, journal-recovery.ts reading it back, spool-pool.ts
 *                       emptied spools kept for reuse; engine-close-record.ts the engine's records);
 *   upload-queue.ts     the uploads; file-hasher.ts and sha1-streams.ts the spools' hashes.
 *
 * Lock order. There is no mutex: all of this runs on the event loop, and these rules stand in for locks.
 * 1. A slot's fields (session, current, acked, followed) change only with no await between the decision
 *    and the change (each such place says so), so an open from then on finds a consistent slot.
 * 2. Per version, in this order: `recording` (an fsync's record while it is open), then `sealing` (one
 *    seal at a time: a second flush or close awaits the first), then `journaling` (its entry written),
 *    then the upload's commit, which waits for that entry. A version is never changed after `sealing`.
 * 3. Per session, `cloning`: one clone of a journaled version at a time; concurrent writes wait for it.
 * 4. Per library, `makingFolders`: one creation of offline folders at a time, parents first.
 * 5. The journal: a version's spool is durable before its record is (unless the record carries the
 *    bytes); records are ordered by `seq`, and at replay the later record of a path wins. Every change
 *    of the log file (an append, a rewrite) runs on JournalLog's one chain, one at a time.
 * 6. The engine (a lessee): a direct writer's `stop` runs synchronously before any other change of its
 *    version (DirectSpool); a side writer's records are settled before the journal leaves its log.
 */
import { baseAfter, baseOf } from './conflicts.js';
import { createReadStream } from 'node:fs';
import { copyFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { fsErrorOf } from '../fs-errors.js';
import { LocalVersion, type BaseOpener } from './local-version.js';
import { parentOf, type RemoteEntry } from '../remote.js';
import { VfsError, type Attr, type CallContext } from '../types.js';
import type { LeasedHandle, LeaseOpenFlags } from '../engine-lease.js';
import { entryOf, gatewayPath, isEmpty, keyOf, type PathSlot, type WriteBackStatus } from './slots.js';
import { WriteBackFolders } from './pending-folders.js';
import { FollowedFile, SessionHandle, VersionReadHandle } from './handles.js';

export type { FollowedFile } from './handles.js';
export type { WriteBackHost, WriteBackOptions, WriteBackStatus } from './slots.js';

export class WriteBack extends WriteBackFolders {
  async init(): Promise<void> {
    await this.journal.init();
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

  /**
   * Where the path's local content stands (file-state.ts): `uploading` while an upload of one of its
   * versions is under way, `pending` while other content of it is not yet on the service (being written,
   * journaled, queued, waiting to retry), undefined when the service has it all.
   */
  syncState(library: string, fullpath: string): 'pending' | 'uploading' | undefined {
    if (!this.dirty(library, fullpath)) return undefined;
    const slot = this.slots.get(keyOf(library, fullpath))!;
    return this.versionsOf(slot).some((v) => this.uploads.stateOf(v.id) === 'uploading') ? 'uploading' : 'pending';
  }

  // ---- writes --------------------------------------------------------------------------------------------

  /**
   * A write handle on a path: joins the path's open version, or starts one (from the local version, the
   * service's `base`, or empty). `truncate` empties it; a new file (`base` undefined, nothing local) starts
   * empty and is listed from now on.
   */
  async openWrite(library: string, fullpath: string, base: RemoteEntry | undefined, flags: LeaseOpenFlags, ctx?: CallContext): Promise<LeasedHandle> {
    const slot = base ? this.slotFor(library, fullpath) : this.slotForNew(library, fullpath);
    let session = slot.session;
    const joined = !!session;
    if (!session) {
      const start = slot.current;
      // From a local version: it is shared until the first change, then cloned (it may be journaled).
      const version = start ?? this.newVersion(library, fullpath, base, ctx, flags);
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
      // A new file whose spool a front end made and has not taken over yet: that spool stays the front end's.
      if (joined && s.version.lent) await this.disownLentSpool(s);
      // A truncate changes the file when it empties something: the session's version, or another version
      // with content the path shows (a replace made meanwhile, local or already on the service). An empty
      // one shown is left as it is: nothing changes, nothing to upload.
      s.version.refreshLive();
      const empties = flags.truncate && (!isEmpty(s.version) || (slot.current ? slot.current !== s.version && !isEmpty(slot.current) : (base?.size ?? 0) > 0));
      // Handed to the kernel (passthrough): changed in place, as the kernel writes it.
      if (s.version.isLive) {
        if (empties) await this.truncateLive(s, 0);
      } else if (!slot.current && !base) await this.change(s, { empty: true });
      // With other writers, the front end's spool is not taken over: no id of it.
      else if (empties) await this.change(s, { empty: true, ...(s.writers === 1 ? { journalId: flags.journalId, spoolMade: flags.spoolMade } : {}) });
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
  openRead(library: string, fullpath: string): LeasedHandle | undefined {
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
    const key = keyOf(library, fullpath);
    const replacing = this.replacing.get(key) ?? new Set<LocalVersion>();
    this.replacing.set(key, replacing.add(v));
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
      if (opts.holdUploadMs) v.holdUntilMs = this.clock.now() + opts.holdUploadMs;
      if (this.closed) throw new VfsError('EIO', 'the gateway is closing');
      await this.journalVersion(v, undefined, { upload: false, sync: this.syncOnClose }); // no writer has it open: queued unless held
      return entryOf(v);
    } catch (err) {
      v.failed ??= err instanceof VfsError ? err : fsErrorOf(err, `writing '${fullpath}'`);
      throw err;
    } finally {
      replacing.delete(v);
      if (replacing.size === 0 && this.replacing.get(key) === replacing) this.replacing.delete(key);
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
      // Held until moved() or resumeUploads(); set first: a commit answered after the cancel is one a
      // rename stopped (committedAfterCancel), and the version then counts as uploaded at this path.
      v.holdUntilMs = Number.MAX_SAFE_INTEGER;
      await this.uploads.cancel(v.id);
      if (v.state === 'uploading') v.state = 'journaled';
    }
  }

  /**
   * True when the service has nothing of the file at `fullpath` from here: every local version of it was
   * made in this run from a new file and none of the path's was handed to the uploader (a rename then moves
   * it here only; after stopUploads, none can be handed over before moved()).
   */
  unsent(library: string, fullpath: string): boolean {
    const slot = this.slots.get(keyOf(library, fullpath));
    if (!slot?.current || slot.sent) return false;
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
        // A commit under way may land all the same: answered, it is this gateway's own at the path, and the
        // removal that follows removes it (cut off, it could land after that, an unlinked file back).
        await this.uploads.cancel(acked.id, { answered: true });
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
      // A version that failed is its writers' to hear of, at their next flush or close.
      if (!s || s.deleted || s.version.failed) continue;
      // Acknowledged here, as an fsync would, and sealed: the bytes the kernel wrote in place too.
      await this.persist(s, { fsync: true, seal: true }).catch((err: unknown) => {
        if (!s.version.failed) throw err;
      });
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

  /** A rename moved `from` to `to` on the service (ConflictKeeper.moved); a conflict's copy moved away is dealt with. */
  movedOnService(library: string, from: string, to: string): void {
    this.conflicts.moved(library, from, to);
    this.conflicts.gone(library, from);
  }

  /** `fullpath` was removed on the service through this gateway (ConflictKeeper.gone). */
  removedOnService(library: string, fullpath: string): void {
    this.conflicts.gone(library, fullpath);
  }

  /** True while `fullpath` is the file or the copy of an open conflict (ConflictKeeper.involves). */
  inConflict(library: string, fullpath: string, copyGone: (library: string, fullpath: string) => boolean): boolean {
    return this.conflicts.involves(library, fullpath, copyGone);
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
    for (const t of this.holdTimers) t.cancel();
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

  // ---- scratch spools, attributes, durability ---------------------------------------------------------------

  /** A spool file for a copy through the gateway (removed at the next start if left behind). */
  scratchSpool(): { id: string; path: string } {
    const id = this.journal.newId();
    return { id, path: this.journal.spoolPath(id) };
  }

  /**
   * Fills scratch spool `spool` (scratchSpool) with the whole of service version `base`, read with
   * `openBase`, durable and closed: a copy's source, never a version of a path (nothing journals it).
   */
  async fillScratch(id: string, spool: string, library: string, fullpath: string, base: RemoteEntry, openBase: BaseOpener): Promise<void> {
    const tmp = new LocalVersion(id, spool, library, fullpath, base, { baseSize: base.size, openBase, clock: this.clock });
    await tmp.fillAll();
    await tmp.sync();
    await tmp.closeSpool();
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
