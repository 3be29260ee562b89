/**
 * DepartmentLookup: what the permission model needs to know about departments — a member's departments
 * with every department above them (a permission given to a department reaches the members of its
 * sub-departments), the role of a department in a library, and departments by id or external id.
 *
 * EnterpriseDepartments reads the enterprise directory's tables (`departments`, `department_members`,
 * `library_groups`) through Departments.
 */
import type { Db } from '../store/database.js';
import { Departments } from './departments.js';

export interface DepartmentLookup {
  /** The member's departments and all their ancestors. */
  departmentsOf(memberId: number): number[];
  /** A department and all its ancestors. */
  withAncestors(groupId: number): number[];
  /** Role of each department that is a member of the library. */
  libraryRoles(libraryId: number): Map<number, number>;
  exists(groupId: number, entId: number): boolean;
  byOutId(outId: string, entId: number): number | undefined;
  /** Members of a department and of every department below it (whom a grant to it reaches). */
  membersReached(groupId: number): number[];
}

export class EnterpriseDepartments implements DepartmentLookup {
  private readonly departments: Departments;

  constructor(private readonly db: Db) {
    // The clock only stamps new departments, which this lookup never adds.
    this.departments = new Departments(db, Date.now);
  }

  departmentsOf(memberId: number): number[] {
    return [...new Set(this.departments.ofMember(memberId).flatMap((d) => this.departments.ancestors(d.id)))];
  }

  withAncestors(groupId: number): number[] {
    return this.departments.ancestors(groupId);
  }

  libraryRoles(libraryId: number): Map<number, number> {
    const rows = this.db.prepare('SELECT group_id, role_id FROM library_groups WHERE library_id = ?').all(libraryId) as { group_id: number; role_id: number }[];
    return new Map(rows.map((r) => [r.group_id, r.role_id]));
  }

  exists(groupId: number, entId: number): boolean {
    return this.departments.byId(entId, groupId) !== undefined;
  }

  byOutId(outId: string, entId: number): number | undefined {
    return this.departments.byOutId(entId, outId)?.id;
  }

  membersReached(groupId: number): number[] {
    const get = this.db.prepare('SELECT member_id FROM department_members WHERE group_id = ?');
    const ids = this.departments.subtree(groupId).flatMap((g) => (get.all(g) as { member_id: number }[]).map((r) => r.member_id));
    return [...new Set(ids)].sort((a, b) => a - b);
  }
}
