/**
 * InodeTable: the inode numbers the kernel knows files and folders by (libfuse 3's low-level API), each
 * bound to a name in a parent folder, so every request resolves to a gateway path.
 *
 * - A successful lookup (or create, mkdir) counts one reference; `forget` takes references back; an
 *   inode with none left, and no child that still has some, is dropped.
 * - Numbers are never reused (a counter), so the kernel never confuses a dropped inode with a new one.
 * - rename moves the node, and with it the whole subtree (paths are computed from parent links).
 * - unlink/rmdir (and a rename over an existing name) detach the node from its name: it stays until the
 *   kernel forgets it, and resolving its path then fails with ENOENT.
 */
import { FuseOpError } from '../errno.js';

export const ROOT_INO = 1;

export interface InodeNode {
  readonly ino: number;
  parent: InodeNode | undefined;
  name: string;
  /** References the kernel holds (lookups not yet forgotten). */
  lookups: number;
  /** Children still in the table (they keep their parent's path resolvable). */
  children: number;
  /** Detached from its name (unlinked, removed, replaced): no path any more. */
  detached: boolean;
  /** Open file handles on this inode (the front end counts them). */
  opens: number;
  /** Of those, the ones open for writing. */
  writers: number;
  /** Size, mtime and kind (mode & S_IFMT) last shown to the kernel, to tell a change made elsewhere. */
  shown?: { size: number; mtimeMs: number; kind?: number };
  /** The content hash the last open read (the kernel's pages hold that content; open-files.ts). */
  pagesOf?: string;
  isDir: boolean;
  /** Unlinked while open: renamed to a hidden name, removed at the last close. */
  hidden?: boolean;
}

function key(parentIno: number, name: string): string {
  return `${parentIno}/${name}`;
}

export class InodeTable {
  private readonly byIno = new Map<number, InodeNode>();
  private readonly byName = new Map<string, InodeNode>();
  private next = ROOT_INO + 1;
  readonly root: InodeNode;

  constructor() {
    this.root = { ino: ROOT_INO, parent: undefined, name: '', lookups: 1, children: 0, detached: false, opens: 0, writers: 0, isDir: true };
    this.byIno.set(ROOT_INO, this.root);
  }

  /** Inodes in the table (the root included). */
  get size(): number {
    return this.byIno.size;
  }

  get(ino: number): InodeNode {
    const node = this.byIno.get(ino);
    if (!node) throw new FuseOpError('ENOENT', `no inode ${ino}`);
    return node;
  }

  /** The gateway path of an inode; ENOENT once it was detached from its name. */
  path(ino: number): string {
    return this.pathOf(this.get(ino));
  }

  pathOf(node: InodeNode): string {
    if (node === this.root) return '/';
    const parts: string[] = [];
    for (let n: InodeNode | undefined = node; n && n !== this.root; n = n.parent) {
      if (n.detached) throw new FuseOpError('ENOENT', `inode ${node.ino} was removed`);
      parts.push(n.name);
    }
    return `/${parts.reverse().join('/')}`;
  }

  /** The path of `name` in folder `parentIno`. */
  childPath(parentIno: number, name: string): string {
    const dir = this.path(parentIno);
    return dir === '/' ? `/${name}` : `${dir}/${name}`;
  }

  /** The inode bound to `name` in `parentIno`, if the kernel knows one. */
  find(parentIno: number, name: string): InodeNode | undefined {
    return this.byName.get(key(parentIno, name));
  }

  /**
   * Counts one kernel reference to `name` in `parentIno`, making its inode if needed. `fresh`: give the
   * name a new inode even if it had one (its content changed elsewhere: the kernel must not keep the old
   * inode's cached pages and size); the old inode is detached and lives until forgotten.
   */
  remember(parentIno: number, name: string, isDir: boolean, fresh = false): InodeNode {
    const parent = this.get(parentIno);
    const k = key(parentIno, name);
    let node = this.byName.get(k);
    if (node && (fresh || node.isDir !== isDir)) {
      this.detach(node);
      node = undefined;
    }
    if (!node) {
      node = { ino: this.next++, parent, name, lookups: 0, children: 0, detached: false, opens: 0, writers: 0, isDir };
      parent.children++;
      this.byIno.set(node.ino, node);
      this.byName.set(k, node);
    }
    node.lookups++;
    return node;
  }

  /**
   * `name` in `parentIno` is the new file `ino`, numbered by the engine (from a range of its own): one
   * kernel reference; a node the name had is detached. EEXIST when `ino` is in the table already.
   */
  rememberAt(parentIno: number, name: string, ino: number): InodeNode {
    const parent = this.get(parentIno);
    if (this.byIno.has(ino)) throw new FuseOpError('EEXIST', `inode ${ino} exists`);
    const k = key(parentIno, name);
    const old = this.byName.get(k);
    if (old) this.detach(old);
    const node: InodeNode = { ino, parent, name, lookups: 1, children: 0, detached: false, opens: 0, writers: 0, isDir: false };
    parent.children++;
    this.byIno.set(ino, node);
    this.byName.set(k, node);
    return node;
  }

  /** The kernel dropped `count` references to `ino`. */
  forget(ino: number, count: number): void {
    const node = this.byIno.get(ino);
    if (!node || node === this.root) return;
    node.lookups = Math.max(0, node.lookups - count);
    this.dropIfUnused(node);
  }

  /** `name` in `parentIno` is gone (unlink, rmdir): its inode keeps living until forgotten, without a path. */
  removeName(parentIno: number, name: string): void {
    const node = this.byName.get(key(parentIno, name));
    if (node) this.detach(node);
  }

  /**
   * `name` in `parentIno` now is `newName` in `newParentIno`, subtree included; what was there is detached.
   * `moved`: the node the name had when the rename was asked; the kernel moved that inode, so it is bound
   * at the new name even when something told meanwhile (a change the feed brought) detached it here.
   */
  rename(parentIno: number, name: string, newParentIno: number, newName: string, moved?: InodeNode): void {
    const named = this.byName.get(key(parentIno, name));
    const node = named ?? (moved?.detached && this.byIno.get(moved.ino) === moved ? moved : undefined);
    const target = this.byName.get(key(newParentIno, newName));
    if (target && target !== node) this.detach(target);
    if (!node) return;
    const newParent = this.get(newParentIno);
    // Detached meanwhile: its old folder still counts it as a child (detach keeps the count).
    node.detached = false;
    if (named === node) this.byName.delete(key(parentIno, name));
    const oldParent = node.parent!;
    if (oldParent !== newParent) {
      newParent.children++;
      oldParent.children--;
    }
    node.parent = newParent;
    node.name = newName;
    this.byName.set(key(newParentIno, newName), node);
    if (oldParent !== newParent) this.dropIfUnused(oldParent);
  }

  private detach(node: InodeNode): void {
    if (node.detached) return;
    this.byName.delete(key(node.parent!.ino, node.name));
    node.detached = true;
    this.dropIfUnused(node);
  }

  private dropIfUnused(node: InodeNode): void {
    for (let n: InodeNode | undefined = node; n && n !== this.root; ) {
      if (n.lookups > 0 || n.children > 0 || n.opens > 0) return;
      this.byIno.delete(n.ino);
      if (!n.detached) this.byName.delete(key(n.parent!.ino, n.name));
      n.detached = true;
      const parent: InodeNode = n.parent!;
      parent.children--;
      n = parent;
    }
  }

  /** An open file on `ino` (keeps the inode while open). */
  opened(node: InodeNode, writable: boolean): void {
    node.opens++;
    if (writable) node.writers++;
  }

  closed(node: InodeNode, writable: boolean): void {
    node.opens = Math.max(0, node.opens - 1);
    if (writable) node.writers = Math.max(0, node.writers - 1);
    this.dropIfUnused(node);
  }
}
