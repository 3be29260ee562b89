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
import type { MetadataStore } from '../store/metadata-store.js';
import type { Directory, MemberRow } from './directory.js';
import type { EntryRow } from './entries.js';
import { FaultCode, ServiceFault, badParam } from './fault.js';
import type { FileTree } from './file-tree.js';
import { PERMISSION_CODES, entryStates, type CodeStates, type PermissionCode } from './permissions-codes.js';
import { EnterpriseDepartments, type DepartmentLookup } from './permissions-departments.js';
import { mapInOrder, someInOrder } from './in-order.js';

export type SubjectKind = 'm' | 'g';
export interface Subject { kind: SubjectKind; id: number }
export interface PermissionEntry { subject: Subject; roleId: number; codes: CodeStates }

interface Row { subject_kind: SubjectKind; subject_id: number; role_id: number; codes: string }

const ALL: CodeStates = Object.fromEntries(PERMISSION_CODES.map((c) => [c, 1])) as CodeStates;

export class FolderPermissions {
  private readonly db: MetadataStore;

  constructor(private readonly tree: FileTree, private readonly directory: Directory, readonly departments: DepartmentLookup) {
    this.db = tree.db;
  }

  /** The model over the enterprise directory's departments. */
  static over(tree: FileTree, directory: Directory): FolderPermissions {
    return new FolderPermissions(tree, directory, new EnterpriseDepartments(tree.db));
  }

  // ---- reading -----------------------------------------------------------------------------------

  /** The folder a permission is set on: the root ('') or a present folder (a file is refused). */
  async folder(libraryId: number, fullpath: string): Promise<{ entryId: number; row?: EntryRow }> {
    if (fullpath === '') return { entryId: 0 };
    const row = await this.tree.require(libraryId, fullpath);
    if (!row.dir) throw new ServiceFault(FaultCode.NotAFolder, `permissions are set on folders; ${JSON.stringify(fullpath)} is a file`);
    return { entryId: row.id, row };
  }

  /** Entries set directly on a folder. */
  async entriesAt(libraryId: number, entryId: number): Promise<PermissionEntry[]> {
    const rows = await this.db.all('SELECT * FROM folder_permissions WHERE library_id = ? AND entry_id = ? ORDER BY subject_kind DESC, subject_id', [libraryId, entryId]) as Row[];
    return rows.map(toEntry);
  }

  async inherits(entryId: number): Promise<boolean> {
    if (entryId === 0) return true;
    const row = await this.db.get('SELECT inherit FROM folder_inherit WHERE entry_id = ?', [entryId]) as { inherit: number } | undefined;
    return row ? row.inherit === 1 : true;
  }

  /** Folder ids from `entryId` up to the root (0 last), as far as inheritance reaches. */
  private async chain(entryId: number): Promise<number[]> {
    const out: number[] = [];
    let id: number | null = entryId;
    while (id !== null) {
      out.push(id);
      if (id === 0 || !await this.inherits(id)) return out;
      const row = await this.tree.byId(id);
      id = row?.parent_id ?? 0;
    }
    return out;
  }

  /** The entry a subject gets at a folder (nearest wins), or undefined. Library roles sit above the root. */
  async subjectStates(libraryId: number, subject: Subject, entryId: number, libraryRoles?: Map<number, number>): Promise<CodeStates | undefined> {
    const chain = await this.chain(entryId);
    for (const id of chain) {
      const row = await this.db.get<Row>('SELECT * FROM folder_permissions WHERE library_id = ? AND entry_id = ? AND subject_kind = ? AND subject_id = ?', [libraryId, id, subject.kind, subject.id]);
      if (row) return entryStates(row.role_id, JSON.parse(row.codes) as CodeStates);
    }
    if (chain[chain.length - 1] !== 0) return undefined;
    const role = subject.kind === 'm' ? await this.memberRole(libraryId, subject.id) : (libraryRoles ?? await this.departments.libraryRoles(libraryId)).get(subject.id);
    return role === undefined ? undefined : entryStates(role, {});
  }

  /** A member's permission at a folder. */
  async memberStates(libraryId: number, memberId: number, entryId: number): Promise<CodeStates> {
    const lib = await this.directory.requireLibrary(libraryId);
    if (lib.owner_id === memberId) return { ...ALL };
    const roles = await this.departments.libraryRoles(libraryId);
    const subjects: Subject[] = [{ kind: 'm', id: memberId }, ...(await this.departments.departmentsOf(memberId)).map((id) => ({ kind: 'g' as const, id }))];
    return combine(await mapInOrder(subjects, async (s) => this.subjectStates(libraryId, s, entryId, roles)));
  }

  /** A department's permission at a folder (with the departments above it). */
  async groupStates(libraryId: number, groupId: number, entryId: number): Promise<CodeStates> {
    const roles = await this.departments.libraryRoles(libraryId);
    return combine(await mapInOrder(await this.departments.withAncestors(groupId), async (id) => this.subjectStates(libraryId, { kind: 'g', id }, entryId, roles)));
  }

  async memberRole(libraryId: number, memberId: number): Promise<number | undefined> {
    return (await this.db.get('SELECT role_id FROM library_members WHERE library_id = ? AND member_id = ?', [libraryId, memberId]) as { role_id: number } | undefined)?.role_id;
  }

  /** Whether a member takes part in a library at all: owner, member, a department of theirs, or a folder entry. */
  async takesPart(libraryId: number, memberId: number): Promise<boolean> {
    if (await this.directory.memberInLibrary(memberId, libraryId)) return true;
    const groups = await this.departments.departmentsOf(memberId);
    const roles = await this.departments.libraryRoles(libraryId);
    if (groups.some((g) => roles.has(g))) return true;
    if (await this.db.get("SELECT 1 FROM folder_permissions WHERE library_id = ? AND subject_kind = 'm' AND subject_id = ?", [libraryId, memberId])) return true;
    return someInOrder(groups, async (g) => !!await this.db.get("SELECT 1 FROM folder_permissions WHERE library_id = ? AND subject_kind = 'g' AND subject_id = ?", [libraryId, g]));
  }

  /** Members who may have a permission on a folder: owner, library members, members with an entry, members of departments (and their sub-departments) with one. */
  async candidates(libraryId: number): Promise<number[]> {
    const lib = await this.directory.requireLibrary(libraryId);
    const ids = new Set<number>();
    if (lib.owner_id) ids.add(lib.owner_id);
    for (const r of await this.db.all('SELECT member_id FROM library_members WHERE library_id = ?', [libraryId]) as { member_id: number }[]) ids.add(r.member_id);
    for (const r of await this.db.all('SELECT DISTINCT subject_kind AS k, subject_id AS id FROM folder_permissions WHERE library_id = ?', [libraryId]) as { k: SubjectKind; id: number }[]) {
      if (r.k === 'm') ids.add(r.id);
      else for (const m of await this.departments.membersReached(r.id)) ids.add(m);
    }
    for (const g of (await this.departments.libraryRoles(libraryId)).keys()) for (const m of await this.departments.membersReached(g)) ids.add(m);
    return [...ids].sort((a, b) => a - b);
  }

  // ---- changing ----------------------------------------------------------------------------------

  /** Sets (replaces) the entries of subjects on a folder; `merge` overlays the codes on existing entries instead. */
  async set(libraryId: number, entryId: number, subjects: Subject[], roleId: number, codes: CodeStates, merge = false): Promise<void> {
    await this.tree.tx(async () => {
      const put = `INSERT INTO folder_permissions (library_id, entry_id, subject_kind, subject_id, role_id, codes) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (library_id, entry_id, subject_kind, subject_id) DO UPDATE SET role_id = excluded.role_id, codes = excluded.codes`;
      for (const s of subjects) {
        let role = roleId;
        let next = codes;
        const existing = merge ? await this.db.get<Row>('SELECT * FROM folder_permissions WHERE library_id = ? AND entry_id = ? AND subject_kind = ? AND subject_id = ?', [libraryId, entryId, s.kind, s.id]) : undefined;
        if (existing) {
          role = roleId || existing.role_id;
          next = { ...(JSON.parse(existing.codes) as CodeStates), ...codes };
        }
        await this.db.run(put, [libraryId, entryId, s.kind, s.id, role, JSON.stringify(next)]);
      }
      await this.touch(libraryId, entryId);
    });
  }

  /** Removes the entries of subjects on a folder (all entries when `subjects` is undefined). */
  async remove(libraryId: number, entryId: number, subjects?: Subject[]): Promise<void> {
    await this.tree.tx(async () => {
      if (!subjects) await this.db.run('DELETE FROM folder_permissions WHERE library_id = ? AND entry_id = ?', [libraryId, entryId]);
      else {
        for (const s of subjects) {
          await this.db.run('DELETE FROM folder_permissions WHERE library_id = ? AND entry_id = ? AND subject_kind = ? AND subject_id = ?', [libraryId, entryId, s.kind, s.id]);
        }
      }
      await this.touch(libraryId, entryId);
    });
  }

  /**
   * Turns inheritance on or off. Turning it off with `keep` copies what each subject inherited into the
   * folder (where the folder has no entry of its own for that subject), so nobody's permission changes.
   */
  async setInherit(libraryId: number, entryId: number, inherit: boolean, keep: boolean): Promise<void> {
    if (entryId === 0) throw badParam('fullpath', 'a folder (the library root always takes the library roles)', '');
    await this.tree.tx(async () => {
      if (!inherit && keep && await this.inherits(entryId)) {
        const row = (await this.tree.byId(entryId))!;
        const parentId = row.parent_id ?? 0;
        const own = new Set((await this.entriesAt(libraryId, entryId)).map((e) => `${e.subject.kind}${e.subject.id}`));
        const subjects = (await this.subjectsAbove(libraryId, parentId)).filter((s) => !own.has(`${s.kind}${s.id}`));
        for (const s of subjects) {
          const states = await this.subjectStates(libraryId, s, parentId);
          if (!states) continue;
          await this.db.run('INSERT INTO folder_permissions (library_id, entry_id, subject_kind, subject_id, role_id, codes) VALUES (?, ?, ?, ?, 0, ?)',
            [libraryId, entryId, s.kind, s.id, JSON.stringify(states)]);
        }
      }
      await this.db.run('INSERT INTO folder_inherit (entry_id, inherit) VALUES (?, ?) ON CONFLICT (entry_id) DO UPDATE SET inherit = excluded.inherit', [entryId, inherit ? 1 : 0]);
      await this.touch(libraryId, entryId);
    });
  }

  /** Subjects with an entry on `entryId` or a folder above it (as far as inheritance reaches), or a library role. */
  private async subjectsAbove(libraryId: number, entryId: number): Promise<Subject[]> {
    const seen = new Map<string, Subject>();
    const add = (s: Subject) => seen.set(`${s.kind}${s.id}`, s);
    const chain = await this.chain(entryId);
    for (const id of chain) for (const e of await this.entriesAt(libraryId, id)) add(e.subject);
    if (chain[chain.length - 1] === 0) {
      for (const r of await this.db.all('SELECT member_id FROM library_members WHERE library_id = ?', [libraryId]) as { member_id: number }[]) add({ kind: 'm', id: r.member_id });
      for (const g of (await this.departments.libraryRoles(libraryId)).keys()) add({ kind: 'g', id: g });
    }
    return [...seen.values()];
  }

  /** A permission change changes the folder's operation time (spec "updates" rule 4). */
  private async touch(libraryId: number, entryId: number): Promise<void> {
    if (entryId === 0) return;
    await this.db.run('UPDATE entries SET op_ms = ? WHERE id = ?', [await this.tree.opClock.next(libraryId), entryId]);
  }

  // ---- subjects ----------------------------------------------------------------------------------

  /** Members by id, account or external id, all of the library's enterprise (40406 names the first missing). */
  async members(entId: number, by: 'id' | 'account' | 'out_id', values: readonly (string | number)[]): Promise<Subject[]> {
    const col = by === 'id' ? 'id' : by;
    return mapInOrder(values, async (v) => {
      const m = await this.db.get<MemberRow>(`SELECT * FROM members WHERE ${col} = ? AND ent_id = ?`, [v, entId]);
      if (!m) throw new ServiceFault(FaultCode.MemberMissing, `member ${by}=${String(v)} not found in this enterprise`);
      return { kind: 'm' as const, id: m.id };
    });
  }

  async groups(entId: number, by: 'id' | 'out_id', values: readonly (string | number)[]): Promise<Subject[]> {
    return mapInOrder(values, async (v) => {
      const id = by === 'id' ? Number(v) : await this.departments.byOutId(String(v), entId);
      if (id === undefined || !Number.isInteger(id) || !await this.departments.exists(id, entId)) {
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
