/**
 * A read handle on a service file (no local copy when opened); it follows the file (FollowedFile), so
 * once the file is changed through the gateway it reads the local version.
 */
import type { RangeReader } from './range-reader.js';
import type { FollowedFile } from './write-back/index.js';
import { VfsError, type Attr, type CallContext } from './types.js';
import type { CacheFileGrant, LeasedHandle as FileHandle, LocalRange } from './engine-lease.js';

export class RemoteReadHandle implements FileHandle {
  private releasedOnce = false;
  constructor(readonly path: string, private readonly rr: RangeReader, private readonly file: FollowedFile, private readonly attr: () => Attr, private readonly onRelease: () => void, private readonly grant?: () => Promise<CacheFileGrant | undefined>) {}
  read(position: number, length: number, ctx?: CallContext): Promise<Buffer> {
    return this.file.read((v) => v.read(position, length), () => this.rr.read(position, length, ctx));
  }
  readParts(position: number, length: number, ctx?: CallContext): Promise<Buffer[]> {
    return this.file.read(async (v) => [await v.read(position, length)], () => this.rr.readParts(position, length, ctx));
  }
  localRange(position: number, length: number): LocalRange | undefined {
    if (this.releasedOnce) return undefined;
    const v = this.file.version();
    return v ? v.localRange(position, length) : this.rr.localRange(position, length);
  }
  /** LeasedHandle.localFile: the cache file of the version opened, when cache-file-grant.ts's rules allow. */
  async localFile(): Promise<CacheFileGrant | undefined> {
    if (this.releasedOnce || !this.grant) return undefined;
    return this.grant();
  }
  async write(): Promise<number> { throw new VfsError('EACCES', `${this.path} was opened read-only`); }
  async truncate(): Promise<void> { throw new VfsError('EACCES', `${this.path} was opened read-only`); }
  async stat(): Promise<Attr> { return this.file.attr() ?? this.attr(); }
  async flush(): Promise<void> {}
  async fsync(): Promise<void> {}
  async release(): Promise<void> {
    if (this.releasedOnce) return;
    this.releasedOnce = true;
    this.rr.close();
    try {
      await this.file.release();
    } finally {
      this.onRelease();
    }
  }
}
