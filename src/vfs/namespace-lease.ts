/**
 * NamespaceLease: the namespace's side of the engine lease (engine-lease.ts; the write-back's side is
 * write-back/write-back-lease.ts): what the gateway hands the FUSE engine so that it answers requests by
 * itself: a folder's cached names, where it may answer closes, the side journal it writes its versions'
 * records to, and the files it created, wrote and closed on its own, taken in by the WriteBack in one call.
 */
import { VersionsView } from './versions-view.js';
import type { MetadataCache } from './metadata-cache.js';
import type { NamespaceLookups } from './namespace-lookups.js';
import { parentOf } from './remote.js';
import type { LibraryFolders } from './library-folders.js';
import type { UnlinkedWhileRead } from './unlinked-while-read.js';
import type { WriteBack } from './write-back/index.js';
import type { CallContext } from './types.js';
import type { ClosedCreate, EngineClose, SideJournal } from './engine-lease.js';

export interface NamespaceLeaseOptions {
  libs: LibraryFolders;
  cache: MetadataCache;
  lookups: NamespaceLookups;
  unlinked: UnlinkedWhileRead;
  writeBack: WriteBack;
  readOnly: boolean;
  /** Throws unless changes are taken now (EROFS, EIO once closed). */
  writable: (path: string) => void;
  closed: () => boolean;
}

export class NamespaceLease {
  constructor(private readonly opts: NamespaceLeaseOptions) {}

  sideJournal(): SideJournal | undefined {
    return this.opts.readOnly || this.opts.closed() ? undefined : this.opts.writeBack.sideJournal();
  }

  async createClosed(files: readonly ClosedCreate[], ctx?: CallContext): Promise<boolean[]> {
    const { libs, lookups, unlinked, writeBack } = this.opts;
    const made: boolean[] = files.map(() => false);
    const takes: { at: number; library: string; fullpath: string; id: string; closed: EngineClose }[] = [];
    // Folders looked up once for all the files in them.
    const folders = new Map<string, Promise<boolean>>();
    for (let at = 0; at < files.length; at++) {
      const f = files[at]!;
      const t = libs.target(f.path);
      if (!t.lib || t.fullpath === '' || this.opts.readOnly || t.lib.remote.checkWrite || unlinked.isHidden(t.lib.name, t.fullpath) || VersionsView.names(f.path)) continue;
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
    const t = this.opts.libs.target(path);
    // A library whose service checks each new file against the member's rights: its closes wait for that.
    if (!t.lib || this.opts.readOnly || t.lib.remote.checkWrite) return undefined;
    return { library: t.lib.name, fullpath: t.fullpath };
  }

  cachedNames(path: string, max: number): string[] | undefined {
    const t = this.opts.libs.target(path);
    if (!t.lib) return undefined;
    const list = this.opts.cache.getListing(t.lib.name, t.fullpath);
    if (!list || list.length > max) return undefined;
    return [...this.opts.lookups.overlaid(t.lib, t.fullpath, list).keys()];
  }
}
