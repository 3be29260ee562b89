/**
 * FolderPermissions: one model behind the simple (`/m-open/1/file/`) and the advanced (`/m-open/2/file/`)
 * permission endpoints, and the checks of the user file API.
 *
 * - An entry gives one subject (a member, or a department) a role and/or codes on one folder
 *   (entry id 0 = the library root). Library roles (library_members, the department roles of the
 *   library) are the subjects' entries above the root.
 * - Per subject the nearest entry wins: walking from the folder up, the first entry of that subject is
 *   its permission; a folder that does not inherit stops the walk (nothing above it counts).
 * - The member's permission combines their own subject and each of their departments with every
 *   department above them: per code, any -1 → denied (deny wins), else any 1 → granted, else none.
 * - The library owner may do everything.
 */
import type { Db } from '../store/database.js';
import type { Directory, MemberRow } from './directory.js';
import type { EntryRow } from './entries.js';
import { FaultCode, ServiceFault, badParam } from './fault.js';
import type { FileTree } from './file-tree.js';
import { PERMISSION_CODES, entryStates, type CodeStates, type PermissionCode } from './permissions-codes.js';
import { EnterpriseDepartments, type DepartmentLookup } from './permissions-departments.js';

export type SubjectKind = 'm' | 'g';
export interface Subject { kind: SubjectKind; id: number }
export interface PermissionEntry { subject: Subject; roleId: number; codes: CodeStates }

interface Row { subject_kind: SubjectKind; subject_id: number; role_id: number; codes: string }

const ALL: CodeStates = Object.fromEntries(PERMISSION_CODES.map((c) => [c, 1])) as CodeStates;

export class FolderPermissions {
  private readonly db: Db;

  constructor(private readonly tree: FileTree, private readonly directory: Directory, readonly departments: DepartmentLookup) {
    this.db = tree.db;
  }

  /** The model over the enterprise directory's departments. */
  static over(tree: FileTree, directory: Directory): FolderPermissions {
    return new FolderPermissions(tree, directory, new EnterpriseDepartments(tree.db));
  }

  // ---- reading -----------------------------------------------------------------------------------

  /** The folder a permission is set on: the root ('') or a present folder (a file is refused). */
  folder(libraryId: number, fullpath: string): { entryId: number; row?: EntryRow } {
    if (fullpath === '') return { entryId: 0 };
    const row = this.tree.require(libraryId, fullpath);
    if (!row.dir) throw new ServiceFault(FaultCode.NotAFolder, `permissions are set on folders; ${JSON.stringify(fullpath)} is a file`);
    return { entryId: row.id, row };
  }

  /** Entries set directly on a folder. */
  entriesAt(libraryId: number, entryId: number): PermissionEntry[] {
    const rows = this.db.prepare('SELECT * FROM folder_permissions WHERE library_id = ? AND entry_id = ? ORDER BY subject_kind DESC, subject_id').all(libraryId, entryId) as Row[];
    return rows.map(toEntry);
  }

  inherits(entryId: number): boolean {
    if (entryId === 0) return true;
    const row = this.db.prepare('SELECT inherit FROM folder_inherit WHERE entry_id = ?').get(entryId) as { inherit: number } | undefined;
    return row ? row.inherit === 1 : true;
  }

  /** Folder ids from `entryId` up to the root (0 last), as far as inheritance reaches. */
  private chain(entryId: number): number[] {
    const out: number[] = [];
    let id: number | null = entryId;
    while (id !== null) {
      out.push(id);
      if (id === 0 || !this.inherits(id)) return out;
      const row = this.tree.byId(id);
      id = row?.parent_id ?? 0;
    }
    return out;
  }

  /** The entry a subject gets at a folder (nearest wins), or undefined. Library roles sit above the root. */
  subjectStates(libraryId: number, subject: Subject, entryId: number, libraryRoles?: Map<number, number>): CodeStates | undefined {
    const chain = this.chain(entryId);
    const get = this.db.prepare('SELECT * FROM folder_permissions WHERE library_id = ? AND entry_id = ? AND subject_kind = ? AND subject_id = ?');
    for (const id of chain) {
      const row = get.get(libraryId, id, subject.kind, subject.id) as Row | undefined;
      if (row) return entryStates(row.role_id, JSON.parse(row.codes) as CodeStates);
    }
    if (chain[chain.length - 1] !== 0) return undefined;
    const role = subject.kind === 'm' ? this.memberRole(libraryId, subject.id) : (libraryRoles ?? this.departments.libraryRoles(libraryId)).get(subject.id);
    return role === undefined ? undefined : entryStates(role, {});
  }

  /** A member's permission at a folder. */
  memberStates(libraryId: number, memberId: number, entryId: number): CodeStates {
    const lib = this.directory.requireLibrary(libraryId);
    if (lib.owner_id === memberId) return { ...ALL };
    const roles = this.departments.libraryRoles(libraryId);
    const subjects: Subject[] = [{ kind: 'm', id: memberId }, ...this.departments.departmentsOf(memberId).map((id) => ({ kind: 'g' as const, id }))];
    return combine(subjects.map((s) => this.subjectStates(libraryId, s, entryId, roles)));
  }

  /** A department's permission at a folder (with the departments above it). */
  groupStates(libraryId: number, groupId: number, entryId: number): CodeStates {
    const roles = this.departments.libraryRoles(libraryId);
    return combine(this.departments.withAncestors(groupId).map((id) => this.subjectStates(libraryId, { kind: 'g', id }, entryId, roles)));
  }

  memberRole(libraryId: number, memberId: number): number | undefined {
    return (this.db.prepare('SELECT role_id FROM library_members WHERE library_id = ? AND member_id = ?').get(libraryId, memberId) as { role_id: number } | undefined)?.role_id;
  }

  /** Whether a member takes part in a library at all: owner, member, a department of theirs, or a folder entry. */
  takesPart(libraryId: number, memberId: number): boolean {
    if (this.directory.memberInLibrary(memberId, libraryId)) return true;
    const groups = this.departments.departmentsOf(memberId);
    const roles = this.departments.libraryRoles(libraryId);
    if (groups.some((g) => roles.has(g))) return true;
    if (this.db.prepare("SELECT 1 FROM folder_permissions WHERE library_id = ? AND subject_kind = 'm' AND subject_id = ?").get(libraryId, memberId)) return true;
    return groups.some((g) => !!this.db.prepare("SELECT 1 FROM folder_permissions WHERE library_id = ? AND subject_kind = 'g' AND subject_id = ?").get(libraryId, g));
  }

  /** Members who may have a permission on a folder: owner, library members, members with an entry, members of departments (and their sub-departments) with one. */
  candidates(libraryId: number): number[] {
    const lib = this.directory.requireLibrary(libraryId);
    const ids = new Set<number>();
    if (lib.owner_id) ids.add(lib.owner_id);
    for (const r of this.db.prepare('SELECT member_id FROM library_members WHERE library_id = ?').all(libraryId) as { member_id: number }[]) ids.add(r.member_id);
    for (const r of this.db.prepare('SELECT DISTINCT subject_kind AS k, subject_id AS id FROM folder_permissions WHERE library_id = ?').all(libraryId) as { k: SubjectKind; id: number }[]) {
      if (r.k === 'm') ids.add(r.id);
      else for (const m of this.departments.membersReached(r.id)) ids.add(m);
    }
    for (const g of this.departments.libraryRoles(libraryId).keys()) for (const m of this.departments.membersReached(g)) ids.add(m);
    return [...ids].sort((a, b) => a - b);
  }

  // ---- changing ----------------------------------------------------------------------------------

  /** Sets (replaces) the entries of subjects on a folder; `merge` overlays the codes on existing entries instead. */
  set(libraryId: number, entryId: number, subjects: Subject[], roleId: number, codes: CodeStates, merge = false): void {
    this.tree.tx(() => {
      const get = this.db.prepare('SELECT * FROM folder_permissions WHERE library_id = ? AND entry_id = ? AND subject_kind = ? AND subject_id = ?');
      const put = this.db.prepare(`INSERT INTO folder_permissions (library_id, entry_id, subject_kind, subject_id, role_id, codes) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (library_id, entry_id, subject_kind, subject_id) DO UPDATE SET role_id = excluded.role_id, codes = excluded.codes`);
      for (const s of subjects) {
        let role = roleId;
        let next = codes;
        const existing = merge ? (get.get(libraryId, entryId, s.kind, s.id) as Row | undefined) : undefined;
        if (existing) {
          role = roleId || existing.role_id;
          next = { ...(JSON.parse(existing.codes) as CodeStates), ...codes };
        }
        put.run(libraryId, entryId, s.kind, s.id, role, JSON.stringify(next));
      }
      this.touch(libraryId, entryId);
    });
  }

  /** Removes the entries of subjects on a folder (all entries when `subjects` is undefined). */
  remove(libraryId: number, entryId: number, subjects?: Subject[]): void {
    this.tree.tx(() => {
      if (!subjects) this.db.prepare('DELETE FROM folder_permissions WHERE library_id = ? AND entry_id = ?').run(libraryId, entryId);
      else {
        const del = this.db.prepare('DELETE FROM folder_permissions WHERE library_id = ? AND entry_id = ? AND subject_kind = ? AND subject_id = ?');
        for (const s of subjects) del.run(libraryId, entryId, s.kind, s.id);
      }
      this.touch(libraryId, entryId);
    });
  }

  /**
   * Turns inheritance on or off. Turning it off with `keep` copies what each subject inherited into the
   * folder (where the folder has no entry of its own for that subject), so nobody's permission changes.
   */
  setInherit(libraryId: number, entryId: number, inherit: boolean, keep: boolean): void {
    if (entryId === 0) throw badParam('fullpath', 'a folder (the library root always takes the library roles)', '');
    this.tree.tx(() => {
      if (!inherit && keep && this.inherits(entryId)) {
        const row = this.tree.byId(entryId)!;
        const parentId = row.parent_id ?? 0;
        const own = new Set(this.entriesAt(libraryId, entryId).map((e) => `${e.subject.kind}${e.subject.id}`));
        const subjects = this.subjectsAbove(libraryId, parentId).filter((s) => !own.has(`${s.kind}${s.id}`));
        const put = this.db.prepare('INSERT INTO folder_permissions (library_id, entry_id, subject_kind, subject_id, role_id, codes) VALUES (?, ?, ?, ?, 0, ?)');
        for (const s of subjects) {
          const states = this.subjectStates(libraryId, s, parentId);
          if (states) put.run(libraryId, entryId, s.kind, s.id, JSON.stringify(states));
        }
      }
      this.db.prepare('INSERT INTO folder_inherit (entry_id, inherit) VALUES (?, ?) ON CONFLICT (entry_id) DO UPDATE SET inherit = excluded.inherit').run(entryId, inherit ? 1 : 0);
      this.touch(libraryId, entryId);
    });
  }

  /** Subjects with an entry on `entryId` or a folder above it (as far as inheritance reaches), or a library role. */
  private subjectsAbove(libraryId: number, entryId: number): Subject[] {
    const seen = new Map<string, Subject>();
    const add = (s: Subject) => seen.set(`${s.kind}${s.id}`, s);
    const chain = this.chain(entryId);
    for (const id of chain) for (const e of this.entriesAt(libraryId, id)) add(e.subject);
    if (chain[chain.length - 1] === 0) {
      for (const r of this.db.prepare('SELECT member_id FROM library_members WHERE library_id = ?').all(libraryId) as { member_id: number }[]) add({ kind: 'm', id: r.member_id });
      for (const g of this.departments.libraryRoles(libraryId).keys()) add({ kind: 'g', id: g });
    }
    return [...seen.values()];
  }

  /** A permission change changes the folder's operation time (spec "updates" rule 4). */
  private touch(libraryId: number, entryId: number): void {
    if (entryId === 0) return;
    this.db.prepare('UPDATE entries SET op_ms = ? WHERE id = ?').run(this.tree.opClock.next(libraryId), entryId);
  }

  // ---- subjects ----------------------------------------------------------------------------------

  /** Members by id, account or external id, all of the library's enterprise (40406 names the first missing). */
  members(entId: number, by: 'id' | 'account' | 'out_id', values: readonly (string | number)[]): Subject[] {
    const col = by === 'id' ? 'id' : by;
    const get = this.db.prepare(`SELECT * FROM members WHERE ${col} = ? AND ent_id = ?`);
    return values.map((v) => {
      const m = get.get(v, entId) as MemberRow | undefined;
      if (!m) throw new ServiceFault(FaultCode.MemberMissing, `member ${by}=${String(v)} not found in this enterprise`);
      return { kind: 'm' as const, id: m.id };
    });
  }

  groups(entId: number, by: 'id' | 'out_id', values: readonly (string | number)[]): Subject[] {
    return values.map((v) => {
      const id = by === 'id' ? Number(v) : this.departments.byOutId(String(v), entId);
      if (id === undefined || !Number.isInteger(id) || !this.departments.exists(id, entId)) {
        throw new ServiceFault(FaultCode.DepartmentMissing, `department ${by}=${String(v)} not found in this enterprise`);
      }
      return { kind: 'g' as const, id };
    });
  }
}

function toEntry(r: Row): PermissionEntry {
  return { subject: { kind: r.subject_kind, id: r.subject_id }, roleId: r.role_id, codes: JSON.parse(r.codes) as CodeStates };
}

/** Deny wins, then grant. */
export function combine(all: (CodeStates | undefined)[]): CodeStates {
  const out: CodeStates = {};
  for (const states of all) {
    if (!states) continue;
    for (const [code, v] of Object.entries(states) as [PermissionCode, 1 | -1][]) {
      if (v === -1) out[code] = -1;
      else if (v === 1 && out[code] !== -1) out[code] = 1;
    }
  }
  return out;
}
