/**
 * FileTree: the files and folders of libraries and every change to them. Each public mutation runs in
 * one transaction of the MetadataStore (the building blocks it calls join it): the tree is never seen
 * half-changed, by this process or another. Every entry a change touches gets a new operation time from the
 * OperationClock, which is what the updates feed reads.
 */
import { randomBytes } from 'node:crypto';
import type { MetadataStore } from '../store/metadata-store.js';
import type { Directory, LibraryCapacity } from './directory.js';
import { FaultCode, ServiceFault, fileMissing } from './fault.js';
import { EntryState, tagsColumn, tagsOf, type EntryRow, type Operator } from './entries.js';
import { OperationClock } from './op-clock.js';
import { baseOf, isWithin, joinPath, numberedName, parentOf, pathAndAncestors } from './paths.js';

/** History and log operation codes (spec/decisions.md). */
export const Act = {
  Delete: 0, Create: 1, Rename: 2, Edit: 3, Move: 4, Restore: 5, VersionRestore: 6, Lock: 12, Unlock: 13, Download: 20, Preview: 21,
} as const;

export const ACT_NAMES: Record<number, string> = {
  0: 'delete', 1: 'create', 2: 'rename', 3: 'edit', 4: 'move', 5: 'restore', 6: 'restore version', 12: 'lock', 13: 'unlock',
  20: 'download', 21: 'preview', 1014: 'link created', 1015: 'link visited', 1016: 'link download', 1017: 'link save', 1018: 'link upload',
};

/** Content to place at a path: a blob already stored (row in `blobs`). */
export interface Content { sha1: string; size: number }

export const newHash = (): string => randomBytes(20).toString('hex');

/**
 * The folder an entry goes in: its id, null for the root, or the hash of a folder this transaction
 * inserts and has not sent yet (the statement finds it by its hash, as an event does).
 */
export type ParentRef = number | null | { hash: string };

/** The entries at a path and at every folder above it, as found (one statement: FileTree.lineage). */
type Lineage = Map<string, EntryRow>;

/** What placing content reads first (FileTree.placeReads). */
interface PlaceReads {
  /** The content is stored, and its blob's row locked by this transaction. */
  pinned: boolean;
  /** The file's path and every folder above it, as found. */
  found: Lineage;
  library: Promise<LibraryCapacity>;
  hashTaken: Promise<unknown> | undefined;
}

/** What an event says of its entry (the entry is found by its hash, which never changes). */
export type EventSubject = Pick<EntryRow, 'library_id' | 'hash' | 'dir' | 'fullpath' | 'filehash' | 'filesize' | 'state'>;


export class FileTree {
  readonly opClock: OperationClock;

  constructor(readonly db: MetadataStore, readonly directory: Directory, readonly clock: () => number) {
    this.opClock = new OperationClock(db, clock);
  }

  /**
   * Runs `fn` in one transaction; with `libraryId`, under that library's write lock (what a change of
   * the library's tree needs: see store/metadata-store.ts).
   */
  tx<T>(fn: () => Promise<T>, libraryId?: number): Promise<T> {
    return this.db.tx(fn, libraryId === undefined ? undefined : { library: libraryId });
  }

  // ---- lookups -------------------------------------------------------------------------------------

  async byPath(libraryId: number, fullpath: string): Promise<EntryRow | undefined> {
    if (fullpath === '') return undefined;
    return await this.db.get('SELECT * FROM entries WHERE library_id = ? AND fullpath = ? AND state = 0', [libraryId, fullpath]) as EntryRow | undefined;
  }

  /** The present entries at `fullpaths` (one statement), by path; paths with none are absent. */
  async byPaths(libraryId: number, fullpaths: string[]): Promise<Map<string, EntryRow>> {
    const wanted = [...new Set(fullpaths.filter((p) => p !== ''))];
    if (wanted.length === 0) return new Map();
    const rows = await this.db.all<EntryRow>(`SELECT * FROM entries WHERE library_id = ? AND state = 0 AND fullpath IN (${wanted.map(() => '?').join(', ')})`, [libraryId, ...wanted]);
    return new Map(rows.map((r) => [r.fullpath, r]));
  }

  async byHash(libraryId: number, hash: string): Promise<EntryRow | undefined> {
    return await this.db.get('SELECT * FROM entries WHERE library_id = ? AND hash = ? AND state = 0', [libraryId, hash]) as EntryRow | undefined;
  }

  async byId(id: number): Promise<EntryRow | undefined> {
    return await this.db.get('SELECT * FROM entries WHERE id = ?', [id]) as EntryRow | undefined;
  }

  async require(libraryId: number, fullpath: string): Promise<EntryRow> {
    const row = await this.byPath(libraryId, fullpath);
    if (!row) throw fileMissing(fullpath);
    return row;
  }

  /** The entry named by `fullpath` or `hash` (the spec's one-of pair). */
  async resolve(libraryId: number, ref: { fullpath?: string; hash?: string }): Promise<EntryRow> {
    if (ref.hash !== undefined) {
      const row = await this.byHash(libraryId, ref.hash);
      if (!row) throw fileMissing(ref.hash);
      return row;
    }
    return this.require(libraryId, ref.fullpath ?? '');
  }

  /** Id of the folder at `fullpath` (null for the root); a file there is refused. */
  async folderId(libraryId: number, fullpath: string): Promise<number | null> {
    if (fullpath === '') return null;
    const row = await this.require(libraryId, fullpath);
    if (!row.dir) throw new ServiceFault(FaultCode.NotAFolder, `not a folder: ${JSON.stringify(fullpath)}`);
    return row.id;
  }

  /** Present entries below `row` (not `row` itself), parents before children. */
  async subtree(row: EntryRow): Promise<EntryRow[]> {
    if (!row.dir) return [];
    return this.below(row.library_id, row.fullpath);
  }

  /** Present entries below `fullpath`, parents before children. */
  async below(libraryId: number, fullpath: string): Promise<EntryRow[]> {
    return await this.db.all("SELECT * FROM entries WHERE library_id = ? AND state = 0 AND fullpath > ? AND fullpath < ? ORDER BY fullpath", [libraryId, `${fullpath}/`, `${fullpath}0`]) as EntryRow[];
  }

  /**
   * The present entries at `fullpaths` (by path) and those below `under` (parents before children), in
   * one statement: a change reads what is below its entry before knowing whether it is a folder.
   */
  async atAndBelow(libraryId: number, fullpaths: string[], under: string): Promise<{ at: Map<string, EntryRow>; below: EntryRow[] }> {
    const wanted = [...new Set(fullpaths.filter((p) => p !== ''))];
    const rows = await this.db.all<EntryRow>(`SELECT * FROM entries WHERE library_id = ? AND state = 0 AND (fullpath IN (${wanted.map(() => '?').join(', ')}) OR (fullpath > ? AND fullpath < ?)) ORDER BY fullpath`, [libraryId, ...wanted, `${under}/`, `${under}0`]);
    const at = new Map<string, EntryRow>();
    const below: EntryRow[] = [];
    for (const r of rows) {
      if (wanted.includes(r.fullpath)) at.set(r.fullpath, r);
      else below.push(r);
    }
    return { at, below };
  }

  /** The present entries at `fullpath` and at every folder above it (one statement). */
  lineage(libraryId: number, fullpath: string): Promise<Lineage> {
    return this.byPaths(libraryId, pathAndAncestors(fullpath));
  }

  /** `name` in `folder` if free, else the first free numbered name. */
  async freeName(libraryId: number, folder: string, name: string, isDir: boolean): Promise<string> {
    if (!await this.byPath(libraryId, joinPath(folder, name))) return name;
    for (let n = 1; ; n++) {
      const candidate = numberedName(name, n, isDir);
      if (!await this.byPath(libraryId, joinPath(folder, candidate))) return candidate;
    }
  }

  // ---- building blocks (call inside a transaction) ------------------------------------------------

  /** Creates the folders of `fullpath` that are missing; returns the folder's id (null for the root). */
  async ensureFolder(libraryId: number, fullpath: string, op: Operator): Promise<number | null> {
    const ref = await this.folderRef(libraryId, fullpath, op, await this.lineage(libraryId, fullpath));
    return typeof ref === 'object' && ref !== null ? (await this.byHash(libraryId, ref.hash))!.id : ref;
  }

  /**
   * The folder at `fullpath`, its missing folders created without waiting for their inserts: `found`
   * holds what is present at `fullpath` and above it (FileTree.lineage), so nothing is looked up again.
   */
  private async folderRef(libraryId: number, fullpath: string, op: Operator, found: Lineage): Promise<ParentRef> {
    if (fullpath === '') return null;
    const row = found.get(fullpath);
    if (row) {
      if (!row.dir) throw new ServiceFault(FaultCode.NotAFolder, `not a folder: ${JSON.stringify(fullpath)}`);
      return row.id;
    }
    const parent = await this.folderRef(libraryId, parentOf(fullpath), op, found);
    const { hash } = await this.create(libraryId, parent, fullpath, { dir: 1 }, op, true);
    return { hash };
  }

  async insert(libraryId: number, parent: ParentRef, fullpath: string, what: { dir: number; content?: Content; tags?: string; hash?: string }, op: Operator): Promise<EntryRow> {
    const { sql, params } = await this.insertStatement(libraryId, parent, fullpath, what, op);
    return (await this.db.get<EntryRow>(sql, params))!;
  }

  /** The insert of an entry, with its operation time reserved, and the entry as its event needs it. */
  private async insertStatement(libraryId: number, parent: ParentRef, fullpath: string, what: { dir: number; content?: Content; tags?: string; hash?: string }, op: Operator): Promise<{ sql: string; params: unknown[]; entry: EventSubject }> {
    const now = this.clock();
    const opMs = await this.opClock.next(libraryId);
    const entry: EventSubject = { library_id: libraryId, hash: what.hash ?? newHash(), dir: what.dir, fullpath, filehash: what.content?.sha1 ?? '', filesize: what.content?.size ?? 0, state: EntryState.Present };
    return {
      sql: `INSERT INTO entries (library_id, hash, parent_id, fullpath, name, dir, filehash, filesize,
        create_member_id, create_member_name, create_ms, last_member_id, last_member_name, last_ms, op_ms, state, tags)
        VALUES (?, ?, ${parentSql(parent)}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?) RETURNING *`,
      params: [libraryId, entry.hash, parentParam(parent), fullpath, baseOf(fullpath), what.dir, entry.filehash, entry.filesize, op.id, op.name, now, op.id, op.name, now, opMs, what.tags ?? ''],
      entry,
    };
  }

  /**
   * Creates an entry and its Create event; `written`: the row, `hash`: its hash. `later`: the body does
   * not wait for the row, which is the change's answer: the insert goes with the event and COMMIT (the
   * row once sent).
   */
  private async create(libraryId: number, parent: ParentRef, fullpath: string, what: { dir: number; content?: Content; hash?: string }, op: Operator, later: boolean): Promise<{ written: Promise<EntryRow>; hash: string }> {
    const { sql, params, entry } = await this.insertStatement(libraryId, parent, fullpath, what, op);
    if (!later) {
      const row = (await this.db.get<EntryRow>(sql, params))!;
      await this.event(row, Act.Create, op);
      return { written: Promise.resolve(row), hash: row.hash };
    }
    const { rows } = await this.db.runLater<EntryRow>(sql, params);
    await this.event(entry, Act.Create, op);
    const written = rows.then((r) => r[0]!);
    written.catch(() => undefined); // the transaction fails with it; whoever waits for the row sees it too
    return { written, hash: entry.hash };
  }

  /** Appends a history/log event for `row` (its current path and content unless given). */
  async event(row: EventSubject, act: number, op: Operator, extra: { fullpath?: string; property?: Record<string, unknown> } = {}): Promise<void> {
    const filehash = row.dir ? '' : row.filehash;
    // Nothing in a change reads its own event back: it goes with the change's next statement or COMMIT.
    // The entry by its hash: a new one is known by it before its insert answers.
    await this.db.runLater(`INSERT INTO file_events (library_id, entry_id, hash, act, dir, fullpath, filehash, filesize, member_id, member_name, ms, property, keeps_blob)
        VALUES (?, (SELECT id FROM entries WHERE hash = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, [row.library_id, row.hash, row.hash, act, row.dir, extra.fullpath ?? row.fullpath, filehash, row.dir ? 0 : row.filesize, op.id, op.name, this.clock(), JSON.stringify(extra.property ?? {}), filehash !== '' && row.state !== EntryState.Removed ? 1 : 0]);
  }

  /**
   * Refuses a change of `row` (and, for a folder, of anything below it) locked by another operator;
   * `below`: what is below `row`, when the caller has read it (FileTree.below).
   */
  async checkUnlocked(row: EntryRow, op: Operator, below?: readonly EntryRow[]): Promise<void> {
    const rows = !row.dir ? []
      : below ? below.filter((r) => r.lock_member_name !== null)
        : await this.db.all("SELECT * FROM entries WHERE library_id = ? AND state = 0 AND lock_member_name IS NOT NULL AND fullpath > ? AND fullpath < ?", [row.library_id, `${row.fullpath}/`, `${row.fullpath}0`]) as EntryRow[];
    for (const r of [row, ...rows]) {
      if (r.lock_member_name !== null && !sameOperator(r, op)) {
        throw new ServiceFault(FaultCode.Locked, `${JSON.stringify(r.fullpath)} is locked by ${r.lock_member_name}`);
      }
    }
  }

  /** Refuses growing the library by `delta` bytes past its capacity. */
  async checkCapacity(libraryId: number, delta: number, library?: Promise<LibraryCapacity>): Promise<void> {
    if (delta <= 0) return;
    const lib = await (library ?? this.directory.requireCapacity(libraryId));
    if (lib.capacity >= 0 && lib.size_used + delta > lib.capacity) {
      throw new ServiceFault(FaultCode.CapacityExceeded, `library capacity exceeded: ${lib.size_used} of ${lib.capacity} bytes used, ${delta} more needed`);
    }
  }

  /** Bytes the library may still grow by (Infinity when unlimited). */
  async remainingCapacity(libraryId: number): Promise<number> {
    return remainingBytes(await this.directory.requireCapacity(libraryId));
  }

  async blobStored(sha1: string): Promise<boolean> {
    return !!await this.db.get('SELECT 1 FROM blobs WHERE sha1 = ?', [sha1]);
  }

  /**
   * Whether the blob is stored, locking its row until the transaction ends (an UPDATE that changes
   * nothing): a collection removing it either committed before, or waits and then finds the reference
   * this transaction adds (PostgreSQL starts its SERIALIZABLE transaction over).
   */
  pinBlob(sha1: string): Promise<boolean> {
    // The pin, whose answer no one waits for, and the read after it, issued together (on PostgreSQL in
    // one round trip, the pin first).
    const pinned = this.db.runLater('UPDATE blobs SET refs = refs WHERE sha1 = ?', [sha1]);
    const stored = this.blobStored(sha1);
    return Promise.all([pinned, stored]).then(([, s]) => s);
  }

  /**
   * Records a blob that was just written to the blob store; inside a transaction it goes with the next
   * statement (nobody reads its result).
   */
  async addBlob(content: Content): Promise<void> {
    await this.db.runLater('INSERT INTO blobs (sha1, size, created_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [content.sha1, content.size, this.clock()]);
  }

  // ---- mutations -------------------------------------------------------------------------------------

  /** Creates a folder and its missing parents; an existing name is refused (40901). */
  async createFolder(libraryId: number, fullpath: string, op: Operator): Promise<EntryRow> {
    const { written } = await this.tx(async () => {
      const found = await this.lineage(libraryId, fullpath);
      if (found.has(fullpath)) throw new ServiceFault(FaultCode.NameExists, `${JSON.stringify(fullpath)} already exists`);
      const parent = await this.folderRef(libraryId, parentOf(fullpath), op, found);
      return this.create(libraryId, parent, fullpath, { dir: 1 }, op, true);
    }, libraryId);
    return written;
  }

  /**
   * Places stored content at `fullpath` (call inside a transaction; the blob row exists). An existing file
   * is replaced when `overwrite` (a new version), otherwise the content gets a numbered name.
   */
  async placeContent(libraryId: number, fullpath: string, content: Content, overwrite: boolean, op: Operator, hash?: string): Promise<EntryRow> {
    return (await this.place(libraryId, fullpath, content, overwrite, op, hash, false)).written;
  }

  /**
   * placeContent that returns once the change is issued; `written`: the row. With `later` the body must
   * not wait for it: it comes once the transaction has sent the insert (FileTree.create).
   */
  async place(libraryId: number, fullpath: string, content: Content, overwrite: boolean, op: Operator, hash?: string, later = true): Promise<{ written: Promise<EntryRow> }> {
    const reads = await this.placeReads(libraryId, fullpath, content.sha1, hash);
    if (!reads.pinned) throw new ServiceFault(FaultCode.FileMissing, `content ${content.sha1} is no longer stored; upload it again`);
    return this.placeRead(reads, libraryId, fullpath, content, overwrite, op, hash, later);
  }

  /**
   * `place` (with `later`) when the content is stored; when it is not, nothing written and what was read
   * for it, so that the caller takes another way in the same transaction without reading them again.
   */
  async placeIfStored(libraryId: number, fullpath: string, content: Content, overwrite: boolean, op: Operator): Promise<{ written: Promise<EntryRow> } | { missing: Pick<PlaceReads, 'found' | 'library'> }> {
    const reads = await this.placeReads(libraryId, fullpath, content.sha1);
    if (!reads.pinned) return { missing: reads };
    return this.placeRead(reads, libraryId, fullpath, content, overwrite, op, undefined, true);
  }

  /**
   * What placing content reads first, issued together (on PostgreSQL one round trip): the pin, the paths
   * of the file and of every folder above it, the hash `hash` and the library's capacity (read in the change's
   * transaction, before this change adds to it).
   */
  private async placeReads(libraryId: number, fullpath: string, sha1: string, hash?: string): Promise<PlaceReads> {
    const library = this.directory.requireCapacity(libraryId);
    library.catch(() => undefined); // awaited by the capacity check, or its failure is the pin's or the lookup's
    // A new file takes the hash `hash` when no entry has it: looked up with them.
    const hashTaken = hash === undefined ? undefined : this.db.get('SELECT 1 FROM entries WHERE hash = ?', [hash]);
    hashTaken?.catch(() => undefined); // awaited by the insert, or its failure is the pin's or the lookup's
    const [pinned, found] = await Promise.all([this.pinBlob(sha1), this.lineage(libraryId, fullpath)]);
    return { pinned, found, library, hashTaken };
  }

  private async placeRead(reads: PlaceReads, libraryId: number, fullpath: string, content: Content, overwrite: boolean, op: Operator, hash: string | undefined, later: boolean): Promise<{ written: Promise<EntryRow> }> {
    const { found, library, hashTaken } = reads;
    const folder = parentOf(fullpath);
    const parent = await this.folderRef(libraryId, folder, op, found);
    const existing = found.get(fullpath);
    if (existing && overwrite && !existing.dir) {
      await this.checkUnlocked(existing, op);
      if (existing.filehash === content.sha1 && existing.filesize === content.size) return { written: Promise.resolve(existing) };
      await this.checkCapacity(libraryId, content.size - existing.filesize, library);
      // The new version is known without reading it back (no trigger writes these columns): the update
      // goes with the event and COMMIT.
      const row: EntryRow = { ...existing, filehash: content.sha1, filesize: content.size, last_member_id: op.id, last_member_name: op.name, last_ms: this.clock(), op_ms: await this.opClock.next(libraryId) };
      await this.db.runLater('UPDATE entries SET filehash = ?, filesize = ?, last_member_id = ?, last_member_name = ?, last_ms = ?, op_ms = ? WHERE id = ?', [row.filehash, row.filesize, row.last_member_id, row.last_member_name, row.last_ms, row.op_ms, existing.id]);
      await this.event(row, Act.Edit, op);
      return { written: Promise.resolve(row) };
    }
    await this.checkCapacity(libraryId, content.size, library);
    const name = existing ? await this.freeName(libraryId, folder, baseOf(fullpath), false) : baseOf(fullpath);
    const free = hashTaken !== undefined && !await hashTaken;
    return this.create(libraryId, parent, joinPath(folder, name), { dir: 0, content, hash: free ? hash : undefined }, op, later);
  }

  /** Renames or moves a file or folder (with its whole subtree); `hash` is unchanged. */
  async move(libraryId: number, from: string, to: string, op: Operator): Promise<void> {
    await this.tx(async () => {
      // The entries at both paths and above `to`, and what is below `from` (if a folder): one statement.
      const { at: found, below } = await this.atAndBelow(libraryId, [...pathAndAncestors(to), from], from);
      const src = found.get(from);
      if (!src) throw fileMissing(from);
      if (to === from) return;
      if (isWithin(to, from)) throw new ServiceFault(FaultCode.MoveIntoItself, `cannot move ${JSON.stringify(from)} into itself (${JSON.stringify(to)})`);
      if (found.has(to)) throw new ServiceFault(FaultCode.NameExists, `${JSON.stringify(to)} already exists`);
      await this.checkUnlocked(src, op, below);
      const parent = await this.folderRef(libraryId, parentOf(to), op, found);
      const first = await this.opClock.next(libraryId, 1 + below.length);
      // The moved rows are not read back (no trigger writes these columns): the updates go with the
      // event and COMMIT (on PostgreSQL one round trip).
      await this.db.runLater(`UPDATE entries SET parent_id = ${parentSql(parent)}, fullpath = ?, name = ?, op_ms = ? WHERE id = ?`, [parentParam(parent), to, baseOf(to), first, src.id]);
      for (const [i, d] of below.entries()) {
        await this.db.runLater('UPDATE entries SET fullpath = ?, op_ms = ? WHERE id = ?', [to + d.fullpath.slice(from.length), first + 1 + i, d.id]);
      }
      await this.event({ ...src, fullpath: to }, parentOf(from) === parentOf(to) ? Act.Rename : Act.Move, op, { property: { from } });
    }, libraryId);
  }

  /** Moves a file or folder (with its subtree) to the recycle bin, or removes it for good (`destroy`). */
  async remove(libraryId: number, fullpath: string, destroy: boolean, op: Operator): Promise<void> {
    await this.tx(async () => {
      // The entry and what is below it (if a folder): one statement. The event and the updates go with
      // COMMIT.
      const { at, below } = await this.atAndBelow(libraryId, [fullpath], fullpath);
      const row = at.get(fullpath);
      if (!row) throw fileMissing(fullpath);
      await this.checkUnlocked(row, op, below);
      const all = [row, ...below];
      await this.event(row, Act.Delete, op, { property: destroy ? { destroy: 1 } : {} });
      const first = await this.opClock.next(libraryId, all.length);
      const now = this.clock();
      if (destroy) {
        for (const [i, r] of all.entries()) await this.db.runLater('UPDATE entries SET state = 2, op_ms = ?, recycle_root = NULL WHERE id = ?', [first + i, r.id]);
        await this.releaseEvents(all.map((r) => r.id));
      } else {
        for (const [i, r] of all.entries()) {
          await this.db.runLater('UPDATE entries SET state = 1, op_ms = ?, recycle_root = ?, recycled_ms = ?, recycled_by = ? WHERE id = ?', [first + i, row.id, now, op.name, r.id]);
        }
      }
    }, libraryId);
  }

  /** Deletes (to the bin, or for good) the present entries carrying any of `tags` within `path`. */
  async removeByTags(libraryId: number, tags: string[], path: string, destroy: boolean, op: Operator): Promise<number> {
    return this.tx(async () => {
      const rows = await this.withTags(libraryId, tags, path, EntryState.Present);
      let removed = 0;
      let lastRemoved: string | undefined;
      for (const r of rows) {
        if (lastRemoved !== undefined && isWithin(r.fullpath, lastRemoved)) continue;
        await this.remove(libraryId, r.fullpath, destroy, op);
        lastRemoved = r.fullpath;
        removed++;
      }
      return removed;
    }, libraryId);
  }

  /** Entries in `state` with any of `tags`, within `path`, parents before children. */
  async withTags(libraryId: number, tags: string[], path: string, state: number): Promise<EntryRow[]> {
    if (tags.length === 0) return [];
    const likes = tags.map(() => 'LOWER(tags) LIKE LOWER(?) ESCAPE \'\\\'').join(' OR ');
    const scope = path === '' ? '' : 'AND fullpath > ? AND fullpath < ?';
    const args: (string | number)[] = [libraryId, state, ...tags.map((t) => `%;${escapeLike(t)};%`)];
    if (path !== '') args.push(`${path}/`, `${path}0`);
    return await this.db.all(`SELECT * FROM entries WHERE library_id = ? AND state = ? AND (${likes}) ${scope} ORDER BY fullpath`, [...args]) as EntryRow[];
  }

  /** Items of the recycle bin deleted from `fullpath`, newest first. */
  async binItems(libraryId: number, fullpath: string): Promise<EntryRow[]> {
    return await this.db.all('SELECT * FROM entries WHERE library_id = ? AND state = 1 AND recycle_root = id AND fullpath = ? ORDER BY recycled_ms DESC, id DESC', [libraryId, fullpath]) as EntryRow[];
  }

  /** Removes recycle-bin items for good: by original path, or those with any of `tags`. Present entries named by path are removed too. */
  async destroy(libraryId: number, by: { fullpaths?: string[]; tags?: string[] }, op: Operator): Promise<void> {
    await this.tx(async () => {
      const roots: EntryRow[] = [];
      for (const p of by.fullpaths ?? []) {
        const items = await this.binItems(libraryId, p);
        if (items.length > 0) roots.push(...items);
        else if (await this.byPath(libraryId, p)) await this.remove(libraryId, p, true, op);
        else throw fileMissing(p);
      }
      if (by.tags) roots.push(...(await this.withTags(libraryId, by.tags, '', EntryState.Recycled)).filter((r) => r.recycle_root === r.id));
      for (const root of roots) {
        const ids = (await this.db.all('SELECT id FROM entries WHERE recycle_root = ? AND state = 1', [root.id]) as { id: number }[]).map((r) => r.id);
        for (const id of ids) await this.db.run('UPDATE entries SET state = 2, recycle_root = NULL WHERE id = ?', [id]);
        await this.releaseEvents(ids);
      }
    }, libraryId);
  }

  /** Restores recycle-bin items to their original paths (missing folders are created; a taken name gets a number). */
  async recover(libraryId: number, fullpaths: string[], op: Operator): Promise<EntryRow[]> {
    return this.tx(async () => {
      const restored: EntryRow[] = [];
      for (const p of fullpaths) {
        const root = (await this.binItems(libraryId, p))[0];
        if (!root) throw fileMissing(p);
        const members = await this.db.all('SELECT * FROM entries WHERE recycle_root = ? AND state = 1 ORDER BY fullpath', [root.id]) as EntryRow[];
        const folder = parentOf(p);
        const parentId = await this.ensureFolder(libraryId, folder, op);
        const target = joinPath(folder, await this.freeName(libraryId, folder, root.name, root.dir === 1));
        const first = await this.opClock.next(libraryId, members.length);
        for (const [i, m] of members.entries()) {
          const isRoot = m.id === root.id;
          const fp = isRoot ? target : target + m.fullpath.slice(p.length);
          await this.db.run('UPDATE entries SET state = 0, recycle_root = NULL, recycled_ms = NULL, recycled_by = NULL, fullpath = ?, name = ?, parent_id = ?, op_ms = ? WHERE id = ?',
            [fp, baseOf(fp), isRoot ? parentId : m.parent_id, first + i, m.id]);
        }
        const row = (await this.byId(root.id))!;
        await this.event(row, Act.Restore, op);
        restored.push(row);
      }
      return restored;
    }, libraryId);
  }

  /** Locks or unlocks a file for `op`; a lock held by another operator refuses both. */
  async setLock(libraryId: number, fullpath: string, lock: boolean, op: Operator): Promise<void> {
    await this.tx(async () => {
      const row = await this.require(libraryId, fullpath);
      if (row.lock_member_name !== null && !sameOperator(row, op)) {
        throw new ServiceFault(FaultCode.Locked, `${JSON.stringify(fullpath)} is locked by ${row.lock_member_name}`);
      }
      // The event says nothing of the lock: the row read serves it, and the update, not read back, goes
      // with the event and COMMIT (on PostgreSQL one round trip).
      await this.db.runLater('UPDATE entries SET lock_member_id = ?, lock_member_name = ?, op_ms = ? WHERE id = ?', [lock ? op.id : null, lock ? op.name : null, await this.opClock.next(libraryId), row.id]);
      await this.event(row, lock ? Act.Lock : Act.Unlock, op);
    }, libraryId);
  }

  /** Adds or removes tags of a file or folder. */
  async changeTags(libraryId: number, fullpath: string, tags: string[], add: boolean, _op: Operator): Promise<void> {
    await this.tx(async () => {
      const row = await this.require(libraryId, fullpath);
      const current = tagsOf(row.tags);
      const next = add ? [...new Set([...current, ...tags])] : current.filter((t) => !tags.includes(t));
      await this.db.runLater('UPDATE entries SET tags = ?, op_ms = ? WHERE id = ?', [tagsColumn(next), await this.opClock.next(libraryId), row.id]);
    }, libraryId);
  }

  /** Events of removed entries no longer hold their content. */
  private async releaseEvents(entryIds: number[]): Promise<void> {
    for (const id of entryIds) await this.db.runLater('UPDATE file_events SET keeps_blob = 0 WHERE entry_id = ? AND keeps_blob = 1', [id]);
  }
}

/** The SQL of a parent_id value, and its parameter. */
function parentSql(parent: ParentRef): string {
  return typeof parent === 'object' && parent !== null ? '(SELECT id FROM entries WHERE hash = ?)' : '?';
}

function parentParam(parent: ParentRef): number | string | null {
  return typeof parent === 'object' && parent !== null ? parent.hash : parent;
}

function sameOperator(row: EntryRow, op: Operator): boolean {
  if (row.lock_member_id && op.id) return row.lock_member_id === op.id;
  return row.lock_member_name === op.name || (op.account !== undefined && op.account !== '' && row.lock_member_name === op.account);
}

export function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** Bytes a library may still grow by (Infinity when unlimited). */
export function remainingBytes(lib: LibraryCapacity): number {
  return lib.capacity < 0 ? Infinity : Math.max(0, lib.capacity - lib.size_used);
}
