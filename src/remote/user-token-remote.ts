/**
 * UserTokenRemote: the gateway's Remote for one library as one member sees it, over the user file API
 * (`/m-api/*`) with that member's access token. The service checks every call against the member's
 * folder permissions: a listing holds what the member may see, a read needs their download right, a
 * change their write, upload, create, rename or delete right, and a refusal (40310, 40311) is EACCES with
 * nothing changed. The service records the member as the operator (the token names them; no op_id).
 *
 * The user file API has no change feed. The library's own feed (the library authorization's `updates`,
 * given as `feed`) says what changed; before a change reaches the member's cache it is asked for again
 * under the member's token: what the member may see comes back as the member sees it, what they may not
 * (or no longer) see is passed on as gone. Nothing the member may not see enters their cache.
 *
 * Not in the user file API: service locks and tags (made through the library authorization naming the
 * member, after the service confirmed the member's `w`/`t`/`trm`: `asMember`; ENOTSUP without it), a copy
 * to another name (ENOTSUP).
 */
import { Readable } from 'node:stream';
import type { ServiceClient } from '../api/client.js';
import { VfsError, type Operator } from '../vfs/types.js';
import { baseName, joinPath, parentOf } from '../vfs/remote.js';
import type {
  ChangesPage, CommitOptions, CommitSource, RangeCallOptions, Remote, RemoteCallOptions, RemoteChange, RemoteEntry, RemoteInfo, RemoteQuota,
} from '../vfs/remote.js';
import type { UserFileRecord } from '../shared/records.js';
import { limitedSource, loadUploader, statOrNull, throttledRange, toVfsError, uploadSourceOf } from './library-remote.js';
import type { BandwidthLimit } from '../shared/bandwidth-limit.js';
import { DownloadLinks } from './download-links.js';
import { ErrorCode } from '../shared/error-codes.js';

export interface UserTokenRemoteOptions {
  /** A client holding the member's access token (`credentials.user`). */
  client: ServiceClient;
  /** The gateway's bandwidth limit (`bwlimit`), shared with every other transfer. Default none. */
  bandwidth?: BandwidthLimit;
  /** The library's `mount_id` (the user file API names libraries by it). */
  mountId: number;
  /** The library's id and name as the service lists them for the member (`account/mount`). */
  library: RemoteInfo;
  /** Where the library's changes come from (its library authorization's feed); none = no change feed (ENOSYS). */
  feed?: Pick<Remote, 'changes' | 'headCursor'>;
  /**
   * Whether the member holds `code` on the folder of `fullpath` (the service's answer for the member, e.g.
   * the library authorization's get_member_permission): checked before a write is journaled. None = no
   * check before the upload (the upload itself is refused then).
   */
  mayWrite?: (fullpath: string, code: 'w' | 'ul', opts?: RemoteCallOptions) => Promise<boolean>;
  /**
   * Service locks and tags, which the user file API lacks: made through the library authorization
   * (`remote`), naming the member as the operator, once the service said the member holds the code on
   * the item (`may`: `w` to lock or unlock, `t` to add a tag, `trm` to remove one). None = ENOTSUP.
   */
  asMember?: {
    remote: Pick<Remote, 'stat' | 'lock' | 'addTags' | 'removeTags'>;
    operator: Operator;
    may: (fullpath: string, code: 'w' | 't' | 'trm', opts?: RemoteCallOptions) => Promise<boolean>;
  };
  /**
   * A download link (issued after the service checked the member's download right) serves this member's
   * reads of that version for this long, ms (the service's last 10 minutes). Default 60 000.
   */
  linkLifetimeMs?: number;
  /** Page size of `ls`. Default 100. */
  pageSize?: number;
  /** Deadline of one range request until its headers arrive, ms. Default 30 000. */
  rangeTimeoutMs?: number;
  /** Changes of one feed page looked up under the member's token at once. Default 8. */
  lookupConcurrency?: number;
}

export class UserTokenRemote implements Remote {
  readonly client: ServiceClient;
  readonly mountId: number;
  private readonly library: RemoteInfo;
  private readonly feed?: Pick<Remote, 'changes' | 'headCursor'>;
  private readonly mayWrite?: UserTokenRemoteOptions['mayWrite'];
  private readonly asMember?: UserTokenRemoteOptions['asMember'];
  private readonly pageSize: number;
  private readonly lookupConcurrency: number;
  /** Download links this member was given, by path and version (never shared with another member). */
  private readonly downloads: DownloadLinks;
  readonly counters = { feedLookups: 0 };

  private readonly bandwidth: BandwidthLimit;

  constructor(opts: UserTokenRemoteOptions) {
    if (!opts.client.credentials.user) throw new TypeError('client: expected a client with a user access token (credentials.user), got none');
    if (!Number.isInteger(opts.mountId) || opts.mountId < 1) throw new TypeError(`mountId: expected a whole number >= 1, got ${String(opts.mountId)}`);
    this.client = opts.client;
    this.mountId = opts.mountId;
    this.library = opts.library;
    this.feed = opts.feed;
    this.mayWrite = opts.mayWrite;
    this.asMember = opts.asMember;
    this.bandwidth = opts.bandwidth ?? {};
    this.pageSize = opts.pageSize ?? 100;
    this.downloads = new DownloadLinks({
      issue: (fullpath, o) => this.issueLink(fullpath, o), dispatcher: this.client.retryingDispatcher,
      lifetimeMs: opts.linkLifetimeMs ?? 60_000, max: 1000, rangeTimeoutMs: opts.rangeTimeoutMs ?? 30_000,
    });
    this.lookupConcurrency = opts.lookupConcurrency ?? 8;
  }

  async info(): Promise<RemoteInfo> {
    return { ...this.library };
  }

  async list(fullpath: string, opts?: RemoteCallOptions): Promise<RemoteEntry[]> {
    const out = new Map<string, RemoteEntry>();
    for (let start = 0; ; start += this.pageSize) {
      const page = await this.wrap(() => this.client.user.ls({ mount_id: this.mountId, ...(fullpath ? { fullpath } : {}), start, size: this.pageSize }, { signal: opts?.signal }), fullpath);
      for (const r of page.list ?? []) {
        const e = fromUserRecord(r);
        out.set(e.fullpath, e);
      }
      const count = Number(page.count);
      if ((page.list ?? []).length < this.pageSize || (Number.isFinite(count) && out.size >= count)) break;
    }
    return [...out.values()];
  }

  stat(fullpath: string, opts?: RemoteCallOptions): Promise<RemoteEntry | null> {
    return statOrNull(fullpath, async () => {
      const info = await this.client.user.info({ mount_id: this.mountId, fullpath }, { signal: opts?.signal });
      const lock = (info as { lock?: unknown }).lock;
      return { ...fromUserRecord(info), locked: lock === undefined ? undefined : Number(lock) === 1 };
    });
  }

  openRange(fullpath: string, start: number, end: number, opts: RangeCallOptions = {}): Promise<Readable> {
    return throttledRange(this.downloads.openRange(fullpath, start, end, opts), this.bandwidth);
  }

  /** A download link of the member (`file/open`: the service checks their download right each time one is issued). */
  private async issueLink(fullpath: string, opts: RangeCallOptions): Promise<string> {
    const res = await this.wrap(() => this.client.user.open({ mount_id: this.mountId, fullpath }, { signal: opts.signal }), fullpath);
    if (opts.contentHash && res.filehash && res.filehash !== opts.contentHash) {
      // The service holds another version now: the one asked for is gone for this reader.
      throw new VfsError('ENOENT', `'${fullpath}': the version read (${opts.contentHash.slice(0, 12)}…) was replaced on the service`);
    }
    const url = (res.uris ?? [])[0];
    if (!url) throw new VfsError('EIO', `file/open of '${fullpath}' returned no link`);
    return url;
  }

  async commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> {
    const up = await loadUploader();
    const started = Date.now();
    const res = await this.wrap(async () => up.uploadFile(this.client, limitedSource(await uploadSourceOf(up, source), this.bandwidth), {
      fullpath, overwrite: opts?.replace !== false, mountId: this.mountId, signal: opts?.signal, onProgress: opts?.onProgress,
    }), fullpath);
    this.downloads.forget(fullpath);
    return {
      id: res.hash, fullpath: res.fullpath || fullpath, name: baseName(res.fullpath || fullpath), isDir: false,
      size: Number(res.filesize ?? source.size), contentHash: res.filehash || source.sha1, mtimeMs: started, ctimeMs: started,
    };
  }

  /** A change of an existing file needs `w`, a new file `ul` in its folder (asked of the service, not cached). */
  async checkWrite(fullpath: string, existing: boolean, opts?: RemoteCallOptions): Promise<void> {
    if (!this.mayWrite) return;
    const code = existing ? 'w' : 'ul';
    let ok: boolean;
    try {
      ok = await this.mayWrite(fullpath, code, opts);
    } catch (err) {
      throw toVfsError(err, fullpath);
    }
    if (!ok) throw new VfsError('EACCES', existing ? `'${fullpath}': no permission to change this file (w)` : `'${fullpath}': no permission to add a file here (ul)`);
  }

  async mkdir(fullpath: string, opts?: RemoteCallOptions): Promise<RemoteEntry> {
    // overwrite=0: an existing name is not answered with the existing folder.
    const existing = await this.stat(fullpath, opts);
    if (existing) throw new VfsError('EEXIST', `'${fullpath}' exists`);
    const res = await this.wrap(() => this.client.user.createFolder({ mount_id: this.mountId, fullpath, overwrite: 1 }, { signal: opts?.signal }), fullpath);
    const now = Date.now();
    return { id: res.hash, fullpath: res.fullpath || fullpath, name: baseName(res.fullpath || fullpath), isDir: true, size: 0, mtimeMs: now, ctimeMs: now };
  }

  /**
   * A rename within a folder is `rename`; a move to another folder under the same name is `move`; both
   * at once are a rename and then a move, the rename undone when the move is refused.
   */
  async move(from: string, to: string, opts?: RemoteCallOptions): Promise<void> {
    const sameFolder = parentOf(from) === parentOf(to);
    const sameName = baseName(from) === baseName(to);
    const call = { signal: opts?.signal };
    if (await this.stat(to, opts)) throw new VfsError('EEXIST', `'${to}' exists`);
    if (sameFolder) {
      if (!sameName) await this.wrap(() => this.client.user.rename({ mount_id: this.mountId, fullpath: from, newname: baseName(to) }, call), from);
    } else if (sameName) {
      await this.wrap(() => this.client.user.move({ mount_id: this.mountId, fullpath: from, target_fullpath: parentOf(to) }, call), from);
    } else {
      const renamed = joinPath(parentOf(from), baseName(to));
      if (await this.stat(renamed, opts)) throw new VfsError('EEXIST', `'${renamed}' exists (a move to another name renames in place first)`);
      await this.wrap(() => this.client.user.rename({ mount_id: this.mountId, fullpath: from, newname: baseName(to) }, call), from);
      try {
        await this.wrap(() => this.client.user.move({ mount_id: this.mountId, fullpath: renamed, target_fullpath: parentOf(to) }, call), renamed);
      } catch (err) {
        await this.client.user.rename({ mount_id: this.mountId, fullpath: renamed, newname: baseName(from) }).catch(() => undefined);
        throw err;
      }
    }
    this.downloads.forget(from);
  }

  async copy(from: string, to: string, opts?: RemoteCallOptions): Promise<void> {
    if (baseName(from) !== baseName(to)) {
      throw new VfsError('ENOTSUP', `copy of '${from}' to another name: the user file API copies under the same name only (copy, then rename)`);
    }
    if (await this.stat(to, opts)) throw new VfsError('EEXIST', `'${to}' exists`);
    await this.wrap(() => this.client.user.copy({ mount_id: this.mountId, fullpath: from, target_fullpath: parentOf(to) }, { signal: opts?.signal }), from);
  }

  async remove(fullpath: string, opts?: RemoteCallOptions): Promise<void> {
    await this.wrap(() => this.client.user.del({ mount_id: this.mountId, fullpath }, { signal: opts?.signal }), fullpath);
    this.downloads.forget(fullpath);
  }

  /**
   * The library's changes after `cursor`, each looked up under the member's token: an item the member
   * may see is passed on as they see it; one they may not see (or that is gone) as deleted.
   */
  async changes(cursor: number, opts?: RemoteCallOptions): Promise<ChangesPage> {
    if (!this.feed) throw new VfsError('ENOSYS', 'no change feed: the user file API has none, and no library feed was given');
    const page = await this.feed.changes(cursor, opts);
    const out = new Array<RemoteChange>(page.changes.length);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < page.changes.length) {
        const i = next++;
        const change = page.changes[i]!;
        if (change.kind === 'delete') {
          out[i] = { kind: 'delete', entry: bare(change.entry) };
          continue;
        }
        this.counters.feedLookups++;
        let seen: RemoteEntry | null;
        try {
          seen = await this.stat(change.entry.fullpath, opts);
        } catch (err) {
          if (!(err instanceof VfsError) || err.code !== 'EACCES' || err.unreachable) throw err;
          // A refusal of the member's token itself (disabled, signed out) is the feed's failure, not the item's.
          if (!isItemRefusal(err)) throw err;
          seen = null;
        }
        out[i] = seen ? { kind: 'upsert', entry: seen } : { kind: 'delete', entry: bare(change.entry) };
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.lookupConcurrency, page.changes.length) }, worker));
    return { cursor: page.cursor, changes: out };
  }

  async headCursor(opts?: RemoteCallOptions): Promise<number> {
    if (!this.feed) throw new VfsError('ENOSYS', 'no change feed: the user file API has none, and no library feed was given');
    return this.feed.headCursor(opts);
  }

  async quota(opts?: RemoteCallOptions): Promise<RemoteQuota> {
    const { list } = await this.wrap(() => this.client.user.mount({}, { signal: opts?.signal }), '');
    const lib = (list ?? []).find((l) => Number(l.mount_id) === this.mountId);
    if (!lib) throw new VfsError('EACCES', `library '${this.library.name}': the member no longer takes part in it`);
    const total = Number(lib.size_org_total);
    return { total: total > 0 ? total : undefined, used: Number(lib.size_org_use) || 0 };
  }

  /** Tags of an item the member sees (their own lookup first), read through the library authorization. */
  async tags(fullpath: string, opts?: RemoteCallOptions): Promise<string[] | null> {
    const mine = await this.stat(fullpath, opts);
    if (!mine) return null;
    if (!this.asMember) return mine.tags ?? [];
    return (await this.asMember.remote.stat(fullpath, opts))?.tags ?? [];
  }

  async lock(fullpath: string, locked: boolean, opts?: RemoteCallOptions): Promise<void> {
    const as = await this.mayAsMember(fullpath, 'w', 'lock or unlock this file', 'service locks', opts);
    await as.remote.lock(fullpath, locked, { ...opts, operator: as.operator });
  }

  async addTags(fullpath: string, tags: string[], opts?: RemoteCallOptions): Promise<void> {
    if (tags.length === 0) return;
    const as = await this.mayAsMember(fullpath, 't', 'add tags here', 'tags', opts);
    await as.remote.addTags(fullpath, tags, { ...opts, operator: as.operator });
  }

  async removeTags(fullpath: string, tags: string[], opts?: RemoteCallOptions): Promise<void> {
    if (tags.length === 0) return;
    const as = await this.mayAsMember(fullpath, 'trm', 'remove tags here', 'tags', opts);
    await as.remote.removeTags(fullpath, tags, { ...opts, operator: as.operator });
  }

  /** The library authorization acting as this member, once the service said the member holds `code` on the item. */
  private async mayAsMember(fullpath: string, code: 'w' | 't' | 'trm', what: string, feature: string, opts?: RemoteCallOptions): Promise<NonNullable<UserTokenRemoteOptions['asMember']>> {
    const as = this.asMember;
    if (!as) throw new VfsError('ENOTSUP', `'${fullpath}': ${feature} are not in the user file API`);
    let ok: boolean;
    try {
      ok = await as.may(fullpath, code, opts);
    } catch (err) {
      throw toVfsError(err, fullpath);
    }
    if (!ok) throw new VfsError('EACCES', `'${fullpath}': no permission to ${what} (${code})`);
    return as;
  }


  private async wrap<T>(fn: () => Promise<T>, path: string): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toVfsError(err, path);
    }
  }
}

/** True when an EACCES is about the item (no permission on it), not about the member's token or account. */
function isItemRefusal(err: VfsError): boolean {
  const cause = err.cause as { code?: number; status?: number } | undefined;
  return cause?.status === 403 && (cause.code === ErrorCode.NoPermission || cause.code === ErrorCode.NoLibraryAccess);
}

/** A change's entry with nothing but its identity (a delete passes on no name's details). */
function bare(e: RemoteEntry): RemoteEntry {
  return { id: e.id, fullpath: e.fullpath, name: e.name, isDir: e.isDir, size: 0, mtimeMs: 0, ctimeMs: 0 };
}

export function fromUserRecord(r: UserFileRecord): RemoteEntry {
  const fullpath = String(r.fullpath ?? '');
  const isDir = Number(r.dir) === 1;
  return {
    id: String(r.hash), fullpath, name: r.filename || baseName(fullpath), isDir, size: isDir ? 0 : Number(r.filesize) || 0,
    contentHash: isDir || !r.filehash ? undefined : String(r.filehash),
    mtimeMs: (Number(r.last_dateline) || 0) * 1000, ctimeMs: (Number(r.create_dateline) || Number(r.last_dateline) || 0) * 1000,
    lastModifiedBy: r.last_member_name || undefined,
  };
}
