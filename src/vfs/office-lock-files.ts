/**
 * OfficeLockFiles: the lock files Microsoft Office (`~$name.docx`) and LibreOffice (`.~lock.name.odt#`)
 * make beside a document they open for editing, kept on the gateway's disk and turned into the service's
 * lock of that document, as SeaDrive does (haiwen/seadrive-fuse `repo_tree_is_office_lock_file`).
 *
 * - A lock file made (through the mount or WebDAV) takes the service lock of its document for the maker
 *   (CallContext.lockHolder): another member's writers are refused while it is held. Deleting the lock
 *   file releases it. The lock file itself never reaches the service: it is a file in
 *   `<dataDir>/office-lock-files/` (a mirror of the gateway tree), listed and read in its folder like any
 *   other, so the program finds its own lock.
 * - Which locks were taken because of lock files is written to `<dataDir>/office-locks.json` at once: a
 *   gateway that stops (or crashes) with lock files releases those locks at its next start, and lock
 *   files do not outlive the run that made them (no program holds a document through a mount or a WebDAV
 *   session that went away). A clean close releases them at once.
 * - Office writes `~$` plus the name, except that a long name loses its first two characters (one for a
 *   name of seven): when no file of the exact name is there, the document is the file of the folder whose
 *   name without its first two (then its first one) characters is what follows `~$`.
 * - A lock file whose document is not there, or whose document another member holds locked, is kept all
 *   the same and locks nothing (logged).
 * - A lock file deleted is released after a short grace (`releaseGraceMs`): LibreOffice deletes its lock
 *   file and makes it again around each save, and the document stays locked through that. A clean close
 *   releases at once.
 */
import { createReadStream } from 'node:fs';
import { copyFile, mkdir, open, readFile, rename, rm, stat, utimes, type FileHandle as FsHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Writable } from 'node:stream';
import { writeFileAtomic } from '../shared/atomic-file.js';
import type { Logger } from '../shared/log.js';
import { systemClock, type Clock, type ClockTimer } from './clock.js';
import { VfsError, type Attr, type CallContext, type FileHandle, type Operator } from './types.js';
import type { ClosedCreate, LeaseOpenFlags as OpenFlags, PassthroughSpool, SideJournal } from './engine-lease.js';

const MS_PREFIX = '~$';
const LIBRE_PREFIX = '.~lock.';
const LIBRE_SUFFIX = '#';
/** Largest lock file kept, bytes (Office's are 162, LibreOffice's about 100): a larger one is EFBIG. */
export const OFFICE_LOCK_FILE_MAX_BYTES = 64 * 1024;

/** True for the name of an Office or LibreOffice lock file. */
export function isOfficeLockName(name: string): boolean {
  if (name.startsWith(MS_PREFIX)) return name.length > MS_PREFIX.length;
  return name.startsWith(LIBRE_PREFIX) && name.endsWith(LIBRE_SUFFIX) && name.length > LIBRE_PREFIX.length + LIBRE_SUFFIX.length;
}

/** True for a path inside a library (`/<library>/…`) whose last name is an Office or LibreOffice lock file's. */
export function isOfficeLockPath(path: string): boolean {
  // Asked of every path the Vfs is given: the last name alone, found without splitting the path.
  let end = path.length;
  while (end > 0 && path.charCodeAt(end - 1) === SLASH) end--;
  const slash = path.lastIndexOf('/', end - 1);
  if (!isOfficeLockName(path.slice(slash + 1, end))) return false;
  for (let i = 0; i < slash; i++) if (path.charCodeAt(i) !== SLASH) return true;
  return false;
}

const SLASH = 0x2f;

/**
 * The name of the document lock file `lockName` stands for, among the names of its folder; undefined
 * when none is there.
 */
export function documentNameOf(lockName: string, siblings: readonly string[]): string | undefined {
  if (!isOfficeLockName(lockName)) return undefined;
  const names = siblings.filter((n) => !isOfficeLockName(n));
  if (lockName.startsWith(LIBRE_PREFIX)) {
    const doc = lockName.slice(LIBRE_PREFIX.length, -LIBRE_SUFFIX.length);
    return names.includes(doc) ? doc : undefined;
  }
  const rest = lockName.slice(MS_PREFIX.length);
  if (names.includes(rest)) return rest;
  // A long name: its first characters (code points, as Office counts them) gave way to `~$`.
  const sorted = [...names].sort();
  for (const dropped of [2, 1]) {
    const found = sorted.find((n) => [...n].slice(dropped).join('') === rest);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** What OfficeLockFiles needs of the Vfs: the service lock of a document, and the names of a folder. */
export interface DocumentLocks {
  setLocked(path: string, locked: boolean, ctx?: CallContext): Promise<void>;
  names(folder: string, ctx?: CallContext): Promise<string[]>;
}

export interface OfficeLockFilesOptions {
  /** The Vfs's data folder: lock files under `office-lock-files/`, the locks taken in `office-locks.json`. */
  dataDir: string;
  documents: DocumentLocks;
  logger: Logger;
  /**
   * The folder of the journal's spools, where a front end that hands new files to the kernel made the
   * spool of one (OpenFlags.journalId and spoolMade, FileHandle.adoptSpool); undefined when it makes none.
   */
  spoolFolder?: () => string | undefined;
  /**
   * How long a document stays locked after its lock file is deleted, ms, so that the same maker making a
   * lock file for it again meanwhile (LibreOffice, around a save) keeps it locked throughout. Default 0
   * (released at once).
   */
  releaseGraceMs?: number;
  /** The time of the grace. Default the real one. */
  clock?: Clock;
}

/** A service lock taken because of a lock file (what `office-locks.json` keeps). */
interface TakenLock {
  /** Gateway path of the lock file. */
  lockFile: string;
  /** Gateway path of the document locked. */
  document: string;
  /** CallContext.lockHolder of the maker. */
  holder: string;
  /** Who made it (the service lets only the lock's owner release it). */
  operator?: Operator;
}

function parentPath(path: string): string {
  const at = path.lastIndexOf('/');
  return at <= 0 ? '/' : path.slice(0, at);
}

function nameOf(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

function codeOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException).code;
}

export class OfficeLockFiles {
  private readonly root: string;
  private readonly recordFile: string;
  /** Lock files present, by folder (gateway path): every one is made through this object, none survives a start. */
  private readonly present = new Map<string, Set<string>>();
  /** Locks taken, by lock file path; written to `recordFile` after each change (in order, `saving`). */
  private readonly taken = new Map<string, TakenLock>();
  private saving: Promise<void> = Promise.resolve();
  /** The release of what an earlier run took: lock files wait for it before they lock anything. */
  private released: Promise<void> = Promise.resolve();
  /** Releases waiting out their grace, by document and holder: the lock file deleted, its lock still taken. */
  private readonly leaving = new Map<string, { lockFile: string; timer: ClockTimer }>();

  constructor(private readonly opts: OfficeLockFilesOptions) {
    this.root = join(opts.dataDir, 'office-lock-files');
    this.recordFile = join(opts.dataDir, 'office-locks.json');
  }

  /**
   * At start: the lock files of an earlier run are removed, and the locks it took are released in the
   * background (those the service does not take back stay written down for the next start).
   */
  async start(): Promise<void> {
    await rm(this.root, { recursive: true, force: true });
    let earlier: TakenLock[] = [];
    try {
      earlier = JSON.parse(await readFile(this.recordFile, 'utf8')) as TakenLock[];
      if (!Array.isArray(earlier)) earlier = [];
    } catch (err) {
      if (codeOf(err) !== 'ENOENT') this.opts.logger.warn({ err: (err as Error).message }, 'office locks: the record of locks taken is unreadable; none released');
    }
    for (const t of earlier) {
      if (typeof t?.lockFile === 'string' && typeof t.document === 'string' && typeof t.holder === 'string') this.taken.set(t.lockFile, t);
    }
    if (this.taken.size > 0) {
      this.released = this.releaseAll('at start, from the last run').catch((err: unknown) => {
        this.opts.logger.warn({ err: (err as Error).message }, 'office locks: the record of locks taken could not be written');
      });
    }
  }

  /** At a clean close: every lock taken is released, the lock files removed. */
  async close(): Promise<void> {
    for (const l of this.leaving.values()) l.timer.cancel();
    this.leaving.clear();
    await this.released;
    const any = this.present.size > 0;
    this.present.clear();
    if (this.taken.size > 0) await this.releaseAll('at close');
    if (any) await rm(this.root, { recursive: true, force: true });
  }

  /** True while a lock file of this run holds the lock of `document` for `holder`. */
  holds(document: string, holder: string): boolean {
    for (const t of this.taken.values()) if (t.document === document && t.holder === holder && this.known(t.lockFile)) return true;
    return this.leaving.has(leavingKey(document, holder));
  }

  private async releaseAll(when: string): Promise<void> {
    const documents = new Map<string, TakenLock>();
    for (const t of this.taken.values()) documents.set(t.document, t);
    for (const [document, t] of documents) {
      try {
        await this.opts.documents.setLocked(document, false, { lockHolder: t.holder, operator: t.operator });
        for (const [k, t] of this.taken) if (t.document === document) this.taken.delete(k);
        this.opts.logger.info({ path: document }, `office locks: released ${when}`);
      } catch (err) {
        if ((err as VfsError).code === 'ENOENT') {
          for (const [k, t] of this.taken) if (t.document === document) this.taken.delete(k);
          continue;
        }
        this.opts.logger.warn({ path: document, err: (err as Error).message }, `office locks: releasing ${when} failed; tried again at the next start`);
      }
    }
    await this.save();
  }

  private save(): Promise<void> {
    const snapshot = JSON.stringify([...this.taken.values()]);
    this.saving = this.saving.then(() => writeFileAtomic(this.recordFile, snapshot, { durability: 'fsync-file', mode: 0o600 }));
    return this.saving;
  }

  private local(path: string): string {
    return join(this.root, ...path.split('/').filter((s) => s !== ''));
  }

  private known(path: string): boolean {
    return this.present.get(parentPath(path))?.has(nameOf(path)) ?? false;
  }

  private mark(path: string, there: boolean): void {
    const folder = parentPath(path);
    let names = this.present.get(folder);
    if (there) {
      if (!names) this.present.set(folder, (names = new Set()));
      names.add(nameOf(path));
    } else if (names) {
      names.delete(nameOf(path));
      if (names.size === 0) this.present.delete(folder);
    }
  }

  /** Names of the lock files of a folder (gateway path). */
  namesIn(folder: string): string[] {
    return [...(this.present.get(folder) ?? [])];
  }

  async stat(path: string): Promise<Attr> {
    if (!this.known(path)) throw new VfsError('ENOENT', `no such file: ${path}`);
    const s = await stat(this.local(path));
    return { path, name: nameOf(path), isDir: false, size: s.size, mtimeMs: s.mtimeMs, ctimeMs: s.birthtimeMs || s.ctimeMs };
  }

  async list(folder: string): Promise<Attr[]> {
    const out: Attr[] = [];
    for (const name of this.namesIn(folder)) out.push(await this.stat(`${folder === '/' ? '' : folder}/${name}`));
    return out;
  }

  async open(path: string, flags: OpenFlags, ctx?: CallContext): Promise<FileHandle> {
    const exists = this.known(path);
    if (exists && flags.create && flags.exclusive) throw new VfsError('EEXIST', `${path} exists`);
    if (!exists && !flags.create) throw new VfsError('ENOENT', `no such file: ${path}`);
    const writing = !!(flags.write || flags.create || flags.truncate || flags.append);
    const file = this.local(path);
    if (!exists) await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    const fh = await open(file, writing ? (exists ? 'r+' : 'w+') : 'r', 0o600);
    try {
      if (exists && flags.truncate) await fh.truncate(0);
    } catch (err) {
      await fh.close();
      throw err;
    }
    if (!exists) await this.made(path, ctx);
    const folder = this.opts.spoolFolder?.();
    const spool = !exists && flags.spoolMade && flags.journalId && folder ? join(folder, flags.journalId) : undefined;
    return new LocalLockFileHandle(path, file, fh, writing, () => this.stat(path), spool);
  }

  /** Lock files here. */
  count(): number {
    let n = 0;
    for (const names of this.present.values()) n += names.size;
    return n;
  }

  /** True when lock file `path` is here. */
  has(path: string): boolean {
    return this.known(path);
  }

  /**
   * A new lock file a front end made, wrote and closed by itself (Vfs.createClosed): its bytes are taken
   * from the journal record it wrote (never the journal's: the record is settled as gone), its spool
   * dropped. False when it cannot be made so (a lock file of that name is here already).
   */
  async createClosed(path: string, file: ClosedCreate, journal: SideJournal | undefined, ctx?: CallContext): Promise<boolean> {
    const put = journal?.sideRecordContent(file.closed.record);
    if (!put || `/${put.library}/${put.fullpath}` !== path || this.known(path)) return false;
    await this.writeFile(path, put.data, ctx);
    await journal!.dropSpool(file.journalId);
    return true;
  }

  /** Replaces (or makes) lock file `path` with the bytes of `source`. */
  async writeFile(path: string, source: Readable | Buffer | AsyncIterable<Buffer>, ctx?: CallContext): Promise<Attr> {
    const file = this.local(path);
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    const chunks: Buffer[] = [];
    let size = 0;
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        size += chunk.length;
        if (size > OFFICE_LOCK_FILE_MAX_BYTES) return done(new VfsError('EFBIG', `${path}: a lock file larger than ${OFFICE_LOCK_FILE_MAX_BYTES} bytes`));
        chunks.push(Buffer.from(chunk));
        done();
      },
    });
    await pipeline(Buffer.isBuffer(source) ? [source] : source, sink);
    await writeFileAtomic(file, Buffer.concat(chunks), { durability: 'rename', mode: 0o600 });
    const made = !this.known(path);
    if (made) await this.made(path, ctx);
    return this.stat(path);
  }

  createReadStream(path: string, range: { start?: number; end?: number } = {}): Readable {
    if (!this.known(path)) throw new VfsError('ENOENT', `no such file: ${path}`);
    return createReadStream(this.local(path), range);
  }

  async unlink(path: string): Promise<void> {
    if (!this.known(path)) throw new VfsError('ENOENT', `no such file: ${path}`);
    await rm(this.local(path), { force: true });
    this.mark(path, false);
    await this.release(path);
  }

  /** Renames lock file `from` to lock file name `to`: the lock of the old document goes, the new one's is taken. */
  async rename(from: string, to: string, opts: { noReplace?: boolean } = {}, ctx?: CallContext): Promise<void> {
    if (!this.known(from)) throw new VfsError('ENOENT', `no such file: ${from}`);
    if (from === to) return;
    if (this.known(to)) {
      if (opts.noReplace) throw new VfsError('EEXIST', `${to} exists`);
      await this.unlink(to);
    }
    await mkdir(dirname(this.local(to)), { recursive: true, mode: 0o700 });
    await rename(this.local(from), this.local(to));
    this.mark(from, false);
    await this.release(from);
    await this.made(to, ctx);
  }

  async copy(from: string, to: string, opts: { noReplace?: boolean } = {}, ctx?: CallContext): Promise<void> {
    if (!this.known(from)) throw new VfsError('ENOENT', `no such file: ${from}`);
    if (this.known(to) && opts.noReplace) throw new VfsError('EEXIST', `${to} exists`);
    await mkdir(dirname(this.local(to)), { recursive: true, mode: 0o700 });
    await copyFile(this.local(from), this.local(to));
    if (!this.known(to)) await this.made(to, ctx);
  }

  async setTimes(path: string, mtimeMs: number): Promise<void> {
    if (!this.known(path)) throw new VfsError('ENOENT', `no such file: ${path}`);
    await utimes(this.local(path), mtimeMs / 1000, mtimeMs / 1000);
  }

  /**
   * A file or folder of the service was renamed from `from` to `to`: lock files in a folder moved go with
   * it, and a document replaced by the rename (a program saving through a temporary file) is locked again
   * for the lock file that stands for it.
   */
  async moved(from: string, to: string, ctx?: CallContext): Promise<void> {
    const within = (p: string): boolean => p.startsWith(`${from}/`);
    const moved = (p: string): string => `${to}${p.slice(from.length)}`;
    // A lock file of the folder waiting out its grace: the save it waited for is over, released now.
    for (const [key, l] of [...this.leaving]) {
      if (!within(l.lockFile)) continue;
      l.timer.cancel();
      this.leaving.delete(key);
      const t = this.taken.get(l.lockFile);
      if (t && within(t.document)) this.taken.set(l.lockFile, { ...t, document: moved(t.document) }); // moved already
      await this.releaseNow(l.lockFile);
    }
    const folders = [...this.present.keys()].filter((f) => f === from || within(f));
    if (folders.length > 0) {
      const target = this.local(to);
      await rm(target, { recursive: true, force: true });
      await mkdir(dirname(target), { recursive: true, mode: 0o700 });
      await rename(this.local(from), target);
      for (const f of folders) {
        const names = this.present.get(f)!;
        this.present.delete(f);
        this.present.set(moved(f), names);
      }
      for (const [k, t] of [...this.taken]) {
        if (!within(k)) continue;
        this.taken.delete(k);
        this.taken.set(moved(k), { ...t, lockFile: moved(t.lockFile), document: within(t.document) ? moved(t.document) : t.document });
      }
      await this.save();
    }
    await this.documentReplaced(to, ctx);
  }

  private async documentReplaced(path: string, ctx?: CallContext): Promise<void> {
    const t = [...this.taken.values()].find((x) => x.document === path && (this.known(x.lockFile) || this.leaving.get(leavingKey(x.document, x.holder))?.lockFile === x.lockFile));
    if (!t) return;
    try {
      await this.opts.documents.setLocked(path, true, { ...ctx, lockHolder: t.holder, operator: t.operator });
    } catch (err) {
      this.opts.logger.warn({ path, err: (err as Error).message }, 'office locks: the lock could not be taken again on the saved document');
    }
  }

  /** Lock file `path` was made: it is present, and its document locked for the maker. */
  private async made(path: string, ctx?: CallContext): Promise<void> {
    this.mark(path, true);
    await this.released;
    const folder = parentPath(path);
    let names: string[];
    try {
      names = await this.opts.documents.names(folder, ctx);
    } catch (err) {
      this.opts.logger.warn({ path, err: (err as Error).message }, 'office locks: the folder of a lock file could not be listed; nothing locked');
      return;
    }
    const doc = documentNameOf(nameOf(path), names);
    if (doc === undefined) {
      this.opts.logger.info({ path }, 'office locks: a lock file without its document beside it; nothing locked');
      return;
    }
    const document = `${folder === '/' ? '' : folder}/${doc}`;
    const holder = ctx?.lockHolder ?? '';
    // A lock file of the same maker deleted within the grace: its lock was never released, and goes on.
    const leaving = this.leaving.get(leavingKey(document, holder));
    if (leaving) {
      leaving.timer.cancel();
      this.leaving.delete(leavingKey(document, holder));
      if (leaving.lockFile !== path) this.taken.delete(leaving.lockFile);
    }
    // Another lock file of this run holds it already (one of an earlier run not released yet does not count).
    const already = !!leaving || [...this.taken.values()].some((t) => t.document === document && t.holder === holder && t.lockFile !== path && this.known(t.lockFile));
    if (!already) {
      try {
        await this.opts.documents.setLocked(document, true, ctx);
      } catch (err) {
        this.opts.logger.warn({ path: document, lockFile: path, err: (err as Error).message }, 'office locks: the document could not be locked (kept unlocked here)');
        return;
      }
      this.opts.logger.info({ path: document, lockFile: path }, 'office locks: document locked on the service for its lock file');
    }
    this.taken.set(path, { lockFile: path, document, holder, ...(ctx?.operator ? { operator: ctx.operator } : {}) });
    await this.save();
  }

  /**
   * Lock file `path` went: its document's lock is released when no other lock file holds it, after the
   * grace (at once without one).
   */
  private async release(path: string): Promise<void> {
    const t = this.taken.get(path);
    if (!t) return;
    const grace = this.opts.releaseGraceMs ?? 0;
    const key = leavingKey(t.document, t.holder);
    const still = [...this.taken.values()].some((x) => x !== t && x.document === t.document && this.known(x.lockFile));
    if (grace > 0 && !still) {
      if (this.leaving.has(key)) {
        // Another lock file of the same maker for the document is waiting out its grace: that one releases.
        this.taken.delete(path);
        await this.save();
        return;
      }
      const timer = (this.opts.clock ?? systemClock).after(grace, () => {
        if (this.leaving.get(key)?.timer !== timer) return;
        this.leaving.delete(key);
        this.releaseNow(path).catch((err: unknown) => this.opts.logger.warn({ path: t.document, err: (err as Error).message }, 'office locks: the record of locks taken could not be written'));
      });
      this.leaving.set(key, { lockFile: path, timer });
      return;
    }
    await this.releaseNow(path);
  }

  private async releaseNow(path: string): Promise<void> {
    const t = this.taken.get(path);
    if (!t || this.known(path)) return;
    this.taken.delete(path);
    const still = [...this.taken.values()].some((x) => x.document === t.document && this.known(x.lockFile));
    if (!still) {
      try {
        await this.opts.documents.setLocked(t.document, false, { lockHolder: t.holder, operator: t.operator });
        this.opts.logger.info({ path: t.document, lockFile: path }, 'office locks: document unlocked, its lock file removed');
      } catch (err) {
        if ((err as VfsError).code !== 'ENOENT') {
          // Kept written down: the next start releases it.
          this.taken.set(path, t);
          this.opts.logger.warn({ path: t.document, err: (err as Error).message }, 'office locks: releasing the document failed; tried again at the next start');
        }
      }
    }
    await this.save();
  }
}

/** An open lock file: a descriptor of its local file. */
class LocalLockFileHandle implements FileHandle {
  constructor(
    readonly path: string, private readonly file: string, private readonly fh: FsHandle, private readonly writing: boolean,
    private readonly attr: () => Promise<Attr>, private readonly spool?: string,
  ) {}

  /**
   * A lock file made by a front end that had the kernel write the spool it made (FileHandle.adoptSpool):
   * that spool becomes the lock file (moved into place), handed to the kernel.
   */
  async adoptSpool(): Promise<PassthroughSpool | undefined> {
    if (!this.spool) return undefined;
    await rename(this.spool, this.file);
    const fh = await open(this.file, 'r+');
    return { fd: fh.fd, end: () => void fh.close().catch(() => undefined) };
  }

  async read(position: number, length: number): Promise<Buffer> {
    const buf = Buffer.alloc(Math.min(length, OFFICE_LOCK_FILE_MAX_BYTES));
    const { bytesRead } = await this.fh.read(buf, 0, buf.length, position);
    return buf.subarray(0, bytesRead);
  }

  async write(position: number, data: Buffer): Promise<number> {
    if (!this.writing) throw new VfsError('EACCES', `${this.path} was opened read-only`);
    if (position + data.length > OFFICE_LOCK_FILE_MAX_BYTES) throw new VfsError('EFBIG', `${this.path}: a lock file larger than ${OFFICE_LOCK_FILE_MAX_BYTES} bytes`);
    const { bytesWritten } = await this.fh.write(data, 0, data.length, position);
    return bytesWritten;
  }

  async truncate(size: number): Promise<void> {
    if (!this.writing) throw new VfsError('EACCES', `${this.path} was opened read-only`);
    if (size > OFFICE_LOCK_FILE_MAX_BYTES) throw new VfsError('EFBIG', `${this.path}: a lock file larger than ${OFFICE_LOCK_FILE_MAX_BYTES} bytes`);
    await this.fh.truncate(size);
  }

  stat(): Promise<Attr> {
    return this.attr();
  }

  async flush(): Promise<void> {}

  async fsync(): Promise<void> {}

  async release(): Promise<void> {
    await this.fh.close();
  }
}

function leavingKey(document: string, holder: string): string {
  return `${holder}\0${document}`;
}
