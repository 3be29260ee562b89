/**
 * VersionsView: every version of every file, read-only, under a hidden folder of each library:
 * `/<library>/.versions/<path of the file>/<version>`. The folders of the library appear there as
 * folders, each file as a folder of its versions, named `<date> <time> <operator> <short hash>.<ext>`
 * (UTC, see versionName) so that they sort by time. The view is not listed in the library's root (it is
 * reached by its name, as NetApp's `.snapshot`), asks the service for a file's history only when a path
 * inside that file's folder is looked up, and refuses every change (EROFS). A library whose root holds a
 * real `.versions` (made elsewhere) shows that one instead: the view steps aside, nothing is hidden.
 */
import { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import { systemClock, type Clock } from './clock.js';
import { parseGatewayPath } from './gateway-path.js';
import { baseName, joinPath, type Remote, type RemoteEntry, type RemoteHistoryItem } from './remote.js';
import type { RangeReader } from './range-reader.js';
import { VfsError, type Attr, type CallContext, type FileHandle, type OpenFlags } from './types.js';

/** The view's folder name at a library's root. */
export const VERSIONS_FOLDER = '.versions';

/** Versions of one file shown at most (the newest). */
export const MAX_VERSIONS_SHOWN = 1000;

/** How long a file's list of versions is used before the service is asked again, ms (a new version of it is seen at once). */
const VERSIONS_TTL_MS = 10_000;

/** Longest operator name shown in a version's name, characters. */
const OPERATOR_CHARS = 48;

/** One version of a file as the view shows it. */
export interface ShownVersion {
  name: string;
  contentHash: string;
  size: number;
  timeMs: number;
  operator?: string;
}

/** What the view needs of the Vfs it belongs to. */
export interface VersionsHost {
  /** The library's Remote; undefined when there is no such library. */
  remoteOf(library: string): Remote | undefined;
  /** An entry as the Vfs sees it (a local version first, then the cache, then the service). */
  lookup(library: string, fullpath: string, ctx?: CallContext): Promise<RemoteEntry | null>;
  /** A folder's entries as the Vfs lists them. */
  list(library: string, fullpath: string, ctx?: CallContext): Promise<RemoteEntry[]>;
  /** A reader of the bytes of a version of a file (`entry`: its path, size and content hash). */
  reader(library: string, entry: RemoteEntry, ctx?: CallContext): RangeReader;
}

/** A path syntactically inside a library's view: the library and the parts after `.versions`. */
interface ViewPath { path: string; library: string; parts: string[] }

/** What a path of the view is. */
type Resolved =
  | { kind: 'folder'; fullpath: string; entry?: RemoteEntry }
  | { kind: 'file'; entry: RemoteEntry }
  | { kind: 'version'; entry: RemoteEntry; version: ShownVersion };

export class VersionsView {
  private readonly lists = new LRUCache<string, { atMs: number; versions: Promise<ShownVersion[]> }>({ max: 256 });

  /** `clock`: the time a file's list of versions is kept for (VERSIONS_TTL_MS). */
  constructor(private readonly host: VersionsHost, private readonly clock: Clock = systemClock) {}

  /** The path named inside a view (syntactically: `/<library>/.versions[/…]`); undefined otherwise. Throws on a bad path. */
  static parse(path: string): ViewPath | undefined {
    if (!path.includes(VERSIONS_FOLDER)) return undefined;
    const p = parseGatewayPath(path);
    const parts = p.fullpath.split('/');
    if (!p.library || parts[0] !== VERSIONS_FOLDER) return undefined;
    return { path: p.path, library: p.library, parts: parts.slice(1) };
  }

  /** True when `path` names the view or something in it, by its name alone (no lookup). */
  static names(path: string): boolean {
    try {
      return VersionsView.parse(path) !== undefined;
    } catch {
      return false;
    }
  }

  /**
   * The view path `path` is in, when it is one now: its library's Remote keeps history and the library
   * has no `.versions` of its own at its root. Undefined otherwise (the Vfs answers the path itself).
   */
  async at(path: string, ctx?: CallContext): Promise<ViewPath | undefined> {
    const v = VersionsView.parse(path);
    if (!v) return undefined;
    if (!this.host.remoteOf(v.library)?.history) return undefined;
    if (await this.host.lookup(v.library, VERSIONS_FOLDER, ctx)) return undefined;
    return v;
  }

  /** Whether library `library` shows the view at its root (for the names a lookup there finds). */
  shownIn(library: string, rootNames: Iterable<string>): boolean {
    if (!this.host.remoteOf(library)?.history) return false;
    for (const n of rootNames) if (n === VERSIONS_FOLDER) return false;
    return true;
  }

  /** The refusal of any change inside the view. */
  refusal(path: string): VfsError {
    return new VfsError('EROFS', `${path} is in the read-only view of versions: copy a version out of it to restore it`);
  }

  async stat(v: ViewPath, ctx?: CallContext): Promise<Attr> {
    const r = await this.resolve(v, ctx);
    return this.attrOf(v.path, r);
  }

  async readdir(v: ViewPath, ctx?: CallContext): Promise<Attr[]> {
    const r = await this.resolve(v, ctx);
    if (r.kind === 'version') throw new VfsError('ENOTDIR', `${v.path} is a file`);
    if (r.kind === 'file') {
      const versions = await this.versionsOf(v.library, r.entry, ctx);
      return versions.map((x) => this.attrOf(`${v.path}/${x.name}`, { kind: 'version', entry: r.entry, version: x }));
    }
    const entries = await this.host.list(v.library, r.fullpath, ctx);
    return entries.map((e) => this.attrOf(`${v.path}/${e.name}`, e.isDir ? { kind: 'folder', fullpath: e.fullpath, entry: e } : { kind: 'file', entry: e }));
  }

  async open(v: ViewPath, flags: OpenFlags, ctx?: CallContext): Promise<FileHandle> {
    if (flags.write || flags.create || flags.truncate || flags.append) throw this.refusal(v.path);
    const r = await this.resolve(v, ctx);
    if (r.kind !== 'version') throw new VfsError('EISDIR', `${v.path} is a folder`);
    const attr = this.attrOf(v.path, r);
    const reader = this.host.reader(v.library, this.versionEntry(r.entry, r.version), ctx);
    return new VersionReadHandle(v.path, reader, attr, this);
  }

  /** Streams `[start, end]` (inclusive) of a version, asking the service for that range only. */
  async createReadStream(v: ViewPath, range: { start?: number; end?: number }, ctx?: CallContext): Promise<Readable> {
    const r = await this.resolve(v, ctx);
    if (r.kind !== 'version') throw new VfsError('EISDIR', `${v.path} is a folder`);
    const start = range.start ?? 0;
    if (!Number.isInteger(start) || start < 0) throw new VfsError('EINVAL', `expected a range start >= 0, got ${range.start}`);
    const end = Math.min(range.end ?? r.version.size - 1, r.version.size - 1);
    if (end < start) return Readable.from([]);
    const remote = this.host.remoteOf(v.library)!;
    return remote.openRange(r.entry.fullpath, start, end, { operator: ctx?.operator, signal: ctx?.signal, contentHash: r.version.contentHash, exactVersion: true });
  }

  /** What a path of the view is, looking up each folder of it in the library (and the file's versions last). */
  private async resolve(v: ViewPath, ctx?: CallContext): Promise<Resolved> {
    let fullpath = '';
    let folder: RemoteEntry | undefined;
    for (let i = 0; i < v.parts.length; i++) {
      const e = await this.host.lookup(v.library, joinPath(fullpath, v.parts[i]!), ctx);
      if (!e) throw new VfsError('ENOENT', `no such file or folder: ${v.path}`);
      if (e.isDir) {
        fullpath = e.fullpath;
        folder = e;
        continue;
      }
      if (i === v.parts.length - 1) return { kind: 'file', entry: e };
      if (i < v.parts.length - 2) throw new VfsError('ENOTDIR', `${v.path}: ${v.parts.slice(0, i + 2).join('/')} is a version of a file, not a folder`);
      const name = v.parts[i + 1]!;
      const version = (await this.versionsOf(v.library, e, ctx)).find((x) => x.name === name);
      if (!version) throw new VfsError('ENOENT', `no version '${name}' of ${e.fullpath}`);
      return { kind: 'version', entry: e, version };
    }
    return { kind: 'folder', fullpath, entry: folder };
  }

  /** The versions of a file, oldest first: the service's history, each content change once. */
  private versionsOf(library: string, file: RemoteEntry, ctx?: CallContext): Promise<ShownVersion[]> {
    const key = `${library}\0${file.fullpath}\0${file.id}\0${file.contentHash ?? ''}\0${file.size}`;
    const cached = this.lists.get(key);
    if (cached && this.clock.now() - cached.atMs < VERSIONS_TTL_MS) return cached.versions;
    const remote = this.host.remoteOf(library);
    if (!remote?.history) return Promise.reject(new VfsError('ENOENT', `no versions of ${file.fullpath} on this library`));
    const versions = (async () => {
      let items: RemoteHistoryItem[];
      try {
        items = await remote.history!(file.fullpath, MAX_VERSIONS_SHOWN, { operator: ctx?.operator, signal: ctx?.signal });
      } catch (err) {
        // A file made here and not uploaded yet has no history on the service.
        if (err instanceof VfsError && err.code === 'ENOENT') return [];
        throw err;
      }
      return shownVersions(items, baseName(file.fullpath));
    })();
    this.lists.set(key, { atMs: this.clock.now(), versions });
    versions.catch(() => { if (this.lists.get(key)?.versions === versions) this.lists.delete(key); });
    return versions;
  }

  private versionEntry(file: RemoteEntry, v: ShownVersion): RemoteEntry {
    return { id: file.id, fullpath: file.fullpath, name: v.name, isDir: false, size: v.size, contentHash: v.contentHash, mtimeMs: v.timeMs, ctimeMs: v.timeMs };
  }

  private attrOf(path: string, r: Resolved): Attr {
    const name = path.slice(path.lastIndexOf('/') + 1);
    if (r.kind === 'version') {
      const v = r.version;
      return { path, name, isDir: false, size: v.size, mtimeMs: v.timeMs, ctimeMs: v.timeMs, contentHash: v.contentHash, lastModifiedBy: v.operator, readOnly: true };
    }
    const e = r.kind === 'file' ? r.entry : r.entry;
    return { path, name, isDir: true, size: 0, mtimeMs: e?.mtimeMs ?? 0, ctimeMs: e?.ctimeMs ?? 0, readOnly: true };
  }
}

/**
 * The versions shown of a file from its history events (newest first, as the service gives them): each
 * event whose content differs from the event before it is a version, named by `versionName`; names
 * alike get ` (2)`, ` (3)`… in time order. Oldest first.
 */
export function shownVersions(newestFirst: readonly RemoteHistoryItem[], fileName: string): ShownVersion[] {
  const out: ShownVersion[] = [];
  const used = new Map<string, number>();
  let previous: string | undefined;
  for (let i = newestFirst.length - 1; i >= 0; i--) {
    const h = newestFirst[i]!;
    if (h.contentHash === previous) continue;
    previous = h.contentHash;
    let name = versionName(h, fileName);
    const seen = used.get(name) ?? 0;
    used.set(name, seen + 1);
    if (seen > 0) name = versionName(h, fileName, seen + 1);
    out.push({ name, contentHash: h.contentHash, size: h.size, timeMs: h.timeMs, operator: h.operator });
  }
  return out;
}

/**
 * A version's name: `YYYY-MM-DD HH.MM.SS <operator> <first 7 of its SHA-1>[ (n)].<ext>`, the time in UTC
 * (dots, not colons: a name every system takes), the operator `unknown` when the service names none and
 * without characters a name cannot hold, the extension the file's own (so that the right program opens it).
 */
export function versionName(h: Pick<RemoteHistoryItem, 'timeMs' | 'operator' | 'contentHash'>, fileName: string, nth?: number): string {
  const iso = new Date(h.timeMs).toISOString();
  const time = `${iso.slice(0, 10)} ${iso.slice(11, 19).replace(/:/g, '.')}`;
  const operator = [...(h.operator ?? '')].map((c) => (c.charCodeAt(0) < 0x20 || c === '\u007f' || '/\\:*?"<>|'.includes(c) ? '_' : c)).join('').trim().slice(0, OPERATOR_CHARS) || 'unknown';
  const dot = fileName.lastIndexOf('.');
  const ext = dot > 0 ? fileName.slice(dot) : '';
  return `${time} ${operator} ${h.contentHash.slice(0, 7)}${nth ? ` (${nth})` : ''}${ext}`;
}

/** A read handle on one version: reads with read-ahead, refuses every change. */
class VersionReadHandle implements FileHandle {
  private released = false;
  constructor(readonly path: string, private readonly rr: RangeReader, private readonly attr: Attr, private readonly view: VersionsView) {}
  read(position: number, length: number, ctx?: CallContext): Promise<Buffer> {
    return this.rr.read(position, length, ctx);
  }
  readParts(position: number, length: number, ctx?: CallContext): Promise<Buffer[]> {
    return this.rr.readParts(position, length, ctx);
  }
  async write(): Promise<number> { throw this.view.refusal(this.path); }
  async truncate(): Promise<void> { throw this.view.refusal(this.path); }
  async stat(): Promise<Attr> { return { ...this.attr }; }
  async flush(): Promise<void> {}
  async fsync(): Promise<void> {}
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    this.rr.close();
  }
}
