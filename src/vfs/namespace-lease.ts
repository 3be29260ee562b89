/**
 * NamespaceLease: the namespace's side of the engine lease (engine-lease.ts; the write-back's side is
 * write-back/write-back-lease.ts): what the gateway hands the FUSE engine so that it answers requests by
 * itself: a folder's cached names, where it may answer closes, the side journal it writes its versions'
 * records to, and the files it created, wrote and closed on its own, taken in by the WriteBack in one call.
 * Paths of the gateway-side namespaces (gateway-namespaces.ts) are theirs: the engine answers nothing there.
 */
import type { MetadataCache } from './metadata-cache.js';
import type { NamespaceLookups } from './namespace-lookups.js';
import { parentOf } from './remote.js';
import type { LibraryFolders } from './library-folders.js';
import type { UnlinkedWhileRead } from './unlinked-while-read.js';
import type { WriteBack } from './write-back/index.js';
import type { CallContext } from './types.js';
import type { GatewayNamespaces } from './gateway-namespaces.js';
import type { ClosedCreate, EngineClose, EngineLease, LeasedHandle, LeaseOpenFlags, SideJournal } from './engine-lease.js';

export interface NamespaceLeaseOptions {
  libs: LibraryFolders;
  cache: MetadataCache;
  lookups: NamespaceLookups;
  unlinked: UnlinkedWhileRead;
  writeBack: WriteBack;
  namespaces: GatewayNamespaces;
  readOnly: boolean;
  /** Throws unless changes are taken now (EROFS, EIO once closed). */
  writable: (path: string) => void;
  closed: () => boolean;
  /** The gateway's Vfs.open. */
  open: (path: string, flags: LeaseOpenFlags, ctx?: CallContext) => Promise<LeasedHandle>;
}

export class NamespaceLease implements EngineLease {
  constructor(private readonly opts: NamespaceLeaseOptions) {}

  open(path: string, flags: LeaseOpenFlags, ctx?: CallContext, opts?: { journalId?: string; spoolMade?: boolean }): Promise<LeasedHandle> {
    return this.opts.open(path, opts?.journalId === undefined ? flags : { ...flags, journalId: opts.journalId, spoolMade: opts.spoolMade }, ctx);
  }

  sideJournal(): SideJournal | undefined {
    return this.opts.readOnly || this.opts.closed() ? undefined : this.opts.writeBack.sideJournal();
  }

  createClosed(files: readonly ClosedCreate[], ctx?: CallContext): Promise<boolean[]> {
    return this.opts.namespaces.createClosed(files, (rest) => this.takeClosed(rest, ctx), ctx);
  }

  /** Files of the libraries the engine closed by itself, taken in by the WriteBack in one call. */
  private async takeClosed(files: readonly ClosedCreate[], ctx?: CallContext): Promise<boolean[]> {
    const { libs, lookups, unlinked, writeBack } = this.opts;
    const made: boolean[] = files.map(() => false);
    const takes: { at: number; library: string; fullpath: string; id: string; closed: EngineClose }[] = [];
    // Folders looked up once for all the files in them.
    const folders = new Map<string, Promise<boolean>>();
    for (let at = 0; at < files.length; at++) {
      const f = files[at]!;
      const t = libs.target(f.path);
      if (!t.lib || t.fullpath === '' || this.opts.readOnly || t.lib.remote.checkWrite || unlinked.isHidden(t.lib.name, t.fullpath)) continue;
      const lib = t.lib;
      const folder = parentOf(t.fullpath);
      const key = `${lib.name}\0${folder}`;
      let there = folders.get(key);
      if (!there) folders.set(key, (there = lookups.needFolder(lib, folder, ctx).then(() => true, () => false)));
      try {
        this.opts.writable(t.path);
        if (!(await there) || (await lookups.lookup(lib, t.fullpath, ctx))) continue;
      } catch {
        continue; // the three steps answer it
      }
      takes.push({ at, library: lib.name, fullpath: t.fullpath, id: f.journalId, closed: f.closed });
    }
    if (takes.length === 0) return made;
    const took = await writeBack.createClosed(takes);
    takes.forEach((t, i) => (made[t.at] = took[i]!));
    return made;
  }

  answeredClosesIn(path: string): { library: string; fullpath: string } | undefined {
    if (this.opts.namespaces.named(path)) return undefined;
    const t = this.opts.libs.target(path);
    // A library whose service checks each new file against the member's rights: its closes wait for that.
    if (!t.lib || this.opts.readOnly || t.lib.remote.checkWrite) return undefined;
    return { library: t.lib.name, fullpath: t.fullpath };
  }

  cachedNames(path: string, max: number): string[] | undefined {
    if (this.opts.namespaces.named(path)) return undefined;
    const t = this.opts.libs.target(path);
    if (!t.lib) return undefined;
    // A name in doubt (the feed brought a change of it while the gateway changed it) is offered as there:
    // its lookup comes here, while every other name is still answered from the listing.
    const known = this.opts.cache.getNames(t.lib.name, t.fullpath);
    if (!known || known.entries.length + known.inDoubt.length > max) return undefined;
    const byName = this.opts.lookups.overlaid(t.lib, t.fullpath, known.entries);
    const names = this.opts.namespaces.namesShown(t.path, [...byName.keys(), ...known.inDoubt.filter((n) => !byName.has(n))]);
    return names.length > max ? undefined : [...names, ...this.unlistedNames(path, names)!];
  }

  knownMissing(path: string): boolean {
    if (this.opts.namespaces.named(path)) return false;
    let t;
    try {
      t = this.opts.libs.target(path);
    } catch {
      return false;
    }
    return !!t.lib && t.fullpath !== '' && this.opts.lookups.knownMissing(t.lib, t.fullpath);
  }

  unlistedNames(path: string, listed: readonly string[]): string[] | undefined {
    if (this.opts.namespaces.named(path)) return undefined;
    return this.opts.namespaces.unlisted(path, listed);
  }
}
