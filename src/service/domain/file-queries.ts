/**
 * Read-only views of a library's tree: listing, search, recycle bin, history, statistics and the
 * updates feed (spec "updates" rules 1–4).
 */
import type { FileList, FileRecord, HistoryList, LibraryStat, RecycleList, UpdateItem, Updates } from '../../shared/records.js';
import type { MetadataStore } from '../store/metadata-store.js';
import type { Directory } from './directory.js';
import { FaultCode, ServiceFault, badParam, fileMissing } from './fault.js';
import { basicFields, seconds, toFileRecord, type EntryRow } from './entries.js';
import { ACT_NAMES, escapeLike, type FileTree } from './file-tree.js';
import { MetadataTemplates, shownValues } from './metadata.js';

/** Items per page of `updates` (spec rule 3). */
export const UPDATES_PAGE = 100;

export interface Page { start: number; size: number }

const RECYCLE_ORDERS: Record<string, string> = {
  filename: 'name', filesize: 'filesize', fullpath: 'fullpath', last_dateline: 'last_ms', dateline: 'recycled_ms', create_dateline: 'create_ms',
};

export class FileQueries {
  private readonly db: MetadataStore;
  private readonly metadata: MetadataTemplates;

  constructor(private readonly tree: FileTree, private readonly directory: Directory) {
    this.db = tree.db;
    this.metadata = new MetadataTemplates(tree.db);
  }

  /**
   * File records of `rows`, with `property.inherit` 0 for folders whose inheritance is off (one query per
   * 500 folders), and `metadata` (template key → attribute → value) on the entries whose metadata has
   * attributes shown in file lists (`display`).
   */
  async records(rows: EntryRow[]): Promise<FileRecord[]> {
    const dirs = rows.filter((r) => r.dir).map((r) => r.id);
    const off = new Set<number>();
    for (let i = 0; i < dirs.length; i += 500) {
      const some = dirs.slice(i, i + 500);
      const found = await this.db.all<{ entry_id: number }>(`SELECT entry_id FROM folder_inherit WHERE inherit = 0 AND entry_id IN (${some.map(() => '?').join(', ')})`, some);
      for (const r of found) off.add(r.entry_id);
    }
    const shown = await this.metadata.displayed(rows.map((r) => r.id));
    return rows.map((r) => {
      const record = toFileRecord(r, !off.has(r.id));
      const metadata = shown.get(r.id);
      return metadata ? { ...record, metadata } : record;
    });
  }

  /**
   * An entry by `fullpath` or `hash` (the spec's one-of pair, as FileTree.resolve) with its file record
   * (as `records` makes it) and every metadata value set on it (template key → attribute → value), in one statement: the
   * entry joined with its metadata rows, one row per template (one row with none).
   */
  async details(libraryId: number, ref: { fullpath?: string; hash?: string }): Promise<{ row: EntryRow; record: FileRecord; metadata: Record<string, Record<string, unknown>> | undefined }> {
    const byHash = ref.hash !== undefined;
    const missing = byHash ? ref.hash! : ref.fullpath ?? '';
    if (!byHash && missing === '') throw fileMissing(missing);
    const rows = await this.db.all<EntryRow & { details_inherit: number | null; details_key: string | null; details_metadata: string | null; details_display: string | null }>(
      `SELECT e.*, (SELECT i.inherit FROM folder_inherit i WHERE i.entry_id = e.id) AS details_inherit,
          m.key AS details_key, m.metadata AS details_metadata, m.display AS details_display
        FROM entries e LEFT JOIN entry_metadata m ON m.entry_id = e.id
        WHERE e.library_id = ? AND ${byHash ? 'e.hash' : 'e.fullpath'} = ? AND e.state = 0 ORDER BY m.key`, [libraryId, missing]);
    const first = rows[0];
    if (!first) throw fileMissing(missing);
    const { details_inherit: inherit, details_key: _k, details_metadata: _m, details_display: _d, ...row } = first;
    const all: Record<string, Record<string, unknown>> = {};
    const shown: Record<string, Record<string, unknown>> = {};
    for (const r of rows) {
      if (r.details_key === null) continue;
      const values = JSON.parse(r.details_metadata!) as Record<string, unknown>;
      all[r.details_key] = values;
      const s = shownValues(values, r.details_display ?? '');
      if (s) shown[r.details_key] = s;
    }
    const record = toFileRecord(row, !(row.dir && inherit === 0));
    return {
      row,
      record: Object.keys(shown).length ? { ...record, metadata: shown } : record,
      metadata: Object.keys(all).length ? all : undefined,
    };
  }

  /** Children of a folder (folders first, then by name), or entries by `tag` at any depth, or by `hashs`. */
  async ls(libraryId: number, folder: string, opts: Page & { tags?: string[]; hashs?: string[] }): Promise<FileList> {
    if (folder !== '' && !opts.hashs && !opts.tags) {
      // The common listing in one statement: the folder, the page, the count and the folders'
      // inheritance; a page with no row says nothing of the folder, so the path is then looked up.
      const rows = await this.db.all<EntryRow & { ls_count: number; ls_inherit: number | null }>(
        `SELECT e.*, COUNT(*) OVER () AS ls_count, (SELECT i.inherit FROM folder_inherit i WHERE i.entry_id = e.id) AS ls_inherit FROM entries e
          WHERE e.parent_id = (SELECT f.id FROM entries f WHERE f.library_id = ? AND f.fullpath = ? AND f.state = 0 AND f.dir = 1) AND e.state = 0
          ORDER BY e.dir DESC, e.name LIMIT ? OFFSET ?`, [libraryId, folder, opts.size, opts.start]);
      if (rows.length > 0) {
        return {
          count: Number(rows[0]!.ls_count),
          list: rows.map(({ ls_count: _count, ls_inherit: inherit, ...row }) => toFileRecord(row, !(row.dir && inherit === 0))),
        };
      }
    }
    const parentId = await this.tree.folderId(libraryId, folder);
    if (opts.hashs) {
      const marks = opts.hashs.map(() => '?').join(',');
      const rows = await this.db.all(`SELECT * FROM entries WHERE library_id = ? AND state = 0 AND hash IN (${marks}) ORDER BY dir DESC, name`, [libraryId, ...opts.hashs]) as EntryRow[];
      return { count: rows.length, list: await this.records(rows.slice(opts.start, opts.start + opts.size)) };
    }
    if (opts.tags) {
      const rows = await this.tree.withTags(libraryId, opts.tags, folder, 0);
      return { count: rows.length, list: await this.records(rows.slice(opts.start, opts.start + opts.size)) };
    }
    const where = parentId === null ? 'library_id = ? AND parent_id IS NULL AND state = 0' : 'parent_id = ? AND state = 0';
    const key = parentId ?? libraryId;
    const count = (await this.db.get(`SELECT COUNT(*) AS n FROM entries WHERE ${where}`, [key]) as { n: number }).n;
    const rows = await this.db.all(`SELECT * FROM entries WHERE ${where} ORDER BY dir DESC, name LIMIT ? OFFSET ?`, [key, opts.size, opts.start]) as EntryRow[];
    return { count, list: await this.records(rows) };
  }

  /** Entries below `path` whose name (scope filename) or tags (scope tag) contain `keywords`. */
  async search(libraryId: number, keywords: string, path: string, scope: { filename: boolean; tag: boolean }, page: Page): Promise<FileList> {
    await this.tree.folderId(libraryId, path);
    const like = `%${escapeLike(keywords)}%`;
    const conds: string[] = [];
    const args: (string | number)[] = [libraryId];
    if (scope.filename) { conds.push("LOWER(name) LIKE LOWER(?) ESCAPE '\\'"); args.push(like); }
    if (scope.tag) { conds.push("LOWER(tags) LIKE LOWER(?) ESCAPE '\\'"); args.push(like); }
    const inPath = path === '' ? '' : 'AND fullpath > ? AND fullpath < ?';
    if (path !== '') args.push(`${path}/`, `${path}0`);
    const sql = `FROM entries WHERE library_id = ? AND state = 0 AND (${conds.join(' OR ')}) ${inPath}`;
    const count = (await this.db.get(`SELECT COUNT(*) AS n ${sql}`, [...args]) as { n: number }).n;
    const rows = await this.db.all(`SELECT * ${sql} ORDER BY dir DESC, fullpath LIMIT ? OFFSET ?`, [...args, page.size, page.start]) as EntryRow[];
    return { count, list: await this.records(rows) };
  }

  /** Items deleted to the recycle bin (one per `del`), newest first unless `order` says otherwise. */
  async recycle(libraryId: number, page: Page, order?: string, keyword?: string): Promise<RecycleList> {
    let orderBy = 'recycled_ms DESC, id DESC';
    if (order) {
      const m = /^\s*([a-z_]+)(?:[\s_]+(asc|desc))?\s*$/i.exec(order);
      const column = m ? RECYCLE_ORDERS[m[1]!.toLowerCase()] : undefined;
      if (!column) throw badParam('order', `one of ${Object.keys(RECYCLE_ORDERS).join(', ')} (optionally followed by asc or desc)`, order);
      orderBy = `${column} ${(m![2] ?? 'asc').toUpperCase()}, id DESC`;
    }
    const args: (string | number)[] = [libraryId];
    let filter = '';
    if (keyword) { filter = "AND LOWER(name) LIKE LOWER(?) ESCAPE '\\'"; args.push(`%${escapeLike(keyword)}%`); }
    const sql = `FROM entries WHERE library_id = ? AND state = 1 AND recycle_root = id ${filter}`;
    const count = (await this.db.get(`SELECT COUNT(*) AS n ${sql}`, [...args]) as { n: number }).n;
    const rows = await this.db.all(`SELECT * ${sql} ORDER BY ${orderBy} LIMIT ? OFFSET ?`, [...args, page.size, page.start]) as EntryRow[];
    return { count, list: rows.map(basicFields) };
  }

  /** Events of a file or folder, newest first. */
  async history(libraryId: number, fullpath: string, page: Page): Promise<HistoryList> {
    const row = await this.tree.require(libraryId, fullpath);
    const count = (await this.db.get('SELECT COUNT(*) AS n FROM file_events WHERE entry_id = ?', [row.id]) as { n: number }).n;
    const events = await this.db.all('SELECT * FROM file_events WHERE entry_id = ? ORDER BY id DESC LIMIT ? OFFSET ?', [row.id, page.size, page.start]) as EventRow[];
    return {
      count,
      list: events.map((e) => ({
        hid: String(e.id), act: e.act, act_name: ACT_NAMES[e.act] ?? String(e.act), dir: e.dir, hash: e.hash, fullpath: e.fullpath,
        filename: e.fullpath.slice(e.fullpath.lastIndexOf('/') + 1), filehash: e.filehash, filesize: e.filesize,
        member_id: e.member_id, member_name: e.member_name, dateline: seconds(e.ms), property: e.property,
      })),
    };
  }

  /** An event of `row` by its `hid`. */
  async event(row: EntryRow, hid: string): Promise<EventRow> {
    const e = /^\d+$/.test(hid) ? await this.db.get('SELECT * FROM file_events WHERE id = ? AND entry_id = ?', [Number(hid), row.id]) as EventRow | undefined : undefined;
    if (!e) throw new ServiceFault(FaultCode.FileMissing, `no version ${JSON.stringify(hid)} of ${JSON.stringify(row.fullpath)}`);
    return e;
  }

  /** Whether `filehash` is the content of `row` now or of one of its versions. */
  async hasVersion(row: EntryRow, filehash: string): Promise<boolean> {
    if (row.filehash === filehash) return true;
    return !!await this.db.get('SELECT 1 FROM file_events WHERE entry_id = ? AND filehash = ? AND keeps_blob = 1', [row.id, filehash]);
  }

  /** Counts of everything below a folder (all depths) and the size of its files. */
  async folderTotals(row: EntryRow): Promise<{ file_count: number; folder_count: number; files_size: number }> {
    if (!row.dir) return { file_count: 0, folder_count: 0, files_size: 0 };
    const r = await this.db.get('SELECT CAST(SUM(CASE WHEN dir = 0 THEN 1 ELSE 0 END) AS BIGINT) AS files, CAST(SUM(dir) AS BIGINT) AS folders, CAST(SUM(filesize) AS BIGINT) AS size FROM entries WHERE library_id = ? AND state = 0 AND fullpath > ? AND fullpath < ?', [row.library_id, `${row.fullpath}/`, `${row.fullpath}0`]) as { files: number | null; folders: number | null; size: number | null };
    return { file_count: r.files ?? 0, folder_count: r.folders ?? 0, files_size: r.size ?? 0 };
  }

  async stat(libraryId: number): Promise<LibraryStat> {
    const lib = await this.directory.requireLibrary(libraryId);
    return {
      org_id: lib.id, org_name: lib.name, mount_id: lib.mount_id, capacity: lib.capacity, size: lib.size_used,
      size_recycle: lib.size_recycle, count_file: lib.file_count, storage_point: 'local',
    };
  }

  /**
   * The updates feed. `compare`: ascending, after `fetchMs` (0 = from the start), deleted entries as cmd 0;
   * otherwise descending, before `fetchMs` (0 = from now), present entries only. At most 100 items.
   * `libraryId` is the caller's, which authentication found present: the feed polled by every gateway
   * reads no more than its page.
   */
  async updates(libraryId: number, opts: { compare: boolean; fetchMs: number; dir?: number }): Promise<Updates> {
    const dirFilter = opts.dir === 0 || opts.dir === 1 ? `AND dir = ${opts.dir}` : '';
    let rows: EntryRow[];
    if (opts.compare) {
      rows = await this.db.all(`SELECT * FROM entries WHERE library_id = ? AND op_ms > ? ${dirFilter} ORDER BY op_ms LIMIT ?`, [libraryId, opts.fetchMs, UPDATES_PAGE]) as EntryRow[];
    } else {
      const before = opts.fetchMs > 0 ? opts.fetchMs : Number.MAX_SAFE_INTEGER;
      rows = await this.db.all(`SELECT * FROM entries WHERE library_id = ? AND state = 0 AND op_ms < ? ${dirFilter} ORDER BY op_ms DESC LIMIT ?`, [libraryId, before, UPDATES_PAGE]) as EntryRow[];
    }
    const list: UpdateItem[] = rows.map((r) => (opts.compare ? { cmd: r.state === 0 ? 1 : 0, ...basicFields(r) } : basicFields(r)));
    const fetch_dateline = rows.length > 0 ? rows[rows.length - 1]!.op_ms : opts.fetchMs;
    return { fetch_dateline, list };
  }

  /** Changes with an operation time in [begin, end) ms; deleted entries only with `showdel`. */
  async updatesCount(libraryId: number, beginMs: number, endMs: number, showdel: boolean): Promise<number> {
    await this.directory.requireLibrary(libraryId);
    const r = await this.db.get(`SELECT COUNT(*) AS n FROM entries WHERE library_id = ? AND op_ms >= ? AND op_ms < ? ${showdel ? '' : 'AND state = 0'}`, [libraryId, beginMs, endMs]) as { n: number };
    return r.n;
  }
}

export interface EventRow {
  id: number; library_id: number; entry_id: number | null; hash: string; act: number; dir: number; fullpath: string; filehash: string;
  filesize: number; member_id: number; member_name: string; ms: number; property: string; keeps_blob: number;
}

