/**
 * The handles the write-back gives: a write session's (SessionHandle), a read handle of a local version
 * (VersionReadHandle), and a reader that follows a file across its versions (FollowedFile).
 */
import { LocalVersion } from './local-version.js';
import { VfsError, type Attr, type CallContext } from '../types.js';
import type { DirectSpool, EngineClose, LocalRange, PassthroughSpool, LeasedHandle } from '../engine-lease.js';
import type { PathSlot, WriteSession } from './slots.js';
import type { WriteBack } from './write-back.js';


/** A handle of a write session: reads and writes go to the session's version. */
export class SessionHandle implements LeasedHandle {
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
      if (this.s.version.isLive) return await this.wb.writeLive(this.s, this.mode.append ? this.s.version.size : position, data);
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
      if (this.s.version.isLive) return await this.wb.truncateLive(this.s, size);
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
export class VersionReadHandle implements LeasedHandle {
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
