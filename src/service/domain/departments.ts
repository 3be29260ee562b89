/**
 * Departments: the department tree of an enterprise (parent_id 0 = top level) and who belongs where.
 * Departments are found by id, by path (`<parent>/<child>`, names separated by `/`) or by `out_id`.
 * Names are unique among siblings. "Top level" membership (group path omitted or empty, group_out_id
 * omitted) is the member's `listed` flag: whether it appears in the admin console's member management.
 */
import type { EntGroup } from '../../shared/records.js';
import type { MetadataStore } from '../store/metadata-store.js';
import { FaultCode, ServiceFault, badParam } from './fault.js';

export interface DepartmentRow { id: number; ent_id: number; parent_id: number; name: string; out_id: string | null; orderby: number; state: number }

export class Departments {
  constructor(private readonly db: MetadataStore, private readonly clock: () => number) {}

  async byId(entId: number, id: number): Promise<DepartmentRow | undefined> {
    return await this.db.get('SELECT * FROM departments WHERE id = ? AND ent_id = ?', [id, entId]) as DepartmentRow | undefined;
  }

  async byOutId(entId: number, outId: string): Promise<DepartmentRow | undefined> {
    return await this.db.get('SELECT * FROM departments WHERE out_id = ? AND ent_id = ?', [outId, entId]) as DepartmentRow | undefined;
  }

  /** The department at a path of names; undefined when a part is missing. An empty path is refused. */
  async byPath(entId: number, path: string, param = 'group_path'): Promise<DepartmentRow | undefined> {
    const names = splitPath(path, param);
    let found: DepartmentRow | undefined;
    for (const name of names) {
      found = await this.db.get('SELECT * FROM departments WHERE ent_id = ? AND parent_id = ? AND name = ?', [entId, found?.id ?? 0, name]) as DepartmentRow | undefined;
      if (!found) return undefined;
    }
    return found;
  }

  async requirePath(entId: number, path: string, param = 'group_path'): Promise<DepartmentRow> {
    const d = await this.byPath(entId, path, param);
    if (!d) throw new ServiceFault(FaultCode.DepartmentMissing, `no department at ${JSON.stringify(path)}`);
    return d;
  }

  async requireId(entId: number, id: number): Promise<DepartmentRow> {
    const d = await this.byId(entId, id);
    if (!d) throw new ServiceFault(FaultCode.DepartmentMissing, `no department with id ${id}`);
    return d;
  }

  async requireOutId(entId: number, outId: string): Promise<DepartmentRow> {
    const d = await this.byOutId(entId, outId);
    if (!d) throw new ServiceFault(FaultCode.DepartmentMissing, `no department with out_id ${JSON.stringify(outId)}`);
    return d;
  }

  /** Parent id of a path given as the parent (omitted or empty = top level, 0). */
  async parentOf(entId: number, path: string | undefined, param: string): Promise<number> {
    if (path === undefined || path.trim() === '' || path.trim() === '/') return 0;
    return (await this.requirePath(entId, path, param)).id;
  }

  async add(entId: number, d: { name: string; parentId: number; orderby?: number; state?: number; outId?: string }): Promise<number> {
    checkName(d.name);
    await this.checkFreeName(entId, d.parentId, d.name, 0);
    return this.db.insert('INSERT INTO departments (ent_id, parent_id, name, out_id, orderby, state, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)', [entId, d.parentId, d.name, d.outId ?? null, d.orderby ?? 0, d.state ?? 1, this.clock()]);
  }

  /** Changes the given fields; a new parent moves the department (not below itself). */
  async update(row: DepartmentRow, change: { name?: string; parentId?: number; orderby?: number; state?: number }): Promise<void> {
    const name = change.name ?? row.name;
    const parentId = change.parentId ?? row.parent_id;
    checkName(name);
    if (parentId !== row.parent_id && (await this.ancestors(parentId)).includes(row.id)) {
      throw new ServiceFault(FaultCode.BadParam, `a department cannot move below itself (${JSON.stringify(row.name)})`);
    }
    if (name !== row.name || parentId !== row.parent_id) await this.checkFreeName(row.ent_id, parentId, name, row.id);
    await this.db.run('UPDATE departments SET name = ?, parent_id = ?, orderby = ?, state = ? WHERE id = ?', [name, parentId, change.orderby ?? row.orderby, change.state ?? row.state, row.id]);
  }

  /** Removes departments with everything below them; their members stay in the enterprise. */
  async remove(rows: DepartmentRow[]): Promise<void> {
    await this.db.tx(async () => {
      for (const r of rows) {
        for (const id of (await this.subtree(r.id)).reverse()) {
          await this.db.run("DELETE FROM folder_permissions WHERE subject_kind = 'g' AND subject_id = ?", [id]);
          await this.db.run('DELETE FROM departments WHERE id = ?', [id]);
        }
      }
    });
  }

  /** A department and every department below it (parents before children). */
  async subtree(id: number): Promise<number[]> {
    const out = [id];
    for (let i = 0; i < out.length; i++) {
      for (const c of await this.db.all('SELECT id FROM departments WHERE parent_id = ? ORDER BY id', [out[i]]) as { id: number }[]) out.push(c.id);
    }
    return out;
  }

  /** A department and its parents up to the top (nearest first). */
  async ancestors(id: number): Promise<number[]> {
    const out: number[] = [];
    let cur = id;
    while (cur !== 0 && !out.includes(cur)) {
      out.push(cur);
      cur = (await this.db.get('SELECT parent_id FROM departments WHERE id = ?', [cur]) as { parent_id: number } | undefined)?.parent_id ?? 0;
    }
    return out;
  }

  /** Puts members in a department (0 = top level: listed in the admin console). */
  async addMembers(groupId: number, memberIds: number[]): Promise<void> {
    await this.db.tx(async () => {
      for (const m of memberIds) {
        if (groupId !== 0) await this.db.run('INSERT INTO department_members (group_id, member_id) VALUES (?, ?) ON CONFLICT DO NOTHING', [groupId, m]);
        await this.db.run('UPDATE members SET listed = 1 WHERE id = ?', [m]);
      }
    });
  }

  /** Takes members out of a department (0 = top level). */
  async removeMembers(groupId: number, memberIds: number[]): Promise<void> {
    await this.db.tx(async () => {
      for (const m of memberIds) {
        if (groupId === 0) await this.db.run('UPDATE members SET listed = 0 WHERE id = ?', [m]);
        else await this.db.run('DELETE FROM department_members WHERE group_id = ? AND member_id = ?', [groupId, m]);
      }
    });
  }

  /** Takes members out of every department. */
  async clearMemberships(memberIds: number[]): Promise<void> {
    await this.db.tx(async () => { for (const m of memberIds) await this.db.run('DELETE FROM department_members WHERE member_id = ?', [m]); });
  }

  /** Departments a member belongs to directly. */
  async ofMember(memberId: number): Promise<DepartmentRow[]> {
    return await this.db.all('SELECT d.* FROM departments d JOIN department_members dm ON dm.group_id = d.id WHERE dm.member_id = ? ORDER BY d.id', [memberId]) as DepartmentRow[];
  }

  async all(entId: number): Promise<DepartmentRow[]> {
    return await this.db.all('SELECT * FROM departments WHERE ent_id = ? ORDER BY parent_id, orderby, id', [entId]) as DepartmentRow[];
  }

  /** Internal code of a department: the ids from the top down, joined by `-`. */
  async code(id: number): Promise<string> {
    return (await this.ancestors(id)).reverse().join('-');
  }

  record(r: DepartmentRow): EntGroup {
    return { id: r.id, name: r.name, out_id: r.out_id ?? '', parent_id: r.parent_id };
  }

  private async checkFreeName(entId: number, parentId: number, name: string, selfId: number): Promise<void> {
    const taken = await this.db.get('SELECT id FROM departments WHERE ent_id = ? AND parent_id = ? AND name = ? AND id != ?', [entId, parentId, name, selfId]);
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
