/**
 * Symbolic links stored as link files. The service has no symbolic links: a link `NAME` is kept as a
 * small file `NAME.rclonelink` whose content is the link's target (UTF-8), as rclone's `--links` stores
 * them, so a tree copied with `rclone copy --links` shows its links here and the other way round. A front
 * end that shows links (the FUSE mount) maps names through LinkFiles; the others (WebDAV) show the link files as
 * the plain files they are. The format itself is shared/link-file-format.ts (`ctl upload`/`download` use it too).
 */
import type { Attr, CallContext, Vfs } from '../vfs/types.js';
import { VfsError } from '../vfs/types.js';
import { LINK_SUFFIX, LINK_TARGET_MAX, encodeLinkTarget, isLinkFileEntry, linkFileNameOf, linkNameOf } from '../shared/link-file-format.js';

export { LINK_SUFFIX, LINK_TARGET_MAX, linkNameOf } from '../shared/link-file-format.js';

/** An object as a front end that shows links sees it: `isLink` for a link (its `size` the target's length). */
export type LinkAttr = Attr & { isLink?: true };

/** Whether `attr` is a link file: a file with the suffix, small enough to hold a target. */
export function isLinkFile(attr: Attr): boolean {
  return isLinkFileEntry(attr);
}

function notFound(err: unknown): boolean {
  return err instanceof VfsError && err.code === 'ENOENT';
}

/** The attributes of the link a link file `file` holds, at `path`. */
function asLink(file: Attr, path: string): LinkAttr {
  return { ...file, path, name: linkNameOf(file.name)!, isLink: true };
}

/** Targets of links kept in memory, at most (the oldest forgotten first). */
export const TARGETS_KEPT_MAX = 10_000;

interface KnownTarget {
  target: string;
  size: number;
  mtimeMs: number;
  contentHash?: string;
}

export class LinkFiles {
  /**
   * Targets this mount made or read, by link path, with the link file's attributes then: readlink (every
   * path walk through a link: each exec of an npm bin) answers from it while the file shows the same.
   */
  private readonly targets = new Map<string, KnownTarget>();

  constructor(private readonly vfs: Vfs) {}

  /** Targets kept in memory now. */
  get targetsKept(): number {
    return this.targets.size;
  }

  private keep(path: string, file: Attr, target: string): void {
    this.targets.delete(path);
    this.targets.set(path, { target, size: file.size, mtimeMs: file.mtimeMs, contentHash: file.contentHash });
    if (this.targets.size > TARGETS_KEPT_MAX) this.targets.delete(this.targets.keys().next().value!);
  }

  /** The target kept for link `path` while its file `file` shows as it did, else undefined. */
  private kept(path: string, file: Attr): string | undefined {
    const k = this.targets.get(path);
    if (!k) return undefined;
    const same = k.size === file.size && k.mtimeMs === file.mtimeMs && (k.contentHash === undefined || file.contentHash === undefined || k.contentHash === file.contentHash);
    if (same) return k.target;
    this.targets.delete(path);
    return undefined;
  }

  /** Forgets the targets at `path` and under it (a link moved or removed, or a folder holding links). */
  private forget(path: string): void {
    this.targets.delete(path);
    if (this.targets.size === 0) return;
    const prefix = `${path}/`;
    for (const key of [...this.targets.keys()]) if (key.startsWith(prefix)) this.targets.delete(key);
  }

  /** The link file that holds link `path`. */
  static fileOf(path: string): string {
    return linkFileNameOf(path);
  }

  /**
   * Attributes of `path` as a front end showing links sees them: the object at `path`, or else the link
   * its link file holds. A link file shown as its link is not found by its own name (ENOENT), as a
   * listing does not show it; one an object of the link's name hides is the file it is.
   */
  async stat(path: string, ctx?: CallContext): Promise<LinkAttr> {
    try {
      const attr = await this.vfs.stat(path, ctx);
      if (isLinkFile(attr) && !(await this.exists(path.slice(0, -LINK_SUFFIX.length), ctx))) {
        throw new VfsError('ENOENT', `no such file or folder: ${path} (it holds the symbolic link ${attr.name.slice(0, -LINK_SUFFIX.length)})`);
      }
      return attr;
    } catch (err) {
      if (!notFound(err)) throw err;
      const link = await this.linkAt(path, ctx);
      if (!link) throw err;
      return link;
    }
  }

  private async exists(path: string, ctx?: CallContext): Promise<boolean> {
    return this.vfs.stat(path, ctx).then(
      () => true,
      (err: unknown) => {
        if (notFound(err)) return false;
        throw err;
      },
    );
  }

  /** The link at `path` (its link file's attributes shown as the link), undefined when there is none. */
  async linkAt(path: string, ctx?: CallContext): Promise<LinkAttr | undefined> {
    if (path === '/' || path.endsWith('/')) return undefined;
    // No link file there, as the cached listing of its folder says (every rename's target asks).
    if (this.vfs.engineLease?.knownMissing(LinkFiles.fileOf(path))) return undefined;
    let file: Attr;
    try {
      file = await this.vfs.stat(LinkFiles.fileOf(path), ctx);
    } catch (err) {
      if (notFound(err)) return undefined;
      throw err;
    }
    return isLinkFile(file) ? asLink(file, path) : undefined;
  }

  /**
   * A folder's entries as shown with links: each link file as its link, unless an object of the link's
   * name is there too (then the link file shows as the file it is).
   */
  static shown(entries: readonly Attr[]): LinkAttr[] {
    const names = new Set(entries.map((e) => e.name));
    return entries.map((e) => {
      if (!isLinkFile(e)) return e;
      const name = linkNameOf(e.name)!;
      return names.has(name) ? e : asLink(e, e.path.slice(0, -LINK_SUFFIX.length));
    });
  }

  /** Names a lookup finds in a folder of `names`: each, and the link each link file's name makes. */
  static namesFound(names: readonly string[]): string[] {
    const out = [...names];
    for (const n of names) {
      const link = linkNameOf(n);
      if (link !== undefined) out.push(link);
    }
    return out;
  }

  /** The target of link `path`: ENOENT when there is no link there, EINVAL when `path` is no link. */
  async readTarget(path: string, ctx?: CallContext): Promise<string> {
    const shown = await this.stat(path, ctx); // ENOENT when nothing is there
    if (!shown.isLink) throw new VfsError('EINVAL', `not a symbolic link: ${path}`);
    const known = this.kept(path, shown);
    if (known !== undefined) return known;
    const handle = await this.vfs.open(LinkFiles.fileOf(path), { read: true }, ctx);
    let target: string;
    try {
      const data = await handle.read(0, LINK_TARGET_MAX + 1, ctx);
      if (data.length > LINK_TARGET_MAX) throw new VfsError('EIO', `link file of ${path} grew past ${LINK_TARGET_MAX} bytes`);
      target = data.toString('utf8');
    } finally {
      await handle.release();
    }
    this.keep(path, shown, target);
    return target;
  }

  /** Makes link `path` to `target`: EEXIST when something (an object or a link) is there already. */
  async make(target: string, path: string, ctx?: CallContext): Promise<LinkAttr> {
    const bytes = encodeLinkTarget(target);
    if (bytes.length === 0) throw new VfsError('ENOENT', `empty symbolic link target for ${path}`);
    if (bytes.length > LINK_TARGET_MAX) throw new VfsError('ENAMETOOLONG', `symbolic link target longer than ${LINK_TARGET_MAX} bytes`);
    const existing = await this.stat(path, ctx).catch((err: unknown) => {
      if (notFound(err)) return undefined;
      throw err;
    });
    if (existing) throw new VfsError('EEXIST', `already exists: ${path}`);
    const file = await this.vfs.writeFile(LinkFiles.fileOf(path), bytes, ctx, { size: bytes.length });
    const link = asLink(file, path);
    this.keep(path, link, target);
    return link;
  }

  /** Removes `path`, a link or not: the link's file for a link. */
  async unlink(path: string, ctx?: CallContext): Promise<void> {
    this.forget(path);
    try {
      await this.vfs.unlink(path, ctx);
    } catch (err) {
      if (!notFound(err) || !(await this.linkAt(path, ctx))) throw err;
      await this.vfs.unlink(LinkFiles.fileOf(path), ctx);
    }
  }

  /**
   * Renames `from` (a link or not) to `to`, replacing what `to` names unless `noReplace`: a link moves
   * as its link file; an object replacing a link removes the link's file, a link replacing an object
   * removes the object.
   */
  async rename(from: string, to: string, noReplace: boolean, ctx?: CallContext): Promise<void> {
    this.forget(from);
    this.forget(to);
    // A link at `to` is looked for first; `from` is looked at only when one is, or when it is not found.
    const toLink = await this.linkAt(to, ctx);
    if (toLink) {
      if (noReplace) throw new VfsError('EEXIST', `already exists: ${to}`);
      const fromObject = await this.objectAt(from, ctx);
      // rename(2): a folder does not replace what is not a folder.
      if (fromObject?.isDir) throw new VfsError('ENOTDIR', `not a folder: ${to}`);
    }
    try {
      await this.vfs.rename(from, to, { noReplace }, ctx);
    } catch (err) {
      if (!notFound(err) || !(await this.linkAt(from, ctx))) throw err;
      return this.renameLink(from, to, noReplace, ctx);
    }
    if (toLink) await this.vfs.unlink(LinkFiles.fileOf(to), ctx);
  }

  /** Moves link `from` (its file) to `to`, replacing an object there unless `noReplace`. */
  private async renameLink(from: string, to: string, noReplace: boolean, ctx?: CallContext): Promise<void> {
    const toObject = await this.objectAt(to, ctx);
    if (toObject && noReplace) throw new VfsError('EEXIST', `already exists: ${to}`);
    if (toObject?.isDir) throw new VfsError('EISDIR', `a folder is there: ${to}`);
    await this.vfs.rename(LinkFiles.fileOf(from), LinkFiles.fileOf(to), { noReplace }, ctx);
    if (toObject) await this.vfs.unlink(to, ctx);
  }

  /** The object at `path` (not a link), undefined when there is none. */
  private objectAt(path: string, ctx?: CallContext): Promise<Attr | undefined> {
    return this.vfs.stat(path, ctx).catch((err: unknown) => {
      if (notFound(err)) return undefined;
      throw err;
    });
  }

  /** Sets the modification time of `path`, a link or not: the link file's for a link (`touch -h`, `cp -a`). */
  async setTimes(path: string, mtimeMs: number, ctx?: CallContext): Promise<void> {
    try {
      await this.vfs.setTimes(path, mtimeMs, ctx);
    } catch (err) {
      if (!notFound(err) || !(await this.linkAt(path, ctx))) throw err;
      this.targets.delete(path);
      await this.vfs.setTimes(LinkFiles.fileOf(path), mtimeMs, ctx);
    }
  }
}
