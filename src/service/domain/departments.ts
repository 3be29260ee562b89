/**
 * Departments: the department tree of an enterprise (parent_id 0 = top level) and who belongs where.
 * Departments are found by id, by path (`<parent>/<child>`, names separated by `/`) or by `out_id`.
 * Names are unique among siblings. "Top level" membership (group path omitted or empty, group_out_id
 * omitted) is the member's `listed` flag: whether it appears in the admin console's member management.
 */
import type { EntGroup } from '../../shared/records.js';
import type { Db } from '../store/database.js';
import { FaultCode, ServiceFault, badParam } from './fault.js';

export interface DepartmentRow { id: number; ent_id: number; parent_id: number; name: string; out_id: string | null; orderby: number; state: number }

export class Departments {
  constructor(private readonly db: Db, private readonly clock: () => number) {}

  byId(entId: number, id: number): DepartmentRow | undefined {
    return this.db.prepare('SELECT * FROM departments WHERE id = ? AND ent_id = ?').get(id, entId) as DepartmentRow | undefined;
  }

  byOutId(entId: number, outId: string): DepartmentRow | undefined {
    return this.db.prepare('SELECT * FROM departments WHERE out_id = ? AND ent_id = ?').get(outId, entId) as DepartmentRow | undefined;
  }

  /** The department at a path of names; undefined when a part is missing. An empty path is refused. */
  byPath(entId: number, path: string, param = 'group_path'): DepartmentRow | undefined {
    const names = splitPath(path, param);
    let found: DepartmentRow | undefined;
    for (const name of names) {
      found = this.db.prepare('SELECT * FROM departments WHERE ent_id = ? AND parent_id = ? AND name = ?').get(entId, found?.id ?? 0, name) as DepartmentRow | undefined;
      if (!found) return undefined;
    }
    return found;
  }

  requirePath(entId: number, path: string, param = 'group_path'): DepartmentRow {
    const d = this.byPath(entId, path, param);
    if (!d) throw new ServiceFault(FaultCode.DepartmentMissing, `no department at ${JSON.stringify(path)}`);
    return d;
  }

  requireId(entId: number, id: number): DepartmentRow {
    const d = this.byId(entId, id);
    if (!d) throw new ServiceFault(FaultCode.DepartmentMissing, `no department with id ${id}`);
    return d;
  }

  requireOutId(entId: number, outId: string): DepartmentRow {
    const d = this.byOutId(entId, outId);
    if (!d) throw new ServiceFault(FaultCode.DepartmentMissing, `no department with out_id ${JSON.stringify(outId)}`);
    return d;
  }

  /** Parent id of a path given as the parent (omitted or empty = top level, 0). */
  parentOf(entId: number, path: string | undefined, param: string): number {
    if (path === undefined || path.trim() === '' || path.trim() === '/') return 0;
    return this.requirePath(entId, path, param).id;
  }

  add(entId: number, d: { name: string; parentId: number; orderby?: number; state?: number; outId?: string }): number {
    checkName(d.name);
    this.checkFreeName(entId, d.parentId, d.name, 0);
    return Number(this.db.prepare('INSERT INTO departments (ent_id, parent_id, name, out_id, orderby, state, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(entId, d.parentId, d.name, d.outId ?? null, d.orderby ?? 0, d.state ?? 1, this.clock()).lastInsertRowid);
  }

  /** Changes the given fields; a new parent moves the department (not below itself). */
  update(row: DepartmentRow, change: { name?: string; parentId?: number; orderby?: number; state?: number }): void {
    const name = change.name ?? row.name;
    const parentId = change.parentId ?? row.parent_id;
    checkName(name);
    if (parentId !== row.parent_id && this.ancestors(parentId).includes(row.id)) {
      throw new ServiceFault(FaultCode.BadParam, `a department cannot move below itself (${JSON.stringify(row.name)})`);
    }
    if (name !== row.name || parentId !== row.parent_id) this.checkFreeName(row.ent_id, parentId, name, row.id);
    this.db.prepare('UPDATE departments SET name = ?, parent_id = ?, orderby = ?, state = ? WHERE id = ?')
      .run(name, parentId, change.orderby ?? row.orderby, change.state ?? row.state, row.id);
  }

  /** Removes departments with everything below them; their members stay in the enterprise. */
  remove(rows: DepartmentRow[]): void {
    this.db.transaction(() => {
      for (const r of rows) {
        for (const id of this.subtree(r.id).reverse()) {
          this.db.prepare("DELETE FROM folder_permissions WHERE subject_kind = 'g' AND subject_id = ?").run(id);
          this.db.prepare('DELETE FROM departments WHERE id = ?').run(id);
        }
      }
    })();
  }

  /** A department and every department below it (parents before children). */
  subtree(id: number): number[] {
    const out = [id];
    for (let i = 0; i < out.length; i++) {
      for (const c of this.db.prepare('SELECT id FROM departments WHERE parent_id = ? ORDER BY id').all(out[i]) as { id: number }[]) out.push(c.id);
    }
    return out;
  }

  /** A department and its parents up to the top (nearest first). */
  ancestors(id: number): number[] {
    const out: number[] = [];
    let cur = id;
    while (cur !== 0 && !out.includes(cur)) {
      out.push(cur);
      cur = (this.db.prepare('SELECT parent_id FROM departments WHERE id = ?').get(cur) as { parent_id: number } | undefined)?.parent_id ?? 0;
    }
    return out;
  }

  /** Puts members in a department (0 = top level: listed in the admin console). */
  addMembers(groupId: number, memberIds: number[]): void {
    this.db.transaction(() => {
      for (const m of memberIds) {
        if (groupId !== 0) this.db.prepare('INSERT OR IGNORE INTO department_members (group_id, member_id) VALUES (?, ?)').run(groupId, m);
        this.db.prepare('UPDATE members SET listed = 1 WHERE id = ?').run(m);
      }
    })();
  }

  /** Takes members out of a department (0 = top level). */
  removeMembers(groupId: number, memberIds: number[]): void {
    this.db.transaction(() => {
      for (const m of memberIds) {
        if (groupId === 0) this.db.prepare('UPDATE members SET listed = 0 WHERE id = ?').run(m);
        else this.db.prepare('DELETE FROM department_members WHERE group_id = ? AND member_id = ?').run(groupId, m);
      }
    })();
  }

  /** Takes members out of every department. */
  clearMemberships(memberIds: number[]): void {
    this.db.transaction(() => { for (const m of memberIds) this.db.prepare('DELETE FROM department_members WHERE member_id = ?').run(m); })();
  }

  /** Departments a member belongs to directly. */
  ofMember(memberId: number): DepartmentRow[] {
    return this.db.prepare('SELECT d.* FROM departments d JOIN department_members dm ON dm.group_id = d.id WHERE dm.member_id = ? ORDER BY d.id').all(memberId) as DepartmentRow[];
  }

  all(entId: number): DepartmentRow[] {
    return this.db.prepare('SELECT * FROM departments WHERE ent_id = ? ORDER BY parent_id, orderby, id').all(entId) as DepartmentRow[];
  }

  /** Internal code of a department: the ids from the top down, joined by `-`. */
  code(id: number): string {
    return this.ancestors(id).reverse().join('-');
  }

  record(r: DepartmentRow): EntGroup {
    return { id: r.id, name: r.name, out_id: r.out_id ?? '', parent_id: r.parent_id };
  }

  private checkFreeName(entId: number, parentId: number, name: string, selfId: number): void {
    const taken = this.db.prepare('SELECT id FROM departments WHERE ent_id = ? AND parent_id = ? AND name = ? AND id != ?').get(entId, parentId, name, selfId);
    if (taken) throw new ServiceFault(FaultCode.NameExists, `a department named ${JSON.stringify(name)} exists there`);
  }
}

function checkName(name: string): void {
  if (name.trim() === '' || name.includes('/') || name.length > 255) throw badParam('group_name', 'a department name (1–255 characters, no "/")', name);
}

function splitPath(path: string, param: string): string[] {
  const names = path.split('/').map((s) => s.trim()).filter((s) => s !== '');
  if (names.length === 0) throw badParam(param, 'a department path such as <parent>/<child>', path);
  return names;
}
