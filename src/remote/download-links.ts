/**
 * DownloadLinks: one Remote's download links and the range reads made with them. A link is cached by
 * path and version until shortly before it expires; a read waits for a fetch of the same link already
 * under way rather than asking again; a link the download host refuses is renewed once. How a link is
 * issued (the library's `download_url`, a member's `file/open`) is the adapter's; the rest is here, so
 * both adapters keep links fresh the same way.
 */
import { request, type Dispatcher } from 'undici';
import { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import { VfsError, type VfsErrorCode } from '../vfs/types.js';
import type { RangeCallOptions } from '../vfs/remote.js';

export interface DownloadLinksOptions {
  /** Issues a download link for the version `opts.contentHash` of the file (the service call). */
  issue: (fullpath: string, opts: RangeCallOptions) => Promise<string>;
  /** The client's retrying dispatcher (transient failures retried there, a cut body resumed). */
  dispatcher: Dispatcher;
  /** Lifetime assumed for a link from when it was asked for, ms. */
  lifetimeMs: number;
  /** A link is used until this long before it expires, ms. Default 0. */
  marginMs?: number;
  /** Links cached. */
  max: number;
  /** Deadline of one range request until its headers arrive, and between body chunks, ms. */
  rangeTimeoutMs: number;
}

interface Link { url: string; expiresMs: number }

export class DownloadLinks {
  readonly counters = { linkFetches: 0, rangeRequests: 0, linksPrepared: 0 };
  private readonly links: LRUCache<string, Link>;
  /** Links being fetched, by key: a read waits for the fetch under way rather than asking again. */
  private readonly pending = new Map<string, Promise<Link>>();
  private readonly marginMs: number;

  constructor(private readonly opts: DownloadLinksOptions) {
    this.links = new LRUCache<string, Link>({ max: opts.max });
    this.marginMs = opts.marginMs ?? 0;
  }

  /**
   * Bytes [start, end] of the file, streamed from its download link. Retries are the dispatcher's;
   * what is left here is the link's freshness: a link the download host refuses (403, 404, 410:
   * expired, or no longer valid) is fetched anew once.
   */
  openRange(fullpath: string, start: number, end: number, opts: RangeCallOptions = {}): Promise<Readable> {
    return fetchRange({
      fullpath, start, end, signal: opts.signal, dispatcher: this.opts.dispatcher, timeoutMs: this.opts.rangeTimeoutMs,
      link: (renew) => this.link(fullpath, opts, renew).then((l) => { this.counters.rangeRequests++; return l.url; }),
      forgetLink: () => { this.links.delete(linkKey(fullpath, opts.contentHash, opts.exactVersion)); },
    });
  }

  /**
   * Fetches the links of these files now (at most `limit` fetches under way, those not cached nor being
   * fetched), so that reading each is one range request. Failures are forgotten: the read asks again.
   */
  prepare(files: { fullpath: string; contentHash?: string }[], opts: RangeCallOptions, limit: number): void {
    for (const f of files) {
      if (this.pending.size >= limit) break;
      const key = linkKey(f.fullpath, f.contentHash);
      if (this.pending.has(key) || this.fresh(this.links.get(key))) continue;
      this.counters.linksPrepared++;
      void this.link(f.fullpath, { ...opts, contentHash: f.contentHash }, false).catch(() => undefined);
    }
  }

  /** Forgets the links of a path's versions and of everything under it (it changed, moved or is gone). */
  forget(fullpath: string): void {
    for (const key of this.links.keys()) if (key.startsWith(`${fullpath}\0`) || key.startsWith(`${fullpath}/`)) this.links.delete(key);
  }

  private fresh(link: Link | undefined): link is Link {
    return link !== undefined && link.expiresMs - this.marginMs > Date.now();
  }

  private link(fullpath: string, opts: RangeCallOptions, renew: boolean): Promise<Link> {
    const key = linkKey(fullpath, opts.contentHash, opts.exactVersion);
    const cached = renew ? undefined : this.links.get(key);
    if (this.fresh(cached)) return Promise.resolve(cached);
    const pending = renew ? undefined : this.pending.get(key);
    if (pending) return pending;
    const fetching = this.fetch(key, fullpath, opts).finally(() => {
      if (this.pending.get(key) === fetching) this.pending.delete(key);
    });
    this.pending.set(key, fetching);
    return fetching;
  }

  private async fetch(key: string, fullpath: string, opts: RangeCallOptions): Promise<Link> {
    this.counters.linkFetches++;
    const askedAt = Date.now();
    const url = await this.opts.issue(fullpath, opts);
    const link = { url, expiresMs: askedAt + this.opts.lifetimeMs };
    this.links.set(key, link);
    return link;
  }
}

/**
 * The key a download link is cached under: the path and the version read (a link asked for that version
 * alone apart: a plain one may serve the current content in its place).
 */
function linkKey(fullpath: string, contentHash?: string, exactVersion?: boolean): string {
  return `${fullpath}\0${contentHash ?? ''}${exactVersion ? '\0exact' : ''}`;
}

/** Statuses of a download host that mean "this link no longer serves": it is renewed once. */
const LINK_REFUSED = [403, 404, 410];

interface RangeFetch {
  fullpath: string;
  start: number;
  end: number;
  signal?: AbortSignal;
  dispatcher: Dispatcher;
  timeoutMs: number;
  /** The download link to use; `renew` asks for a new one (the cached one was refused). */
  link: (renew: boolean) => Promise<string>;
  /** Drops the cached link (it failed for good). */
  forgetLink: () => void;
}

/**
 * Bytes `start..end` of a file through its download link: a link the download host refuses is renewed
 * once; nothing else is repeated here (transient failures are retried by the dispatcher's retry policy).
 */
async function fetchRange(f: RangeFetch): Promise<Readable> {
  if (f.end < f.start) return Readable.from([]);
  for (let renewed = false; ; renewed = true) {
    const url = await f.link(renewed);
    let res;
    try {
      res = await request(url, {
        method: 'GET', dispatcher: f.dispatcher, headers: { range: `bytes=${f.start}-${f.end}` },
        headersTimeout: f.timeoutMs, bodyTimeout: f.timeoutMs, signal: f.signal,
      });
    } catch (err) {
      throw new VfsError('EIO', `range of '${f.fullpath}': ${(err as Error).message}`, { cause: err });
    }
    if (res.statusCode === 206) {
      // The bytes answered must be the ones asked for (a range from elsewhere would be read as these).
      const answered = parseContentRange(res.headers['content-range']);
      if (answered && answered.start === f.start && answered.end <= f.end) return res.body as unknown as Readable;
      await res.body.dump().catch(() => undefined);
      throw new VfsError('EIO', `range of '${f.fullpath}': asked for bytes ${f.start}-${f.end}, answered ${JSON.stringify(res.headers['content-range'] ?? null)}`);
    }
    if (res.statusCode === 200 && f.start === 0) return res.body as unknown as Readable;
    if (res.statusCode === 200) return skipBytes(res.body as unknown as Readable, f.start, f.end - f.start + 1);
    await res.body.dump().catch(() => undefined);
    if (res.statusCode === 416) return Readable.from([]);
    if (LINK_REFUSED.includes(res.statusCode) && !renewed) continue;
    f.forgetLink();
    const code: VfsErrorCode = res.statusCode === 404 || res.statusCode === 410 ? 'ENOENT' : res.statusCode === 403 ? 'EACCES' : res.statusCode === 503 || res.statusCode === 429 ? 'EAGAIN' : 'EIO';
    throw new VfsError(code, `range of '${f.fullpath}': HTTP ${res.statusCode}`);
  }
}

/** `bytes a-b/n` (n may be `*`) as its first and last byte; undefined when absent or not that form. */
export function parseContentRange(value: string | string[] | undefined): { start: number; end: number } | undefined {
  const m = /^\s*bytes\s+(\d+)-(\d+)\/(\d+|\*)\s*$/i.exec(Array.isArray(value) ? value[0] ?? '' : value ?? '');
  if (!m) return undefined;
  const start = Number(m[1]);
  const end = Number(m[2]);
  return Number.isSafeInteger(start) && Number.isSafeInteger(end) && end >= start ? { start, end } : undefined;
}

/** A whole-content body when the server ignored the range: skip to `start`, stop after `length`. */
function skipBytes(body: Readable, start: number, length: number): Readable {
  async function* gen(): AsyncGenerator<Buffer> {
    let pos = 0;
    let sent = 0;
    for await (const chunk of body as AsyncIterable<Buffer>) {
      const from = Math.max(0, start - pos);
      pos += chunk.length;
      if (from >= chunk.length) continue;
      const piece = chunk.subarray(from, from + (length - sent));
      sent += piece.length;
      yield piece;
      if (sent >= length) { body.destroy(); return; }
    }
  }
  return Readable.from(gen(), { objectMode: false });
}
