/**
 * The versions view (versions-view.ts) as a gateway-side namespace (gateway-namespaces.ts): it owns
 * `/<library>/.versions/…` wherever the view is shown, answers reads there (no tags: versions have none
 * of their own), copies a version out of it (a restore), and refuses every change with EROFS. Its
 * folder is found by its name at a library's root, though no listing shows it.
 */
import type { Clock } from './clock.js';
import type { GatewayNamespace, NamespaceOp, NamespaceOps } from './gateway-namespaces.js';
import type { LibraryFolders } from './library-folders.js';
import type { NamespaceLookups } from './namespace-lookups.js';
import type { ServiceReads } from './service-reads.js';
import { VERSIONS_FOLDER, VersionsView } from './versions-view.js';
import { VfsError, type CallContext, type Vfs } from './types.js';

export interface VersionsNamespaceOptions {
  libs: LibraryFolders;
  lookups: NamespaceLookups;
  reads: ServiceReads;
  /** The gateway's own stat and writeFile: where a version copied out goes. */
  gateway: Pick<Vfs, 'stat' | 'writeFile'>;
  /** The time the lists of versions are kept for. */
  clock: Clock;
}

export class VersionsNamespace implements GatewayNamespace {
  readonly readOnly = true;
  readonly ops: Partial<NamespaceOps>;
  private readonly view: VersionsView;

  constructor(private readonly opts: VersionsNamespaceOptions) {
    const lib = (name: string) => opts.libs.get(name)!;
    const view = (this.view = new VersionsView({
      remoteOf: (name) => opts.libs.get(name)?.remote,
      lookup: (name, fullpath, ctx) => opts.lookups.lookup(lib(name), fullpath, ctx),
      list: (name, fullpath, ctx) => opts.lookups.listDir(lib(name), fullpath, ctx),
      reader: (name, entry, ctx) => opts.reads.reader(lib(name), entry, ctx, { exactVersion: true }),
    }, opts.clock));
    // Asked only for a path `owns` found in the view: its parts are read again by name alone.
    const at = (path: string) => VersionsView.parse(path)!;
    this.ops = {
      stat: (path, ctx) => view.stat(at(path), ctx),
      readdir: (path, ctx) => view.readdir(at(path), ctx),
      open: (path, flags, ctx) => view.open(at(path), flags, ctx),
      createReadStream: (path, range, ctx) => view.createReadStream(at(path), range, ctx),
      getTags: async () => [],
      copy: (from, to, o, ctx) => this.copyOut(from, to, o, ctx),
    };
  }

  async owns(path: string, ctx?: CallContext): Promise<boolean> {
    return (await this.view.at(path, ctx)) !== undefined;
  }

  named(path: string): boolean {
    return VersionsView.names(path);
  }

  refusal(_op: NamespaceOp, path: string): VfsError {
    return this.view.refusal(path);
  }

  unlisted(folder: string, listed: readonly string[]): string[] {
    const t = this.opts.libs.target(folder);
    return t.lib && t.fullpath === '' && this.view.shownIn(t.lib.name, listed) ? [VERSIONS_FOLDER] : [];
  }

  /** A version copied out of the view (restored): its bytes streamed into a file at `to`. Nothing is copied into the view. */
  private async copyOut(from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext): Promise<void> {
    const view = this.view;
    if (await view.at(to, ctx)) throw view.refusal(to);
    const v = (await view.at(from, ctx))!;
    const attr = await view.stat(v, ctx);
    if (attr.isDir) throw new VfsError('ENOTSUP', `${v.path}: folders of the versions view are not copied; copy its versions one by one`);
    if (opts.noReplace && (await this.opts.gateway.stat(to, ctx).catch(() => undefined))) throw new VfsError('EEXIST', `${to} exists`);
    await this.opts.gateway.writeFile(to, await view.createReadStream(v, {}, ctx), ctx, { size: attr.size });
  }
}
