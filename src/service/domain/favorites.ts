/**
 * Favorites: a member's marked files and folders, in lists by `fav_id` (-1 = the default list; other
 * ids are lists of the member's own numbering, created by their first use). A favorite follows its
 * entry (by id) through renames and moves; entries no longer present drop out of the list.
 */
import type { MetadataStore } from '../store/metadata-store.js';
import type { EntryRow } from './entries.js';

export const DEFAULT_FAVORITES = -1;

export class Favorites {
  constructor(private readonly db: MetadataStore, private readonly clock: () => number) {}

  /** Adds an entry (adding it again changes nothing). */
  async add(memberId: number, favId: number, entry: EntryRow): Promise<void> {
    await this.db.run('INSERT INTO favorites (member_id, fav_id, entry_id, created_ms) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING', [memberId, favId, entry.id, this.clock()]);
  }

  /** Removes an entry; false when it was not in the list. */
  async remove(memberId: number, favId: number, entry: EntryRow): Promise<boolean> {
    return (await this.db.run('DELETE FROM favorites WHERE member_id = ? AND fav_id = ? AND entry_id = ?', [memberId, favId, entry.id])).changes > 0;
  }

  /** Present entries of a list, newest favorite first. */
  async entries(memberId: number, favId: number): Promise<EntryRow[]> {
    return await this.db.all(`SELECT e.* FROM favorites f JOIN entries e ON e.id = f.entry_id
      WHERE f.member_id = ? AND f.fav_id = ? AND e.state = 0 ORDER BY f.created_ms DESC, e.id`, [memberId, favId]) as EntryRow[];
  }
}
