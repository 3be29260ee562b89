/**
 * VersionEngineWrites: a LocalVersion's spool written by others than its own writes — a direct writer (the
 * FUSE engine writes from its own thread and reports each write; every change made here ends it first),
 * and the kernel (FUSE passthrough: the version is "live", its size and times the spool's, until
 * `passthroughEnd`).
 */
import { closeSync, constants, fstatSync, openSync, readSync, statfsSync } from 'node:fs';
import { INLINE_MAX_BYTES } from './journal-entry.js';
import { VfsError } from '../types.js';
import { KERNEL_WRITE_MIN_FREE_BYTES } from '../engine-lease.js';
import type { DirectSpool } from '../engine-lease.js';
import type { LocalVersion } from './local-version.js';
import { VersionSpool, type DirectAttachment } from './version-spool.js';
import { spoolMarkOf, type SpoolMark } from './spool-verification.js';

/** A direct writer continues the running hash only of a spool this small (it reads the bytes back once). */
const DIRECT_HASH_FROM_MAX = 8 * 1024 * 1024;

export abstract class VersionEngineWrites extends VersionSpool {
  /** Continues the main thread's hash of a small file appended to from empty (LocalVersion). */
  protected abstract hashSmall(data: Buffer): void;

  /**
   * The spool for a direct writer, when it may take over the writes now: the version is being written,
   * its spool is open (not held in memory), every base byte is local, no write of this side is under way,
   * and no injected disk failure is waiting. The caller makes sure it is the version's only writer.
   */
  directSpool(): DirectSpool | undefined {
    if (!this.mutable || this.direct || this.live || this.memory || !this.fh || !this.baseReady || this.writesUnderWay > 0) return undefined;
    if (this.faults?.armed('write')) return undefined;
    const sequential = (this.smallHash !== undefined && this.smallBytes === this.size) || this.appended !== undefined;
    const hashFrom = sequential && this.size <= DIRECT_HASH_FROM_MAX && this.spoolLength === this.size ? this.size : -1;
    const fd = this.fh.fd;
    let attachment: DirectAttachment | undefined;
    return {
      fd,
      hashFrom,
      begin: (stop) => {
        if (!this.mutable || this.direct) {
          stop();
          return;
        }
        attachment = { stop, reported: 0 };
        this.direct = attachment;
        // The writer keeps the hash from here (or none): this side's running hashes would miss its writes.
        this.dropSha1Stream();
      },
      wrote: (offset, length, errno) => {
        if (!this.direct || this.direct !== attachment) return; // ended: its stop accounted for this write
        if (errno > 0) {
          this.recordDirectFailure(errno);
          return;
        }
        this.direct.reported++;
        this.recordDirectWrite(offset + length);
      },
      end: () => {
        if (this.direct && this.direct === attachment) this.stopDirect();
      },
    };
  }

  /** Ends the direct writes (if any): what they did that was not reported yet is taken from the writer's answer. */
  stopDirect(): void {
    const d = this.direct;
    if (!d) return;
    this.direct = undefined;
    const done = d.stop();
    if (!done) return;
    if (done.count > d.reported) this.recordDirectWrite(done.end);
    if (done.errno > 0) this.recordDirectFailure(done.errno);
    // The writer's hash covers the whole content: the seal needs no pass over the spool. A hash the
    // writer is still finishing is waited for where a hash is needed (hashNow).
    if (done.hashed !== this.size || this.failed) return;
    if (done.sha1) this.hashed = { generation: this.generation, sha1: done.sha1, size: this.size };
    else if (done.sha1Later) this.directHash = { generation: this.generation, size: this.size, sha1: done.sha1Later };
  }

  /**
   * The spool's descriptor for the kernel to read and write itself (passthrough), when the version may be
   * handed over now: being written, every base byte local, no other writer (direct, or of this side), no
   * injected disk failure waiting. A file held in memory is written to its spool first. The caller makes
   * sure no handle reads or writes the version through this side meanwhile.
   */
  async passthroughBegin(): Promise<number | undefined> {
    if (this.live) return this.live.fd;
    const ready = (): boolean => this.mutable && !this.direct && this.baseReady && this.writesUnderWay === 0 && !this.faults?.armed('write');
    if (!ready()) return undefined;
    const fh = await this.exclusive(async () => (ready() ? this.handle() : undefined)).catch(() => undefined);
    if (!fh || !ready()) return undefined;
    await this.padToSize(fh);
    return this.goLive(false);
  }

  /**
   * Hands the spool over: a descriptor of its own for it, closed at the end (the spool's may close
   * meanwhile), and no running hash (the kernel's writes are not seen here). `adopt`: what the spool holds
   * now is the version's content.
   */
  protected goLive(adopt: boolean): number | undefined {
    let fd: number;
    try {
      fd = openSync(this.spoolPath, constants.O_RDWR);
    } catch {
      return undefined;
    }
    this.dropSha1Stream();
    this.hashed = undefined;
    this.directHash = undefined;
    const st = fstatSync(fd, { bigint: true });
    this.live = { fd, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs, ino: st.ino };
    this.lastLive = undefined;
    // Adopted: what the spool holds now is the version's content, a change.
    if (adopt) this.applyLiveStat(st, true);
    return fd;
  }

  /**
   * A new file held in memory, still empty, whose spool a front end made and had the kernel write
   * (LeasedHandle.adoptSpool): that spool becomes this version's, taken as it is, and the version is
   * handed to the kernel (see passthroughBegin). Undefined when the version is not such a file.
   */
  async adoptSpool(): Promise<number | undefined> {
    if (!this.lent || !this.mutable || !this.memory || this.size !== 0 || this.live || this.direct || this.writesUnderWay > 0 || this.queued > 0) return undefined;
    // With no wait: the file's next request waits for this (its spool, made by the front end, exists);
    // the spool's own handle is opened when something needs it.
    const fd = this.goLive(true);
    if (fd === undefined) return undefined;
    this.lent = false;
    this.memory = undefined;
    this.releaseUnwritten();
    this.spoolMade = true;
    return fd;
  }

  /** True while the kernel reads and writes the spool (passthrough). */
  get isLive(): boolean {
    return this.live !== undefined;
  }

  /**
   * While live: takes the size and mtime from the spool. A change since the last look is a change of the
   * version (a new generation; due for a new journal record once sealed).
   */
  refreshLive(): void {
    const live = this.live;
    if (!live) return;
    let st;
    try {
      st = fstatSync(live.fd, { bigint: true });
    } catch {
      return; // unreadable: the last look stands
    }
    this.applyLiveStat(st, false);
  }

  /**
   * What an fstat of the live spool shows; a change (or `changed`) is a new generation. Its ctime counts
   * too: a seal by the spool's mark (`markLive`) names it.
   */
  protected applyLiveStat(st: { size: bigint; mtimeNs: bigint; ctimeNs: bigint; ino: bigint }, changed: boolean): void {
    const live = this.live!;
    if (!changed && st.size === live.size && st.mtimeNs === live.mtimeNs && st.ctimeNs === live.ctimeNs && st.ino === live.ino) return;
    live.size = st.size;
    live.mtimeNs = st.mtimeNs;
    live.ctimeNs = st.ctimeNs;
    live.ino = st.ino;
    this.generation++;
    this.size = Number(st.size);
    this.spoolLength = this.size;
    this.mtimeMs = Number(st.mtimeNs / 1_000_000n);
    this.hashed = undefined;
    if (this.sealed) this.liveChanged = true;
  }

  /** While live: a truncate, made in place (the kernel writes on into the same spool). */
  async truncateLive(size: number): Promise<void> {
    const live = this.live;
    if (!live) throw new VfsError('EIO', `'${this.fullpath}': not handed to the kernel`);
    await this.exclusive(async () => {
      await (await this.handle()).truncate(size).catch((err: unknown) => { throw this.fail(err, `truncating to ${size}`); });
      this.changedInPlace(live);
      // A truncate to the same size still changes the file (its mtime), as the kernel shows it.
      this.touch();
    });
  }

  /** While live: a change made through this side (a write, a truncate), seen as the kernel's are. */
  protected changedInPlace(live: NonNullable<LocalVersion['live']>): void {
    live.small = undefined;
    this.refreshLive();
    if (this.sealed) this.liveChanged = true;
  }

  /**
   * Changed in place after its seal (`liveChanged`): sealed again as the spool now is. A small one is
   * hashed again and its bytes answered (its new journal record carries them); a large one is sealed by
   * its spool's mark (nothing read; hashed when it is uploaded).
   */
  reseal(): Buffer | undefined {
    this.refreshLive();
    this.liveChanged = false;
    this.hashed = undefined;
    const fd = this.live?.fd ?? this.fh?.fd;
    const data = fd !== undefined && this.size <= INLINE_MAX_BYTES ? readWhole(fd, this.size) : undefined;
    if (data) this.hashSmall(data);
    else this.markLive();
    return data;
  }

  /**
   * Seals this generation by the spool's mark as the last fstat showed it (the one that made this
   * generation: nothing the kernel wrote after it is covered), with no byte read. A version the kernel
   * never had keeps none.
   */
  protected markLive(): void {
    const st = this.live ?? this.lastLive;
    if (!st || st.size !== BigInt(this.size)) return;
    this.marked = spoolMarkOf(st);
  }

  /**
   * The spool's mark this version was last sealed by (see markLive), even when the kernel wrote on since:
   * a record naming it is then set aside by replay, never uploaded as the spool now is, until the version
   * is journaled again.
   */
  sealedMark(): SpoolMark | undefined {
    return this.marked;
  }

  /** A version replay took up again, sealed by `mark` (its record's). */
  sealedByMark(mark: SpoolMark): void {
    this.marked = mark;
  }

  /** While live: a write made through this side (another front end's), in place as the kernel's are. */
  async writeLive(position: number, data: Buffer): Promise<number> {
    const live = this.live;
    if (!live) throw new VfsError('EIO', `'${this.fullpath}': not handed to the kernel`);
    return this.exclusive(async () => {
      let done = 0;
      try {
        while (done < data.length) done += (await (await this.handle()).write(data, done, data.length - done, position + done)).bytesWritten;
      } catch (err) {
        throw this.fail(err, `writing ${data.length} bytes at ${position}`);
      }
      this.changedInPlace(live);
      return done;
    });
  }

  /** The kernel no longer reads or writes the spool: the version is as the spool last shows it. */
  passthroughEnd(): void {
    const live = this.live;
    if (!live) return;
    this.refreshLive();
    this.live = undefined;
    this.lastLive = { size: live.size, mtimeNs: live.mtimeNs, ctimeNs: live.ctimeNs, ino: live.ino };
    try {
      closeSync(live.fd);
    } catch {
      // already closed: nothing holds it
    }
  }

  protected recordDirectWrite(end: number): void {
    this.touch();
    this.counters.directWrites++;
    this.size = Math.max(this.size, end);
    if (this.spoolLength !== undefined) this.spoolLength = Math.max(this.spoolLength, end);
  }

  protected recordDirectFailure(errno: number): void {
    const code = errno === 28 ? 'ENOSPC' : 'EIO';
    const err = Object.assign(new Error(`${code}: a direct write to the spool failed (errno ${errno})`), { code });
    this.fail(err, 'writing');
  }

  /**
   * Fails the version (ENOSPC) when the spool's disk has less than KERNEL_WRITE_MIN_FREE_BYTES free: the
   * kernel writes a live spool itself and tells nothing of a write the disk refused.
   */
  async checkRoomForKernelWrites(): Promise<void> {
    // The spool's folder is on local disk: looked at on the spot (counters the kernel holds in memory), as
    // a live spool's fstat is, with no round trip through the thread pool on every close.
    let st;
    try {
      st = statfsSync(this.spoolPath);
    } catch {
      return;
    }
    // Root may write into the blocks kept for it: those count as free for the gateway running as root.
    const free = (process.geteuid?.() === 0 ? st.bfree : st.bavail) * st.bsize;
    if (free >= KERNEL_WRITE_MIN_FREE_BYTES) return;
    throw this.fail(Object.assign(new Error(`ENOSPC: the data folder is full (${free} bytes free): a write of the file may have been refused`), { code: 'ENOSPC' }), 'journaling');
  }

  /**
   * While live and small: the spool's bytes (its journal record carries them). Kept until the seal, which
   * takes the same bytes when nothing changed meanwhile: the flush that journals a small file asks for
   * them (inlineContent) just before it seals.
   */
  protected liveSmallContent(): Buffer | undefined {
    const live = this.live;
    if (!live) return undefined;
    this.refreshLive();
    if (this.size > INLINE_MAX_BYTES) return undefined;
    if (live.small?.generation === this.generation) return live.small.data;
    const data = readWhole(live.fd, this.size);
    live.small = data ? { generation: this.generation, data } : undefined;
    return data;
  }
}

/** `size` bytes from the start of the file `fd` (a spool, on local disk); undefined when it is shorter or unreadable. */
function readWhole(fd: number, size: number): Buffer | undefined {
  const data = Buffer.alloc(size);
  let done = 0;
  try {
    while (done < size) {
      const n = readSync(fd, data, done, size - done, done);
      if (n === 0) return undefined;
      done += n;
    }
  } catch {
    return undefined;
  }
  return data;
}
