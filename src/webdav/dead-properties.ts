/**
 * DeadPropertyStore: the WebDAV dead properties (PROPPATCH) of files and folders, kept on disk under the
 * gateway's data folder, one file per object, keyed by the object's stable id on the service (so they
 * follow renames). An object without an id yet (a new file still waiting for its upload) is keyed by its
 * path until it has one; the first read with an id moves them over. Operations are serialised per key.
 *
 * Each file is a log of JSON lines: a snapshot `{"key","props"}` first, then one change `{"key","set",
 * "remove"}` per update, appended (a change costs what it sets, not what the object already has). When the
 * log has grown past twice its live content it is compacted into a new snapshot (temp file, rename). A torn
 * last line (a crash while appending) is ignored. Files are 0600 in a 0700 folder.
 *
 * What one object may hold is bounded (property count and bytes): an update that would go past the bounds
 * is refused with PropertyLimitError and changes nothing.
 */
import { createHash } from 'node:crypto';
import { appendFile, chmod, mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { writeFileAtomic } from '../shared/atomic-file.js';

export interface DeadProperty {
  /** Namespace URI ('' for none). */
  ns: string;
  name: string;
  /** The value as an XML fragment (namespaces declared inside), or escaped text. */
  xml: string;
}

export interface DeadPropertyLimits {
  /** Properties one object may hold. Default 1000. */
  maxPerObject: number;
  /** Bytes (names and values) one object may hold. Default 1 MiB. */
  maxBytesPerObject: number;
}

export const DEFAULT_PROPERTY_LIMITS: DeadPropertyLimits = { maxPerObject: 1000, maxBytesPerObject: 1024 * 1024 };

/** An update refused because the object would hold more than the limits allow (WebDAV answers 507). */
export class PropertyLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PropertyLimitError';
  }
}

/** How an object is keyed: its id when it has one, else its path. */
export function propertyKey(obj: { id?: string; path: string }): string {
  return obj.id ? `id:${obj.id}` : `path:${obj.path}`;
}

/** Bytes a property counts against its object's limit. */
export function propertyBytes(p: DeadProperty): number {
  return Buffer.byteLength(p.ns) + Buffer.byteLength(p.name) + Buffer.byteLength(p.xml);
}

const nameKey = (p: { ns: string; name: string }): string => `${p.ns}\0${p.name}`;

/** The live properties of an object as read from its log, the log's size, and whether it ends with a whole line. */
interface Loaded { props: Map<string, DeadProperty>; logBytes: number; whole: boolean }

const FILE_MODE = 0o600;
const DIR_MODE = 0o700;
/** Compaction slack: a log is rewritten once it is above twice its content plus this. */
const COMPACT_SLACK_BYTES = 64 * 1024;

export class DeadPropertyStore {
  private readonly dir: string;
  private readonly limits: DeadPropertyLimits;
  /** Tail of the pending operations per key (serialises read-modify-write). */
  private readonly chains = new Map<string, Promise<unknown>>();
  private ready?: Promise<void>;
  /** Names of the files present (the store's own index, so objects without properties cost no disk access). */
  private index?: Promise<Set<string>>;

  constructor(dataDir: string, limits: Partial<DeadPropertyLimits> = {}) {
    this.dir = join(dataDir, 'properties');
    this.limits = { ...DEFAULT_PROPERTY_LIMITS, ...limits };
  }

  private file(key: string): string {
    return join(this.dir, createHash('sha256').update(key).digest('hex') + '.json');
  }

  private serial<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.chains.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.chains.set(key, tail);
    void tail.then(() => { if (this.chains.get(key) === tail) this.chains.delete(key); });
    return next;
  }

  private names(): Promise<Set<string>> {
    this.index ??= readdir(this.dir).then(
      (names) => new Set(names.filter((n) => n.endsWith('.json'))),
      () => new Set<string>(),
    );
    return this.index;
  }

  /** The folder, made (or tightened) to 0700 once. */
  private folder(): Promise<void> {
    this.ready ??= mkdir(this.dir, { recursive: true, mode: DIR_MODE }).then(() => chmod(this.dir, DIR_MODE));
    return this.ready;
  }

  private async load(key: string): Promise<Loaded> {
    const props = new Map<string, DeadProperty>();
    if (!(await this.names()).has(basename(this.file(key)))) return { props, logBytes: 0, whole: true };
    let text: string;
    try {
      text = await readFile(this.file(key), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { props, logBytes: 0, whole: true };
      throw err;
    }
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      let rec: { key?: unknown; props?: unknown; set?: unknown; remove?: unknown };
      try {
        rec = JSON.parse(line) as typeof rec;
      } catch {
        continue; // a torn line (crash while appending): what it said is lost, the rest stands
      }
      if (rec.key !== key) continue;
      if (Array.isArray(rec.props)) {
        props.clear();
        for (const p of rec.props as DeadProperty[]) props.set(nameKey(p), p);
      }
      if (Array.isArray(rec.remove)) for (const r of rec.remove as DeadProperty[]) props.delete(nameKey(r));
      if (Array.isArray(rec.set)) for (const p of rec.set as DeadProperty[]) { props.delete(nameKey(p)); props.set(nameKey(p), p); }
    }
    return { props, logBytes: Buffer.byteLength(text), whole: text.endsWith('\n') };
  }

  /** Writes a snapshot of `props` (or removes the file when there is none). */
  private async snapshot(key: string, props: DeadProperty[]): Promise<void> {
    const file = this.file(key);
    const names = await this.names();
    if (props.length === 0) {
      if (!names.has(basename(file))) return;
      await rm(file, { force: true });
      names.delete(basename(file));
      return;
    }
    await this.folder();
    await writeFileAtomic(file, JSON.stringify({ key, props }) + '\n', { durability: 'rename', mode: FILE_MODE });
    names.add(basename(file));
  }

  private checkLimits(props: Map<string, DeadProperty>): void {
    if (props.size > this.limits.maxPerObject) {
      throw new PropertyLimitError(`expected at most ${this.limits.maxPerObject} dead properties on one resource, got ${props.size}`);
    }
    let bytes = 0;
    for (const p of props.values()) bytes += propertyBytes(p);
    if (bytes > this.limits.maxBytesPerObject) {
      throw new PropertyLimitError(`expected at most ${this.limits.maxBytesPerObject} bytes of dead properties on one resource, got ${bytes}`);
    }
  }

  /**
   * Moves the properties kept under an object's path (set before it had an id) to its id. They are older
   * than any kept under the id (once the id is known every change goes there), so those win.
   */
  private async adopt(obj: { id?: string; path: string }): Promise<void> {
    if (!obj.id) return;
    const byPath = `path:${obj.path}`;
    if (!(await this.names()).has(basename(this.file(byPath)))) return;
    const pending = await this.serial(byPath, async () => {
      const p = [...(await this.load(byPath)).props.values()];
      if (p.length > 0) await this.snapshot(byPath, []);
      return p;
    });
    if (pending.length === 0) return;
    const key = propertyKey(obj);
    await this.serial(key, async () => {
      const merged = new Map<string, DeadProperty>();
      for (const p of pending) merged.set(nameKey(p), p);
      for (const p of (await this.load(key)).props.values()) { merged.delete(nameKey(p)); merged.set(nameKey(p), p); }
      await this.snapshot(key, [...merged.values()]);
    });
  }

  /** The properties of an object; those kept under its path move to its id. */
  async get(obj: { id?: string; path: string }): Promise<DeadProperty[]> {
    await this.adopt(obj);
    const key = propertyKey(obj);
    return this.serial(key, async () => [...(await this.load(key)).props.values()]);
  }

  /**
   * Sets (replacing same-named) and removes properties in one step; returns the new set. Throws
   * PropertyLimitError (nothing changed) when the object would hold more than the limits allow.
   */
  async update(obj: { id?: string; path: string }, set: DeadProperty[], remove: { ns: string; name: string }[]): Promise<DeadProperty[]> {
    await this.adopt(obj);
    const key = propertyKey(obj);
    return this.serial(key, async () => {
      const { props, logBytes, whole } = await this.load(key);
      for (const r of remove) props.delete(nameKey(r));
      for (const p of set) { props.delete(nameKey(p)); props.set(nameKey(p), p); }
      this.checkLimits(props);
      const all = [...props.values()];
      const names = await this.names();
      const file = this.file(key);
      // A log not ending with a whole line (a torn append, or a file of an earlier version) is rewritten.
      if (all.length === 0 || logBytes === 0 || !whole || !names.has(basename(file))) {
        await this.snapshot(key, all);
        return all;
      }
      const change = JSON.stringify({ key, set, remove: remove.map((r) => ({ ns: r.ns, name: r.name })) }) + '\n';
      let live = 0;
      for (const p of all) live += propertyBytes(p);
      if (logBytes + Buffer.byteLength(change) > 2 * live + COMPACT_SLACK_BYTES) await this.snapshot(key, all);
      else await appendFile(file, change, { mode: FILE_MODE });
      return all;
    });
  }

  /** Drops every property of an object. */
  async remove(obj: { id?: string; path: string }): Promise<void> {
    const key = propertyKey(obj);
    await this.serial(key, () => this.snapshot(key, []));
    if (obj.id) await this.serial(`path:${obj.path}`, () => this.snapshot(`path:${obj.path}`, []));
  }

  /** Replaces the properties of `to` with those of `from` (COPY). */
  async copy(from: { id?: string; path: string }, to: { id?: string; path: string }): Promise<void> {
    const props = await this.get(from);
    const key = propertyKey(to);
    await this.serial(key, () => this.snapshot(key, props));
  }
}
