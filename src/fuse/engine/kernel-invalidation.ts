/**
 * KernelInvalidation: a change made elsewhere (ChangeEvents, from the updates feed) makes the kernel forget
 * what it cached of the name and the file, so that the next access asks the Vfs, which shows the change:
 *
 * - created: the name in its folder (a negative entry), the folder's listing and attributes;
 * - changed, locked, unlocked: the file's attributes and cached pages (not of a file open for writing
 *   here: its content is the local version's);
 * - deleted: the name, with FUSE's delete notification, which tells inotify watchers of the folder
 *   (IN_DELETE) and of the file (IN_DELETE_SELF) as a delete through the mount would;
 * - moved: the old name as deleted (inotify sees a delete: the kernel has no notification of a new name),
 *   the new name as created.
 *
 * Only what the kernel was given (inodes in the table) is told: a name it never looked up it holds
 * nothing of. A change the gateway showed already (its own coming back through the feed) tells nothing,
 * unless the kernel was shown another size of the file (the Vfs found the change first).
 * The notifications run one after the other (`notify`, the mount's queue of them).
 */
import type { Logger } from 'pino';
import type { ChangeEvent } from '../../vfs/types.js';
import { Errno } from '../errno.js';
import type { Fuse3Binding, NativeSession } from './binding.js';
import type { InodeNode, InodeTable } from './inode-table.js';

export interface KernelInvalidationOptions {
  binding: Fuse3Binding;
  inodes: InodeTable;
  /** The live session (undefined once unmounted: nothing is told). */
  session: () => NativeSession | undefined;
  /** Runs `call` after the notifications queued before it; `what` names it in a failure's log line. */
  notify: (what: Record<string, unknown>, call: (se: NativeSession) => Promise<number>) => void;
  /** Inodes the kernel writes itself (passthrough): their pages are the kernel's own. */
  isLive: (ino: number) => boolean;
  logger: Logger;
}

/** Notifications told so far, by kind, for tests and the mount's counters. */
export interface KernelInvalidationCounters {
  entries: number;
  inodes: number;
  deletes: number;
  /** Left out because `MAX_PENDING` were still waiting (the kernel then keeps those caches until their timeout). */
  dropped: number;
}

/**
 * Notifications waiting for the ones before them, at most: a flood of changes (a feed's backlog of
 * thousands) holds bounded memory; past it, a change shows when the kernel's own timeout ends.
 */
export const MAX_PENDING = 4096;

export class KernelInvalidation {
  readonly counters: KernelInvalidationCounters = { entries: 0, inodes: 0, deletes: 0, dropped: 0 };
  private pending = 0;

  constructor(private readonly opts: KernelInvalidationOptions) {}

  /** Queues one notification, unless MAX_PENDING wait already; false when left out. */
  private tell(what: Record<string, unknown>, call: (se: NativeSession) => Promise<number>): boolean {
    if (this.pending >= MAX_PENDING) {
      if (this.counters.dropped++ === 0) this.opts.logger.warn({ pending: this.pending }, 'fuse: too many changes made elsewhere to tell the kernel at once; the rest show when its caches time out');
      return false;
    }
    this.pending++;
    this.opts.notify(what, (se) => call(se).finally(() => void this.pending--));
    return true;
  }

  /** Tells the kernel what `event` makes stale. */
  changed(event: ChangeEvent): void {
    if (!this.opts.session()) return;
    if (event.shown) {
      // Shown already (this gateway's own change coming back, or one the Vfs found first): the kernel got
      // it from the Vfs, unless it was shown another size of the file (the Vfs found the change for a
      // request that gives the kernel no attributes: an open, a listing without them, another front end).
      if (this.sizeNotShown(event)) this.contentChanged(event.path);
      return;
    }
    switch (event.kind) {
      case 'deleted':
        this.gone(event.path);
        return;
      case 'moved':
        if (event.from !== undefined) this.gone(event.from);
        this.named(event.path);
        return;
      case 'created':
        this.named(event.path);
        return;
      default:
        this.contentChanged(event.path);
    }
  }

  /** A file's change (in place) whose size is not the one the kernel was last shown of the file. */
  private sizeNotShown(event: ChangeEvent): boolean {
    if (event.isDir || event.size === undefined || event.kind === 'deleted' || event.kind === 'moved') return false;
    const shown = this.resolve(event.path).node?.shown;
    return shown !== undefined && shown.size !== event.size;
  }

  /** The folder node and, when the kernel was given it, the node of the last name of gateway path `path`. */
  private resolve(path: string): { parent?: InodeNode; node?: InodeNode; name: string } {
    const names = path.split('/').filter((p) => p !== '');
    const name = names.pop() ?? '';
    let parent: InodeNode | undefined = this.opts.inodes.root;
    for (const n of names) {
      parent = this.opts.inodes.find(parent.ino, n);
      if (!parent) return { name };
    }
    return { parent, node: name === '' ? undefined : this.opts.inodes.find(parent.ino, name), name };
  }

  /**
   * A name made (created, or moved there): the kernel forgets the folder's listing, then a negative entry.
   * The folder first: that also makes the engine forget the folder's names (notify.c), from which it
   * answers lookups of names it does not hold itself; a lookup between the two would have been answered
   * "no such entry" again by the engine, and the kernel kept that answer for its timeout.
   */
  private named(path: string): void {
    const { parent, node, name } = this.resolve(path);
    if (!parent) return;
    // The kernel holds that name already (made again elsewhere): what it cached of the file goes.
    if (node) this.contentChanged(path);
    this.inode(parent);
    this.entry(parent, name);
  }

  /** A name gone (deleted, or moved away). */
  private gone(path: string): void {
    const { parent, node, name } = this.resolve(path);
    if (!parent) return;
    this.inode(parent);
    if (!node) {
      this.entry(parent, name);
      return;
    }
    const parentIno = parent.ino;
    const childIno = node.ino;
    // A file still open here keeps its name in the table: its handles resolve through it.
    if (node.opens === 0) this.opts.inodes.removeName(parentIno, name);
    if (!this.tell({ name, parent: parentIno, child: childIno, call: 'notifyDelete' }, async (se) => {
      const rc = await this.opts.binding.notifyDelete(se, parentIno, childIno, name);
      // A folder whose names the kernel still uses cannot be deleted there: its name is forgotten instead.
      if (rc === -Errno.ENOTEMPTY || rc === -Errno.EBUSY) return this.opts.binding.invalidateEntry(se, parentIno, name);
      return rc;
    })) return;
    this.counters.deletes++;
  }

  private contentChanged(path: string): void {
    const { node } = this.resolve(path);
    if (!node) return;
    if (!node.isDir && (node.writers > 0 || this.opts.isLive(node.ino))) return;
    this.inode(node);
  }

  private entry(parent: InodeNode, name: string): void {
    const ino = parent.ino;
    if (this.tell({ name, parent: ino, call: 'invalidateEntry' }, (se) => this.opts.binding.invalidateEntry(se, ino, name))) this.counters.entries++;
  }

  private inode(node: InodeNode): void {
    const ino = node.ino;
    if (this.tell({ ino, call: 'invalidateInode' }, (se) => this.opts.binding.invalidateInode(se, ino))) this.counters.inodes++;
  }
}
