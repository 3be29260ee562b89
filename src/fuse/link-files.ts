/**
 * Symbolic links stored as link files. The service has no symbolic links: a link `NAME` is kept as a
 * small file `NAME.rclonelink` whose content is the link's target (UTF-8), as rclone's `--links` stores
 * them, so a tree copied with `rclone copy --links` shows its links here and the other way round. A front
 * end that shows links (the FUSE mount) maps names through LinkFiles; the others (WebDAV, ctl) show the
 * link files as the plain files they are.
 */
import type { Attr, CallContext, Vfs } from '../vfs/types.js';
import { VfsError } from '../vfs/types.js';

/** The suffix of a link file's name. */
export const LINK_SUFFIX = '.rclonelink';

/** Longest target, bytes (PATH_MAX less its terminating zero); a longer file is no link file. */
export const LINK_TARGET_MAX = 4095;

/** An object as a front end that shows links sees it: `isLink` for a link (its `size` the target's length). */
export type LinkAttr = Attr & { isLink?: true };

/** The name of the link a file named `name` holds, when such a name does (undefined otherwise). */
export function linkNameOf(name: string): string | undefined {
  return name.length > LINK_SUFFIX.length && name.endsWith(LINK_SUFFIX) ? name.slice(0, -LINK_SUFFIX.length) : undefined;
}

/** Whether `attr` is a link file: a file with the suffix, small enough to hold a target. */
export function isLinkFile(attr: Attr): boolean {
  return !attr.isDir && attr.size <= LINK_TARGET_MAX && linkNameOf(attr.name) !== undefined;
}

function notFound(err: unknown): boolean {
  return err instanceof VfsError && err.code === 'ENOENT';
}

/** The attributes of the link a link file `file` holds, at `path`. */
function asLink(file: Attr, path: string): LinkAttr {
  return { ...file, path, name: linkNameOf(file.name)!, isLink: true };
}

export class LinkFiles {
  constructor(private readonly vfs: Vfs) {}

  /** The link file that holds link `path`. */
  static fileOf(path: string): string {
    return path + LINK_SUFFIX;
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
    const handle = await this.vfs.open(LinkFiles.fileOf(path), { read: true }, ctx);
    try {
      const data = await handle.read(0, LINK_TARGET_MAX + 1, ctx);
      if (data.length > LINK_TARGET_MAX) throw new VfsError('EIO', `link file of ${path} grew past ${LINK_TARGET_MAX} bytes`);
      return data.toString('utf8');
    } finally {
      await handle.release();
    }
  }

  /** Makes link `path` to `target`: EEXIST when something (an object or a link) is there already. */
  async make(target: string, path: string, ctx?: CallContext): Promise<LinkAttr> {
    const bytes = Buffer.from(target, 'utf8');
    if (bytes.length === 0) throw new VfsError('ENOENT', `empty symbolic link target for ${path}`);
    if (bytes.length > LINK_TARGET_MAX) throw new VfsError('ENAMETOOLONG', `symbolic link target longer than ${LINK_TARGET_MAX} bytes`);
    const existing = await this.stat(path, ctx).catch((err: unknown) => {
      if (notFound(err)) return undefined;
      throw err;
    });
    if (existing) throw new VfsError('EEXIST', `already exists: ${path}`);
    const file = await this.vfs.writeFile(LinkFiles.fileOf(path), bytes, ctx, { size: bytes.length });
    return asLink(file, path);
  }

  /** Removes `path`, a link or not: the link's file for a link. */
  async unlink(path: string, ctx?: CallContext): Promise<void> {
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
    const fromLink = await this.vfs.stat(from, ctx).then(
      () => false,
      async (err: unknown) => {
        if (!notFound(err) || !(await this.linkAt(from, ctx))) throw err;
        return true;
      },
    );
    const toLink = await this.linkAt(to, ctx);
    if (noReplace && toLink) throw new VfsError('EEXIST', `already exists: ${to}`);
    if (!fromLink) {
      await this.vfs.rename(from, to, { noReplace }, ctx);
      if (toLink) await this.vfs.unlink(LinkFiles.fileOf(to), ctx);
      return;
    }
    const toObject = await this.vfs.stat(to, ctx).catch((err: unknown) => {
      if (notFound(err)) return undefined;
      throw err;
    });
    if (toObject && noReplace) throw new VfsError('EEXIST', `already exists: ${to}`);
    if (toObject?.isDir) throw new VfsError('EISDIR', `a folder is there: ${to}`);
    await this.vfs.rename(LinkFiles.fileOf(from), LinkFiles.fileOf(to), { noReplace }, ctx);
    if (toObject) await this.vfs.unlink(to, ctx);
  }

  /** The Vfs path of what `path` shows: its link file for a link, else `path` itself. */
  async stored(path: string, ctx?: CallContext): Promise<string> {
    try {
      await this.vfs.stat(path, ctx);
      return path;
    } catch (err) {
      if (!notFound(err) || !(await this.linkAt(path, ctx))) throw err;
      return LinkFiles.fileOf(path);
    }
  }
}
