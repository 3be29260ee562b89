/**
 * EnterpriseLibraries: what the library management API changes about a library beyond its files — its
 * members and departments with their roles, its owner, personal libraries of members (type 20), and
 * destruction (files, history, authorizations and memberships removed; blobs no longer used are
 * released by the blob collector).
 */
import type { LibraryGroup, LibraryMember } from '../../shared/records.js';
import type { Db } from '../store/database.js';
import type { Directory, LibraryRow } from './directory.js';
import { FaultCode, ServiceFault } from './fault.js';
import type { MemberDbRow } from './members.js';
import { roleCodes } from './permissions-codes.js';

/** org_type of a member's personal library. */
export const PERSONAL_LIBRARY_TYPE = 20;

export class EnterpriseLibraries {
  constructor(private readonly db: Db, private readonly directory: Directory) {}

  personalOf(memberId: number): LibraryRow | undefined {
    return this.db.prepare('SELECT * FROM libraries WHERE owner_id = ? AND type = ? AND deleted = 0 ORDER BY id LIMIT 1').get(memberId, PERSONAL_LIBRARY_TYPE) as LibraryRow | undefined;
  }

  /** The member's personal library, created when missing (capacity: the one set beforehand, else unlimited). */
  ensurePersonal(member: MemberDbRow): LibraryRow {
    const found = this.personalOf(member.id);
    if (found) return found;
    const lib = this.directory.createLibrary(member.ent_id, { name: member.name, capacity: member.personal_capacity ?? -1, ownerId: member.id, type: PERSONAL_LIBRARY_TYPE });
    this.db.prepare('INSERT OR IGNORE INTO library_members (library_id, member_id, role_id) VALUES (?, ?, 0)').run(lib.id, member.id);
    return lib;
  }

  /** Sets the capacity of a member's personal library, or remembers it for when the library is created. */
  setPersonalCapacity(member: MemberDbRow, capacity: number): void {
    const lib = this.personalOf(member.id);
    if (lib) this.db.prepare('UPDATE libraries SET capacity = ? WHERE id = ?').run(capacity, lib.id);
    else this.db.prepare('UPDATE members SET personal_capacity = ? WHERE id = ?').run(capacity, member.id);
  }

  members(libraryId: number, start: number, size: number): { list: LibraryMember[]; count: number } {
    const count = (this.db.prepare('SELECT COUNT(*) AS n FROM library_members WHERE library_id = ?').get(libraryId) as { n: number }).n;
    const rows = this.db.prepare(`SELECT m.*, lm.role_id FROM library_members lm JOIN members m ON m.id = lm.member_id
      WHERE lm.library_id = ? ORDER BY m.id LIMIT ? OFFSET ?`).all(libraryId, size, start) as (MemberDbRow & { role_id: number })[];
    return { list: rows.map(libraryMember), count };
  }

  member(libraryId: number, memberId: number): LibraryMember | undefined {
    const row = this.db.prepare('SELECT m.*, lm.role_id FROM library_members lm JOIN members m ON m.id = lm.member_id WHERE lm.library_id = ? AND m.id = ?')
      .get(libraryId, memberId) as (MemberDbRow & { role_id: number }) | undefined;
    return row ? libraryMember(row) : undefined;
  }

  /** Adds members with a role (a member already in the library gets the role). */
  addMembers(libraryId: number, memberIds: number[], roleId: number): void {
    roleCodes(roleId);
    this.db.transaction(() => {
      for (const m of memberIds) {
        this.db.prepare('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, ?) ON CONFLICT (library_id, member_id) DO UPDATE SET role_id = excluded.role_id').run(libraryId, m, roleId);
      }
    })();
  }

  setMemberRole(libraryId: number, memberIds: number[], roleId: number): void {
    roleCodes(roleId);
    for (const m of memberIds) {
      if (!this.member(libraryId, m)) throw new ServiceFault(FaultCode.MemberMissing, `member ${m} is not a member of library ${libraryId}`);
    }
    this.db.transaction(() => { for (const m of memberIds) this.db.prepare('UPDATE library_members SET role_id = ? WHERE library_id = ? AND member_id = ?').run(roleId, libraryId, m); })();
  }

  /** Takes members out of a library (the owner cannot be taken out: set another owner first). */
  removeMembers(lib: LibraryRow, memberIds: number[]): void {
    if (memberIds.includes(lib.owner_id)) throw new ServiceFault(FaultCode.BadParam, `member ${lib.owner_id} owns library ${lib.id}: set another owner first`);
    this.db.transaction(() => { for (const m of memberIds) this.db.prepare('DELETE FROM library_members WHERE library_id = ? AND member_id = ?').run(lib.id, m); })();
  }

  /**
   * Makes a member the owner. The former owner keeps `formerRoleId` as a member, or leaves the library
   * when it is undefined.
   */
  setOwner(lib: LibraryRow, memberId: number, formerRoleId: number | undefined): void {
    if (formerRoleId !== undefined) roleCodes(formerRoleId);
    this.db.transaction(() => {
      const former = lib.owner_id;
      this.db.prepare('UPDATE libraries SET owner_id = ? WHERE id = ?').run(memberId, lib.id);
      this.db.prepare('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, 0) ON CONFLICT (library_id, member_id) DO UPDATE SET role_id = 0').run(lib.id, memberId);
      if (former !== 0 && former !== memberId) {
        if (formerRoleId === undefined) this.db.prepare('DELETE FROM library_members WHERE library_id = ? AND member_id = ?').run(lib.id, former);
        else this.db.prepare('UPDATE library_members SET role_id = ? WHERE library_id = ? AND member_id = ?').run(formerRoleId, lib.id, former);
      }
    })();
  }

  groups(libraryId: number): LibraryGroup[] {
    return this.db.prepare('SELECT d.id, d.name, lg.role_id FROM library_groups lg JOIN departments d ON d.id = lg.group_id WHERE lg.library_id = ? ORDER BY d.id')
      .all(libraryId) as LibraryGroup[];
  }

  /** Adds a department with a role, or changes its role. `mustExist`: only change an existing one. */
  setGroup(libraryId: number, groupId: number, roleId: number, mustExist: boolean): void {
    roleCodes(roleId);
    const has = !!this.db.prepare('SELECT 1 FROM library_groups WHERE library_id = ? AND group_id = ?').get(libraryId, groupId);
    if (mustExist && !has) throw new ServiceFault(FaultCode.DepartmentMissing, `department ${groupId} is not in library ${libraryId}`);
    this.db.prepare('INSERT INTO library_groups (library_id, group_id, role_id) VALUES (?, ?, ?) ON CONFLICT (library_id, group_id) DO UPDATE SET role_id = excluded.role_id').run(libraryId, groupId, roleId);
  }

  removeGroup(libraryId: number, groupId: number): void {
    if (this.db.prepare('DELETE FROM library_groups WHERE library_id = ? AND group_id = ?').run(libraryId, groupId).changes === 0) {
      throw new ServiceFault(FaultCode.DepartmentMissing, `department ${groupId} is not in library ${libraryId}`);
    }
  }

  /**
   * Destroys a library: its files, recycle bin, history, pending uploads, copy queue, permissions,
   * memberships and authorizations go at once (the authorizations stop working); the library is marked
   * deleted. The caller schedules the blob collection.
   */
  destroy(libraryId: number): void {
    this.db.transaction(() => {
      for (const sql of [
        'DELETE FROM file_events WHERE library_id = ?',
        'DELETE FROM folder_inherit WHERE entry_id IN (SELECT id FROM entries WHERE library_id = ?)',
        'DELETE FROM entries WHERE library_id = ?',
        'DELETE FROM pending_uploads WHERE library_id = ?',
        'DELETE FROM copy_queue WHERE library_id = ?',
        'DELETE FROM folder_permissions WHERE library_id = ?',
        'DELETE FROM library_metadata_templates WHERE library_id = ?',
        'DELETE FROM library_members WHERE library_id = ?',
        'DELETE FROM library_groups WHERE library_id = ?',
        'DELETE FROM library_auths WHERE library_id = ?',
        'UPDATE libraries SET deleted = 1 WHERE id = ?',
      ]) this.db.prepare(sql).run(libraryId);
    })();
  }
}

function libraryMember(r: MemberDbRow & { role_id: number }): LibraryMember {
  return { member_id: r.id, out_id: r.out_id ?? '', account: r.account, member_name: r.name, member_email: r.email, state: r.state, role_id: r.role_id };
}
