/**
 * MemoryVfs: a small in-memory Vfs for exercising the FUSE adapter without a service. One library per
 * name given; contents are Buffers. `faults` lets a test make every call hang or fail (a service that
 * is unreachable). Only for tests.
 */
import { Readable } from 'node:stream';
import { VfsError, type Attr, type FileHandle, type OpenFlags, type StatFs, type Vfs } from '../../src/vfs/types.js';

interface Node {
  id: string;
  isDir: boolean;
  data: Buffer;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
  children: Map<string, Node>;
  tags: string[];
  locked: boolean;
}

export interface MemoryVfsFaults {
  /** Every Vfs call waits this long first, ms (a slow or unreachable service). */
  delayMs: number;
  /** Every metadata call fails with this code. */
  failWith?: VfsError['code'];
}

let nextId = 1;
function node(isDir: boolean): Node {
  const now = Date.now();
  return { id: `n${nextId++}`, isDir, data: Buffer.alloc(0), size: 0, mtimeMs: now, ctimeMs: now, children: new Map(), tags: [], locked: false };
}

function split(path: string): string[] {
  if (!path.startsWith('/')) throw new VfsError('EINVAL', `expected an absolute path, got '${path}'`);
  return path.split('/').filter(Boolean);
}

export class MemoryVfs implements Vfs {
  readonly root = node(true);
  readonly faults: MemoryVfsFaults = { delayMs: 0 };
  capacity = 10 * 1024 ** 3;

  constructor(libraries: string[] = ['Lib']) {
    for (const name of libraries) this.root.children.set(name, node(true));
  }

  private async gate(): Promise<void> {
    // eslint-disable-next-line no-restricted-syntax -- an injected slow answer of this fake Vfs, not a wait
    if (this.faults.delayMs > 0) await new Promise((r) => setTimeout(r, this.faults.delayMs));
    if (this.faults.failWith) throw new VfsError(this.faults.failWith, 'injected fault');
  }

  private lookup(path: string): Node {
    let cur = this.root;
    for (const part of split(path)) {
      if (!cur.isDir) throw new VfsError('ENOTDIR', path);
      const next = cur.children.get(part);
      if (!next) throw new VfsError('ENOENT', path);
      cur = next;
    }
    return cur;
  }

  private parent(path: string): { dir: Node; name: string } {
    const parts = split(path);
    const name = parts.pop();
    if (!name) throw new VfsError('EPERM', 'the root cannot be changed');
    if (parts.length === 0) throw new VfsError('EPERM', 'libraries cannot be created or removed here');
    if (Buffer.byteLength(name) > 255) throw new VfsError('ENAMETOOLONG', name);
    const dir = this.lookup('/' + parts.join('/'));
    if (!dir.isDir) throw new VfsError('ENOTDIR', path);
    return { dir, name };
  }

  private attr(path: string, n: Node): Attr {
    const parts = split(path);
    return {
      path, name: parts.at(-1) ?? '', isDir: n.isDir, size: n.isDir ? 0 : n.size, mtimeMs: n.mtimeMs, ctimeMs: n.ctimeMs,
      id: parts.length ? n.id : undefined, locked: n.locked, tags: [...n.tags],
    };
  }

  private used(n: Node = this.root): number {
    let total = n.isDir ? 0 : n.size;
    for (const c of n.children.values()) total += this.used(c);
    return total;
  }

  async stat(path: string): Promise<Attr> {
    await this.gate();
    return this.attr(path, this.lookup(path));
  }

  async readdir(path: string): Promise<Attr[]> {
    await this.gate();
    const dir = this.lookup(path);
    if (!dir.isDir) throw new VfsError('ENOTDIR', path);
    const base = path === '/' ? '' : path;
    return [...dir.children].map(([name, n]) => this.attr(`${base}/${name}`, n));
  }

  async open(path: string, flags: OpenFlags): Promise<FileHandle> {
    await this.gate();
    let n: Node;
    const { dir, name } = this.parent(path);
    const existing = dir.children.get(name);
    if (existing) {
      if (flags.create && flags.exclusive) throw new VfsError('EEXIST', path);
      n = existing;
    } else {
      if (!flags.create) throw new VfsError('ENOENT', path);
      n = node(false);
      dir.children.set(name, n);
    }
    if (n.isDir) throw new VfsError('EISDIR', path);
    if (flags.write && n.locked) throw new VfsError('ELOCKED', path);
    const gate = (): Promise<void> => this.gate();
    const attrOf = (): Attr => this.attr(path, n);
    const used = (): number => this.used();
    const capacity = this.capacity;
    const resize = (size: number): void => {
      if (size > n.data.length) {
        const grown = Buffer.allocUnsafe(Math.max(size, n.data.length * 2));
        n.data.copy(grown, 0, 0, n.size);
        n.data = grown;
      }
      if (size > n.size) n.data.fill(0, n.size, size);
      n.size = size;
      n.mtimeMs = Date.now();
    };
    if (flags.truncate) resize(0);
    return {
      path,
      async read(position, length) {
        await gate();
        return Buffer.from(n.data.subarray(Math.min(position, n.size), Math.min(position + length, n.size)));
      },
      async write(position, data) {
        const at = flags.append ? n.size : position;
        if (used() + Math.max(0, at + data.length - n.size) > capacity) throw new VfsError('ENOSPC', path);
        if (at + data.length > n.size) {
          if (at > n.size) resize(at);
          if (at + data.length > n.data.length) resize(at + data.length);
          else n.size = at + data.length;
        }
        data.copy(n.data, at);
        n.mtimeMs = Date.now();
        return data.length;
      },
      async truncate(size) {
        resize(size);
      },
      async stat() {
        return attrOf();
      },
      async flush() {},
      async fsync() {},
      async release() {},
    };
  }

  async mkdir(path: string): Promise<Attr> {
    await this.gate();
    const { dir, name } = this.parent(path);
    if (dir.children.has(name)) throw new VfsError('EEXIST', path);
    const n = node(true);
    dir.children.set(name, n);
    return this.attr(path, n);
  }

  async rename(from: string, to: string, opts?: { noReplace?: boolean }): Promise<void> {
    await this.gate();
    const src = this.parent(from);
    const n = src.dir.children.get(src.name);
    if (!n) throw new VfsError('ENOENT', from);
    const dst = this.parent(to);
    if (split(from)[0] !== split(to)[0]) throw new VfsError('EXDEV', to);
    if (n.isDir && (to + '/').startsWith(from + '/')) throw new VfsError('EINVAL', 'a folder cannot move into itself');
    const target = dst.dir.children.get(dst.name);
    if (target === n) return;
    if (target) {
      if (opts?.noReplace) throw new VfsError('EEXIST', to);
      if (target.isDir !== n.isDir) throw new VfsError(target.isDir ? 'EISDIR' : 'ENOTDIR', to);
      if (target.isDir && target.children.size) throw new VfsError('ENOTEMPTY', to);
    }
    src.dir.children.delete(src.name);
    dst.dir.children.set(dst.name, n);
  }

  async unlink(path: string): Promise<void> {
    await this.gate();
    const { dir, name } = this.parent(path);
    const n = dir.children.get(name);
    if (!n) throw new VfsError('ENOENT', path);
    if (n.isDir) throw new VfsError('EISDIR', path);
    dir.children.delete(name);
  }

  async rmdir(path: string): Promise<void> {
    await this.gate();
    const { dir, name } = this.parent(path);
    const n = dir.children.get(name);
    if (!n) throw new VfsError('ENOENT', path);
    if (!n.isDir) throw new VfsError('ENOTDIR', path);
    if (n.children.size) throw new VfsError('ENOTEMPTY', path);
    dir.children.delete(name);
  }

  async copy(): Promise<void> {
    throw new VfsError('ENOSYS', 'copy is not supported by the in-memory test Vfs');
  }

  async statfs(): Promise<StatFs> {
    await this.gate();
    const used = this.used();
    return { total: this.capacity, used, free: this.capacity - used, files: 0 };
  }

  async setTimes(path: string, mtimeMs: number): Promise<void> {
    await this.gate();
    this.lookup(path).mtimeMs = mtimeMs;
  }

  async createReadStream(path: string, range?: { start?: number; end?: number }): Promise<Readable> {
    const n = this.lookup(path);
    return Readable.from([n.data.subarray(range?.start ?? 0, (range?.end ?? n.size - 1) + 1)]);
  }

  async writeFile(path: string, source: Readable | Buffer): Promise<Attr> {
    const chunks: Buffer[] = [];
    if (Buffer.isBuffer(source)) chunks.push(source);
    else for await (const c of source) chunks.push(c as Buffer);
    const h = await this.open(path, { write: true, create: true, truncate: true });
    await h.write(0, Buffer.concat(chunks));
    return this.stat(path);
  }

  async getTags(path: string): Promise<string[]> {
    await this.gate();
    return [...this.lookup(path).tags];
  }

  async setTags(path: string, tags: string[]): Promise<void> {
    await this.gate();
    this.lookup(path).tags = [...tags];
  }

  async setLocked(path: string, locked: boolean): Promise<void> {
    await this.gate();
    this.lookup(path).locked = locked;
  }

  async flushAll(): Promise<void> {
    await this.gate();
  }

  async close(): Promise<void> {}
}
