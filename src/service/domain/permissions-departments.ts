/**
 * DepartmentLookup: what the permission model needs to know about departments — a member's departments
 * with every department above them (a permission given to a department reaches the members of its
 * sub-departments), the role of a department in a library, and departments by id or external id.
 *
 * EnterpriseDepartments reads the enterprise directory's tables (`departments`, `department_members`,
 * `library_groups`) through Departments.
 */
import type { MetadataStore } from '../store/metadata-store.js';
import { Departments } from './departments.js';
import { mapInOrder } from './in-order.js';

export interface DepartmentLookup {
  /** The member's departments and all their ancestors. */
  departmentsOf(memberId: number): Promise<number[]>;
  /** A department and all its ancestors. */
  withAncestors(groupId: number): Promise<number[]>;
  /** Role of each department that is a member of the library. */
  libraryRoles(libraryId: number): Promise<Map<number, number>>;
  exists(groupId: number, entId: number): Promise<boolean>;
  byOutId(outId: string, entId: number): Promise<number | undefined>;
  /** Members of a department and of every department below it (whom a grant to it reaches). */
  membersReached(groupId: number): Promise<number[]>;
}

export class EnterpriseDepartments implements DepartmentLookup {
  private readonly departments: Departments;

  constructor(private readonly db: MetadataStore) {
    // The clock only stamps new departments, which this lookup never adds.
    this.departments = new Departments(db, Date.now);
  }

  async departmentsOf(memberId: number): Promise<number[]> {
    const chains = await mapInOrder(await this.departments.ofMember(memberId), async (d) => this.departments.ancestors(d.id));
    return [...new Set(chains.flat())];
  }

  async withAncestors(groupId: number): Promise<number[]> {
    return this.departments.ancestors(groupId);
  }

  async libraryRoles(libraryId: number): Promise<Map<number, number>> {
    const rows = await this.db.all('SELECT group_id, role_id FROM library_groups WHERE library_id = ?', [libraryId]) as { group_id: number; role_id: number }[];
    return new Map(rows.map((r) => [r.group_id, r.role_id]));
  }

  async exists(groupId: number, entId: number): Promise<boolean> {
    return await this.departments.byId(entId, groupId) !== undefined;
  }

  async byOutId(outId: string, entId: number): Promise<number | undefined> {
    return (await this.departments.byOutId(entId, outId))?.id;
  }

  async membersReached(groupId: number): Promise<number[]> {
    const rows = await mapInOrder(await this.departments.subtree(groupId),
      (g) => this.db.all<{ member_id: number }>('SELECT member_id FROM department_members WHERE group_id = ?', [g]));
    return [...new Set(rows.flat().map((r) => r.member_id))].sort((a, b) => a - b);
  }
}
