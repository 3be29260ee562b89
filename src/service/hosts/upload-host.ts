/**
 * LibraryUploadHost: the UploadHost of the upload server over the service's storage (authorization,
 * pending create_file steps, blob lookup, commit of verified content).
 */
import type { FinishedContent, PendingUpload, UploadCaller, UploadedFile, UploadHost, VerifiedContent, WebUploadTarget } from '../upload/types.js';
import type { Directory } from '../domain/directory.js';
import { remainingBytes, type FileTree } from '../domain/file-tree.js';
import type { LibraryContent } from '../domain/content.js';
import type { PendingLookup, PendingUploads } from '../domain/pending-uploads.js';
import type { EntryRow, Operator } from '../domain/entries.js';
import { FaultCode, ServiceFault } from '../domain/fault.js';
import { joinPath, nameProblem, normalizePath } from '../domain/paths.js';
import { accountRefusal } from '../domain/members.js';
import { FolderPermissions } from '../domain/permissions.js';
import { MemberAccess } from '../domain/permissions-access.js';

export class LibraryUploadHost implements UploadHost {
  private readonly permissions: FolderPermissions;

  constructor(
    readonly tempDir: string,
    private readonly directory: Directory,
    private readonly tree: FileTree,
    private readonly content: LibraryContent,
    private readonly uploads: PendingUploads,
    private readonly clock: () => number,
  ) {
    this.permissions = FolderPermissions.over(tree, directory);
  }

  async authorizeLibrary(orgClientId: string): Promise<UploadCaller> {
    const auth = await this.directory.libraryAuth(orgClientId);
    if (!auth) throw new ServiceFault(FaultCode.ClientNotFound, 'org_client_id not found');
    return { kind: 'library', libraryId: auth.library_id, orgClientId };
  }

  async authorizeToken(token: string): Promise<UploadCaller> {
    const row = await this.directory.accessToken(token);
    if (!row) throw new ServiceFault(FaultCode.TokenInvalid, 'access token invalid');
    if (row.expires_ms <= this.clock()) throw new ServiceFault(FaultCode.TokenExpired, 'access token expired');
    const member = await this.directory.member(row.member_id);
    if (!member) throw new ServiceFault(FaultCode.TokenInvalid, 'access token invalid');
    const refusal = accountRefusal(member, this.clock());
    if (refusal) throw new ServiceFault(FaultCode.NoPermission, refusal);
    return { kind: 'user', memberId: row.member_id, token };
  }

  async pendingUpload(caller: UploadCaller, pathhash: string): Promise<PendingUpload | undefined> {
    // With what upload_init decides on next (instant upload, capacity), read in the same statement.
    const found = await this.uploads.lookup(pathhash);
    if (!found || !await this.mayWrite(caller, found.step.library_id)) return undefined;
    return pendingOf(found);
  }

  async pendingUploadOfLibrary(orgClientId: string, pathhash: string): Promise<PendingUpload | undefined> {
    // The authorization read with the step: a library's authorization writes to its own library only.
    const read = await this.uploads.lookupForAuthorization(orgClientId, pathhash);
    if (!read) throw new ServiceFault(FaultCode.ClientNotFound, 'org_client_id not found');
    return read.found && pendingOf(read.found);
  }

  async blobExists(sha1: string): Promise<boolean> {
    return this.tree.blobStored(sha1);
  }

  async completeUpload(pathhash: string, content: FinishedContent | null, committing?: (file: UploadedFile) => Promise<void>): Promise<UploadedFile> {
    return uploaded(await this.uploads.complete(pathhash, content, committing && ((row) => committing(uploaded(row)))));
  }

  async libraryOfMount(caller: UploadCaller, mountId: number): Promise<number> {
    const lib = await this.tree.db.get('SELECT id FROM libraries WHERE mount_id = ? AND deleted = 0', [mountId]) as { id: number } | undefined;
    if (!lib) throw new ServiceFault(FaultCode.LibraryMissing, `library with mount_id ${mountId} not found`);
    if (!await this.mayWrite(caller, lib.id)) throw new ServiceFault(FaultCode.NoLibraryAccess, `no access to the library with mount_id ${mountId}`);
    return lib.id;
  }

  async remainingCapacity(libraryId: number): Promise<number> {
    return this.tree.remainingCapacity(libraryId);
  }

  async webUpload(caller: UploadCaller, target: WebUploadTarget, content: VerifiedContent): Promise<UploadedFile> {
    if (!await this.mayWrite(caller, target.libraryId)) throw new ServiceFault(FaultCode.NoLibraryAccess, 'no access to this library');
    const problem = nameProblem(target.name);
    if (problem) throw new ServiceFault(FaultCode.BadParam, `parameter 'name': expected ${problem}, got ${JSON.stringify(target.name)}`);
    const fullpath = joinPath(normalizePath('path', target.folder, { allowRoot: true }), target.name);
    if (caller.kind === 'user') {
      // A member's web upload needs what the user API's create_file needs: `w` to replace, `ul` to add.
      const access = await MemberAccess.open(this.permissions, this.tree, target.libraryId, caller.memberId);
      const existing = await this.tree.byPath(target.libraryId, fullpath);
      if (existing && !existing.dir && target.overwrite) await access.requireOn(existing, 'w', 'change this file');
      else await access.requireIn(await access.nearestFolder(fullpath), 'ul', 'add a file here');
    }
    const op = await this.operator(caller, target.opId, target.opName);
    const row = await this.content.ingest(target.libraryId, content, async (c) => this.tree.placeContent(target.libraryId, fullpath, c, target.overwrite, op));
    return uploaded(row);
  }

  /**
   * Whether the caller may send content to the library: its own library authorization, or a member who
   * takes part in it in any way the user API accepts (owner, member, a department, a folder entry). The
   * file's own permission was checked by create_file.
   */
  private async mayWrite(caller: UploadCaller, libraryId: number): Promise<boolean> {
    return caller.kind === 'library' ? caller.libraryId === libraryId : this.permissions.takesPart(libraryId, caller.memberId);
  }

  private async operator(caller: UploadCaller, opId?: string, opName?: string): Promise<Operator> {
    if (caller.kind === 'user') {
      const m = await this.directory.member(caller.memberId);
      return { id: caller.memberId, name: m?.name ?? '', ...(m ? { account: m.account } : {}) };
    }
    if (opId && /^\d+$/.test(opId)) return { id: Number(opId), name: (await this.directory.member(Number(opId)))?.name ?? opName ?? `member ${opId}` };
    return { id: 0, name: opName || ((await this.directory.libraryAuth(caller.orgClientId))?.title ?? '') };
  }
}

function pendingOf({ step: p, blobStored, library }: PendingLookup): PendingUpload {
  return { libraryId: p.library_id, fullpath: p.fullpath, filehash: p.filehash, filesize: p.filesize, blobStored, ...(library ? { remaining: remainingBytes(library) } : {}) };
}

export function uploaded(row: EntryRow): UploadedFile {
  return { hash: row.hash, fullpath: row.fullpath, filesize: row.filesize, filehash: row.filehash };
}
