/**
 * GatewayVfs: the Vfs over a set of libraries. The root lists one folder per library; inside, gateway
 * paths map one to one to the library's `fullpath`. Metadata comes from the MetadataCache (kept coherent by
 * one UpdatesFeed per library and updated at once by the gateway's own changes), reads from RangeReaders,
 * and writes go to LocalFiles (spool files of the UploadJournal) committed by the UploadQueue on close and
 * fsync. What is and is not POSIX here is written down in docs/semantics.md.
 */
import { copyFile, mkdir } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import type { Logger } from '../shared/log.js';
import { BlockCache } from './block-cache.js';
import { ContentCache } from './content-cache.js';
import { FileHasher } from './file-hasher.js';
import { Sha1Streams } from './sha1-streams.js';
import { gatewayPathOf, parseGatewayPath } from './gateway-path.js';
import { LocalFile } from './local-file.js';
import { MetadataCache } from './metadata-cache.js';
import { RangeReader } from './range-reader.js';
import { baseName, isWithin, joinPath, parentOf, type Remote, type RemoteCallOptions, type RemoteEntry } from './remote.js';
import { UpdatesFeed, type UpdatesFeedStatus } from './updates-feed.js';
import { UploadJournal, type JournalEntry } from './upload-journal.js';
import { UploadQueue, type PendingFile, type UploadStatus } from './upload-queue.js';
import { VfsError, type Attr, type CallContext, type FileHandle, type OpenFlags, type StatFs, type Vfs } from './types.js';
import type { ResolvedLibrary } from './library-set.js';

export interface GatewayVfsOptions {
  libraries: ResolvedLibrary[];
  /** Folder of the journal, the content cache and the feed cursors. */
  dataDir: string;
  /** Updates feed poll interval, ms; 0 = no feed (cache entries then expire after `cache.ttlMs`). Default 2000. */
  feedIntervalMs?: number;
  cache?: {
    /** Metadata entries kept. Default 100 000. */
    metadataEntries?: number;
    /** Memory bound of the metadata cache, bytes. Default 64 MiB. */
    metadataBytes?: number;
    /** Trust limit of cached metadata, ms (0 = until changed). Default 0 with a feed, else 1000. */
    ttlMs?: number;
    /** In-memory block cache, bytes. Default 64 MiB. */
    blockBytes?: number;
    /** Block size of random reads, bytes. Default 64 KiB. */
    blockSize?: number;
    /** On-disk content cache, bytes; 0 = off. Default 0. */
    diskBytes?: number;
  };
  /** Read-ahead window of sequential reads, bytes: first and largest. Default 1 MiB and 64 MiB. */
  readAhead?: { initial?: number; max?: number };
  upload?: {
    /** Uploads at once. Default 4. */
    concurrency?: number;
    /** First retry delay, ms. Default 1000. */
    retryBaseMs?: number;
    /** Longest retry delay, ms. Default 30 000. */
    retryMaxMs?: number;
  };
  /** Existing files opened for writing: up to `wholeMaxBytes` fetched whole at the first change (default 8 MiB); larger ones on demand, at least `chunkBytes` per fetch (default 1 MiB). */
  partialFetch?: { wholeMaxBytes?: number; chunkBytes?: number };
  /** Refuse every change with EROFS. Default false. */
  readOnly?: boolean;
  logger: Logger;
  /** Called by close() after everything else (closes what the factory opened). */
  onClose?: () => Promise<void>;
}

interface Library {
  name: string;
  id: string;
  remote: Remote;
  feed?: UpdatesFeed;
}

/** Where a gateway path points. */
interface Target {
  path: string;
  lib?: Library;
  fullpath: string;
}

export interface GatewayStatus {
  uploads: UploadStatus[];
  /** Journal entries whose library is not configured (kept, not uploaded). */
  stranded: { id: string; library: string; fullpath: string }[];
  feeds: UpdatesFeedStatus[];
  localFiles: number;
  metadata: ReturnType<MetadataCache['stats']>;
  blocks: ReturnType<BlockCache['stats']>;
  disk?: ReturnType<ContentCache['stats']>;
}

const LIB_ROOT_ATTR_TIME = Date.now();


export class GatewayVfs implements Vfs {
  private readonly libs = new Map<string, Library>();
  readonly cache: MetadataCache;
  private readonly blocks: BlockCache;
  private readonly disk: ContentCache | undefined;
  private readonly journal: UploadJournal;
  private readonly hasher = new FileHasher();
  private readonly sha1Streams = new Sha1Streams();
  readonly uploads: UploadQueue;
  /** Local files by `library\0fullpath`. */
  private readonly locals = new Map<string, LocalFile>();
  private readonly stranded: JournalEntry[] = [];
  /**
   * Times set by setTimes: `library\0id` → the version they apply to (content hash, or the service's time
   * for a folder) and the time. A new version on the service ends the override.
   */
  private readonly timeOverrides = new LRUCache<string, { version: string; mtimeMs: number }>({ max: 10_000 });
  private readonly logger: Logger;
  private closed = false;

  private constructor(private readonly opts: GatewayVfsOptions) {
    this.logger = opts.logger;
    const feedOn = (opts.feedIntervalMs ?? 2000) > 0;
    this.cache = new MetadataCache({
      maxEntries: opts.cache?.metadataEntries, maxBytes: opts.cache?.metadataBytes, ttlMs: opts.cache?.ttlMs ?? (feedOn ? 0 : 1000),
    });
    this.blocks = new BlockCache({ maxBytes: opts.cache?.blockBytes, blockSize: opts.cache?.blockSize });
    this.disk = (opts.cache?.diskBytes ?? 0) > 0 ? new ContentCache({ dir: join(opts.dataDir, 'content'), maxBytes: opts.cache?.diskBytes, logger: opts.logger }) : undefined;
    this.journal = new UploadJournal(join(opts.dataDir, 'journal'));
    this.uploads = new UploadQueue({
      concurrency: opts.upload?.concurrency, retryBaseMs: opts.upload?.retryBaseMs, retryMaxMs: opts.upload?.retryMaxMs,
      hasher: this.hasher, logger: opts.logger,
      remoteFor: (name) => this.libs.get(name)?.remote,
      onCommitted: (file, entry, snapshot) => this.committed(file as LocalFile, entry, snapshot),
      // A last handle that went while the upload was being confirmed kept the file (it was still pending).
      onDone: (file) => {
        const l = file as LocalFile;
        if (l.deleted || this.locals.get(localKey(l.library, l.fullpath)) !== l) return;
        this.released(l).catch((err: Error) => this.logger.warn({ path: l.fullpath, err: err.message }, 'letting go of an uploaded local copy failed'));
      },
      onMissingParent: (file) => this.ensureParents(file.library, file.fullpath),
    });
  }

  /** Opens the gateway: journal replay, feeds started. */
  static async open(opts: GatewayVfsOptions): Promise<GatewayVfs> {
    const vfs = new GatewayVfs(opts);
    await vfs.init();
    return vfs;
  }

  private async init(): Promise<void> {
    await mkdir(this.opts.dataDir, { recursive: true });
    await this.journal.init();
    await this.disk?.init();
    for (const l of this.opts.libraries) {
      if (this.libs.has(l.name)) throw new TypeError(`libraries: expected unique folder names, got '${l.name}' twice`);
      this.libs.set(l.name, { name: l.name, id: l.id, remote: l.remote });
    }
    await Promise.all([...this.libs.values()].map((l) => this.startFeed(l)));
    await this.replayJournal();
  }

  private async startFeed(lib: Library): Promise<void> {
    const interval = this.opts.feedIntervalMs ?? 2000;
    if (interval <= 0) return;
    lib.feed = new UpdatesFeed({
      library: lib.name, remote: lib.remote, cache: this.cache, intervalMs: interval, logger: this.logger,
      cursorFile: join(this.opts.dataDir, 'feeds', `${safeFileName(lib.id)}.json`),
    });
    await lib.feed.start();
  }

  /**
   * Serves one more library folder at run time. Journal entries kept for a library of that name (from a
   * previous run) are uploaded now.
   */
  async addLibrary(l: ResolvedLibrary): Promise<void> {
    if (this.closed) throw new VfsError('EIO', 'the gateway is closing');
    if (this.libs.has(l.name)) throw new VfsError('EEXIST', `a library folder named '${l.name}' is already served`);
    const lib: Library = { name: l.name, id: l.id, remote: l.remote };
    this.libs.set(l.name, lib);
    try {
      await this.startFeed(lib);
    } catch (err) {
      this.libs.delete(l.name);
      throw err;
    }
    const kept = this.stranded.filter((e) => e.library === l.name);
    this.stranded.splice(0, this.stranded.length, ...this.stranded.filter((e) => e.library !== l.name));
    for (const e of kept) await this.resume(e);
    this.logger.info({ library: l.name, id: l.id, requeued: kept.length }, 'library added');
  }

  /**
   * Stops serving a library folder. Refused (EBUSY) while it has open or pending local files: flush
   * first. The service's data is not touched.
   */
  async removeLibrary(name: string): Promise<void> {
    const lib = this.libs.get(name);
    if (!lib) throw new VfsError('ENOENT', `no library folder named '${name}' is served`);
    const busy = [...this.locals.values()].filter((f) => f.library === name && !f.deleted).length;
    if (busy > 0) throw new VfsError('EBUSY', `library '${name}' has ${busy} open or pending file(s): flush, close them, then remove`);
    this.libs.delete(name);
    await lib.feed?.stop();
    this.cache.dropLibrary(name);
    this.logger.info({ library: name }, 'library removed');
  }

  /** Drops cached metadata and blocks (not local files or pending uploads). */
  dropCaches(): void {
    for (const name of this.libs.keys()) this.cache.dropLibrary(name);
    this.blocks.clear();
  }

  /** Journal entries of a previous run are uploaded again. */
  private async replayJournal(): Promise<void> {
    for (const e of await this.journal.entries()) {
      if (!this.libs.has(e.library)) {
        this.logger.error({ library: e.library, path: e.fullpath }, 'journal entry for a library that is not configured: kept, not uploaded');
        this.stranded.push(e);
        continue;
      }
      await this.resume(e);
    }
  }

  /** A journal entry's upload queued again. */
  private async resume(e: JournalEntry): Promise<void> {
    const local = new LocalFile(e.id, this.journal.spoolPath(e.id), e.library, e.fullpath, undefined, { baseSize: 0, mtimeMs: e.mtimeMs });
    try {
      await local.loadSize();
    } catch {
      this.logger.error({ library: e.library, path: e.fullpath }, 'journal entry without its spool file: dropped');
      await this.journal.remove(e.id);
      return;
    }
    local.operator = e.operator;
    local.generation = 1;
    local.journaledGeneration = 1;
    this.locals.set(localKey(e.library, e.fullpath), local);
    this.logger.info({ library: e.library, path: e.fullpath, size: local.size }, 'journal replay: upload queued again');
    await this.uploads.enqueue(local);
  }

  // ---- metadata -------------------------------------------------------------------------------------------

  async stat(path: string, ctx?: CallContext): Promise<Attr> {
    const t = this.target(path);
    if (!t.lib) return this.rootAttr();
    const e = await this.lookup(t.lib, t.fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    return this.toAttr(t.lib, e);
  }

  async readdir(path: string, ctx?: CallContext): Promise<Attr[]> {
    const t = this.target(path);
    if (!t.lib) return [...this.libs.values()].map((l) => this.libraryAttr(l));
    const entries = await this.listDir(t.lib, t.fullpath, ctx);
    return entries.map((e) => this.toAttr(t.lib!, e));
  }

  async statfs(path: string, ctx?: CallContext): Promise<StatFs> {
    const t = this.target(path);
    const libs = t.lib ? [t.lib] : [...this.libs.values()];
    let total = 0;
    let used = 0;
    let files = 0;
    let unlimited = false;
    for (const lib of libs) {
      const q = await lib.remote.quota(this.call(ctx));
      used += q.used;
      files += q.files ?? 0;
      if (q.total === undefined) unlimited = true;
      else total += q.total;
    }
    const cap = unlimited ? Number.MAX_SAFE_INTEGER : total;
    return { total: cap, used, free: Math.max(0, cap - used), files };
  }

  // ---- reads and writes -----------------------------------------------------------------------------------

  async open(path: string, flags: OpenFlags, ctx?: CallContext): Promise<FileHandle> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'open');
    const writing = !!(flags.write || flags.create || flags.truncate || flags.append);
    if (writing) this.writable(t.path);
    const local = this.locals.get(localKey(lib.name, t.fullpath));
    const existing = local && !local.deleted ? this.localEntry(local) : await this.lookup(lib, t.fullpath, ctx);
    if (existing?.isDir) throw new VfsError('EISDIR', `${t.path} is a folder`);
    if (existing && flags.create && flags.exclusive) throw new VfsError('EEXIST', `${t.path} exists`);
    if (!existing && !flags.create) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (!writing) {
      if (local && !local.deleted) return this.handleFor(t.path, lib, local, { write: false, append: false, read: true }, ctx);
      return new RemoteReadHandle(t.path, existing!, this.reader(lib, existing!, ctx), () => this.toAttr(lib, existing!));
    }
    if (!existing) await this.needFolder(lib, parentOf(t.fullpath), ctx);
    // The local copy found above may have been retired while we waited (its upload was confirmed and it
    // had no handle): start over, the service now has that version.
    if (local && !local.deleted && this.locals.get(localKey(lib.name, t.fullpath)) !== local) return this.open(path, flags, ctx);
    let file = local && !local.deleted ? local : undefined;
    const created = !file;
    if (!file) file = this.newLocal(lib.name, t.fullpath, existing ?? undefined, ctx);
    // Pinned while we wait below: an upload confirmed meanwhile keeps the spool of a file that is open.
    file.openCount++;
    try {
      if (created && !existing) {
        await file.startEmpty();
        file.touch();
      }
      if (flags.truncate && (file.size > 0 || !file.baseReady)) {
        await file.startEmpty();
        file.touch();
      }
    } catch (err) {
      file.openCount--;
      await this.released(file).catch(() => undefined);
      throw err;
    }
    file.openCount--;
    if (ctx?.operator) file.operator = ctx.operator;
    return this.handleFor(t.path, lib, file, { write: !!(flags.write || flags.append || flags.truncate || flags.create), append: !!flags.append, read: flags.read !== false }, ctx);
  }

  async createReadStream(path: string, range: { start?: number; end?: number } = {}, ctx?: CallContext): Promise<Readable> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'read');
    const local = this.locals.get(localKey(lib.name, t.fullpath));
    const entry = local && !local.deleted ? this.localEntry(local) : await this.lookup(lib, t.fullpath, ctx);
    if (!entry) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (entry.isDir) throw new VfsError('EISDIR', `${t.path} is a folder`);
    const start = range.start ?? 0;
    const end = Math.min(range.end ?? entry.size - 1, entry.size - 1);
    if (!Number.isInteger(start) || start < 0) throw new VfsError('EINVAL', `expected a range start >= 0, got ${range.start}`);
    if (end < start) return Readable.from([]);
    if (local && !local.deleted && (local.baseReady || local.generation > 0)) {
      await local.fillAll();
      await local.sync();
      return createReadStream(local.spoolPath, { start, end, highWaterMark: 1024 * 1024 });
    }
    if (this.disk && entry.contentHash && this.disk.has(entry.contentHash, start, end + 1)) {
      return Readable.from(this.diskChunks(entry.contentHash, start, end + 1));
    }
    return lib.remote.openRange(t.fullpath, start, end, { ...this.call(ctx), contentHash: entry.contentHash });
  }

  async writeFile(path: string, source: Readable | Buffer, ctx?: CallContext): Promise<Attr> {
    const handle = await this.open(path, { write: true, create: true, truncate: true }, ctx);
    try {
      let position = 0;
      if (Buffer.isBuffer(source)) {
        position += await handle.write(0, source);
      } else {
        for await (const chunk of source as AsyncIterable<Buffer | string>) {
          const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
          position += await handle.write(position, buf);
        }
      }
      await handle.flush();
      return await handle.stat();
    } finally {
      await handle.release();
    }
  }

  // ---- namespace changes ----------------------------------------------------------------------------------

  async mkdir(path: string, ctx?: CallContext): Promise<Attr> {
    const p = parseGatewayPath(path);
    if (!p.library) throw new VfsError('EEXIST', 'the root exists');
    if (p.fullpath === '') throw new VfsError(this.libs.has(p.library) ? 'EEXIST' : 'EPERM', `libraries are not created through the gateway: ${p.path}`);
    const t = this.target(path);
    this.writable(t.path);
    const lib = t.lib!;
    if (await this.lookup(lib, t.fullpath, ctx)) throw new VfsError('EEXIST', `${t.path} exists`);
    await this.needFolder(lib, parentOf(t.fullpath), ctx);
    const entry = await lib.remote.mkdir(t.fullpath, this.call(ctx));
    this.ownUpsert(lib.name, entry);
    // The service makes a folder only where there was none (an existing name is refused): it is empty, so
    // looking up names in it (every file about to be created there) needs no request.
    this.cache.setListing(lib.name, entry.fullpath, []);
    return this.toAttr(lib, entry);
  }

  async unlink(path: string, ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'unlink');
    if (t.fullpath === '') throw new VfsError('EPERM', `cannot remove a library: ${t.path}`);
    this.writable(t.path);
    const local = this.locals.get(localKey(lib.name, t.fullpath));
    const entry = local && !local.deleted ? this.localEntry(local) : await this.lookup(lib, t.fullpath, ctx);
    if (!entry) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (entry.isDir) throw new VfsError('EISDIR', `${t.path} is a folder (use rmdir)`);
    if (local) await this.dropLocal(local);
    const remoteEntry = await lib.remote.stat(t.fullpath, this.call(ctx));
    if (remoteEntry) await lib.remote.remove(t.fullpath, this.call(ctx));
    this.ownRemove(lib.name, t.fullpath);
  }

  async rmdir(path: string, ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'rmdir');
    if (t.fullpath === '') throw new VfsError('EPERM', `cannot remove a library: ${t.path}`);
    this.writable(t.path);
    const entry = await this.lookup(lib, t.fullpath, ctx);
    if (!entry) throw new VfsError('ENOENT', `no such folder: ${t.path}`);
    if (!entry.isDir) throw new VfsError('ENOTDIR', `${t.path} is a file`);
    // Emptiness is checked on the service itself (not the cache) and against pending local files.
    const children = await lib.remote.list(t.fullpath, this.call(ctx));
    const pending = [...this.locals.values()].some((l) => !l.deleted && l.library === lib.name && isWithin(l.fullpath, t.fullpath) && l.fullpath !== t.fullpath);
    if (children.length > 0 || pending) throw new VfsError('ENOTEMPTY', `${t.path} is not empty`);
    await lib.remote.remove(t.fullpath, this.call(ctx));
    this.ownRemove(lib.name, t.fullpath);
  }

  async rename(from: string, to: string, opts: { noReplace?: boolean } = {}, ctx?: CallContext): Promise<void> {
    if (this.target(from).path === this.target(to).path) {
      this.writable(from);
      return;
    }
    const { a, b, src, dst } = await this.transferEnds('renamed', from, to, opts, ctx);
    if (dst) {
      if (src.isDir && !dst.isDir) throw new VfsError('ENOTDIR', `${b.path} is a file`);
      if (!src.isDir && dst.isDir) throw new VfsError('EISDIR', `${b.path} is a folder`);
      if (dst.isDir) await this.rmdir(b.path, ctx);
      else await this.unlink(b.path, ctx);
    }
    if (a.lib !== b.lib) {
      await this.copyAcross(a.lib, a.fullpath, b.lib, b.fullpath, ctx);
      await this.removeTree(a.lib, a.fullpath, src.isDir, ctx);
      return;
    }
    const lib = a.lib;
    // Pending uploads under the source stop first; they restart at the new path.
    const moved = [...this.locals.values()].filter((l) => !l.deleted && l.library === lib.name && isWithin(l.fullpath, a.fullpath));
    for (const l of moved) await this.uploads.cancel(l.id);
    const onService = await lib.remote.stat(a.fullpath, this.call(ctx));
    if (onService) await lib.remote.move(a.fullpath, b.fullpath, this.call(ctx));
    for (const l of moved) {
      this.locals.delete(localKey(l.library, l.fullpath));
      l.fullpath = b.fullpath + l.fullpath.slice(a.fullpath.length);
      this.locals.set(localKey(l.library, l.fullpath), l);
      await this.requeue(l);
    }
    this.ownRemove(lib.name, a.fullpath);
    if (onService) this.ownUpsert(lib.name, { ...onService, fullpath: b.fullpath, name: baseName(b.fullpath) });
    if (src.isDir) this.cache.invalidateListing(lib.name, b.fullpath);
  }

  async copy(from: string, to: string, opts: { noReplace?: boolean } = {}, ctx?: CallContext): Promise<void> {
    const { a, b, dst } = await this.transferEnds('copied', from, to, opts, ctx);
    if (dst) {
      if (dst.isDir) await this.removeTree(b.lib, b.fullpath, true, ctx);
      else await this.unlink(b.path, ctx);
    }
    const hasLocal = [...this.locals.values()].some((l) => !l.deleted && l.library === a.lib!.name && isWithin(l.fullpath, a.fullpath));
    if (a.lib === b.lib && !hasLocal) {
      await a.lib.remote.copy(a.fullpath, b.fullpath, this.call(ctx));
      this.ownForget(b.lib.name, b.fullpath);
      return;
    }
    await this.copyAcross(a.lib, a.fullpath, b.lib, b.fullpath, ctx);
  }

  /** Both ends of a rename or copy, checked: source exists, not into itself, target's folder exists, noReplace. */
  private async transferEnds(verb: string, from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext):
    Promise<{ a: Target & { lib: Library }; b: Target & { lib: Library }; src: RemoteEntry; dst: RemoteEntry | null }> {
    const a = this.target(from);
    const b = this.target(to);
    if (!a.lib || a.fullpath === '' || !b.lib || b.fullpath === '') throw new VfsError('EPERM', `libraries cannot be ${verb} or replaced: ${a.path} → ${b.path}`);
    this.writable(b.path);
    const src = await this.entryOf(a.lib, a.fullpath, ctx);
    if (!src) throw new VfsError('ENOENT', `no such file or folder: ${a.path}`);
    if (src.isDir && a.lib === b.lib && isWithin(b.fullpath, a.fullpath)) throw new VfsError('EINVAL', `cannot put ${a.path} into itself`);
    await this.needFolder(b.lib, parentOf(b.fullpath), ctx);
    const dst = await this.entryOf(b.lib, b.fullpath, ctx);
    if (dst && opts.noReplace) throw new VfsError('EEXIST', `${b.path} exists`);
    return { a: a as Target & { lib: Library }, b: b as Target & { lib: Library }, src, dst };
  }

  async setTimes(path: string, mtimeMs: number, ctx?: CallContext): Promise<void> {
    if (!Number.isFinite(mtimeMs)) throw new VfsError('EINVAL', `expected a time in ms, got ${mtimeMs}`);
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setTimes');
    this.writable(t.path);
    const local = this.locals.get(localKey(lib.name, t.fullpath));
    if (local && !local.deleted) {
      local.mtimeMs = mtimeMs;
      local.explicitMtimeMs = mtimeMs;
      return;
    }
    const e = await this.lookup(lib, t.fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    this.timeOverrides.set(`${lib.name}\0${e.id}`, { version: versionOf(e), mtimeMs });
  }

  // ---- extended operations ---------------------------------------------------------------------------------

  async getTags(path: string, ctx?: CallContext): Promise<string[]> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'getTags');
    if (t.fullpath === '') throw new VfsError('ENOTSUP', `libraries have no tags: ${t.path}`);
    const e = await lib.remote.stat(t.fullpath, this.call(ctx));
    if (!e) throw new VfsError('ENOENT', `no such file or folder: ${t.path}`);
    return e.tags ?? [];
  }

  async setTags(path: string, tags: string[], ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setTags');
    if (t.fullpath === '') throw new VfsError('ENOTSUP', `libraries have no tags: ${t.path}`);
    this.writable(t.path);
    for (const tag of tags) {
      if (typeof tag !== 'string' || tag.trim() === '' || tag.includes(';')) throw new VfsError('EINVAL', `expected tags without ';' and not empty, got ${JSON.stringify(tag)}`);
    }
    const current = await this.getTags(path, ctx);
    const wanted = [...new Set(tags.map((x) => x.trim()))];
    await lib.remote.removeTags(t.fullpath, current.filter((x) => !wanted.includes(x)), this.call(ctx));
    await lib.remote.addTags(t.fullpath, wanted.filter((x) => !current.includes(x)), this.call(ctx));
    this.ownForget(lib.name, t.fullpath);
    this.patchLocalBase(lib.name, t.fullpath, { tags: wanted });
  }

  async setLocked(path: string, locked: boolean, ctx?: CallContext): Promise<void> {
    const t = this.target(path);
    const lib = this.needLibrary(t, 'setLocked');
    if (t.fullpath === '') throw new VfsError('ENOTSUP', `libraries cannot be locked: ${t.path}`);
    this.writable(t.path);
    const e = await this.lookup(lib, t.fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such file: ${t.path}`);
    if (e.isDir) throw new VfsError('ENOTSUP', `folders cannot be locked: ${t.path}`);
    await lib.remote.lock(t.fullpath, locked, this.call(ctx));
    this.ownForget(lib.name, t.fullpath);
    this.patchLocalBase(lib.name, t.fullpath, { locked });
  }

  /** A local copy shows the service's tags and lock of its base: keep them current when the gateway changes them. */
  private patchLocalBase(library: string, fullpath: string, patch: Pick<RemoteEntry, 'tags'> | Pick<RemoteEntry, 'locked'>): void {
    const local = this.locals.get(localKey(library, fullpath));
    if (local?.base && !local.deleted) local.base = { ...local.base, ...patch };
  }

  // ---- lifecycle ------------------------------------------------------------------------------------------

  async flushAll(opts: { timeoutMs?: number } = {}): Promise<void> {
    for (const l of [...this.locals.values()]) if (!l.deleted && l.generation > l.journaledGeneration) await this.persist(l);
    await this.uploads.settle(opts.timeoutMs);
  }

  /** What the gateway is doing (for the control socket). */
  status(): GatewayStatus {
    return {
      uploads: this.uploads.status(),
      stranded: this.stranded.map((e) => ({ id: e.id, library: e.library, fullpath: e.fullpath })),
      feeds: [...this.libs.values()].flatMap((l) => (l.feed ? [l.feed.snapshot()] : [])),
      localFiles: this.locals.size,
      metadata: this.cache.stats(),
      blocks: this.blocks.stats(),
      disk: this.disk?.stats(),
    };
  }

  /** Library folder names, in order. */
  libraryNames(): string[] {
    return [...this.libs.keys()];
  }

  /** The Remote of a library folder (control socket, tests). */
  remoteOf(name: string): Remote | undefined {
    return this.libs.get(name)?.remote;
  }

  /** Polls every library's feed now (tests, `cloudlib ctl refresh`). */
  async refresh(): Promise<void> {
    await Promise.all([...this.libs.values()].map((l) => l.feed?.pollNow()));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.libs.values()].map((l) => l.feed?.stop()));
    // Dirty open files reach the journal; uploads under way stop (their journal entries stay).
    for (const l of [...this.locals.values()]) {
      if (!l.deleted && l.generation > l.journaledGeneration) {
        const generation = l.generation;
        await l.sync().then(() => this.journal.put(this.journalEntry(l), { spoolSynced: l.generation === generation })).catch((err: Error) => this.logger.error({ path: l.fullpath, err: err.message }, 'journaling on close failed'));
      }
    }
    await this.uploads.close();
    for (const l of this.locals.values()) await l.closeSpool().catch(() => undefined);
    await this.hasher.close();
    await this.sha1Streams.close();
    await this.disk?.close();
    await this.journal.close();
    await this.opts.onClose?.();
  }

  // ---- internals: write-back ------------------------------------------------------------------------------

  private newLocal(library: string, fullpath: string, base: RemoteEntry | undefined, ctx?: CallContext): LocalFile {
    const id = this.journal.newId();
    const file: LocalFile = new LocalFile(id, this.journal.spoolPath(id), library, fullpath, base, {
      baseSize: base?.size ?? 0, mtimeMs: base?.mtimeMs, fetchChunk: this.opts.partialFetch?.chunkBytes,
      sha1Stream: () => this.sha1Streams.open(this.journal.spoolPath(id)),
      // The base is wherever the file is now (a rename moves it on the service too), in the version it had.
      openBase: base ? (start, end) => this.libs.get(file.library)!.remote.openRange(file.fullpath, start, end, { ...this.call(ctx), contentHash: base.contentHash }) : undefined,
    });
    file.operator = ctx?.operator;
    this.locals.set(localKey(library, fullpath), file);
    return file;
  }

  /**
   * Journals the file's current content (durable) and queues its upload. The upload is queued as soon as
   * the spool's hash is known, while its fsync and journal entry are still being written (it reads the
   * spool from the page cache meanwhile); the call returns once both are durable, and a confirmation of
   * the upload waits for them (`committed`), so the entry can never outlive nor precede what it covers.
   */
  async persist(file: LocalFile): Promise<void> {
    if (file.deleted || file.generation === file.journaledGeneration) return;
    await file.fillAll();
    const generation = file.generation;
    let queued: Promise<void> | undefined;
    const journaling = (async () => {
      await file.syncAndHash(this.hasher, () => { if (!file.deleted) queued = this.uploads.enqueue(file); });
      // syncAndHash fsynced the spool; again only if it changed since (the entry records the size now).
      await this.journal.put(this.journalEntry(file), { spoolSynced: file.generation === generation });
      file.journaledGeneration = Math.max(file.journaledGeneration, generation);
    })();
    file.journaling = journaling.catch(() => undefined);
    try {
      await journaling;
    } catch (err) {
      await this.uploads.cancel(file.id); // not durable: nothing may be confirmed for it
      throw err;
    }
    await queued;
  }

  private journalEntry(file: LocalFile): JournalEntry {
    return { id: file.id, library: file.library, fullpath: file.fullpath, size: file.size, mtimeMs: file.mtimeMs, createdMs: Date.now(), operator: file.operator };
  }

  /** A renamed local file: journal rewritten and upload queued again (if it had been journaled). */
  private async requeue(file: LocalFile): Promise<void> {
    if (file.journaledGeneration === 0 || file.deleted) return;
    if (file.uploadedGeneration >= file.generation) {
      // Already on the service (moved with the folder): nothing to upload.
      return;
    }
    await this.journal.put(this.journalEntry(file));
    await this.uploads.enqueue(file);
  }

  private async committed(file: LocalFile, entry: RemoteEntry, snapshot: { generation: number; fullpath: string; library: string }): Promise<void> {
    await file.journaling; // the journal entry of this content is written before it can be removed
    this.ownUpsert(snapshot.library, { ...entry, mtimeMs: Math.max(entry.mtimeMs, file.mtimeMs) });
    file.uploadedGeneration = Math.max(file.uploadedGeneration, snapshot.generation);
    // A time set by the application outlives the local copy, for as long as this version is current.
    if (file.explicitMtimeMs !== undefined) this.timeOverrides.set(`${snapshot.library}\0${entry.id}`, { version: versionOf(entry), mtimeMs: file.explicitMtimeMs });
    file.base = entry;
    if (file.generation !== snapshot.generation || file.deleted) return; // changed since: its next flush uploads again
    file.journaledGeneration = file.generation;
    // Decided with no await before: a handle opened meanwhile must find either this file with its spool,
    // or nothing (then it reads the service's version, which is this one).
    const drop = file.openCount === 0;
    if (drop) {
      this.forgetLocal(file);
      file.retire();
    }
    await this.journal.remove(file.id, { keepSpool: !drop });
    if (drop) await file.closeSpool();
  }

  /** Takes a local file out of the path index (synchronously: no handle can find it after this). */
  private forgetLocal(file: LocalFile): void {
    const key = localKey(file.library, file.fullpath);
    if (this.locals.get(key) === file) this.locals.delete(key);
  }

  /** Forgets a local file (unlinked, replaced): upload cancelled, journal entry and spool removed. */
  private async dropLocal(file: LocalFile): Promise<void> {
    file.deleted = true;
    this.forgetLocal(file);
    await this.uploads.cancel(file.id);
    if (file.openCount === 0) {
      await file.closeSpool();
      await this.journal.remove(file.id);
    } else {
      await this.journal.remove(file.id, { keepSpool: true });
    }
  }

  /** The last handle of a local file was released, or its upload was confirmed after that. */
  private async released(file: LocalFile): Promise<void> {
    if (file.openCount > 0) return;
    if (file.deleted) {
      await file.closeSpool();
      await this.journal.discardSpool(file.id);
      return;
    }
    if (this.uploads.has(file.id) || file.dirty) return; // kept until the service confirmed
    // Clean: its journal entry (if any) went when the upload was confirmed; only the spool is left. Out of
    // the index first, so that an open from now on reads the service's version instead of this spool.
    this.forgetLocal(file);
    file.retire();
    // A time set through a handle that changed nothing (touch, cp -p) stays with the service's version.
    if (file.explicitMtimeMs !== undefined && file.base) this.timeOverrides.set(`${file.library}\0${file.base.id}`, { version: versionOf(file.base), mtimeMs: file.explicitMtimeMs });
    await file.closeSpool();
    await this.journal.discardSpool(file.id);
  }

  /** Recreates missing parent folders of a pending upload (they vanished on the service). */
  private async ensureParents(library: string, fullpath: string): Promise<void> {
    const lib = this.libs.get(library);
    if (!lib) return;
    const parts = parentOf(fullpath).split('/').filter(Boolean);
    let at = '';
    for (const p of parts) {
      at = joinPath(at, p);
      const e = await lib.remote.stat(at);
      if (!e) this.ownUpsert(lib.name, await lib.remote.mkdir(at));
    }
  }

  /** Copies a file or folder between places, through a local spool; returns when the service has it. */
  private async copyAcross(from: Library, fromPath: string, to: Library, toPath: string, ctx?: CallContext): Promise<void> {
    const src = await this.entryOf(from, fromPath, ctx);
    if (!src) throw new VfsError('ENOENT', `no such file or folder: ${gatewayPathOf(from.name, fromPath)}`);
    if (src.isDir) {
      this.ownUpsert(to.name, await to.remote.mkdir(toPath, this.call(ctx)));
      for (const child of await this.listDir(from, fromPath, ctx)) {
        await this.copyAcross(from, joinPath(fromPath, child.name), to, joinPath(toPath, child.name), ctx);
      }
      return;
    }
    const local = this.locals.get(localKey(from.name, fromPath));
    const id = this.journal.newId();
    const spool = this.journal.spoolPath(id);
    try {
      if (local && !local.deleted && (local.baseReady || local.generation > 0)) {
        await local.fillAll();
        await local.sync();
        await copyFile(local.spoolPath, spool);
      } else {
        const tmp = new LocalFile(id, spool, to.name, toPath, src, {
          baseSize: src.size, openBase: (start, end) => from.remote.openRange(fromPath, start, end, { ...this.call(ctx), contentHash: src.contentHash }),
        });
        await tmp.fillAll();
        await tmp.sync();
        await tmp.closeSpool();
      }
      const { sha1, size } = await this.hasher.hash(spool);
      const entry = await to.remote.commit(toPath, { path: spool, size, sha1 }, this.call(ctx));
      this.ownUpsert(to.name, entry);
      ctx?.onCopied?.(size);
    } finally {
      await this.journal.discardSpool(id);
    }
  }

  /** Removes a file or a whole folder (after a cross-library move). */
  private async removeTree(lib: Library, fullpath: string, isDir: boolean, ctx?: CallContext): Promise<void> {
    for (const l of [...this.locals.values()]) if (l.library === lib.name && isWithin(l.fullpath, fullpath)) await this.dropLocal(l);
    if (await lib.remote.stat(fullpath, this.call(ctx))) await lib.remote.remove(fullpath, this.call(ctx));
    this.ownRemove(lib.name, fullpath);
    void isDir;
  }

  // ---- internals: the gateway's own changes ----------------------------------------------------------------

  /** The gateway created or changed an entry: the cache shows it at once, the feed will not undo it. */
  private ownUpsert(library: string, entry: RemoteEntry): void {
    this.cache.upsert(library, entry);
    this.libs.get(library)?.feed?.noteLocalChange(entry.fullpath);
  }

  /** The gateway removed (or moved away) a path. */
  private ownRemove(library: string, fullpath: string): void {
    this.cache.remove(library, fullpath);
    this.libs.get(library)?.feed?.noteLocalChange(fullpath);
  }

  /** The gateway changed a path in a way the cache cannot patch (tags, lock, a copy): asked again next time. */
  private ownForget(library: string, fullpath: string): void {
    this.cache.forget(library, fullpath);
    this.libs.get(library)?.feed?.noteLocalChange(fullpath);
  }

  // ---- internals: lookups ---------------------------------------------------------------------------------

  private target(path: string): Target {
    const p = parseGatewayPath(path);
    if (!p.library) return { path: p.path, fullpath: '' };
    const lib = this.libs.get(p.library);
    if (!lib) throw new VfsError('ENOENT', `no such library: /${p.library}`);
    return { path: p.path, lib, fullpath: p.fullpath };
  }

  private needLibrary(t: Target, what: string): Library {
    if (!t.lib) throw new VfsError('EISDIR', `${what}: the root is a folder`);
    return t.lib;
  }

  private writable(path: string): void {
    if (this.opts.readOnly) throw new VfsError('EROFS', `read-only gateway: ${path}`);
    if (this.closed) throw new VfsError('EIO', 'gateway closed');
  }

  private call(ctx?: CallContext): RemoteCallOptions {
    return { operator: ctx?.operator, signal: ctx?.signal };
  }

  /** An entry as the gateway sees it: a local file first, then the cache, then the service. */
  private async lookup(lib: Library, fullpath: string, ctx?: CallContext): Promise<RemoteEntry | null> {
    if (fullpath === '') return { id: lib.id, fullpath: '', name: lib.name, isDir: true, size: 0, mtimeMs: LIB_ROOT_ATTR_TIME, ctimeMs: LIB_ROOT_ATTR_TIME };
    const local = this.locals.get(localKey(lib.name, fullpath));
    if (local && !local.deleted) return this.localEntry(local);
    // A path below a pending new file cannot exist; a parent known missing answers for its children.
    const cached = this.cache.getEntry(lib.name, fullpath);
    if (cached !== undefined) return cached;
    const parent = parentOf(fullpath);
    if (parent !== '' && this.cache.getEntry(lib.name, parent) === null) return null;
    const e = await lib.remote.stat(fullpath, this.call(ctx));
    this.cache.setEntry(lib.name, fullpath, e);
    return e;
  }

  /** As lookup, without the cache for the final answer (before a change). */
  private async entryOf(lib: Library, fullpath: string, ctx?: CallContext): Promise<RemoteEntry | null> {
    const local = this.locals.get(localKey(lib.name, fullpath));
    if (local && !local.deleted) return this.localEntry(local);
    const e = await lib.remote.stat(fullpath, this.call(ctx));
    this.cache.setEntry(lib.name, fullpath, e);
    return e;
  }

  private async needFolder(lib: Library, fullpath: string, ctx?: CallContext): Promise<void> {
    if (fullpath === '') return;
    const e = await this.lookup(lib, fullpath, ctx);
    if (!e) throw new VfsError('ENOENT', `no such folder: ${gatewayPathOf(lib.name, fullpath)}`);
    if (!e.isDir) throw new VfsError('ENOTDIR', `${gatewayPathOf(lib.name, fullpath)} is a file`);
  }

  /** A folder's entries: the cached or fetched listing, with local files laid over it. */
  private async listDir(lib: Library, fullpath: string, ctx?: CallContext): Promise<RemoteEntry[]> {
    let list = this.cache.getListing(lib.name, fullpath);
    if (!list) {
      if (fullpath !== '') {
        const self = await this.lookup(lib, fullpath, ctx);
        if (!self) throw new VfsError('ENOENT', `no such folder: ${gatewayPathOf(lib.name, fullpath)}`);
        if (!self.isDir) throw new VfsError('ENOTDIR', `${gatewayPathOf(lib.name, fullpath)} is a file`);
      }
      list = await lib.remote.list(fullpath, this.call(ctx));
      this.cache.setListing(lib.name, fullpath, list);
    }
    const byName = new Map(list.map((e) => [e.name, e]));
    for (const l of this.locals.values()) {
      if (l.library !== lib.name || parentOf(l.fullpath) !== fullpath) continue;
      if (l.deleted) byName.delete(baseName(l.fullpath));
      else byName.set(baseName(l.fullpath), this.localEntry(l));
    }
    return [...byName.values()].sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  }

  private localEntry(l: LocalFile): RemoteEntry {
    return {
      id: l.base?.id ?? `local:${l.id}`, fullpath: l.fullpath, name: baseName(l.fullpath), isDir: false,
      // Once flushed, the content's hash is known before the upload: entity tags stay the same across it.
      size: l.size, contentHash: l.dirty ? l.currentSha1() : l.base?.contentHash,
      mtimeMs: l.mtimeMs, ctimeMs: l.ctimeMs, tags: l.base?.tags, locked: l.base?.locked, lastModifiedBy: l.operator?.opName ?? l.base?.lastModifiedBy,
    };
  }

  private toAttr(lib: Library, e: RemoteEntry): Attr {
    const local = e.isDir ? undefined : this.locals.get(localKey(lib.name, e.fullpath));
    const override = this.timeOverrides.get(`${lib.name}\0${e.id}`);
    const mtimeMs = override && override.version === versionOf(e) ? override.mtimeMs : e.mtimeMs;
    return {
      path: gatewayPathOf(lib.name, e.fullpath), name: e.fullpath === '' ? lib.name : e.name, isDir: e.isDir, size: e.isDir ? 0 : e.size,
      mtimeMs, ctimeMs: e.ctimeMs, id: e.id.startsWith('local:') ? undefined : e.id, contentHash: e.contentHash,
      dirty: local && !local.deleted ? local.dirty || this.uploads.has(local.id) : undefined,
      locked: e.locked, tags: e.tags, lastModifiedBy: e.lastModifiedBy,
    };
  }

  private rootAttr(): Attr {
    return { path: '/', name: '', isDir: true, size: 0, mtimeMs: LIB_ROOT_ATTR_TIME, ctimeMs: LIB_ROOT_ATTR_TIME };
  }

  private libraryAttr(l: Library): Attr {
    return { path: `/${l.name}`, name: l.name, isDir: true, size: 0, mtimeMs: LIB_ROOT_ATTR_TIME, ctimeMs: LIB_ROOT_ATTR_TIME, id: l.id };
  }

  private reader(lib: Library, e: RemoteEntry, ctx?: CallContext): RangeReader {
    return new RangeReader({
      remote: lib.remote, fullpath: e.fullpath, size: e.size, contentHash: e.contentHash,
      contentKey: e.contentHash ?? `${lib.name}\0${e.id}\0${e.size}\0${e.mtimeMs}`, blocks: this.blocks, disk: this.disk,
      initialWindow: this.opts.readAhead?.initial, maxWindow: this.opts.readAhead?.max, call: this.call(ctx), logger: this.logger,
    });
  }

  private async *diskChunks(hash: string, start: number, end: number): AsyncGenerator<Buffer> {
    for (let at = start; at < end; at += 1024 * 1024) yield await this.disk!.read(hash, at, Math.min(end, at + 1024 * 1024));
  }

  private handleFor(path: string, lib: Library, file: LocalFile, mode: { read: boolean; write: boolean; append: boolean }, ctx?: CallContext): FileHandle {
    file.openCount++;
    const base = file.base;
    // While nothing is changed, reads of an existing file go through a RangeReader (read-ahead).
    const baseReader = !file.baseReady && file.generation === 0 && base ? this.reader(lib, base, ctx) : undefined;
    return new LocalFileHandle(path, file, mode, {
      baseReader,
      wholeFetchMax: this.opts.partialFetch?.wholeMaxBytes ?? 8 * 1024 * 1024,
      persist: () => this.persist(file),
      cancelUpload: () => this.uploads.cancel(file.id),
      uploading: () => this.uploads.has(file.id),
      attr: () => this.toAttr(lib, this.localEntry(file)),
      released: () => this.released(file),
      writable: () => this.writable(path),
    });
  }
}

/** A read handle on a service file (no local copy). */
class RemoteReadHandle implements FileHandle {
  constructor(readonly path: string, private readonly entry: RemoteEntry, private readonly rr: RangeReader, private readonly attr: () => Attr) {}
  read(position: number, length: number): Promise<Buffer> { return this.rr.read(position, length); }
  readParts(position: number, length: number): Promise<Buffer[]> { return this.rr.readParts(position, length); }
  async write(): Promise<number> { throw new VfsError('EACCES', `${this.path} was opened read-only`); }
  async truncate(): Promise<void> { throw new VfsError('EACCES', `${this.path} was opened read-only`); }
  async stat(): Promise<Attr> { return this.attr(); }
  async flush(): Promise<void> {}
  async fsync(): Promise<void> {}
  async release(): Promise<void> { this.rr.close(); }
}

interface LocalHandleHost {
  baseReader?: RangeReader;
  /** Base size up to which the first change fetches the whole file. */
  wholeFetchMax: number;
  persist(): Promise<void>;
  cancelUpload(): Promise<void>;
  /** An upload of the file is queued, running or waiting to retry. */
  uploading(): boolean;
  attr(): Attr;
  released(): Promise<void>;
  writable(): void;
}

/** A handle on a LocalFile: reads and writes go to the spool; flush, fsync and release journal the data. */
class LocalFileHandle implements FileHandle {
  private releasedOnce = false;

  constructor(readonly path: string, private readonly file: LocalFile, private readonly mode: { read: boolean; write: boolean; append: boolean }, private readonly host: LocalHandleHost) {}

  async read(position: number, length: number): Promise<Buffer> {
    this.open();
    if (!this.file.baseReady && this.file.generation === 0 && this.host.baseReader) return this.host.baseReader.read(position, length);
    return this.file.read(position, length);
  }

  async readParts(position: number, length: number): Promise<Buffer[]> {
    this.open();
    if (!this.file.baseReady && this.file.generation === 0 && this.host.baseReader) return this.host.baseReader.readParts(position, length);
    return [await this.file.read(position, length)];
  }

  async write(position: number, data: Buffer): Promise<number> {
    this.open();
    if (!this.mode.write) throw new VfsError('EACCES', `${this.path} was opened read-only`);
    this.host.writable();
    if (!Number.isInteger(position) || position < 0) throw new VfsError('EINVAL', `expected a write position >= 0, got ${position}`);
    await this.prepareChange();
    return this.file.write(this.mode.append ? this.file.size : position, data);
  }

  async truncate(size: number): Promise<void> {
    this.open();
    if (!this.mode.write) throw new VfsError('EACCES', `${this.path} was opened read-only`);
    this.host.writable();
    if (!Number.isInteger(size) || size < 0) throw new VfsError('EINVAL', `expected a size >= 0, got ${size}`);
    if (size === 0 && !this.file.baseReady) {
      await this.host.cancelUpload();
      await this.file.startEmpty();
      this.file.touch();
      return;
    }
    await this.prepareChange();
    await this.file.truncate(size);
  }

  async stat(): Promise<Attr> {
    return this.host.attr();
  }

  async flush(): Promise<void> {
    this.open();
    if (this.mode.write) await this.host.persist();
  }

  async fsync(): Promise<void> {
    await this.flush();
  }

  async release(): Promise<void> {
    if (this.releasedOnce) return;
    this.releasedOnce = true;
    try {
      if (this.mode.write) await this.host.persist();
    } finally {
      this.file.openCount--;
      this.host.baseReader?.close();
      await this.host.released();
    }
  }

  /** Before a change: the content is local, and an upload under way is stopped (it is queued again on flush). */
  private async prepareChange(): Promise<void> {
    // Small files are fetched whole at the first change; larger ones on demand (and in full before commit).
    if (!this.file.baseReady && this.file.baseSize <= this.host.wholeFetchMax) await this.file.fillAll();
    if (this.host.uploading()) await this.host.cancelUpload();
  }

  private open(): void {
    if (this.releasedOnce) throw new VfsError('EINVAL', `${this.path}: handle already released`);
  }
}

/** What identifies a version of an entry for a time override. */
function versionOf(e: RemoteEntry): string {
  return e.contentHash ?? `t${e.mtimeMs}`;
}

function localKey(library: string, fullpath: string): string {
  return `${library}\0${fullpath}`;
}

function safeFileName(id: string): string {
  return id.replace(/[^A-Za-z0-9_.-]/g, '_') || 'library';
}

export type { PendingFile };
