/**
 * DeadPropertyStore: the WebDAV dead properties (PROPPATCH) of files and folders, kept on disk under the
 * gateway's data folder, one JSON file per object, keyed by the object's stable id on the service (so
 * they follow renames). An object without an id yet (a new file still waiting for its upload) is keyed
 * by its path until it has one; the first read with an id moves them over. Writes are atomic (temp file,
 * rename) and serialised per key.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';

export interface DeadProperty {
  /** Namespace URI ('' for none). */
  ns: string;
  name: string;
  /** The value as an XML fragment (namespaces declared inside), or escaped text. */
  xml: string;
}

/** How an object is keyed: its id when it has one, else its path. */
export function propertyKey(obj: { id?: string; path: string }): string {
  return obj.id ? `id:${obj.id}` : `path:${obj.path}`;
}

export class DeadPropertyStore {
  private readonly dir: string;
  /** Tail of the pending operations per key (serialises read-modify-write). */
  private readonly chains = new Map<string, Promise<unknown>>();
  private ready?: Promise<void>;
  /** Names of the files present (the store's own index, so objects without properties cost no disk access). */
  private index?: Promise<Set<string>>;

  constructor(dataDir: string) {
    this.dir = join(dataDir, 'properties');
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

  private async load(key: string): Promise<DeadProperty[]> {
    if (!(await this.names()).has(basename(this.file(key)))) return [];
    try {
      const data = JSON.parse(await readFile(this.file(key), 'utf8')) as { key: string; props: DeadProperty[] };
      return data.key === key && Array.isArray(data.props) ? data.props : [];
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }

  private async save(key: string, props: DeadProperty[]): Promise<void> {
    const file = this.file(key);
    const names = await this.names();
    if (props.length === 0) {
      if (!names.has(basename(file))) return;
      await rm(file, { force: true });
      names.delete(basename(file));
      return;
    }
    this.ready ??= mkdir(this.dir, { recursive: true }).then(() => undefined);
    await this.ready;
    const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
    await writeFile(tmp, JSON.stringify({ key, props }));
    await rename(tmp, file);
    names.add(basename(file));
  }

  /** The properties of an object; those kept under its path move to its id. */
  async get(obj: { id?: string; path: string }): Promise<DeadProperty[]> {
    const key = propertyKey(obj);
    if (obj.id) {
      const byPath = `path:${obj.path}`;
      const pending = await this.serial(byPath, async () => {
        const p = await this.load(byPath);
        if (p.length > 0) await this.save(byPath, []);
        return p;
      });
      if (pending.length > 0) return this.update(obj, pending, []);
    }
    return this.serial(key, () => this.load(key));
  }

  /** Sets (replacing same-named) and removes properties in one step; returns the new set. */
  async update(obj: { id?: string; path: string }, set: DeadProperty[], remove: { ns: string; name: string }[]): Promise<DeadProperty[]> {
    const key = propertyKey(obj);
    return this.serial(key, async () => {
      const same = (a: { ns: string; name: string }, b: { ns: string; name: string }): boolean => a.ns === b.ns && a.name === b.name;
      let props = await this.load(key);
      props = props.filter((p) => !remove.some((r) => same(p, r)) && !set.some((s) => same(p, s)));
      props.push(...set);
      await this.save(key, props);
      return props;
    });
  }

  /** Drops every property of an object. */
  async remove(obj: { id?: string; path: string }): Promise<void> {
    const key = propertyKey(obj);
    await this.serial(key, () => this.save(key, []));
    if (obj.id) await this.serial(`path:${obj.path}`, () => this.save(`path:${obj.path}`, []));
  }

  /** Replaces the properties of `to` with those of `from` (COPY). */
  async copy(from: { id?: string; path: string }, to: { id?: string; path: string }): Promise<void> {
    const props = await this.get(from);
    const key = propertyKey(to);
    await this.serial(key, () => this.save(key, props));
  }
}
