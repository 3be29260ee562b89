/**
 * WriteBackSeals: write sessions and the seals of their versions — a change in a new version when the last
 * one is journaled, a version journaled at a flush, fsync or close, uploaded once nobody writes it, and a
 * failed one dropped whole (see write-back.ts for the rules).
 */
import { baseAfter, baseJoined, baseUploaded } from './conflicts.js';
import { fsErrorOf } from '../fs-errors.js';
import { LocalVersion } from './local-version.js';
import type { RemoteEntry } from '../remote.js';
import type { Sha1Stream, Sha1Streams } from './sha1-streams.js';
import { INLINE_MAX_BYTES, orderOf, type JournalEntry } from './journal-entry.js';
import { closeRecordEntry, decodeCloseRecord } from './engine-close-record.js';
import { VfsError, type CallContext } from '../types.js';
import type { EngineClose } from '../engine-lease.js';
import { WriteBackSlots, installedSince, keyOf, type PathSlot, type WriteSession } from './slots.js';


export abstract class WriteBackSeals extends WriteBackSlots {
  /**
   * Before a change through a session: its version is writable (a journaled one is cloned first; `empty`
   * starts from nothing instead), the path shows it, and small files have their content local.
   */
  async change(s: WriteSession, opts: { empty?: boolean; journalId?: string; spoolMade?: boolean } = {}): Promise<LocalVersion> {
    if (s.cloning) await s.cloning.catch(() => undefined);
    if (s.version.failed) throw s.version.failed;
    if (!s.version.mutable) {
      const from = s.version;
      // An empty version is not copied: the new one starts empty, as a new file does (held in memory, hashed as written).
      const empty = opts.empty || (from.size === 0 && from.baseReady);
      s.cloning = (async () => {
        // Emptied by an open whose front end made the spool (LeaseOpenFlags.journalId): that spool's id, to adopt it.
        const next = this.newVersion(from.library, from.fullpath, from.base, undefined, empty ? opts : undefined);
        if (!empty) {
          const cloned = await from.derive(next.id, next.spoolPath, { fetchChunk: this.opts.partialFetch?.chunkBytes });
          cloned.deleted = s.deleted;
          cloned.unsent = from.unsent;
          return cloned;
        }
        next.unsent = from.unsent;
        next.operator = from.operator;
        next.replaces = baseAfter(from.replaces, from.currentSha1());
        next.ctimeMs = from.ctimeMs;
        // Emptied before the session shows it: once shown, another handle may write and seal it before
        // this change's turn comes (the change would then find it journaled).
        try {
          await next.startEmpty();
        } catch (err) {
          await this.dropIfUnused(next).catch(() => undefined);
          throw err;
        }
        next.touch();
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
    } else if (opts.empty) {
      s.baseReader?.close();
      s.baseReader = undefined;
      const v = s.version;
      try {
        await v.startEmpty();
      } catch (err) {
        // Sealed meanwhile by another handle's flush or close (it waited for the seal), the session perhaps
        // moved on by that handle's next write: the version the session holds now is emptied, as it would
        // have been a moment later. Only a failure of its own is the writer's.
        if (v.failed || v.mutable || s.deleted) throw err;
        return this.change(s, opts);
      }
      v.touch();
    } else if (!s.version.baseReady && s.version.baseSize <= (this.opts.partialFetch?.wholeMaxBytes ?? 8 * 1024 * 1024)) {
      await s.version.fillAll();
    }
    this.changed(s);
    return s.version;
  }

  /**
   * A write or truncate through the Vfs of the version handed to the kernel (passthrough): in place, as the
   * kernel's own writes, but seen: a change of the session like any other (after a replace, the path shows
   * the session's version again).
   */
  async writeLive(s: WriteSession, position: number, data: Buffer): Promise<number> {
    const n = await s.version.writeLive(position, data);
    this.changed(s);
    return n;
  }

  async truncateLive(s: WriteSession, size: number): Promise<void> {
    await s.version.truncateLive(size);
    this.changed(s);
  }

  /**
   * The writers flushed `s`: nothing of theirs is unflushed, and of a version the session handed to the
   * kernel, only what the kernel writes from its generation now.
   */
  protected flushed(s: WriteSession): void {
    s.unflushed = false;
    if (s.flushedLive?.version === s.version) s.flushedLive = { version: s.version, generation: s.version.generation };
  }

  /** `s` changed: what its writers wrote is unflushed, and its version is what the path shows. */
  protected changed(s: WriteSession): void {
    s.unflushed = true;
    s.replaced = false;
    if (!s.deleted) {
      s.slot.current = s.version;
      this.index(s.slot);
    }
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
   * group commit follows), unless the durability mode is `close`. `closed`: see LeasedHandle.flush.
   * `seal`: a version also of a file writers keep open (flushAll), where an fsync alone keeps it writable.
   */
  async persist(s: WriteSession, opts: { fsync: boolean; closed?: EngineClose; seal?: boolean }): Promise<void> {
    if (s.cloning) await s.cloning.catch(() => undefined);
    // The kernel's last writes, journaled as its hand-over ended (the mount ends it before the release).
    await s.handOverEnded;
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
    // The kernel writes a version handed to it by this session (passthrough) in place, through no change():
    // a generation past the one the writers last flushed is theirs, unflushed as well. Also once the
    // hand-over ended: the mount ends it just before the release.
    const kernel = s.flushedLive?.version === v;
    const unflushed = s.unflushed || (kernel && s.flushedLive!.generation !== v.generation);
    this.flushed(s);
    const sync = opts.fsync || this.syncOnClose;
    if (kernel && v.state !== 'writing' && (v.liveChanged || unflushed) && (s.slot.current !== v || v.superseded || installedSince(s.slot, v))) {
      // Sealed (by a flush or the write-back delay), then replaced, and changed since: see acknowledgeAgain.
      // Changed through the Vfs (a write, a truncate), it is what the path shows again but no longer its
      // acknowledged one; uploaded before the replace came, it was superseded by nothing.
      await this.acknowledgeAgain(s, v, { upload: opts.fsync, sync });
      return;
    }
    if (v.liveChanged && v.state !== 'writing') {
      await this.rejournal(v, { sync });
      if (opts.fsync) this.schedule(s.slot, { force: true });
      return;
    }
    if (v.mutable && v.generation > 0) {
      // Kept open, it stays writable; unless another version was acknowledged at the path since its last
      // change (a replace): this fsync acknowledges it after that one, so it is the path's now, as a flush's.
      if (opts.fsync && !opts.seal && s.writers > 0 && !replacedSinceChange(s)) await this.keepOpen(s, v);
      else await this.journalVersion(v, s, { upload: opts.fsync, sync, closed: opts.closed });
      return;
    }
    if (unflushed && s.slot.current !== v) {
      // Sealed by the write-back delay (uploadWhenQuiet) after a change no writer flushed, and another
      // version acknowledged at the path since (a replace): this flush acknowledges the writers' bytes
      // after that one, as it would had the delay not ended first. A copy of them is journaled anew.
      const next = await this.change(s);
      s.unflushed = false;
      await this.journalVersion(next, s, { upload: opts.fsync, sync });
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
  protected async keepOpen(s: WriteSession, v: LocalVersion): Promise<void> {
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
   * `v` was acknowledged at `slot`: an open version there that an fsync recorded before is older than
   * `v`. Unchanged since, it never becomes the path's version unless it changes again. Changed since or
   * not, its record, replayed after a crash, would bring back the fsync's bytes over `v`'s, acknowledged
   * after them (what changed since is the writers' and goes with a crash; regression: a replace's content
   * uploaded, then a crash, and replay put the fsync's older bytes back at the name). So the record goes
   * (after any record of it still being written, unless that one is newer than `v`; a seal under way
   * removes it itself), and `v`'s confirmation by the service, which removes `v`'s entry, waits for that.
   */
  protected overtake(slot: PathSlot, v: LocalVersion): void {
    const open = slot.session?.version;
    if (!open || open === v || !open.openRecord || open.seq > v.seq) return;
    if (open.generation === open.openGeneration) open.overtakenAt = open.generation;
    const dropped = (open.recording ?? Promise.resolve())
      .then(() => (open.mutable && open.seq < v.seq ? this.dropOpenRecord(open) : undefined))
      .catch(() => undefined);
    open.recording = dropped;
    const entry = v.journaling;
    v.journaling = Promise.all([entry, dropped]).then(() => undefined);
  }

  /** The record an fsync wrote of an open version that will never be one (failed, unlinked): it goes. */
  protected async dropOpenRecord(v: LocalVersion): Promise<void> {
    if (!v.openRecord) return;
    v.openRecord = undefined;
    await this.journal.remove(v.id, { keepSpool: true });
  }

  /**
   * An fsynced version that writers keep open (a database, a log) is sealed and uploaded once it stayed
   * unchanged for the write-back delay: looked at again after each delay until then. A replace stops
   * that (install): a seal is no writer's acknowledgement and must not win over the replace; the writers'
   * next flush, fsync or close acknowledges their bytes after it, and their next fsync starts this again
   * (regression: the seal put unflushed bytes over a replace, lost in a crash then).
   */
  protected uploadWhenQuiet(s: WriteSession, v: LocalVersion): void {
    if (s.quiet) return;
    const look = (mark: number): void => {
      const t = this.clock.after(this.opts.upload?.delayMs ?? 0, () => {
        this.holdTimers.delete(t);
        s.quiet = undefined;
        if (this.closed || this.uploads.stopped || s.deleted || s.version !== v || !v.mutable || s.writers === 0) return;
        const now = v.changeMark();
        if (now !== mark) {
          look(now);
          return;
        }
        // Its place in the order is now: a replace acknowledged while it is sealed comes after it.
        this.journalVersion(v, s, { upload: true, sync: true, seq: this.nextSeq() }).catch((err: unknown) => this.opts.logger.warn({ path: v.fullpath, err: String(err) }, 'write-back: sealing a file kept open after its fsync failed'));
      });
      s.quiet = t;
      this.holdTimers.add(t);
    };
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
    // Handed to the kernel (passthrough) and never written: the path shows the service's version again.
    if (s.slot.current === v && v.mutable && v.generation === 0) s.slot.current = undefined;
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
  protected async journalVersion(v: LocalVersion, s: WriteSession | undefined, opts: SealOptions): Promise<void> {
    if (v.sealing) {
      // Another handle's flush or close is journaling it already: that covers this one's writes too.
      await v.sealing;
      if (opts.sync && v.state !== 'writing') await this.journal.sync(v.id).catch((err: unknown) => { throw fsErrorOf(err, `making '${v.fullpath}' durable`); });
      if (opts.upload) this.schedule(s?.slot ?? this.slotFor(v.library, v.fullpath), { force: true });
      return;
    }
    // Being journaled, it is in use: a clone made meanwhile (a write after its seal) must not drop its spool.
    v.journalingNow = true;
    const key = keyOf(v.library, v.fullpath);
    const at = this.sealingAt.get(key) ?? new Set<LocalVersion>();
    this.sealingAt.set(key, at);
    at.add(v);
    const sealing = this.sealVersion(v, s, opts).finally(() => {
      v.journalingNow = false;
      at.delete(v);
      if (at.size === 0 && this.sealingAt.get(key) === at) this.sealingAt.delete(key);
    });
    v.sealing = sealing;
    // Superseded, unlinked or failed meanwhile: its spool goes once nothing else uses it.
    sealing.catch(() => undefined).then(() => this.dropIfUnused(v)).catch(() => undefined);
    return sealing;
  }

  /**
   * Writes a version's journal entry. `standIn`: the bytes of a close record a front end wrote to its side
   * log before it answered the close itself, of this very content. That record is durable already, so
   * applying it needs no new disk space: should the journal fail to write its own line (a full disk), the
   * record stands for the version until the journal can (UploadJournal.holdSideRecord), and the version is
   * made all the same. Without one, the failure is the caller's (ENOSPC, EIO).
   */
  protected async journalPut(entry: JournalEntry, opts: { spoolSynced: boolean; sync: boolean; inline: Buffer | undefined }, standIn?: () => Buffer | undefined): Promise<void> {
    try {
      this.opts.diskFaults?.check('journal', `journaling '${entry.fullpath}'`);
      await this.journal.put(entry, opts);
    } catch (err) {
      const data = opts.sync ? undefined : standIn?.();
      if (!data) throw fsErrorOf(err, `journaling '${entry.fullpath}'`);
      this.opts.logger.warn({ path: entry.fullpath, err: String(err) }, 'write-back: the journal could not write the line of a close the engine answered; its close record stands for it until it can');
      this.journal.holdSideRecord(entry, data);
    }
  }

  /** The close record `closed` carries, with its entry, when it names `v` at its path (never for an fsync). */
  protected closeRecordOf(v: LocalVersion, closed: EngineClose | undefined, sync: boolean): { entry: JournalEntry; data: Buffer } | undefined {
    const record = closed && !sync ? decodeCloseRecord(closed.record) : undefined;
    const entry = record && closeRecordEntry(record);
    if (!entry || entry.id !== v.id || entry.library !== v.library || entry.fullpath !== v.fullpath || v.operator) return undefined;
    return { entry, data: record.data };
  }

  protected async sealVersion(v: LocalVersion, s: WriteSession | undefined, opts: SealOptions): Promise<void> {
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
      // A close the front end journaled itself, of a spool the kernel wrote: sealed as its record says,
      // when the record names this version at its path.
      const kernels = opts.closed?.spoolMtimeNs !== undefined ? this.closeRecordOf(v, opts.closed, opts.sync) : undefined;
      let closed = kernels?.entry;
      // A small file's bytes go in its journal record: its spool then needs no fsync of its own.
      let inline = kernels ? kernels.data : v.inlineContent();
      const readAt = v.generation;
      const sealSynced = opts.sync && !inline && !closed;
      await v.seal(this.opts.hasher, { sync: sealSynced, closed: closed && { size: closed.size, sha1: closed.sha1!, mtimeNs: opts.closed!.spoolMtimeNs! } });
      if (closed && !v.sealedAs(closed.sha1!, closed.size)) {
        // The kernel wrote on meanwhile (another descriptor of the open file): sealed as the spool is now.
        closed = undefined;
        inline = v.reseal();
      } else if (!closed && inline && (v.generation !== readAt || v.isLive)) {
        // Written on between the read of its bytes and the seal (another handle, or the kernel, which may
        // write on unseen at any moment): the record carries the bytes its SHA-1 names, read with them in
        // one step, or none (the spool, made durable, has them). Regression: a record of a file the kernel
        // wrote named one size and bytes and the SHA-1 of another, and replay set the file aside.
        inline = v.isLive ? v.reseal() : v.inlineContent();
      }
      // Unchanged since an fsync recorded it: its place in the order is that fsync's.
      const asFsynced = v.openRecord !== undefined && v.generation === v.openGeneration;
      v.seq = closed ? this.seqOf(closed) : asFsynced ? v.seq : opts.seq ?? this.nextSeq();
      // The path's acknowledged version it replaces once installed (below) is of its lineage already in its
      // record: replayed after a crash, it takes the gateway's own version at the path for no other's.
      const ackedNow = this.slots.get(keyOf(v.library, v.fullpath))?.acked;
      if (!closed && ackedNow && ackedNow !== v && ackedNow.seq < v.seq) v.replaces = baseJoined(v.replaces, ackedNow.replaces, ackedNow.currentSha1());
      const entry = closed ?? this.journalEntry(v);
      // Unchanged since an fsync made its spool durable: nothing of it is left to a group commit.
      const spoolSynced = sealSynced || v.syncedGeneration === v.generation;
      // The front end's close record, of this very content, stands for it should the journal take no line
      // (looked at only then: a close the engine answered of bytes it had JavaScript write).
      const standIn = (): Buffer | undefined => {
        const r = kernels ?? this.closeRecordOf(v, opts.closed, opts.sync);
        return r && v.sealedAs(r.entry.sha1!, r.entry.size) ? r.data : undefined;
      };
      await this.journalPut(entry, { spoolSynced, sync: opts.sync, inline }, opts.closed && standIn);
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
    await this.install(v, s, opts);
  }

  /**
   * Makes `v`, its entry journaled, the path's acknowledged version, and what the path shows unless a
   * session changed on after its seal; the version it replaces is superseded, and `v` queued (`upload`:
   * at once). A newer version acknowledged meanwhile supersedes `v` instead.
   */
  protected async install(v: LocalVersion, s: WriteSession | undefined, opts: { upload: boolean }): Promise<void> {
    // No await from here to the end of the install: the slot changes in one step.
    const predecessor = v.predecessor;
    v.predecessor = undefined;
    if (predecessor?.journalingNow) predecessor.superseded = true;
    // A replace of nothing (no file at the path) makes a new file there.
    const slot = !s && !v.base ? this.slotForNew(v.library, v.fullpath) : this.slotFor(v.library, v.fullpath);
    const old = slot.acked;
    if ((old && old.seq > v.seq) || (slot.newestSeq ?? 0) > v.seq) {
      // A newer version was acknowledged meanwhile (perhaps uploaded already): this one is superseded at once.
      await this.journal.remove(v.id, { keepSpool: true, durable: false });
      return;
    }
    // Replacing one acknowledged meanwhile that it was not made from: that one is of its lineage now,
    // and this one is of the lineage of every replace still being written.
    if (old && old !== v) v.replaces = baseJoined(v.replaces, old.replaces, old.currentSha1());
    for (const x of this.replacing.get(keyOf(v.library, v.fullpath)) ?? []) if (x !== v) x.replaces = baseJoined(x.replaces, v.replaces, v.currentSha1());
    v.state = 'journaled';
    // The write-back delay: uploaded a little after the last close (a rewrite meanwhile replaces it first).
    const delayMs = this.opts.upload?.delayMs ?? 0;
    if (!opts.upload && delayMs > 0) v.holdUntilMs = Math.max(v.holdUntilMs, this.clock.now() + delayMs);
    slot.acked = v;
    slot.newestSeq = Math.max(slot.newestSeq ?? 0, v.seq);
    this.overtake(slot, v);
    // A session that changed on after this version was sealed shows its newer bytes; otherwise this version.
    if (!s || !(slot.current && slot.current !== v && slot.current.mutable)) slot.current = v;
    if (slot.session && slot.session !== s && slot.session.version !== v) {
      slot.session.replaced = true;
      const quiet = slot.session.quiet;
      slot.session.quiet = undefined;
      if (quiet) {
        quiet.cancel();
        this.holdTimers.delete(quiet);
      }
    }
    this.index(slot);
    if (old && old !== v) await this.supersede(old);
    this.schedule(slot, { force: opts.upload });
  }

  /** A journaled version the kernel changed in place after its seal (passthrough): journaled again. */
  protected async rejournal(v: LocalVersion, opts: { sync: boolean }): Promise<void> {
    if (v.superseded || v.deleted || v.state === 'retired' || v.state === 'writing') return;
    const slot = this.slots.get(keyOf(v.library, v.fullpath));
    await this.journalAsSpoolIs(v, slot, opts, () => {
      if (v.state === 'journaled') return;
      v.state = 'journaled';
      if (slot && !slot.acked) slot.acked = v;
    });
  }

  /**
   * Writes the entry of `v`, a live version the kernel wrote in place since its seal, again as its spool
   * now is (a large one sealed by its mark, nothing read: replay checks it by that; the later line about
   * the id wins). An upload of what it held before stops, to be made again after; the upload's
   * confirmation waits for the line (`journaling`). `beforeLine` runs once the kernel's writes are known
   * to be on the disk. When they may miss what the disk refused, neither content is the file's: the entry
   * goes and `v` fails.
   */
  protected async journalAsSpoolIs(v: LocalVersion, slot: PathSlot | undefined, opts: { sync: boolean }, beforeLine: () => void): Promise<void> {
    if (v.state === 'uploading') await this.uploads.cancel(v.id);
    try {
      await v.checkRoomForKernelWrites();
    } catch (err) {
      await this.journal.remove(v.id, { keepSpool: true }).catch(() => undefined);
      throw this.journalingFailed(v, err, slot);
    }
    beforeLine();
    const inline = v.reseal();
    const written = this.journalPut(this.journalEntry(v), { spoolSynced: false, sync: opts.sync, inline });
    v.journaling = written.catch(() => undefined);
    try {
      await written;
    } catch (err) {
      throw this.journalingFailed(v, err, slot);
    }
  }

  /**
   * A live version (passthrough) sealed by the write-back delay (uploadWhenQuiet), that a replace then
   * superseded or followed, and whose writers flush or close with bytes they had not flushed (the
   * kernel's, before the replace or after it): those bytes are acknowledged after the replace, as a
   * version made from it would be for a writer through the Vfs. It stays the session's version, since the
   * kernel writes its spool: its entry is written again as the spool is now, with a place in the order
   * after the replace's, and it becomes the path's version once more.
   */
  protected async acknowledgeAgain(s: WriteSession, v: LocalVersion, opts: { upload: boolean; sync: boolean }): Promise<void> {
    if (v.deleted || v.state === 'retired') return;
    await this.journalAsSpoolIs(v, s.slot, opts, () => {
      v.seq = this.nextSeq();
      const ackedNow = s.slot.acked;
      if (ackedNow && ackedNow !== v) v.replaces = baseJoined(v.replaces, ackedNow.replaces, ackedNow.currentSha1());
    });
    if (v.deleted || s.deleted) {
      await this.journal.remove(v.id, { keepSpool: true });
      return;
    }
    // No await from here to the install: the path's newest version again.
    v.superseded = false;
    await this.install(v, s, opts);
  }

  /** `v` could not be journaled: it fails with that error (its first), and its path shows what it did before. */
  protected journalingFailed(v: LocalVersion, err: unknown, slot = this.slots.get(keyOf(v.library, v.fullpath))): VfsError {
    v.failed ??= err instanceof VfsError ? err : fsErrorOf(err, `journaling '${v.fullpath}'`);
    if (slot) this.failed(slot, v);
    return v.failed;
  }

  /** An older acknowledged version that a newer one replaced: its upload stops, its entry goes. */
  protected async supersede(old: LocalVersion): Promise<void> {
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
  protected schedule(slot: PathSlot, opts: { force?: boolean } = {}): void {
    const v = slot.acked;
    if (!v || v.state !== 'journaled' || this.closed) return;
    if (v.holdUntilMs === Number.MAX_SAFE_INTEGER) return; // a rename under way (stopUploads)
    // The kernel may still write it (passthrough): queued once it is done with the spool, unless forced
    // (a change it makes meanwhile is journaled again and uploaded after: see rejournal).
    if (v.isLive && !opts.force) return;
    if (!opts.force) {
      if (slot.session && slot.session.version === v && slot.session.writers > 0) return;
      const wait = v.holdUntilMs - this.clock.now();
      if (wait > 0) {
        const t = this.clock.after(wait, () => { this.holdTimers.delete(t); this.schedule(slot); });
        this.holdTimers.add(t);
        return;
      }
    }
    v.state = 'uploading';
    v.unsent = false;
    slot.sent = true;
    void this.uploads.enqueue(v);
  }

  /** The service confirmed `v`. */
  protected async uploadedVersion(v: LocalVersion, entry: RemoteEntry): Promise<void> {
    await v.journaling;
    this.opts.host.uploaded(v.library, entry, v.mtimeMs);
    if (v.deleted || v.superseded || v.state === 'retired') return;
    v.state = 'uploaded';
    v.base = entry;
    const slot = this.slots.get(keyOf(v.library, v.fullpath));
    this.reachedService(v, entry);
    // Decided with no await before: an open from now on finds either this version or the service's.
    if (slot?.acked === v) slot.acked = undefined;
    // A seal under way at the path may be older (the write-back delay's, decided before this version): its
    // entry, once written, is dropped at its end. Until then this entry stays, so that a crash never
    // leaves that seal's entry the path's newest, to be uploaded over this one at the next start.
    const older = [...(this.sealingAt.get(keyOf(v.library, v.fullpath)) ?? [])].filter((x) => x !== v);
    if (older.length > 0) await Promise.all(older.map((x) => x.sealing?.catch(() => undefined)));
    await this.journal.remove(v.id, { keepSpool: true });
    await this.dropIfUnused(v);
    if (slot) this.tidy(slot);
  }

  /**
   * The service answered `v`'s commit after its upload was cancelled. When a rename stopped it (its hold
   * says so: `stopUploads`) and nothing of it changed since, the service has it at its path: it counts as
   * uploaded there, and the rename moves it on the service (or, failing, leaves it there) with nothing
   * sent again. A second commit would find the file at the name and be placed at a numbered one, which
   * the gateway then removes. Any other cancel (superseded, unlinked, changed) keeps its own course,
   * the path's versions knowing that the service has this one there (not unlinked).
   */
  protected async committedAfterCancel(v: LocalVersion, entry: RemoteEntry, snapshot: { generation: number; fullpath: string }): Promise<void> {
    // Whatever stopped it (the kernel changed it in place, a newer version superseded it), the service has
    // its content at the path now: the path's versions, itself included when it is sent again, replace
    // that there. Still counted a new file, the next commit would be placed at a numbered name beside it.
    if (!v.deleted && v.fullpath === snapshot.fullpath && entry.fullpath === snapshot.fullpath) this.reachedService(v, entry);
    if (v.holdUntilMs !== Number.MAX_SAFE_INTEGER || v.deleted || v.superseded || v.failed || v.state !== 'uploading') return;
    if (v.fullpath !== snapshot.fullpath || v.generation !== snapshot.generation || v.liveChanged) return;
    if (this.slots.get(keyOf(v.library, v.fullpath))?.acked !== v) return;
    await this.uploadedVersion(v, entry);
  }

  /** The service has `entry`, `v`'s content, at its path: versions of the path made from it replace it there without a conflict. */
  protected reachedService(v: LocalVersion, entry: RemoteEntry): void {
    const slot = this.slots.get(keyOf(v.library, v.fullpath));
    if (slot) for (const x of this.versionsOf(slot)) x.replaces = baseUploaded(x.replaces, entry.contentHash);
    for (const x of this.replacing.get(keyOf(v.library, v.fullpath)) ?? []) x.replaces = baseUploaded(x.replaces, entry.contentHash);
    v.replaces = baseUploaded(v.replaces, entry.contentHash);
  }

  /** A failed version: the path shows its last acknowledged version again (or nothing). */
  protected failed(slot: PathSlot, v: LocalVersion): void {
    this.dropOpenRecord(v).catch((err: unknown) => this.opts.logger.error({ path: v.fullpath, err: String(err) }, 'write-back: removing the record of a failed version failed'));
    if (slot.current === v) slot.current = slot.acked !== v ? slot.acked : undefined;
    if (slot.acked === v) slot.acked = undefined;
    this.tidy(slot);
  }

  /**
   * Removes a version's spool once nothing uses it: no pin, not what the path shows or has acknowledged.
   * An uploaded version that the path still shows is let go of here too (reads then go to the service).
   */
  protected async dropIfUnused(v: LocalVersion): Promise<void> {
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

  /**
   * `given.journalId`: the id a front end gave the version (it journals the version's record itself too);
   * `given.spoolMade`: it made the spool under that id itself (LeaseOpenFlags).
   */
  protected newVersion(library: string, fullpath: string, base: RemoteEntry | undefined, ctx?: CallContext, given?: { journalId?: string; spoolMade?: boolean }): LocalVersion {
    const journalId = given?.journalId;
    const id = journalId !== undefined && this.journal.freshId(journalId) ? journalId : this.journal.newId();
    const spool = this.journal.spoolPath(id);
    const v: LocalVersion = new LocalVersion(id, spool, library, fullpath, base, {
      baseSize: base?.size ?? 0, mtimeMs: base?.mtimeMs, fetchChunk: this.opts.partialFetch?.chunkBytes,
      sha1Stream: sha1StreamOf(this.opts.sha1Streams, spool), faults: this.opts.diskFaults, newSpool: true, unwritten: this.unwritten, clock: this.clock,
      // The base is wherever the file is now (a rename moves it on the service too), in the version it had.
      openBase: base ? (start, end) => {
        const remote = this.opts.host.remoteFor(v.library);
        if (!remote) throw new VfsError('EIO', `library '${v.library}' is no longer served`);
        return remote.openRange(v.fullpath, start, end, { operator: ctx?.operator, signal: ctx?.signal, contentHash: base.contentHash });
      } : undefined,
    });
    // The front end made the spool itself (the FUSE engine with passthrough): its file until taken over.
    v.lent = id === journalId && given?.spoolMade === true;
    v.operator = ctx?.operator;
    const replaced = base ? undefined : this.replacedObjects.get(keyOf(library, fullpath));
    if (replaced) {
      v.replaces = [replaced];
      this.replacedObjects.delete(keyOf(library, fullpath));
    }
    return v;
  }

  protected journalEntry(v: LocalVersion): JournalEntry {
    return { id: v.id, library: v.library, fullpath: v.fullpath, size: v.size, mtimeMs: v.mtimeMs, createdMs: this.clock.now(), seq: v.seq, ...v.contentNamedBy(), operator: v.operator, replaces: v.replaces?.slice() };
  }

  protected nextSeq(): number {
    this.lastSeq = Math.max(this.lastSeq + 1, this.clock.now() * 1000);
    return this.lastSeq;
  }

  /** The order of a version whose record a side writer wrote (its number from the same clock): later ones follow it. */
  protected seqOf(entry: JournalEntry): number {
    const seq = orderOf(entry);
    this.lastSeq = Math.max(this.lastSeq, seq);
    return seq;
  }
}

/**
 * The version's hash stream opener, made outside newVersion: a closure made there would keep the whole
 * scope of the call (the operation's context and everything it holds) for as long as the version lives.
 */
function sha1StreamOf(streams: Sha1Streams, spool: string): () => Sha1Stream {
  return () => streams.open(spool);
}

/**
 * Another version was acknowledged at the session's path since its last change: what the path shows
 * (that one, or, once it is uploaded, nothing local) is not the session's.
 */
function replacedSinceChange(s: WriteSession): boolean {
  return s.replaced === true || (s.slot.current !== undefined && s.slot.current !== s.version);
}

/** How a version is sealed and journaled (journalVersion). */
interface SealOptions {
  /** Queued for upload at once, even while writers have it open. */
  upload: boolean;
  /** Durable against power loss before it resolves. */
  sync: boolean;
  /** The front end's close record of this content (see LeasedHandle.flush). */
  closed?: EngineClose;
  /** Its place in the order, taken when it was decided (a seal of the write-back's own); else at its seal. */
  seq?: number;
}
