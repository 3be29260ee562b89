/**
 * Favorites: a member's marked files and folders, in lists by `fav_id` (-1 = the default list; other
 * ids are lists of the member's own numbering, created by their first use). A favorite follows its
 * entry (by id) through renames and moves; entries no longer present drop out of the list.
 */
import type { Db } from '../store/database.js';
import type { EntryRow } from './entries.js';

export const DEFAULT_FAVORITES = -1;

export class Favorites {
  constructor(private readonly db: Db, private readonly clock: () => number) {}

  /** Adds an entry (adding it again changes nothing). */
  add(memberId: number, favId: number, entry: EntryRow): void {
    this.db.prepare('INSERT OR IGNORE INTO favorites (member_id, fav_id, entry_id, created_ms) VALUES (?, ?, ?, ?)').run(memberId, favId, entry.id, this.clock());
  }

  /** Removes an entry; false when it was not in the list. */
  remove(memberId: number, favId: number, entry: EntryRow): boolean {
    return this.db.prepare('DELETE FROM favorites WHERE member_id = ? AND fav_id = ? AND entry_id = ?').run(memberId, favId, entry.id).changes > 0;
  }

  /** Present entries of a list, newest favorite first. */
  entries(memberId: number, favId: number): EntryRow[] {
    return this.db.prepare(`SELECT e.* FROM favorites f JOIN entries e ON e.id = f.entry_id
      WHERE f.member_id = ? AND f.fav_id = ? AND e.state = 0 ORDER BY f.created_ms DESC, e.id`).all(memberId, favId) as EntryRow[];
  }
}
