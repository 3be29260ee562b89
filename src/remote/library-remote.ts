/**
 * LibraryRemote: the gateway's Remote over the library file API (one library authorization). Service
 * errors become protocol-neutral VfsErrors here. Reads are HTTP range requests on download links over the
 * client's keep-alive pool; links are cached until shortly before they expire and refreshed when a range
 * fails. Uploads go through the client's uploader (create_file with overwrite, instant or chunked).
 */
import type { Readable } from 'node:stream';
import { getMaxListeners, setMaxListeners } from 'node:events';
import type { ServiceClient } from '../api/client.js';
import type { UploadSource } from '../api/upload-source.js';
import { ServiceError, ErrorCode } from '../api/errors.js';
import { VfsError, type VfsErrorCode } from '../vfs/types.js';
import { DownloadLinks } from './download-links.js';
import { baseName } from '../vfs/remote.js';
import type {
  ChangesPage, CommitOptions, CommitSource, RangeCallOptions, Remote, RemoteCallOptions, RemoteEntry, RemoteHistoryItem, RemoteInfo, RemoteQuota,
} from '../vfs/remote.js';
import type { FileRecord, UpdateItem, FileInfo } from '../shared/records.js';
import { throttled, type BandwidthLimit } from '../shared/bandwidth-limit.js';

export interface LibraryRemoteOptions {
  /** A client holding the library authorization (`credentials.library`). */
  client: ServiceClient;
  /** Download links are used until this long before they expire, ms. Default 60 000. */
  linkMarginMs?: number;
  /** Lifetime assumed for a download link, ms (the spec: "generally 10 minutes"). Default 600 000. */
  linkLifetimeMs?: number;
  /** Download links cached. Default 10 000. */
  maxLinks?: number;
  /**
   * Entries asked for per page of `ls`. Default 1 000 (the largest page the embedded service gives): a
   * folder of up to 1 000 entries in one exchange, 2 000 in two on the same connection. A service that
   * gives fewer per page is followed at the size it gives; one that refuses the size is asked again at
   * its default page of 100 from then on.
   */
  pageSize?: number;
  /** Pages of one `ls` asked for at once once the folder's entry count is known. Default 20. */
  pageConcurrency?: number;
  /** Deadline of one range request until its headers arrive, ms. Default 30 000. */
  rangeTimeoutMs?: number;
  /** Interval between polls of an asynchronous copy's queue status, ms. Default 200. */
  copyPollMs?: number;
  /**
   * Files up to this many bytes are uploaded with create_file carrying the content (one exchange
   * instead of four; see UploadOptions.inlineMaxBytes). Default 256 KiB; 0 = the chunked protocol always.
   */
  inlineUploadMaxBytes?: number;
  /** The gateway's bandwidth limit (`bwlimit`), shared by the transfers of every library. Default none. */
  bandwidth?: BandwidthLimit;
}

type UploaderModule = typeof import('../api/upload.js');

let uploader: Promise<UploaderModule> | undefined;
/** The uploader, loaded on first use (a build without it answers ENOSYS to uploads). */
export function loadUploader(): Promise<UploaderModule> {
  // Loaded on first use: the chunked upload protocol lives in its own module.
  uploader ??= import('../api/upload.js').catch((err: Error) => {
    uploader = undefined;
    throw new VfsError('ENOSYS', `uploads not supported in this build: the uploader module is missing (${err.message})`);
  });
  return uploader;
}

/** What an upload reads: the bytes themselves when the caller holds them, else its file. */
export function uploadSourceOf(up: UploaderModule, source: CommitSource): Promise<UploadSource> {
  return source.data ? Promise.resolve(up.bufferSource(source.data, source.sha1)) : up.fileSource(source.path, source.sha1);
}

/** `source` with its bytes taken through the upload limit, when there is one. */
export function limitedSource(source: UploadSource, limit: BandwidthLimit): UploadSource {
  const upload = limit.upload;
  if (!upload) return source;
  return { size: source.size, filehash: source.filehash, open: (start) => throttled(source.open(start), upload) };
}

export class LibraryRemote implements Remote {
  readonly client: ServiceClient;
  private readonly downloads: DownloadLinks;
  /** Lowered to the spec's default page (100) once the service refuses a larger one. */
  private pageSize: number;
  private readonly pageConcurrency: number;
  private readonly copyPollMs: number;
  private readonly inlineUploadMaxBytes: number;
  private readonly bandwidth: BandwidthLimit;

  constructor(opts: LibraryRemoteOptions) {
    if (!opts.client.credentials.library) throw new TypeError('client: expected a client with a library authorization (credentials.library), got none');
    this.client = opts.client;
    this.bandwidth = opts.bandwidth ?? {};
    this.pageSize = opts.pageSize ?? 1000;
    if (!Number.isInteger(this.pageSize) || this.pageSize < 1) throw new TypeError(`pageSize: expected a whole number >= 1, got ${String(opts.pageSize)}`);
    this.pageConcurrency = opts.pageConcurrency ?? 20;
    if (!Number.isInteger(this.pageConcurrency) || this.pageConcurrency < 1) throw new TypeError(`pageConcurrency: expected a whole number >= 1, got ${String(opts.pageConcurrency)}`);
    this.copyPollMs = opts.copyPollMs ?? 200;
    this.inlineUploadMaxBytes = opts.inlineUploadMaxBytes ?? 256 * 1024;
    this.downloads = new DownloadLinks({
      issue: (fullpath, o) => this.issueLink(fullpath, o), dispatcher: this.client.retryingDispatcher,
      lifetimeMs: opts.linkLifetimeMs ?? 600_000, marginMs: opts.linkMarginMs ?? 60_000, max: opts.maxLinks ?? 10_000,
      rangeTimeoutMs: opts.rangeTimeoutMs ?? 30_000,
    });
  }

  async info(opts?: RemoteCallOptions): Promise<RemoteInfo> {
    const s = await this.wrap(() => this.client.file.stat({}, { signal: opts?.signal }), '');
    return { id: String(s.org_id), name: String(s.org_name ?? `library ${s.org_id}`) };
  }

  /**
   * Every entry of a folder. The first page says how many there are; the pages after it are asked for
   * together (at most `pageConcurrency` at once), so a large folder costs about two round trips instead
   * of one per page, and up to two pages' worth costs two exchanges on the connection already open. A
   * page shorter than asked while the count says more exist means the service caps its pages: the rest
   * is asked for at the size it gives. Pages beyond the count (the folder grew meanwhile) follow one
   * after another.
   */
  async list(fullpath: string, opts?: RemoteCallOptions): Promise<RemoteEntry[]> {
    const first = await this.firstPage(fullpath, opts);
    const out = new Map<string, RemoteEntry>();
    const add = (list: (FileRecord | UpdateItem)[]): void => {
      for (const r of list) {
        const e = fromRecord(r);
        out.set(e.fullpath, e); // a page shifted by a concurrent change may repeat an entry
      }
    };
    add(first.list);
    let count = first.count;
    // Without a count, a short page is the last one; with one, it is the service's page size.
    if (first.list.length === 0 || out.size >= count || (first.list.length < first.asked && !Number.isFinite(count))) return [...out.values()];
    const size = Math.min(first.asked, first.list.length);
    let start = first.list.length;
    if (Number.isFinite(count) && count > start) {
      const starts: number[] = [];
      for (let s = start; s < count; s += size) starts.push(s);
      // Each page in flight listens to the caller's signal.
      if (opts?.signal) setMaxListeners(Math.max(getMaxListeners(opts.signal), this.pageConcurrency + 10), opts.signal);
      const pages = await inParallel(starts, this.pageConcurrency, (s) => this.page(fullpath, s, size, opts));
      let short = false;
      for (const p of pages) {
        add(p.list);
        if (p.list.length < size) short = true;
        count = Math.max(count, p.count);
      }
      if (short || out.size >= count) return [...out.values()];
      start = starts[starts.length - 1]! + size;
    }
    for (; ; start += size) {
      const p = await this.page(fullpath, start, size, opts);
      add(p.list);
      if (p.list.length < size || out.size >= p.count) break;
    }
    return [...out.values()];
  }

  /** The first page at `pageSize`; a service that refuses that size (40003 on `size`) at its default page. */
  private async firstPage(fullpath: string, opts?: RemoteCallOptions): Promise<{ list: FileRecord[]; count: number; asked: number }> {
    const asked = this.pageSize;
    try {
      return { ...(await this.page(fullpath, 0, asked, opts)), asked };
    } catch (err) {
      if (asked <= SPEC_PAGE_SIZE || !refusesPageSize(err)) throw err;
      this.pageSize = SPEC_PAGE_SIZE;
      return { ...(await this.page(fullpath, 0, SPEC_PAGE_SIZE, opts)), asked: SPEC_PAGE_SIZE };
    }
  }

  /** One page of `ls`: its records and the folder's entry count (Infinity when the service gives none). */
  private async page(fullpath: string, start: number, size: number, opts?: RemoteCallOptions): Promise<{ list: FileRecord[]; count: number }> {
    const page = await this.wrap(() => this.client.file.ls({ fullpath, start, size }, { signal: opts?.signal }), fullpath);
    const count = Number(page.count ?? Infinity);
    return { list: page.list ?? [], count: Number.isNaN(count) ? Infinity : count };
  }

  stat(fullpath: string, opts?: RemoteCallOptions): Promise<RemoteEntry | null> {
    return statOrNull(fullpath, async () => fromInfo(await this.client.file.info({ fullpath, ignores: 'favorite,permission,url,preview,thumbnail' }, { signal: opts?.signal })));
  }

  /** Bytes [start, end] of the file, streamed from its download link (DownloadLinks keeps links fresh). */
  openRange(fullpath: string, start: number, end: number, opts: RangeCallOptions = {}): Promise<Readable> {
    return throttledRange(this.downloads.openRange(fullpath, start, end, opts), this.bandwidth);
  }

  async commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> {
    const up = await loadUploader();
    const started = Date.now();
    const res = await this.wrap(async () => up.uploadFile(this.client, limitedSource(await uploadSourceOf(up, source), this.bandwidth), {
      fullpath, overwrite: opts?.replace !== false, operator: operatorParams(opts), signal: opts?.signal, onProgress: opts?.onProgress, inlineMaxBytes: this.inlineUploadMaxBytes,
    }), fullpath);
    this.downloads.forget(fullpath);
    return {
      id: res.hash, fullpath: res.fullpath || fullpath, name: baseName(res.fullpath || fullpath), isDir: false,
      size: Number(res.filesize ?? source.size), contentHash: res.filehash || source.sha1, mtimeMs: started, ctimeMs: started,
      lastModifiedBy: opts?.operator?.opName,
    };
  }

  async mkdir(fullpath: string, opts?: RemoteCallOptions): Promise<RemoteEntry> {
    const res = await this.wrap(() => this.client.file.createFolder({ fullpath, ...operatorParams(opts) }, { signal: opts?.signal }), fullpath);
    const now = Date.now();
    return { id: res.hash, fullpath: res.fullpath || fullpath, name: baseName(res.fullpath || fullpath), isDir: true, size: 0, mtimeMs: now, ctimeMs: now, lastModifiedBy: opts?.operator?.opName };
  }

  async move(from: string, to: string, opts?: RemoteCallOptions): Promise<void> {
    await this.wrap(() => this.client.file.move({ fullpath: from, dest_fullpath: to, ...operatorParams(opts) }, { signal: opts?.signal }), from);
    this.downloads.forget(from);
  }

  async copy(from: string, to: string, opts?: RemoteCallOptions): Promise<void> {
    // The service gives a copy onto a taken name a numbered name (overwrite=0); the Remote's copy is
    // refused there instead (EEXIST), as its interface says. Taken between the look and the copy: the
    // numbered copy the service made is removed again.
    if (await this.stat(to, opts)) throw new VfsError('EEXIST', `'${to}' exists`);
    const res = await this.wrap(() => this.client.file.copy({ from_fullpath: from, fullpath: to, ...operatorParams(opts) }, { signal: opts?.signal }), from);
    if (res.fullpath && res.fullpath !== to) {
      await this.remove(res.fullpath, opts);
      throw new VfsError('EEXIST', `'${to}' exists`);
    }
    if (!res.queue_id) return;
    // Asynchronous copy: wait for the queue to finish it.
    for (;;) {
      const q = await this.wrap(() => this.client.file.queueStatus({ queue_id: String(res.queue_id) }, { signal: opts?.signal }), from);
      if (q.status === 2) return;
      if (q.status === 3) throw new VfsError('EIO', `copy of '${from}' to '${to}' failed on the service`);
      await new Promise((r) => setTimeout(r, this.copyPollMs));
    }
  }

  async remove(fullpath: string, opts?: RemoteCallOptions): Promise<void> {
    await this.wrap(() => this.client.file.del({ fullpath, ...operatorParams(opts) }, { signal: opts?.signal }), fullpath);
    this.downloads.forget(fullpath);
  }

  async changes(cursor: number, opts?: RemoteCallOptions): Promise<ChangesPage> {
    const res = await this.wrap(() => this.client.file.updates({ mode: 'compare', fetch_dateline: cursor }, { signal: opts?.signal }), '');
    const list = res.list ?? [];
    const next = Number(res.fetch_dateline);
    return {
      cursor: list.length > 0 && Number.isFinite(next) ? next : cursor,
      changes: list.map((item) => ({ kind: item.cmd === 0 ? 'delete' as const : 'upsert' as const, entry: fromRecord(item) })),
    };
  }

  async headCursor(opts?: RemoteCallOptions): Promise<number> {
    // The newest changes first (mode empty, from now); their time is in seconds, so start one second early.
    const res = await this.wrap(() => this.client.file.updates({ fetch_dateline: 0 }, { signal: opts?.signal }), '');
    const latest = Math.max(0, ...(res.list ?? []).map((i) => Number(i.last_dateline) || 0));
    return latest > 0 ? latest * 1000 - 1000 : 0;
  }

  async quota(opts?: RemoteCallOptions): Promise<RemoteQuota> {
    const s = await this.wrap(() => this.client.file.stat({}, { signal: opts?.signal }), '');
    const capacity = Number(s.capacity);
    return { total: capacity > 0 ? capacity : undefined, used: Number(s.size) || 0, files: Number(s.count_file) || 0 };
  }

  async lock(fullpath: string, locked: boolean, opts?: RemoteCallOptions): Promise<void> {
    await this.wrap(() => this.client.file.lock({ fullpath, lock: locked ? 'lock' : 'unlock', ...operatorParams(opts) }, { signal: opts?.signal }), fullpath);
  }

  async addTags(fullpath: string, tags: string[], opts?: RemoteCallOptions): Promise<void> {
    if (tags.length === 0) return;
    await this.wrap(() => this.client.file.addTag({ fullpath, tag: tags.join(';'), ...operatorParams(opts) }, { signal: opts?.signal }), fullpath);
  }

  async removeTags(fullpath: string, tags: string[], opts?: RemoteCallOptions): Promise<void> {
    if (tags.length === 0) return;
    await this.wrap(() => this.client.file.delTag({ fullpath, tag: tags.join(';'), ...operatorParams(opts) }, { signal: opts?.signal }), fullpath);
  }

  /** The file's history events that carry content, newest first (pages of HISTORY_PAGE, at most `max`). */
  async history(fullpath: string, max: number, opts?: RemoteCallOptions): Promise<RemoteHistoryItem[]> {
    const out: RemoteHistoryItem[] = [];
    for (let start = 0; out.length < max; start += HISTORY_PAGE) {
      const page = await this.wrap(() => this.client.file.history({ fullpath, start, size: HISTORY_PAGE }, { signal: opts?.signal }), fullpath);
      const list = page.list ?? [];
      for (const h of list) {
        if (Number(h.dir) === 1 || !h.filehash || out.length >= max) continue;
        out.push({
          id: String(h.hid), contentHash: String(h.filehash).toLowerCase(), size: Number(h.filesize), timeMs: Number(h.dateline) * 1000,
          operator: h.member_name ? String(h.member_name) : undefined,
        });
      }
      if (list.length < HISTORY_PAGE || start + HISTORY_PAGE >= Number(page.count)) break;
    }
    return out;
  }

  /**
   * Fetches the download links of these files now, together (at most PREPARE_LINKS at once, those not
   * cached nor being fetched), so that reading each is one range request. Failures are forgotten: the
   * read asks again.
   */
  prepareReads(files: { fullpath: string; contentHash?: string }[], opts?: RemoteCallOptions): void {
    this.downloads.prepare(files, { ...opts }, PREPARE_LINKS);
  }

  /** A download link of the version asked for (`download_url`). */
  private async issueLink(fullpath: string, opts: RangeCallOptions): Promise<string> {
    // Naming the content hash pins the link to the version being read (a concurrent overwrite does not
    // change the bytes under an open handle). A service that does not know the current version by its
    // hash (only history versions) gets the plain request.
    const ask = (filehash?: string) => this.wrap(() => this.client.file.downloadUrl({ fullpath, ...(filehash ? { filehash } : {}), ...operatorParams(opts) }, { signal: opts.signal }), fullpath);
    let res: { urls: string[] };
    try {
      res = await ask(opts.contentHash);
    } catch (err) {
      if (err instanceof VfsError && err.code === 'ENOTDIR') throw new VfsError('EISDIR', `'${fullpath}' is a folder`, { cause: err });
      if (!opts.contentHash || opts.exactVersion || !(err instanceof VfsError) || !['ENOENT', 'EINVAL'].includes(err.code)) throw err;
      res = await ask(undefined);
    }
    const url = (res.urls ?? [])[0];
    if (!url) throw new VfsError('EIO', `download_url of '${fullpath}' returned no link`);
    return url;
  }

  private async wrap<T>(fn: () => Promise<T>, path: string): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toVfsError(err, path);
    }
  }
}

/** fn over every item, at most `limit` at once; results in the items' order. The first failure rejects. */
async function inParallel<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (next < items.length && !failed) {
      const i = next++;
      try {
        out[i] = await fn(items[i]!);
      } catch (err) {
        failed = true; // the others ask for no further item
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Download links fetched ahead of reads at once, at most. */
const PREPARE_LINKS = 16;
/** The page of `ls` the spec gives when none is asked for. */
const SPEC_PAGE_SIZE = 100;
/** History events asked for per page (the spec's default page is 20). */
const HISTORY_PAGE = 100;

/** The service refused the page size asked for (a bad `size` parameter). */
function refusesPageSize(err: unknown): boolean {
  const cause = err instanceof VfsError ? err.cause : err;
  return cause instanceof ServiceError && cause.code === ErrorCode.BadParam && /\bsize\b/.test(cause.serviceMessage);
}

function operatorParams(opts?: RemoteCallOptions): { op_id?: string; op_name?: string } {
  const op = opts?.operator;
  if (!op) return {};
  const out: { op_id?: string; op_name?: string } = {};
  if (op.opId) out.op_id = op.opId;
  if (op.opName) out.op_name = op.opName;
  return out;
}

/** A service error as a VfsError (the code that the front ends translate). */
export function toVfsError(err: unknown, path: string): VfsError {
  if (err instanceof VfsError) return err;
  if (err instanceof ServiceError) {
    const code = vfsCodeOf(err);
    // No answer at all, or a proxy in front saying the service behind it is not there: offline.
    const unreachable = err.transport || err.status === 502 || err.status === 504 || (err.status === 503 && err.code === 0);
    return new VfsError(code, `'${path}': ${err.serviceMessage} (${err.endpoint}${err.code ? ` error_code ${err.code}` : ''})`, { cause: err, unreachable });
  }
  const e = err as { name?: string; code?: string; message?: string };
  if (e?.name === 'AbortError' || e?.code === 'ABORT_ERR') return new VfsError('EIO', `'${path}': aborted`, { cause: err });
  if (e?.name === 'ParamError') return new VfsError('EINVAL', `'${path}': ${e.message}`, { cause: err });
  return new VfsError('EIO', `'${path}': ${e?.message ?? String(err)}`, { cause: err });
}

function vfsCodeOf(err: ServiceError): VfsErrorCode {
  switch (err.code) {
    case ErrorCode.FileMissing: case ErrorCode.LibraryMissing: return 'ENOENT';
    case ErrorCode.NameExists: return 'EEXIST';
    // A file where a folder is needed (a listing, a parent); a download of a folder is EISDIR (fetchLink).
    case ErrorCode.NotAFolder: return 'ENOTDIR';
    case ErrorCode.Locked: return 'ELOCKED';
    case ErrorCode.CapacityExceeded: return 'ENOSPC';
    case ErrorCode.NoPermission: case ErrorCode.NoLibraryAccess: case ErrorCode.SignatureFailed: case ErrorCode.ClientNotFound: return 'EACCES';
    case ErrorCode.BadParam: case ErrorCode.MoveIntoItself: return 'EINVAL';
    case ErrorCode.FeatureNotEnabled: return 'ENOTSUP';
    default: break;
  }
  if (err.transport || err.status === 0) return 'EIO';
  if (err.status === 404) return 'ENOENT';
  if (err.status === 409) return 'EEXIST';
  if (err.status === 423) return 'ELOCKED';
  if (err.status === 403 || err.status === 401) return 'EACCES';
  if (err.status === 503 || err.status === 429) return 'EAGAIN';
  if (err.status === 400) return 'EINVAL';
  return 'EIO';
}

function tagsOf(property: unknown, tag?: unknown): string[] | undefined {
  const raw = typeof tag === 'string' ? tag : (property as { tag?: unknown } | undefined)?.tag;
  if (typeof raw !== 'string') return undefined;
  return raw.split(';').map((t) => t.trim()).filter((t) => t !== '');
}

function fromRecord(r: FileRecord | UpdateItem): RemoteEntry {
  const fullpath = String(r.fullpath ?? '');
  const isDir = Number(r.dir) === 1;
  return {
    id: String(r.hash), fullpath, name: r.filename || baseName(fullpath), isDir, size: isDir ? 0 : Number(r.filesize) || 0,
    contentHash: isDir || !r.filehash ? undefined : String(r.filehash),
    mtimeMs: (Number(r.last_dateline) || 0) * 1000, ctimeMs: (Number(r.create_dateline) || Number(r.last_dateline) || 0) * 1000,
    lastModifiedBy: r.last_member_name || undefined,
    tags: 'property' in r ? tagsOf(r.property) : undefined,
  };
}

function fromInfo(i: FileInfo): RemoteEntry {
  const e = fromRecord({ ...(i as unknown as FileRecord), property: i.property ?? {}, filehash: i.filehash ?? '' });
  return { ...e, tags: tagsOf(i.property, i.tag), locked: i.lock === undefined ? undefined : Number(i.lock) === 1 };
}

/** The entry `info` answers for `fullpath`, the library's root as a folder, or null where nothing is. */
export async function statOrNull(fullpath: string, info: () => Promise<RemoteEntry>): Promise<RemoteEntry | null> {
  if (fullpath === '') return { id: '', fullpath: '', name: '', isDir: true, size: 0, mtimeMs: 0, ctimeMs: 0 };
  try {
    return await info();
  } catch (err) {
    const e = toVfsError(err, fullpath);
    if (e.code === 'ENOENT') return null;
    throw e;
  }
}

/** A range being opened, read at the gateway's download limit when it has one. */
export function throttledRange(range: Promise<Readable>, bandwidth: BandwidthLimit): Promise<Readable> {
  const download = bandwidth.download;
  return download ? range.then((r) => throttled(r, download)) : range;
}
