/**
 * MemoryRemote: a whole library held in memory. It is the reference model of the Remote contract (the
 * same contract suite runs on it and on LibraryRemote over the embedded service) and the backend of the
 * gateway's unit tests and of the front ends' tests. Content lives in Buffers, so it is for small data
 * only. Every change is logged with a strictly increasing millisecond time, like the service's feed.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { systemClock } from './clock.js';
import { VfsError } from './types.js';
import {
  baseName, isWithin, numberedPath, parentOf,
  type ChangesPage, type CommitOptions, type CommitSource, type RangeCallOptions, type Remote, type RemoteCallOptions, type RemoteChange, type RemoteEntry, type RemoteHistoryItem, type RemoteInfo, type RemoteQuota,
} from './remote.js';

interface MemoryNode {
  entry: RemoteEntry;
  data: Buffer;
}

interface LoggedChange { timeMs: number; change: RemoteChange }

export interface MemoryRemoteOptions {
  /** Library display name. Default `Library`. */
  name?: string;
  /** Library id. Default a random hex string. */
  id?: string;
  /** Capacity in bytes; undefined = unlimited. */
  capacity?: number;
  /** Clock, ms. Default the real time (systemClock). */
  clock?: () => number;
}

export class MemoryRemote implements Remote {
  /** Every version committed through `commit` (the gateway's uploads), in order: what the service was given. */
  readonly commits: { fullpath: string; data: Buffer }[] = [];
  /** Earlier versions of files, by `id\0contentHash` (what openRange with an old content hash reads). */
  private readonly versions = new Map<string, Buffer>();
  /** Each file's content changes, oldest first, by its id (what `history` answers). */
  private readonly histories = new Map<string, RemoteHistoryItem[]>();
  /** Calls of `history` so far (tests: the versions view costs nothing until it is looked into). */
  historyCalls = 0;
  private readonly nodes = new Map<string, MemoryNode>();
  private readonly log: LoggedChange[] = [];
  private lastTime = 0;
  private readonly clock: () => number;
  readonly libraryName: string;
  readonly libraryId: string;
  capacity: number | undefined;

  constructor(opts: MemoryRemoteOptions = {}) {
    this.clock = opts.clock ?? systemClock.now;
    this.libraryName = opts.name ?? 'Library';
    this.libraryId = opts.id ?? randomBytes(4).toString('hex');
    this.capacity = opts.capacity;
  }

  async info(): Promise<RemoteInfo> {
    return { id: this.libraryId, name: this.libraryName };
  }

  async list(fullpath: string): Promise<RemoteEntry[]> {
    if (fullpath !== '') {
      const n = this.nodes.get(fullpath);
      if (!n) throw new VfsError('ENOENT', `no folder '${fullpath}'`);
      if (!n.entry.isDir) throw new VfsError('ENOTDIR', `'${fullpath}' is a file`);
    }
    const out: RemoteEntry[] = [];
    for (const [p, n] of this.nodes) if (parentOf(p) === fullpath) out.push({ ...n.entry });
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  async stat(fullpath: string): Promise<RemoteEntry | null> {
    const n = this.nodes.get(fullpath);
    return n ? { ...n.entry } : null;
  }

  async openRange(fullpath: string, start: number, end: number, opts?: RangeCallOptions): Promise<Readable> {
    const n = this.nodes.get(fullpath);
    if (!n) throw new VfsError('ENOENT', `no file '${fullpath}'`);
    if (n.entry.isDir) throw new VfsError('EISDIR', `'${fullpath}' is a folder`);
    // A version named by its content hash is served as it was (the service keeps a file's history).
    const data = opts?.contentHash && opts.contentHash !== n.entry.contentHash ? this.versions.get(`${n.entry.id}\0${opts.contentHash}`) : n.data;
    if (!data) throw new VfsError('ENOENT', `no version ${opts?.contentHash} of '${fullpath}'`);
    return Readable.from([data.subarray(start, end + 1)]);
  }

  async history(fullpath: string, max: number): Promise<RemoteHistoryItem[]> {
    this.historyCalls++;
    const n = this.nodes.get(fullpath);
    if (!n) throw new VfsError('ENOENT', `no file '${fullpath}'`);
    if (n.entry.isDir) return [];
    return (this.histories.get(n.entry.id) ?? []).slice(-max).reverse().map((h) => ({ ...h }));
  }

  async commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> {
    const data = source.data ?? await readFile(source.path);
    if (data.length !== source.size) throw new VfsError('EIO', `commit of '${fullpath}': expected ${source.size} bytes, got ${data.length}`);
    const sha1 = createHash('sha1').update(data).digest('hex');
    if (sha1 !== source.sha1) throw new VfsError('EIO', `commit of '${fullpath}': expected SHA-1 ${source.sha1}, got ${sha1}`);
    // Not replacing: a taken name gets the service's numbered name instead.
    let at = fullpath;
    for (let n = 1; opts?.replace === false && this.nodes.has(at); n++) at = numberedPath(fullpath, n);
    const entry = this.putFile(at, data, opts);
    this.commits.push({ fullpath: at, data });
    opts?.onProgress?.(data.length, data.length);
    return entry;
  }

  /** Writes a file directly (tests: a change made by another client). */
  putFile(fullpath: string, data: Buffer, opts?: RemoteCallOptions): RemoteEntry {
    this.needParentFolder(fullpath);
    const existing = this.nodes.get(fullpath);
    if (existing?.entry.isDir) throw new VfsError('EISDIR', `'${fullpath}' is a folder`);
    const used = this.usedBytes() - (existing?.data.length ?? 0) + data.length;
    if (this.capacity !== undefined && used > this.capacity) throw new VfsError('ENOSPC', `library capacity ${this.capacity} bytes exceeded`);
    const now = this.tick();
    const entry: RemoteEntry = {
      id: existing?.entry.id ?? randomBytes(8).toString('hex'), fullpath, name: baseName(fullpath), isDir: false,
      size: data.length, contentHash: createHash('sha1').update(data).digest('hex'), mtimeMs: now, ctimeMs: existing?.entry.ctimeMs ?? now,
      lastModifiedBy: opts?.operator?.opName, tags: existing?.entry.tags, locked: existing?.entry.locked,
    };
    this.nodes.set(fullpath, { entry, data: Buffer.from(data) });
    if (existing && !existing.entry.isDir) this.versions.set(`${existing.entry.id}\0${existing.entry.contentHash}`, existing.data);
    const history = this.histories.get(entry.id) ?? [];
    history.push({ id: String(this.log.length + 1), contentHash: entry.contentHash!, size: entry.size, timeMs: now, operator: opts?.operator?.opName });
    this.histories.set(entry.id, history);
    this.record('upsert', entry, now);
    return { ...entry };
  }

  async mkdir(fullpath: string, opts?: RemoteCallOptions): Promise<RemoteEntry> {
    this.needParentFolder(fullpath);
    if (this.nodes.has(fullpath)) throw new VfsError('EEXIST', `'${fullpath}' exists`);
    const now = this.tick();
    const entry: RemoteEntry = {
      id: randomBytes(8).toString('hex'), fullpath, name: baseName(fullpath), isDir: true, size: 0, mtimeMs: now, ctimeMs: now,
      lastModifiedBy: opts?.operator?.opName,
    };
    this.nodes.set(fullpath, { entry, data: Buffer.alloc(0) });
    this.record('upsert', entry, now);
    return { ...entry };
  }

  async move(from: string, to: string): Promise<void> {
    const n = this.nodes.get(from);
    if (!n) throw new VfsError('ENOENT', `no '${from}'`);
    if (from === to) return;
    if (this.nodes.has(to)) throw new VfsError('EEXIST', `'${to}' exists`);
    if (n.entry.isDir && isWithin(to, from)) throw new VfsError('EINVAL', `cannot move '${from}' into itself`);
    this.needParentFolder(to);
    const now = this.tick();
    for (const [p, node] of [...this.nodes]) {
      if (!isWithin(p, from)) continue;
      const np = to + p.slice(from.length);
      this.nodes.delete(p);
      node.entry = { ...node.entry, fullpath: np, name: baseName(np), mtimeMs: p === from ? now : node.entry.mtimeMs };
      this.nodes.set(np, node);
      this.record('delete', { ...node.entry, fullpath: p, name: baseName(p) }, now);
      this.record('upsert', node.entry, now);
    }
  }

  async copy(from: string, to: string): Promise<void> {
    const n = this.nodes.get(from);
    if (!n) throw new VfsError('ENOENT', `no '${from}'`);
    if (this.nodes.has(to)) throw new VfsError('EEXIST', `'${to}' exists`);
    if (n.entry.isDir && isWithin(to, from)) throw new VfsError('EINVAL', `cannot copy '${from}' into itself`);
    this.needParentFolder(to);
    const now = this.tick();
    for (const [p, node] of [...this.nodes]) {
      if (!isWithin(p, from)) continue;
      const np = to + p.slice(from.length);
      const entry = { ...node.entry, id: randomBytes(8).toString('hex'), fullpath: np, name: baseName(np), mtimeMs: now, ctimeMs: now };
      this.nodes.set(np, { entry, data: node.data });
      this.record('upsert', entry, now);
    }
  }

  async remove(fullpath: string): Promise<void> {
    if (!this.nodes.has(fullpath)) throw new VfsError('ENOENT', `no '${fullpath}'`);
    const now = this.tick();
    for (const [p, node] of [...this.nodes]) {
      if (!isWithin(p, fullpath)) continue;
      this.nodes.delete(p);
      this.record('delete', node.entry, now);
    }
  }

  async changes(cursor: number): Promise<ChangesPage> {
    const page = this.log.filter((c) => c.timeMs > cursor).slice(0, 100);
    if (page.length === 0) return { cursor, changes: [] };
    return { cursor: page[page.length - 1].timeMs, changes: page.map((c) => c.change) };
  }

  async headCursor(): Promise<number> {
    return this.lastTime;
  }

  async quota(): Promise<RemoteQuota> {
    let files = 0;
    for (const n of this.nodes.values()) if (!n.entry.isDir) files++;
    return { total: this.capacity, used: this.usedBytes(), files };
  }

  async lock(fullpath: string, locked: boolean): Promise<void> {
    const n = this.need(fullpath);
    n.entry = { ...n.entry, locked };
    this.record('upsert', n.entry, this.tick());
  }

  async addTags(fullpath: string, tags: string[]): Promise<void> {
    const n = this.need(fullpath);
    const set = new Set(n.entry.tags ?? []);
    for (const t of tags) set.add(t);
    n.entry = { ...n.entry, tags: [...set] };
    this.record('upsert', n.entry, this.tick());
  }

  async removeTags(fullpath: string, tags: string[]): Promise<void> {
    const n = this.need(fullpath);
    n.entry = { ...n.entry, tags: (n.entry.tags ?? []).filter((t) => !tags.includes(t)) };
    this.record('upsert', n.entry, this.tick());
  }

  /** The content of a file (tests). */
  read(fullpath: string): Buffer {
    const n = this.need(fullpath);
    return Buffer.from(n.data);
  }

  /** The contents the file at `fullpath` held before its current one (the service's history of it; tests). */
  contentsBefore(fullpath: string): Buffer[] {
    const n = this.nodes.get(fullpath);
    if (!n) return [];
    return [...this.versions].filter(([key]) => key.startsWith(`${n.entry.id}\0`)).map(([, data]) => Buffer.from(data));
  }

  /** Every path, sorted (tests). */
  paths(): string[] {
    return [...this.nodes.keys()].sort();
  }

  private need(fullpath: string): MemoryNode {
    const n = this.nodes.get(fullpath);
    if (!n) throw new VfsError('ENOENT', `no '${fullpath}'`);
    return n;
  }

  private needParentFolder(fullpath: string): void {
    const parent = parentOf(fullpath);
    if (parent === '') return;
    const p = this.nodes.get(parent);
    if (!p) throw new VfsError('ENOENT', `no folder '${parent}'`);
    if (!p.entry.isDir) throw new VfsError('ENOTDIR', `'${parent}' is a file`);
  }

  private usedBytes(): number {
    let used = 0;
    for (const n of this.nodes.values()) used += n.data.length;
    return used;
  }

  private tick(): number {
    this.lastTime = Math.max(this.clock(), this.lastTime + 1);
    return this.lastTime;
  }

  /** Logs a change at its own feed time (every change gets a distinct time, so no page splits one). */
  private record(kind: RemoteChange['kind'], entry: RemoteEntry, timeMs: number): void {
    this.log.push({ timeMs: timeMs === this.lastTime && this.log.at(-1)?.timeMs !== timeMs ? timeMs : this.tick(), change: { kind, entry: { ...entry } } });
  }
}
