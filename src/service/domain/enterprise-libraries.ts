/**
 * EnterpriseLibraries: what the library management API changes about a library beyond its files — its
 * members and departments with their roles, its owner, personal libraries of members (type 20), and
 * destruction (files, history, authorizations and memberships removed; blobs no longer used are
 * released by the blob collector).
 */
import type { LibraryGroup, LibraryMember } from '../../shared/records.js';
import type { MetadataStore } from '../store/metadata-store.js';
import type { Directory, LibraryRow } from './directory.js';
import { FaultCode, ServiceFault } from './fault.js';
import type { MemberDbRow } from './members.js';
import { roleCodes } from './permissions-codes.js';

/** org_type of a member's personal library. */
export const PERSONAL_LIBRARY_TYPE = 20;

export class EnterpriseLibraries {
  constructor(private readonly db: MetadataStore, private readonly directory: Directory) {}

  async personalOf(memberId: number): Promise<LibraryRow | undefined> {
    return await this.db.get('SELECT * FROM libraries WHERE owner_id = ? AND type = ? AND deleted = 0 ORDER BY id LIMIT 1', [memberId, PERSONAL_LIBRARY_TYPE]) as LibraryRow | undefined;
  }

  /** The member's personal library, created when missing (capacity: the one set beforehand, else unlimited). */
  async ensurePersonal(member: MemberDbRow): Promise<LibraryRow> {
    const found = await this.personalOf(member.id);
    if (found) return found;
    const lib = await this.directory.createLibrary(member.ent_id, { name: member.name, capacity: member.personal_capacity ?? -1, ownerId: member.id, type: PERSONAL_LIBRARY_TYPE });
    await this.db.run('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, 0) ON CONFLICT DO NOTHING', [lib.id, member.id]);
    return lib;
  }

  /** Sets the capacity of a member's personal library, or remembers it for when the library is created. */
  async setPersonalCapacity(member: MemberDbRow, capacity: number): Promise<void> {
    const lib = await this.personalOf(member.id);
    if (lib) await this.db.run('UPDATE libraries SET capacity = ? WHERE id = ?', [capacity, lib.id]);
    else await this.db.run('UPDATE members SET personal_capacity = ? WHERE id = ?', [capacity, member.id]);
  }

  async members(libraryId: number, start: number, size: number): Promise<{ list: LibraryMember[]; count: number }> {
    const count = (await this.db.get('SELECT COUNT(*) AS n FROM library_members WHERE library_id = ?', [libraryId]) as { n: number }).n;
    const rows = await this.db.all(`SELECT m.*, lm.role_id FROM library_members lm JOIN members m ON m.id = lm.member_id
      WHERE lm.library_id = ? ORDER BY m.id LIMIT ? OFFSET ?`, [libraryId, size, start]) as (MemberDbRow & { role_id: number })[];
    return { list: rows.map(libraryMember), count };
  }

  async member(libraryId: number, memberId: number): Promise<LibraryMember | undefined> {
    const row = await this.db.get('SELECT m.*, lm.role_id FROM library_members lm JOIN members m ON m.id = lm.member_id WHERE lm.library_id = ? AND m.id = ?', [libraryId, memberId]) as (MemberDbRow & { role_id: number }) | undefined;
    return row ? libraryMember(row) : undefined;
  }

  /** Adds members with a role (a member already in the library gets the role). */
  async addMembers(libraryId: number, memberIds: number[], roleId: number): Promise<void> {
    roleCodes(roleId);
    await this.db.tx(async () => {
      for (const m of memberIds) {
        await this.db.run('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, ?) ON CONFLICT (library_id, member_id) DO UPDATE SET role_id = excluded.role_id', [libraryId, m, roleId]);
      }
    });
  }

  async setMemberRole(libraryId: number, memberIds: number[], roleId: number): Promise<void> {
    roleCodes(roleId);
    for (const m of memberIds) {
      if (!await this.member(libraryId, m)) throw new ServiceFault(FaultCode.MemberMissing, `member ${m} is not a member of library ${libraryId}`);
    }
    await this.db.tx(async () => { for (const m of memberIds) await this.db.run('UPDATE library_members SET role_id = ? WHERE library_id = ? AND member_id = ?', [roleId, libraryId, m]); });
  }

  /** Takes members out of a library (the owner cannot be taken out: set another owner first). */
  async removeMembers(lib: LibraryRow, memberIds: number[]): Promise<void> {
    if (memberIds.includes(lib.owner_id)) throw new ServiceFault(FaultCode.BadParam, `member ${lib.owner_id} owns library ${lib.id}: set another owner first`);
    await this.db.tx(async () => { for (const m of memberIds) await this.db.run('DELETE FROM library_members WHERE library_id = ? AND member_id = ?', [lib.id, m]); });
  }

  /**
   * Makes a member the owner. The former owner keeps `formerRoleId` as a member, or leaves the library
   * when it is undefined.
   */
  async setOwner(lib: LibraryRow, memberId: number, formerRoleId: number | undefined): Promise<void> {
    if (formerRoleId !== undefined) roleCodes(formerRoleId);
    await this.db.tx(async () => {
      const former = lib.owner_id;
      await this.db.run('UPDATE libraries SET owner_id = ? WHERE id = ?', [memberId, lib.id]);
      await this.db.run('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, 0) ON CONFLICT (library_id, member_id) DO UPDATE SET role_id = 0', [lib.id, memberId]);
      if (former !== 0 && former !== memberId) {
        if (formerRoleId === undefined) await this.db.run('DELETE FROM library_members WHERE library_id = ? AND member_id = ?', [lib.id, former]);
        else await this.db.run('UPDATE library_members SET role_id = ? WHERE library_id = ? AND member_id = ?', [formerRoleId, lib.id, former]);
      }
    });
  }

  async groups(libraryId: number): Promise<LibraryGroup[]> {
    return await this.db.all('SELECT d.id, d.name, lg.role_id FROM library_groups lg JOIN departments d ON d.id = lg.group_id WHERE lg.library_id = ? ORDER BY d.id', [libraryId]) as LibraryGroup[];
  }

  /** Adds a department with a role, or changes its role. `mustExist`: only change an existing one. */
  async setGroup(libraryId: number, groupId: number, roleId: number, mustExist: boolean): Promise<void> {
    roleCodes(roleId);
    const has = !!await this.db.get('SELECT 1 FROM library_groups WHERE library_id = ? AND group_id = ?', [libraryId, groupId]);
    if (mustExist && !has) throw new ServiceFault(FaultCode.DepartmentMissing, `department ${groupId} is not in library ${libraryId}`);
    await this.db.run('INSERT INTO library_groups (library_id, group_id, role_id) VALUES (?, ?, ?) ON CONFLICT (library_id, group_id) DO UPDATE SET role_id = excluded.role_id', [libraryId, groupId, roleId]);
  }

  async removeGroup(libraryId: number, groupId: number): Promise<void> {
    if ((await this.db.run('DELETE FROM library_groups WHERE library_id = ? AND group_id = ?', [libraryId, groupId])).changes === 0) {
      throw new ServiceFault(FaultCode.DepartmentMissing, `department ${groupId} is not in library ${libraryId}`);
    }
  }

  /**
   * Destroys a library: its files, recycle bin, history, pending uploads, copy queue, permissions,
   * memberships and authorizations go at once (the authorizations stop working); the library is marked
   * deleted. The caller schedules the blob collection.
   */
  async destroy(libraryId: number): Promise<void> {
    await this.db.tx(async () => {
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
      ]) await this.db.run(sql, [libraryId]);
    });
  }
}

function libraryMember(r: MemberDbRow & { role_id: number }): LibraryMember {
  return { member_id: r.id, out_id: r.out_id ?? '', account: r.account, member_name: r.name, member_email: r.email, state: r.state, role_id: r.role_id };
}
