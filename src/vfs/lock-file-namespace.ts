/**
 * Office and LibreOffice lock files (office-lock-files.ts) as a gateway-side namespace
 * (gateway-namespaces.ts): it owns every path whose last name is a lock file's, answers the file
 * operations there from the gateway's own disk, lists its files in their folders (hiding any of the
 * service's under such a name), and refuses a service lock of a lock file. A folder, tags or a listing
 * at such a name are the library's. Lock files move and copy among lock file names only (EXDEV).
 */
import type { GatewayNamespace, NamespaceOp, NamespaceOps } from './gateway-namespaces.js';
import type { LibraryFolders } from './library-folders.js';
import type { NamespaceLookups } from './namespace-lookups.js';
import type { Logger } from '../shared/log.js';
import { isOfficeLockName, isOfficeLockPath, OfficeLockFiles, type DocumentLocks } from './office-lock-files.js';
import { parentOf } from './remote.js';
import { parseGatewayPath } from './gateway-path.js';
import type { SideJournal } from './engine-lease.js';
import { VfsError, type Attr, type CallContext } from './types.js';
import type { Clock } from './clock.js';

export interface LockFileNamespaceOptions {
  /** The Vfs's data folder, where the lock files and the locks they took are kept. */
  dataDir: string;
  logger: Logger;
  /** The service locks of the documents, and the names of a folder, as the Vfs has them. */
  documents: DocumentLocks;
  libs: LibraryFolders;
  lookups: NamespaceLookups;
  readOnly: boolean;
  /** Throws unless changes are taken now (EROFS, EIO once closed). */
  writable: (path: string) => void;
  /** The journal whose records the FUSE engine wrote for the files it closed by itself. */
  sideJournal: () => SideJournal | undefined;
  /** How long a removed lock file's lock waits before it is released (a save remakes it meanwhile). */
  releaseGraceMs: number;
  clock: Clock;
}

export class LockFileNamespace implements GatewayNamespace {
  readonly ops: Partial<NamespaceOps>;
  private readonly files: OfficeLockFiles;

  constructor(private readonly opts: LockFileNamespaceOptions) {
    const { writable } = opts;
    const files = (this.files = new OfficeLockFiles({
      dataDir: opts.dataDir, logger: opts.logger, documents: opts.documents, spoolFolder: () => opts.sideJournal()?.spoolFolderPath(),
      releaseGraceMs: opts.releaseGraceMs, clock: opts.clock,
    }));
    const path = (p: string): string => opts.libs.target(p).path;
    this.ops = {
      stat: (p) => files.stat(path(p)),
      open: async (p, flags, ctx) => {
        const t = opts.libs.target(p);
        if (flags.write || flags.create || flags.truncate || flags.append) writable(t.path);
        await this.folderOf(t.path, ctx);
        return files.open(t.path, flags, ctx);
      },
      createReadStream: async (p, range) => files.createReadStream(path(p), range),
      writeFile: async (p, source, ctx) => {
        writable(path(p));
        await this.folderOf(path(p), ctx);
        return files.writeFile(path(p), source, ctx);
      },
      unlink: (p) => files.unlink(path(p)),
      setTimes: (p, mtimeMs) => files.setTimes(path(p), mtimeMs),
      rename: (from, to, o, ctx) => this.transfer('rename', from, to, o, ctx),
      copy: (from, to, o, ctx) => this.transfer('copy', from, to, o, ctx),
      // Taken from the engine's record, never journaled (false when it cannot be so: the slow path then).
      createClosed: async (f, ctx) => !opts.readOnly && files.createClosed(path(f.path), f, opts.sideJournal(), ctx),
    };
  }

  owns(path: string): boolean {
    // A path of no library is no lock file (what is asked of it answers for itself).
    if (!this.opts.libs.has(parseGatewayPath(path).library ?? '')) return false;
    return isOfficeLockPath(this.opts.libs.target(path).path);
  }

  named(path: string): boolean {
    return isOfficeLockPath(path);
  }

  refusal(op: NamespaceOp, path: string): VfsError | undefined {
    if (op === 'setLocked') return new VfsError('ENOTSUP', `lock files stay on the gateway and have no service lock: ${this.opts.libs.target(path).path}`);
    return undefined;
  }

  hides(name: string): boolean {
    return isOfficeLockName(name);
  }

  namesIn(folder: string): string[] {
    return this.files.namesIn(folder);
  }

  list(folder: string): Promise<Attr[]> {
    return this.files.list(folder);
  }

  /** Lock files kept here. */
  count(): number {
    return this.files.count();
  }

  keptHere(path: string): boolean {
    return isOfficeLockPath(path);
  }

  keepsLock(document: string, holder: string): boolean {
    return this.files.holds(document, holder);
  }

  moved(from: string, to: string, ctx?: CallContext): Promise<void> {
    return this.files.moved(this.opts.libs.target(from).path, this.opts.libs.target(to).path, ctx);
  }

  start(): Promise<void> {
    return this.files.start();
  }

  close(): Promise<void> {
    return this.files.close();
  }

  /** The folder of lock file `path` must be there (as for any new file). */
  private async folderOf(path: string, ctx?: CallContext): Promise<void> {
    const t = this.opts.libs.target(path);
    await this.opts.lookups.needFolder(t.lib!, parentOf(t.fullpath), ctx);
  }

  /** A rename or copy with a lock file at either end: both ends must be lock files (they are not the service's). */
  private async transfer(verb: 'rename' | 'copy', from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext): Promise<void> {
    const a = this.opts.libs.target(from);
    const b = this.opts.libs.target(to);
    if (verb === 'rename' && a.path === b.path) return this.opts.writable(from);
    this.opts.writable(b.path);
    if (!isOfficeLockPath(a.path) || !isOfficeLockPath(b.path)) throw new VfsError('EXDEV', `lock files stay on the gateway: ${a.path} → ${b.path} is not a move between lock files`);
    if (!b.lib) throw new VfsError('EISDIR', `${verb}: the root is a folder`);
    await this.folderOf(b.path, ctx);
    await this.files[verb](a.path, b.path, opts, ctx);
  }
}
