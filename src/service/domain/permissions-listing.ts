/**
 * MemberListing: the lists of the user file API as one member sees them — a folder's children, files by
 * kind, search — keeping only what the member may display (MemberAccess), then ordering and paging.
 */
import type { MetadataStore } from '../store/metadata-store.js';
import type { EntryRow } from './entries.js';
import { badParam } from './fault.js';
import { escapeLike, type FileTree } from './file-tree.js';
import type { MemberAccess } from './permissions-access.js';
import { filterInOrder } from './in-order.js';

export interface ListPage { start: number; size: number }

/** `ls` `sort` kinds: 1 video, 2 audio, 3 image, 5 document (by extension). */
export const KIND_EXTENSIONS: Readonly<Record<number, readonly string[]>> = {
  1: ['mp4', 'mkv', 'mov', 'avi', 'wmv', 'flv', 'webm', 'm4v', 'mpg', 'mpeg', '3gp'],
  2: ['mp3', 'wav', 'flac', 'aac', 'ogg', 'm4a', 'wma', 'opus'],
  3: ['jpg', 'jpeg', 'png', 'gif', 'bmp', 'webp', 'svg', 'tif', 'tiff', 'heic', 'ico'],
  5: ['doc', 'docx', 'xls', 'xlsx', 'ppt', 'pptx', 'pdf', 'txt', 'md', 'rtf', 'odt', 'ods', 'odp', 'csv', 'wps'],
};

const ORDERS: Record<string, { key: (r: EntryRow) => string | number; desc: boolean }> = {
  last_dateline: { key: (r) => r.last_ms, desc: true },
  filename: { key: (r) => r.name, desc: false },
  filesize: { key: (r) => r.filesize, desc: true },
};

export const extensionOf = (name: string): string => {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
};

/** Parses `order`: a field of ORDERS, optionally followed by `asc`/`desc` (space or `_`). */
export function parseOrder(order: string | undefined): (a: EntryRow, b: EntryRow) => number {
  const m = /^\s*([a-z_]+?)(?:[\s_]+(asc|desc))?\s*$/i.exec(order || 'last_dateline');
  const spec = m ? ORDERS[m[1]!.toLowerCase()] : undefined;
  if (!spec) throw badParam('order', `one of ${Object.keys(ORDERS).join(', ')} (optionally followed by asc or desc)`, order);
  const desc = m![2] ? m![2].toLowerCase() === 'desc' : spec.desc;
  return (a, b) => {
    const x = spec.key(a);
    const y = spec.key(b);
    const c = x < y ? -1 : x > y ? 1 : a.id - b.id;
    return desc ? -c : c;
  };
}

export class MemberListing {
  private readonly db: MetadataStore;

  constructor(private readonly tree: FileTree) {
    this.db = tree.db;
  }

  /** Children of a folder (0 = root) the member may display; folders first, then by `order`. */
  async children(access: MemberAccess, folderId: number, opts: { dirsOnly: boolean; order?: string }): Promise<EntryRow[]> {
    const sql = folderId === 0
      ? 'SELECT * FROM entries WHERE library_id = ? AND parent_id IS NULL AND state = 0'
      : 'SELECT * FROM entries WHERE parent_id = ? AND state = 0';
    const rows = await filterInOrder((await this.db.all(sql + (opts.dirsOnly ? ' AND dir = 1' : ''), [folderId === 0 ? access.libraryId : folderId]) as EntryRow[]), async (r) => access.mayDisplay(r));
    const cmp = parseOrder(opts.order);
    return rows.sort((a, b) => b.dir - a.dir || cmp(a, b));
  }

  /** Files of one kind anywhere in the library. */
  async byKind(access: MemberAccess, kind: number, order?: string): Promise<EntryRow[]> {
    const exts = KIND_EXTENSIONS[kind];
    if (!exts) throw badParam('sort', '1 (video), 2 (audio), 3 (image) or 5 (document)', kind);
    const set = new Set(exts);
    const rows = await filterInOrder((await this.db.all('SELECT * FROM entries WHERE library_id = ? AND state = 0 AND dir = 0', [access.libraryId]) as EntryRow[]), async (r) => set.has(extensionOf(r.name)) && await access.mayDisplay(r));
    return rows.sort(parseOrder(order));
  }

  /** Entries below `folder` matching `keyword` in the name and/or tags, filtered by `ext`. */
  async search(access: MemberAccess, keyword: string, folder: string, scope: { filename: boolean; tag: boolean }, ext: { dirs: boolean; files: boolean; extensions: Set<string> }): Promise<EntryRow[]> {
    const like = `%${escapeLike(keyword)}%`;
    const conds: string[] = [];
    const args: (string | number)[] = [access.libraryId];
    if (scope.filename) { conds.push("LOWER(name) LIKE LOWER(?) ESCAPE '\\'"); args.push(like); }
    if (scope.tag) { conds.push("LOWER(tags) LIKE LOWER(?) ESCAPE '\\'"); args.push(like); }
    let within = '';
    if (folder !== '') {
      await this.tree.require(access.libraryId, folder);
      within = 'AND fullpath > ? AND fullpath < ?';
      args.push(`${folder}/`, `${folder}0`);
    }
    const rows = await this.db.all(`SELECT * FROM entries WHERE library_id = ? AND state = 0 AND (${conds.join(' OR ')}) ${within} ORDER BY dir DESC, fullpath`, [...args]) as EntryRow[];
    const anyKind = !ext.dirs && !ext.files && ext.extensions.size === 0;
    return filterInOrder(rows, async (r) => {
      const kindOk = anyKind || (r.dir ? ext.dirs : ext.files || ext.extensions.has(extensionOf(r.name)));
      return kindOk && await access.mayDisplay(r);
    });
  }
}

export function page<T>(rows: T[], p: ListPage): { count: number; list: T[] } {
  return { count: rows.length, list: rows.slice(p.start, p.start + p.size) };
}
