/**
 * Entry rows (files and folders of a library) and their records as the API answers them.
 */
import type { FileRecord } from '../../shared/records.js';

export const EntryState = { Present: 0, Recycled: 1, Removed: 2 } as const;

export interface EntryRow {
  id: number;
  library_id: number;
  hash: string;
  parent_id: number | null;
  fullpath: string;
  name: string;
  dir: number;
  filehash: string;
  filesize: number;
  create_member_id: number;
  create_member_name: string;
  create_ms: number;
  last_member_id: number;
  last_member_name: string;
  last_ms: number;
  op_ms: number;
  state: number;
  tags: string;
  lock_member_id: number | null;
  lock_member_name: string | null;
  recycle_root: number | null;
  recycled_ms: number | null;
  recycled_by: string | null;
}

/** Who acts: a member id (0 when the operator is not a cloud user) and the name shown. */
/**
 * Who makes a change: a member (`id`) or a name a library authorization gives (`id` 0). `account`: the
 * member's account, for a member acting with their own token: a lock a library authorization took naming
 * that account (`op_name`) is theirs.
 */
export interface Operator { id: number; name: string; account?: string }

/** Every simple permission: the library file API acts with top authority. */
export const ALL_PERMISSIONS = ['file_preview', 'file_read', 'file_upload', 'file_write', 'file_delete', 'file_link'];

export const seconds = (ms: number): number => Math.floor(ms / 1000);

/** Tags as stored: `;a;b;` (so that `LIKE '%;a;%'` finds one). */
export function tagsColumn(tags: readonly string[]): string {
  return tags.length ? `;${tags.join(';')};` : '';
}

export function tagsOf(column: string): string[] {
  return column.split(';').filter((t) => t !== '');
}

/** Splits a `;`-separated tag parameter into distinct trimmed tags. */
export function parseTags(param: string): string[] {
  return [...new Set(param.split(';').map((t) => t.trim()).filter((t) => t !== ''))];
}

export function basicFields(row: EntryRow) {
  return {
    hash: row.hash,
    dir: row.dir,
    fullpath: row.fullpath,
    filename: row.name,
    filehash: row.dir ? '' : row.filehash,
    filesize: row.dir ? 0 : row.filesize,
    create_member_name: row.create_member_name,
    create_dateline: seconds(row.create_ms),
    last_member_name: row.last_member_name,
    last_dateline: seconds(row.last_ms),
  };
}

/** The file record; `inherit` is false for a folder whose permission inheritance was turned off. */
export function toFileRecord(row: EntryRow, inherit = true): FileRecord {
  return {
    ...basicFields(row),
    property: { tag: tagsOf(row.tags).join(';'), op_name: row.last_member_name, inherit: inherit ? 1 : 0, permisson: ALL_PERMISSIONS },
  };
}
