/**
 * MemberAccess: one member's permissions in one library for the length of one request (each folder's
 * permission is computed once). Where a code is checked:
 * - on a folder's contents (`cd` to list it; `ul`, `mk` to add to it): at that folder;
 * - on an item (`ls` display, `dl`, `pv`, `w`, `ren`, `rm`, `ln`…): at the folder holding it;
 *   for a folder item, `ss` / `sren` / `srm` at the folder itself also allow display / rename / delete.
 * A refusal is 403/40310 naming the code and the folder.
 */
import type { EntryRow } from './entries.js';
import { FaultCode, ServiceFault } from './fault.js';
import type { FileTree } from './file-tree.js';
import type { CodeStates, PermissionCode } from './permissions-codes.js';
import type { FolderPermissions } from './permissions.js';
import { parentOf } from './paths.js';

export class MemberAccess {
  private readonly memo = new Map<number, CodeStates>();

  constructor(private readonly perms: FolderPermissions, private readonly tree: FileTree, readonly libraryId: number, readonly memberId: number) {}

  /** Throws 403/40311 when the member takes no part in the library. */
  static async open(perms: FolderPermissions, tree: FileTree, libraryId: number, memberId: number): Promise<MemberAccess> {
    if (!await perms.takesPart(libraryId, memberId)) throw new ServiceFault(FaultCode.NoLibraryAccess, 'no access to this library');
    return new MemberAccess(perms, tree, libraryId, memberId);
  }

  async states(folderId: number): Promise<CodeStates> {
    let s = this.memo.get(folderId);
    if (!s) {
      s = await this.perms.memberStates(this.libraryId, this.memberId, folderId);
      this.memo.set(folderId, s);
    }
    return s;
  }

  async can(folderId: number, code: PermissionCode): Promise<boolean> {
    return (await this.states(folderId))[code] === 1;
  }

  async mayDisplay(row: EntryRow): Promise<boolean> {
    return await this.can(row.parent_id ?? 0, 'ls') || (row.dir === 1 && await this.can(row.id, 'ss'));
  }

  /** Requires `code` at a folder (0 = root), for an action on its contents. */
  async requireIn(folderId: number, code: PermissionCode, action: string): Promise<void> {
    if (!await this.can(folderId, code)) throw denied(action, code, await this.folderName(folderId));
  }

  /** Requires `code` on an item (at its folder), or `selfCode` at the item when it is a folder. */
  async requireOn(row: EntryRow, code: PermissionCode, action: string, selfCode?: PermissionCode): Promise<void> {
    const folderId = row.parent_id ?? 0;
    if (await this.can(folderId, code)) return;
    if (selfCode && row.dir === 1 && await this.can(row.id, selfCode)) return;
    throw denied(action, selfCode && row.dir === 1 ? `${code}' or '${selfCode}` : code, await this.folderName(folderId));
  }

  /** The deepest existing folder on the way to `fullpath`'s parent (where new entries would be added): its id (0 = root). */
  async nearestFolder(fullpath: string): Promise<number> {
    for (let folder = parentOf(fullpath); folder !== ''; folder = parentOf(folder)) {
      const row = await this.tree.byPath(this.libraryId, folder);
      if (row) {
        if (!row.dir) throw new ServiceFault(FaultCode.NotAFolder, `not a folder: ${JSON.stringify(folder)}`);
        return row.id;
      }
    }
    return 0;
  }

  private async folderName(folderId: number): Promise<string> {
    return folderId === 0 ? 'the library root' : JSON.stringify((await this.tree.byId(folderId))?.fullpath ?? '');
  }
}

function denied(action: string, code: string, where: string): ServiceFault {
  return new ServiceFault(FaultCode.NoPermission, `no permission to ${action}: needs '${code}' on ${where}`);
}
