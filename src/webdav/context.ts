/**
 * What every method handler works with: the shared parts of the server (Vfs, lock table, dead property
 * store, junk store, deferred empty files) and the request's own state (principal, target path, If
 * header), with the checks several methods share: existence, lock tokens, service locks, body reading.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createHash } from 'node:crypto';
import type { Logger } from '../shared/log.js';
import type { Attr, CallContext, Vfs } from '../vfs/types.js';
import type { Principal } from './auth.js';
import type { DeadPropertyStore } from './dead-properties.js';
import { DavError, vfsCodeOf } from './errors.js';
import { evaluateIf, parseIfHeader, submittedTokens, type IfList } from './if-header.js';
import { isWithin, type DavLock, type LockTable } from './lock-table.js';
import { isJunkName, type JunkStore } from './junk-store.js';
import { baseName, hrefOf, parentPath, pathFromUrl } from './paths.js';

/** The parts of the server every request shares. */
export interface DavShared {
  vfs: Vfs;
  locks: LockTable;
  props: DeadPropertyStore;
  junk: JunkStore;
  /** How long the upload of a new empty file waits for the content that usually follows, ms. */
  emptyCreateGraceMs: number;
  keepJunkLocal: boolean;
  logger: Logger;
  /** Largest XML body accepted, bytes. */
  maxXmlBytes: number;
  /** Largest value of one dead property, bytes. */
  maxPropertyValueBytes: number;
  /** Counts bytes of a PUT body as they are written (metrics). */
  countBodyBytes?: (n: number) => void;
}

/** The entity tag of a file: its content hash when known, else id (or path), size and time. */
export function etagOf(a: Attr): string {
  if (a.contentHash) return `"${a.contentHash}"`;
  const who = a.id ?? createHash('sha1').update(a.path).digest('hex').slice(0, 16);
  return `"${who}-${a.size.toString(16)}-${Math.floor(a.mtimeMs).toString(16)}"`;
}

/** Methods that change nothing (their If header is checked against the cached state). */
const READ_ONLY_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PROPFIND']);

export class DavRequest {
  readonly path: string;
  readonly call: CallContext;
  private ifLists?: IfList[] | null;

  constructor(readonly shared: DavShared, readonly req: IncomingMessage, readonly res: ServerResponse, readonly principal: Principal) {
    this.path = pathFromUrl(req.url ?? '/');
    // Locks taken through WebDAV are held by WebDAV: the mount cannot write what a WebDAV client locked.
    // The signal aborts when the client goes before the answer is complete: what the Vfs fetches for it stops.
    const gone = new AbortController();
    res.once('close', () => { if (!res.writableFinished) gone.abort(new Error('the WebDAV client closed the connection')); });
    this.call = { operator: principal.operator, lockHolder: 'webdav', signal: gone.signal };
  }

  get vfs(): Vfs {
    return this.principal.vfs ?? this.shared.vfs;
  }

  /** True when the path names operating-system junk kept on the gateway's disk. */
  isJunk(path: string): boolean {
    return this.shared.keepJunkLocal && path.split('/').length > 2 && isJunkName(baseName(path));
  }

  /** Attributes of a path, or undefined when nothing is there. */
  async stat(path: string): Promise<Attr | undefined> {
    if (this.isJunk(path)) return this.shared.junk.stat(path);
    try {
      return await this.vfs.stat(path, this.call);
    } catch (err) {
      const code = vfsCodeOf(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
      throw err;
    }
  }

  /** The parsed If header (null when absent). */
  ifHeader(): IfList[] | null {
    if (this.ifLists === undefined) {
      const h = this.req.headers.if;
      this.ifLists = typeof h === 'string' && h.trim() !== '' ? parseIfHeader(h) : null;
    }
    return this.ifLists;
  }

  /** Lock tokens the request submits in its If header. */
  tokens(): string[] {
    const lists = this.ifHeader();
    return lists ? submittedTokens(lists) : [];
  }

  /**
   * Evaluates the If header; a false header is 412 Precondition Failed. Entity tags in it are compared
   * with the service's state when the request changes something (as If-Match is).
   */
  async checkIf(): Promise<void> {
    const lists = this.ifHeader();
    if (!lists) return;
    const changes = !READ_ONLY_METHODS.has((this.req.method ?? 'GET').toUpperCase());
    const namesEtag = lists.some((l) => l.conditions.some((c) => c.etag !== undefined));
    const ok = await evaluateIf(
      lists,
      this.path,
      (resource) => {
        try {
          return pathFromUrl(resource);
        } catch {
          return undefined;
        }
      },
      async (path) => {
        let a = await this.stat(path);
        if (changes && namesEtag) a = await this.stateForPreconditions(a, path);
        return { etag: a && !a.isDir ? etagOf(a) : a ? `"dir"` : undefined, lockTokens: this.shared.locks.covering(path).map((l) => l.token) };
      },
    );
    if (!ok) throw new DavError(412, 'the If header does not match the state of the resource');
  }

  /**
   * Refuses a change of `path` (423) unless the request submits the token of every lock on it: locks
   * covering it, with `members` those below it too (DELETE, MOVE of a folder), with `parent` a depth-0 lock
   * of its folder (a member added or removed).
   */
  assertUnlocked(path: string, opts: { members?: boolean; parent?: boolean } = {}): void {
    const { locks } = this.shared;
    const relevant = new Map<string, DavLock>();
    for (const l of locks.covering(path)) relevant.set(l.token, l);
    if (opts.members) for (const l of locks.within(path)) relevant.set(l.token, l);
    if (opts.parent && path !== '/') for (const l of locks.covering(parentPath(path))) relevant.set(l.token, l);
    if (relevant.size === 0) return;
    const submitted = new Set(this.tokens());
    const held = (l: DavLock): boolean => submitted.has(l.token) && (l.user === null || l.user === this.principal.user);
    const byRoot = new Map<string, DavLock[]>();
    for (const l of relevant.values()) byRoot.set(l.root, [...(byRoot.get(l.root) ?? []), l]);
    for (const [root, group] of byRoot) {
      // Shared locks on one resource: any one of them submitted is enough.
      if (!group.some(held)) {
        const isDir = group[0]!.depth === 'infinity' || root !== path;
        throw new DavError(423, `${root} is locked; submit its lock token in an If header`, 'lock-token-submitted', [hrefOf(root, isDir && root !== path)]);
      }
    }
  }

  /** Refuses a change of a file locked on the service by someone else (not by one of our locks). */
  assertNotLockedElsewhere(attr: Attr | undefined): void {
    if (!attr?.locked || attr.isDir) return;
    // Held through the gateway for WebDAV's callers (an Office lock file made through WebDAV).
    if (attr.lockHolder === this.call.lockHolder) return;
    const ours = this.shared.locks.covering(attr.path).some((l) => l.serviceLock && l.root === attr.path);
    if (!ours) throw new DavError(423, `${attr.path} is locked by another member on the service`);
  }

  /** Refuses any change by a read-only principal. */
  assertWritable(): void {
    if (this.principal.readOnly) throw new DavError(403, 'read-only access: changes are not allowed');
  }

  /** The request body as text, bounded; refuses larger bodies with 413. */
  async bodyText(): Promise<string> {
    const max = this.shared.maxXmlBytes;
    const declared = Number(this.req.headers['content-length'] ?? NaN);
    if (declared > max) throw new DavError(413, `expected an XML body of at most ${max} bytes, got ${declared}`);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of this.req as AsyncIterable<Buffer>) {
      size += c.length;
      if (size > max) throw new DavError(413, `expected an XML body of at most ${max} bytes, got more`);
      chunks.push(c);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  /** True when the request carries a body (a length above 0, or chunked). */
  hasBody(): boolean {
    const len = this.req.headers['content-length'];
    if (len !== undefined) return Number(len) > 0;
    return this.req.headers['transfer-encoding'] !== undefined;
  }

  /**
   * The state a write's If-Match / If-None-Match is checked against: the service's own when the cached
   * `existing` could be behind it (a file with no local change waiting; another client may have changed
   * it since the cache was filled), else `existing`.
   */
  async stateForPreconditions(existing: Attr | undefined, path = this.path): Promise<Attr | undefined> {
    if (this.isJunk(path) || existing?.dirty || existing?.isDir) return existing;
    let fresh: Attr;
    try {
      fresh = await this.vfs.stat(path, this.call, { fresh: true });
    } catch (err) {
      const code = vfsCodeOf(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
      throw err;
    }
    if (existing && fresh.contentHash === existing.contentHash) return existing;
    return fresh;
  }

  /** Throws 409 unless the parent of `path` is an existing folder. */
  async assertParentFolder(path: string): Promise<void> {
    const parent = await this.stat(parentPath(path));
    if (!parent || !parent.isDir) throw new DavError(409, `the folder of ${path} does not exist`);
  }

  /**
   * The gateway path of the Destination header (COPY, MOVE). An absolute URL must name this server (the
   * request's Host): a destination on another server is 502 (RFC 4918 §9.8.5, §9.9.4), nothing is done.
   */
  destination(): string {
    const d = this.req.headers.destination;
    if (typeof d !== 'string' || d === '') throw new DavError(400, 'expected a Destination header, got none');
    if (/^[a-z][a-z0-9+.-]*:/i.test(d)) {
      let url: URL;
      try {
        url = new URL(d);
      } catch {
        throw new DavError(400, `expected a valid Destination URL, got '${d.slice(0, 200)}'`);
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new DavError(502, `the Destination ${url.protocol}… is not on this server`);
      const host = (this.req.headers.host ?? '').toLowerCase();
      if (host === '' || url.host.toLowerCase() !== host.replace(/:(80|443)$/, (m) => (m === ':80' && url.protocol === 'http:') || (m === ':443' && url.protocol === 'https:') ? '' : m)) {
        throw new DavError(502, `the Destination ${url.host} is another server than this one (${host || 'no Host header'}); copy or move through that server`);
      }
    }
    return pathFromUrl(d);
  }
}

export { isWithin };
