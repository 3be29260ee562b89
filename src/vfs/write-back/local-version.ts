/**
 * LocalVersion: one version of a file that the gateway holds locally, in a spool file of the
 * UploadJournal. Its life has explicit states, and only its owner (WriteBack) moves it along them:
 *
 *   writing → journaled → uploading → uploaded → retired
 *
 * - `writing`: the only state in which its bytes change. Writes, truncates and base fetches go to the
 *   spool, serialised (`exclusive()`).
 * - `journaled`: the spool and its journal entry are durable; from here on the version is immutable (a
 *   later change is made in a new version, copied from this one). `uploading` is the same with its upload
 *   running.
 * - `uploaded`: the service has it; the spool stays only while a handle still reads it.
 * - `retired`: the spool is gone; any access is a bug, answered EIO.
 *
 * A version of an existing file starts with none of the service's content (the "base") local. The spool
 * is sparse: `present` records which byte ranges hold valid data (written locally or fetched). Reads of
 * absent base ranges fetch them on demand (at least `fetchChunk` bytes at a time) and keep them;
 * `fillAll()` fetches every absent range before the version is journaled, so an upload never carries a
 * truncated or partial file. Small files are fetched whole at the first change instead (one request).
 *
 * A version may hand its spool to a direct writer (`directSpool`: the FUSE engine writes the data from
 * its own thread and reports each write); while it writes, every change made here ends it first.
 *
 * A version may also be handed to the kernel (`passthroughBegin`: FUSE passthrough), which then reads
 * and writes the spool itself, telling nothing, until WriteBack ends it (`passthroughEnd`, once the last
 * handle opened that way is closed). Meanwhile the version is "live": its size and mtime are the spool's
 * (`refreshLive`, from fstat), it keeps no running hash (a small one is hashed from the spool when it is
 * sealed, read whole; a large one is sealed by its spool's mark, mtime, ctime and inode from the same
 * fstat, nothing read, and hashed at its upload), it is changed in place (a truncate goes to the spool
 * even once sealed, as the kernel's writes do), and a change seen after its seal makes it due for a new
 * journal record (`liveChanged`), sealed again the same way. Replay checks a spool against its record's
 * size and SHA-1, or size and mark, before anything is uploaded, so a spool changed after its last record
 * is never uploaded as that version (WriteBackReplay.resume, spool-verification.ts).
 *
 * Which field is guarded by what: `size`, `baseSize`, `present`, `baseReady`, `generation` and the spool
 * descriptor change only inside `exclusive()`, or from a direct writer's reports, which only arrive
 * while no change of this side runs (each ends the direct writes before it starts). `library`/`fullpath` change only in WriteBack (a rename,
 * after the upload is cancelled). `state`, `pins` and `failed` are changed only by WriteBack.
 *
 * Its layers, each extending the one before: version-spool.ts (the fields, the spool in memory or in its
 * file), engine-writes.ts (the spool written by the FUSE engine or by the kernel), this file (the states
 * and the seal).
 */
import { baseAfter } from './conflicts.js';
import type { Clock } from '../clock.js';
import { copyFile } from 'node:fs/promises';
import { createHash, hash } from 'node:crypto';
import { constants } from 'node:fs';
import type { PendingFile } from './upload-queue.js';
import { INLINE_MAX_BYTES } from './journal-entry.js';
import { fsErrorOf } from '../fs-errors.js';
import { addRange, clipRanges } from '../byte-ranges.js';
import { VfsError } from '../types.js';
import { VersionEngineWrites } from './engine-writes.js';
import type { Hasher, LocalVersionOptions } from './version-spool.js';
import type { SpoolMark } from './spool-verification.js';
export { UnwrittenSpools, type BaseOpener, type LocalVersionOptions, type VersionState } from './version-spool.js';

/** A file appended to from empty is hashed on the main thread up to this size (no worker round trip); beyond, by a Sha1Stream. */
const SMALL_HASH_MAX = 256 * 1024;

export class LocalVersion extends VersionEngineWrites implements PendingFile {
  /**
   * A new file's version whose spool a front end had written and closed by itself (WriteBack.createClosed):
   * sealed at once with the content its journal record names (`sha1`, `size`), nothing read.
   */
  static closedSpool(id: string, spoolPath: string, library: string, fullpath: string, closed: { size: number; mtimeMs: number; sha1: string }, clock?: Clock): LocalVersion {
    const v = new LocalVersion(id, spoolPath, library, fullpath, undefined, { baseSize: 0, mtimeMs: closed.mtimeMs, clock });
    v.size = closed.size;
    v.spoolLength = closed.size;
    v.generation = 1;
    v.hashed = { generation: 1, sha1: closed.sha1, size: closed.size };
    v.sealed = true;
    v.unsent = true;
    return v;
  }

  /** Empties the file (a new or truncated file): no base any more. */
  async startEmpty(): Promise<void> {
    this.stopDirect();
    await this.exclusive(async () => {
      this.stopDirect();
      if (!this.spoolMade && !this.memory && this.mutable) {
        // Its spool never made (a new version, emptied before anything else): held in memory, as a new
        // file is. A spool a front end made under its id (LeaseOpenFlags.journalId) is left alone: it
        // stays the front end's until the version adopts it (adoptSpool), never opened here meanwhile.
        this.memory = [];
        this.baseSize = 0;
        this.present = [];
        this.baseReady = true;
      }
      if (this.memory) {
        this.assertMutable();
        this.generation++;
        this.dropSha1Stream();
        this.memory = [];
        this.size = 0;
        if (this.newSha1Stream) {
          this.smallHash = createHash('sha1');
          this.smallBytes = 0;
        }
        return;
      }
      const fh = await this.changeHandle();
      this.generation++; // before the spool changes (see snapshotHash); callers touch() after
      this.dropSha1Stream();
      if (this.spoolLength !== 0) await fh.truncate(0);
      this.spoolLength = 0;
      this.size = 0;
      this.baseSize = 0;
      this.present = [];
      this.baseReady = true;
      if (this.newSha1Stream) {
        this.smallHash = createHash('sha1');
        this.smallBytes = 0;
        this.smallData = [];
      }
    });
  }

  async write(position: number, data: Buffer): Promise<number> {
    this.writesUnderWay++;
    return this.exclusive(async () => {
      this.stopDirect();
      if (this.memory && position === this.size && this.size + data.length <= INLINE_MAX_BYTES) return this.append(data);
      const fh = await this.changeHandle();
      this.touch(); // before the spool changes (see snapshotHash)
      if (position !== this.size) this.dropSha1Stream(); // not an append: the running hash is of no use
      else if (this.smallHash) {
        if (this.smallBytes + data.length <= SMALL_HASH_MAX) {
          this.smallHash.update(data);
          this.smallBytes += data.length;
          // A copy: the caller may reuse its buffer (a request body).
          if (this.smallData && this.smallBytes <= INLINE_MAX_BYTES) this.smallData.push(Buffer.from(data));
          else this.smallData = undefined;
        } else {
          // Grown past small: the worker hashes from byte 0, reading back what is written.
          this.smallHash = undefined;
          this.appended = this.newSha1Stream?.();
        }
      }
      let done = 0;
      try {
        this.faults?.check('write', `writing '${this.fullpath}'`);
        while (done < data.length) {
          const { bytesWritten } = await fh.write(data, done, data.length - done, position + done);
          done += bytesWritten;
        }
      } catch (err) {
        this.dropSha1Stream();
        throw this.fail(err, `writing ${data.length} bytes at ${position}`);
      }
      if (!this.baseReady) this.present = addRange(this.present, position, position + data.length);
      this.size = Math.max(this.size, position + data.length);
      if (this.spoolLength !== undefined) this.spoolLength = Math.max(this.spoolLength, position + data.length);
      this.appended?.extend(this.size);
      return done;
    }).finally(() => this.writesUnderWay--);
  }

  /** The hash of this generation, from its whole content (a small live file's, read from the spool). */
  protected hashSmall(data: Buffer): void {
    this.hashed = { generation: this.generation, sha1: hash('sha1', data, 'hex'), size: data.length };
  }

  async truncate(size: number): Promise<void> {
    this.stopDirect();
    await this.exclusive(async () => {
      this.stopDirect();
      const fh = await this.changeHandle();
      this.touch(); // before the spool changes (see snapshotHash)
      if (size !== this.size) this.dropSha1Stream();
      await fh.truncate(size).catch((err: unknown) => { throw this.fail(err, `truncating to ${size}`); });
      this.spoolLength = size;
      if (size < this.baseSize) this.baseSize = size;
      this.present = clipRanges(this.present, size);
      if (this.baseSize === 0) this.baseReady = true;
      this.size = size;
    });
  }

  /**
   * Ends the writing: from here on the bytes never change. Hashes the spool and, with `sync`, makes it
   * durable at the same time (the hash runs in a worker while the kernel writes the data out). `onHashed`
   * runs as soon as the hash is known, before the fsync has ended. `closed` (live): the spool's size and
   * time when another reader hashed it; when the spool still shows them, that hash is the version's,
   * nothing is read and the room left is not looked at again (see `sealedAs`).
   */
  async seal(hasher: Hasher, opts: { sync?: boolean; onHashed?: () => void; closed?: { size: number; mtimeNs: bigint; sha1: string } } = {}): Promise<void> {
    this.stopDirect();
    await this.exclusive(async () => {
      this.stopDirect();
      this.assertMutable();
      if (this.live) {
        this.refreshLive();
        const closed = opts.closed;
        const asClosed = closed && this.live.size === BigInt(closed.size) && this.live.mtimeNs === closed.mtimeNs;
        // Written by the kernel, which tells nothing of a write the disk refused: on a full disk, the
        // version may miss bytes its writer was refused, and fails whole. A close another reader answered
        // from the spool as it is now was checked so when answered (the engine answers none with less room).
        if (!asClosed) await this.checkRoomForKernelWrites();
        // Handed to the kernel: a small one is hashed from the spool now (its record carries its bytes); a
        // large one is sealed by its spool's mark, nothing read (its close waits for no pass over its
        // bytes; it is hashed at its upload). Either is what replay checks the spool against.
        if (asClosed && closed) {
          this.hashed = { generation: this.generation, sha1: closed.sha1, size: closed.size };
        } else {
          const small = this.liveSmallContent();
          if (small) this.hashSmall(small);
          else this.markLive();
        }
        this.live.small = undefined;
        this.sealed = true;
        this.liveChanged = false;
        opts.onHashed?.();
        if (opts.sync !== false) await (await this.handle()).sync().catch((err: unknown) => { throw this.fail(err, 'making the local copy durable'); });
        return;
      }
      if (this.memory && opts.sync === false && this.smallHash && this.smallBytes === this.size) {
        // Held in memory: hashed as written. The spool is written when something needs it (the upload, a
        // reader) while the shared budget has room, else right away, off the caller's way.
        this.hashed = { generation: this.generation, sha1: this.smallHash.copy().digest('hex'), size: this.size };
        this.sealed = true;
        opts.onHashed?.();
        this.dropSha1Stream();
        if (this.size > 0 && this.unwritten?.take(this.size)) {
          this.unwrittenBytes = this.size;
          return;
        }
        const writing = this.exclusive(() => this.handle().then(() => undefined));
        writing.catch(() => undefined); // a failure leaves the content in memory: the next user tries again
        return;
      }
      const fh = await this.handle();
      try {
        await this.padToSize(fh);
        const generation = this.generation;
        const synced = opts.sync === false ? Promise.resolve() : fh.sync();
        synced.catch(() => undefined); // awaited below, after the hash
        const h = await this.hashNow(hasher).catch(async (err: unknown) => {
          await synced.catch(() => undefined);
          throw err;
        });
        this.hashed = { generation, ...h };
        this.sealed = true;
        opts.onHashed?.();
        await synced;
      } catch (err) {
        throw this.fail(err, 'making the local copy durable');
      }
      this.dropSha1Stream();
    });
  }

  /**
   * The whole content, when the file is small and was written front to back from empty (its journal
   * record then carries it); undefined otherwise. Ask before `seal`, which lets go of it.
   */
  inlineContent(): Buffer | undefined {
    if (this.memory) return Buffer.concat(this.memory, this.size);
    if (this.live) return this.liveSmallContent();
    if (!this.smallData || !this.smallHash || this.smallBytes !== this.size || this.size > INLINE_MAX_BYTES) return undefined;
    return Buffer.concat(this.smallData, this.size);
  }

  /** The sealed content and its hash while it is held in memory (its spool not written): see PendingFile. */
  heldContent(): { generation: number; sha1: string; size: number; data: Buffer } | undefined {
    if (!this.memory || !this.sealed || !this.hashed || this.hashed.generation !== this.generation) return undefined;
    return { ...this.hashed, data: Buffer.concat(this.memory, this.size) };
  }

  /** The version was sealed with content of `sha1` and `size`, and nothing changed since. */
  sealedAs(sha1: string, size: number): boolean {
    return this.sealed && !this.liveChanged && this.currentSha1() === sha1 && this.size === size;
  }

  /** SHA-1 of the content now, when the last flush hashed it and nothing changed since. */
  currentSha1(): string | undefined {
    return this.hashed && this.hashed.generation === this.generation ? this.hashed.sha1 : undefined;
  }

  /**
   * What the version's journal record names its content by: its SHA-1 when known, else the spool's mark
   * it was sealed by (a file the kernel wrote; see sealedMark).
   */
  contentNamedBy(): { sha1?: string; spoolMark?: SpoolMark } {
    const sha1 = this.currentSha1();
    return sha1 !== undefined ? { sha1 } : { spoolMark: this.sealedMark() };
  }

  /**
   * SHA-1, size and generation of the spool now (reuses the flush's hash when nothing changed since: at
   * once, even while a flush still holds the file for its fsync; every change bumps the generation
   * before it touches the spool).
   */
  async snapshotHash(hasher: Hasher): Promise<{ generation: number; sha1: string; size: number }> {
    await this.onDisk(); // the upload reads the spool by its path
    if (this.hashed && this.hashed.generation === this.generation) return this.hashed;
    return this.exclusive(async () => {
      if (this.hashed && this.hashed.generation === this.generation) return this.hashed;
      const generation = this.generation;
      const h = await this.hashNow(hasher);
      this.hashed = { generation, ...h };
      return this.hashed;
    });
  }

  /** Marks the spool as discarded (done with the version). */
  retire(): void {
    this.stopDirect();
    this.state = 'retired';
    this.memory = undefined;
    this.releaseUnwritten();
  }

  /**
   * A new version holding this one's content (a change of a journaled, immutable version): the spool is
   * cloned where the file system can (reflink), else copied.
   */
  async derive(id: string, spoolPath: string, opts: Pick<LocalVersionOptions, 'fetchChunk'> = {}): Promise<LocalVersion> {
    const next = new LocalVersion(id, spoolPath, this.library, this.fullpath, this.base, { baseSize: 0, mtimeMs: this.mtimeMs, fetchChunk: opts.fetchChunk, clock: this.clock });
    await this.exclusive(async () => {
      if (this.state === 'retired') throw new VfsError('EIO', `'${this.fullpath}': local copy already discarded`);
      if (this.memory) await this.handle();
      await copyFile(this.spoolPath, spoolPath, constants.COPYFILE_FICLONE).catch((err: unknown) => { throw fsErrorOf(err, `copying the local version of '${this.fullpath}'`); });
    });
    next.size = this.size;
    next.baseSize = this.size;
    next.baseReady = true;
    next.spoolLength = this.size;
    next.ctimeMs = this.ctimeMs;
    next.operator = this.operator;
    next.replaces = baseAfter(this.replaces, this.currentSha1());
    return next;
  }

  /** What changes with every change of the content (the kernel's too, while live). */
  changeMark(): number {
    this.refreshLive();
    return this.generation;
  }

  /** A modification: new generation, new time. */
  touch(): void {
    this.generation++;
    this.mtimeMs = this.clock.now();
  }

  /** SHA-1 and size of the spool now: the running hash when the file was only appended to, else a full pass. */
  protected async hashNow(hasher: Hasher): Promise<{ sha1: string; size: number }> {
    if (this.hashed && this.hashed.generation === this.generation && this.hashed.size === this.size) return { sha1: this.hashed.sha1, size: this.size };
    const due = this.directHash;
    this.directHash = undefined;
    if (due && due.generation === this.generation && due.size === this.size) {
      const sha1 = await due.sha1;
      if (sha1 !== undefined && due.generation === this.generation) return { sha1, size: due.size };
    }
    if (this.smallHash && this.smallBytes === this.size) return { sha1: this.smallHash.copy().digest('hex'), size: this.size };
    if (this.appended) {
      const h = await this.appended.digest().catch(() => undefined);
      if (h && h.size === this.size) return h;
      this.dropSha1Stream(); // failed or out of step: never trusted again for this spool
    }
    return hasher.hash(this.spoolPath);
  }

  protected dropSha1Stream(): void {
    this.appended?.close();
    this.appended = undefined;
    this.smallHash = undefined;
    this.smallData = undefined;
  }
}
