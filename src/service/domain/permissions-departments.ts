/**
 * DepartmentLookup: what the permission model needs to know about departments — a member's departments
 * with every department above them (a permission given to a department reaches the members of its
 * sub-departments), the role of a department in a library, and departments by id or external id.
 *
 * Departments are stored by the enterprise directory (tables of the enterprise API's migration). This
 * reads them where they are; a database without department tables has no departments.
 */
import type { Db } from '../store/database.js';

export interface DepartmentLookup {
  /** The member's departments and all their ancestors. */
  departmentsOf(memberId: number): number[];
  /** A department and all its ancestors. */
  withAncestors(groupId: number): number[];
  /** Role of each department that is a member of the library. */
  libraryRoles(libraryId: number): Map<number, number>;
  exists(groupId: number, entId: number): boolean;
  byOutId(outId: string, entId: number): number | undefined;
  /** Members of a department (direct members only). */
  membersOf(groupId: number): number[];
}

interface Layout {
  groups: string; groupParent: string; groupEnt: string; groupOut: string;
  members?: { table: string; group: string; member: string };
  library?: { table: string; library: string; group: string; role: string };
}

/** Department tables as the enterprise directory stores them, found by name. */
export class SqlDepartments implements DepartmentLookup {
  private readonly layout: Layout | undefined;

  constructor(private readonly db: Db) {
    this.layout = discover(db);
  }

  departmentsOf(memberId: number): number[] {
    const m = this.layout?.members;
    if (!m) return [];
    const direct = (this.db.prepare(`SELECT ${m.group} AS g FROM ${m.table} WHERE ${m.member} = ?`).all(memberId) as { g: number }[]).map((r) => r.g);
    return [...new Set(direct.flatMap((g) => this.withAncestors(g)))];
  }

  withAncestors(groupId: number): number[] {
    const l = this.layout;
    if (!l) return [];
    const out: number[] = [];
    let id: number | null = groupId;
    while (id && !out.includes(id) && out.length < 256) {
      out.push(id);
      const row = this.db.prepare(`SELECT ${l.groupParent} AS p FROM ${l.groups} WHERE id = ?`).get(id) as { p: number | null } | undefined;
      id = row?.p ?? null;
    }
    return out;
  }

  libraryRoles(libraryId: number): Map<number, number> {
    const lib = this.layout?.library;
    if (!lib) return new Map();
    const rows = this.db.prepare(`SELECT ${lib.group} AS g, ${lib.role} AS r FROM ${lib.table} WHERE ${lib.library} = ?`).all(libraryId) as { g: number; r: number }[];
    return new Map(rows.map((r) => [r.g, r.r]));
  }

  exists(groupId: number, entId: number): boolean {
    const l = this.layout;
    return !!l && !!this.db.prepare(`SELECT 1 FROM ${l.groups} WHERE id = ? AND ${l.groupEnt} = ?`).get(groupId, entId);
  }

  byOutId(outId: string, entId: number): number | undefined {
    const l = this.layout;
    if (!l) return undefined;
    return (this.db.prepare(`SELECT id FROM ${l.groups} WHERE ${l.groupOut} = ? AND ${l.groupEnt} = ?`).get(outId, entId) as { id: number } | undefined)?.id;
  }

  membersOf(groupId: number): number[] {
    const m = this.layout?.members;
    if (!m) return [];
    return (this.db.prepare(`SELECT ${m.member} AS m FROM ${m.table} WHERE ${m.group} = ?`).all(groupId) as { m: number }[]).map((r) => r.m);
  }
}

function columns(db: Db, table: string): string[] {
  return (db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name);
}

function pick(cols: string[], names: string[]): string | undefined {
  return names.find((n) => cols.includes(n));
}

function discover(db: Db): Layout | undefined {
  const tables = new Set((db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((r) => r.name));
  const groups = ['departments', 'groups', 'ent_groups'].find((t) => tables.has(t));
  if (!groups) return undefined;
  const gc = columns(db, groups);
  const groupParent = pick(gc, ['parent_id']);
  const groupEnt = pick(gc, ['ent_id', 'enterprise_id']);
  const groupOut = pick(gc, ['out_id']);
  if (!groupParent || !groupEnt || !groupOut) return undefined;
  const layout: Layout = { groups, groupParent, groupEnt, groupOut };
  for (const t of ['department_members', 'group_members', 'member_groups', 'ent_group_members']) {
    if (!tables.has(t)) continue;
    const c = columns(db, t);
    const group = pick(c, ['group_id', 'department_id']);
    const member = pick(c, ['member_id']);
    if (group && member) layout.members = { table: t, group, member };
    break;
  }
  for (const t of ['library_groups', 'library_departments']) {
    if (!tables.has(t)) continue;
    const c = columns(db, t);
    const library = pick(c, ['library_id', 'org_id']);
    const group = pick(c, ['group_id', 'department_id']);
    const role = pick(c, ['role_id']);
    if (library && group && role) layout.library = { table: t, library, group, role };
    break;
  }
  return layout;
}
