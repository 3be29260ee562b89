/**
 * PendingUploads: the create_file step. Content already stored completes at once (instant upload,
 * state 1); otherwise a pending upload is recorded under a random `pathhash`, which the upload server
 * presents when the content arrives. Capacity is checked here, before any byte is sent.
 */
import { randomBytes } from 'node:crypto';
import type { CreateFileResult } from '../../shared/records.js';
import type { EntryRow, Operator } from './entries.js';
import { FaultCode, ServiceFault } from './fault.js';
import type { FileTree } from './file-tree.js';
import type { LibraryRow } from './directory.js';
import type { LibraryContent, VerifiedFile } from './content.js';
import { baseOf, joinPath, parentOf } from './paths.js';

export interface PendingRow {
  pathhash: string; library_id: number; fullpath: string; filehash: string; filesize: number; overwrite: number;
  op_id: number; op_name: string; created_ms: number;
}

/** A pending step with what an upload's start decides on (PendingUploads.lookup). */
export interface PendingLookup {
  step: PendingRow;
  /** Whether its content is stored. */
  blobStored: boolean;
  /** Its library's capacity and use; none when the library is gone. */
  library?: Pick<LibraryRow, 'capacity' | 'size_used'>;
}

/** What `lookup` reads of a step (`p`), its blob and its library (`l`), in one statement. */
const LOOKUP_COLUMNS = 'p.*, (SELECT 1 FROM blobs b WHERE b.sha1 = p.filehash) AS blob_stored, l.capacity AS lib_capacity, l.size_used AS lib_size_used';

type LookupRow = PendingRow & { blob_stored: number | null; lib_capacity: number | null; lib_size_used: number | null };

function lookupOf(row: LookupRow): PendingLookup {
  const { blob_stored: blobStored, lib_capacity: capacity, lib_size_used: sizeUsed, ...step } = row;
  return { step, blobStored: blobStored !== null, ...(capacity !== null && sizeUsed !== null ? { library: { capacity: Number(capacity), size_used: Number(sizeUsed) } } : {}) };
}

/** A pending upload older than this is forgotten (ms): 7 days. */
export const PENDING_TTL_MS = 7 * 86_400_000;

export class PendingUploads {
  constructor(private readonly tree: FileTree, private readonly content: LibraryContent, private readonly clock: () => number) {}

  async create(libraryId: number, fullpath: string, sha1: string, size: number, overwrite: boolean, op: Operator, server: string): Promise<CreateFileResult> {
    // The bytes must fit where they are kept, when they are to be sent: the store's free space, asked
    // beside the transaction (it is no statement).
    const freeBytes = this.content.blobs.freeBytes();
    freeBytes.catch(() => undefined); // awaited when the content is not stored
    const answer = await this.tree.tx(async () => {
      // Content already stored is placed at once (instant); the reads for it serve the other way too.
      const placed = await this.tree.placeIfStored(libraryId, fullpath, { sha1, size }, overwrite, op);
      if ('written' in placed) return placed;
      const free = await freeBytes;
      if (free !== undefined && size > free) {
        throw new ServiceFault(FaultCode.CapacityExceeded, `library capacity exceeded: the service's storage has ${free} bytes free, the file needs ${size}`);
      }
      const folder = parentOf(fullpath);
      const { found, library } = placed.missing;
      const parent = found.get(folder);
      if (folder !== '' && parent && !parent.dir) throw new ServiceFault(FaultCode.NotAFolder, `not a folder: ${JSON.stringify(folder)}`);
      const existing = found.get(fullpath);
      const replaces = existing && overwrite && !existing.dir ? existing : undefined;
      if (replaces) await this.tree.checkUnlocked(replaces, op);
      await this.tree.checkCapacity(libraryId, size - (replaces?.filesize ?? 0), library);
      const target = existing && !replaces ? joinPath(folder, await this.tree.freeName(libraryId, folder, baseOf(fullpath), false)) : fullpath;
      // The pathhash is the hash the file will have: the replaced file's, or a fresh one for a new file.
      const pathhash = replaces?.hash ?? randomBytes(20).toString('hex');
      await this.tree.db.runLater(`INSERT INTO pending_uploads (pathhash, library_id, fullpath, filehash, filesize, overwrite, op_id, op_name, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (pathhash) DO UPDATE SET library_id = excluded.library_id, fullpath = excluded.fullpath, filehash = excluded.filehash, filesize = excluded.filesize,
          overwrite = excluded.overwrite, op_id = excluded.op_id, op_name = excluded.op_name, created_ms = excluded.created_ms`, [pathhash, libraryId, target, sha1, size, overwrite ? 1 : 0, op.id, op.name, this.clock()]);
      return { pending: { hash: pathhash, fullpath: target, state: 0, server } };
    }, libraryId);
    if ('pending' in answer) return answer.pending;
    const row = await answer.written;
    return { hash: row.hash, fullpath: row.fullpath, state: 1, server };
  }

  /**
   * The step `pathhash` with what an upload's start decides on, in one statement: whether its content
   * is stored, and its library's capacity and use (none when the library is gone).
   */
  async lookup(pathhash: string): Promise<PendingLookup | undefined> {
    const row = await this.tree.db.get<LookupRow>(
      `SELECT ${LOOKUP_COLUMNS} FROM pending_uploads p LEFT JOIN libraries l ON l.id = p.library_id AND l.deleted = 0 WHERE p.pathhash = ?`, [pathhash]);
    return row && lookupOf(row);
  }

  /**
   * As `lookup`, for a caller with the library authorization `orgClientId`, read with it in one
   * statement: undefined when the authorization is unknown (or its library removed); `found` undefined
   * when the step is not pending in that library.
   */
  async lookupForAuthorization(orgClientId: string, pathhash: string): Promise<{ libraryId: number; found?: PendingLookup } | undefined> {
    const row = await this.tree.db.get<Partial<LookupRow> & { auth_library_id: number }>(
      `SELECT a.library_id AS auth_library_id, ${LOOKUP_COLUMNS}
        FROM library_auths a JOIN libraries l ON l.id = a.library_id AND l.deleted = 0
        LEFT JOIN pending_uploads p ON p.pathhash = ? AND p.library_id = a.library_id WHERE a.org_client_id = ?`, [pathhash, orgClientId]);
    if (!row) return undefined;
    const { auth_library_id: libraryId, ...found } = row;
    if (found.pathhash === null || found.pathhash === undefined) return { libraryId: Number(libraryId) };
    return { libraryId: Number(libraryId), found: lookupOf(found as LookupRow) };
  }

  async get(pathhash: string): Promise<PendingRow | undefined> {
    return await this.tree.db.get('SELECT * FROM pending_uploads WHERE pathhash = ?', [pathhash]) as PendingRow | undefined;
  }

  /**
   * Writes the file of a pending upload: `file` ingested, or (null) the blob already stored. `placed`
   * runs in the transaction that writes the file, with its row (what commits with it).
   */
  async complete(pathhash: string, file: VerifiedFile | null, placed?: (row: EntryRow) => Promise<void>): Promise<EntryRow> {
    if (!file) {
      const p = this.checked(await this.get(pathhash), null);
      const place = await this.placing(p, placed);
      return this.content.reuse(p.library_id, p.filehash, place);
    }
    // Under the blob's lock, the step read with whether its content is stored: one statement.
    return this.content.ingestPrepared(file, async () => {
      const row = await this.tree.db.get<PendingRow & { blob_stored: number | null }>(
        'SELECT p.*, (SELECT 1 FROM blobs b WHERE b.sha1 = ?) AS blob_stored FROM pending_uploads p WHERE p.pathhash = ?', [file.sha1, pathhash]);
      const { blob_stored: stored, ...step } = row ?? { blob_stored: null };
      const p = this.checked(row && (step as PendingRow), file);
      return { libraryId: p.library_id, stored: stored !== null, place: await this.placing(p, placed) };
    });
  }

  /** The step a completion found, checked against the content it brings. */
  private checked(p: PendingRow | undefined, file: VerifiedFile | null): PendingRow {
    if (!p) throw new ServiceFault(FaultCode.FileMissing, 'no pending upload with this pathhash');
    if (file && (file.sha1 !== p.filehash || file.size !== p.filesize)) {
      throw new ServiceFault(FaultCode.BadParam, `content expected sha1 ${p.filehash} and ${p.filesize} bytes, got ${file.sha1} and ${file.size} bytes`);
    }
    return p;
  }

  /** What writes the file of step `p` in its library's transaction (and `placed` with it). */
  private async placing(p: PendingRow, placed?: (row: EntryRow) => Promise<void>): Promise<() => Promise<EntryRow>> {
    // A member's upload counts as theirs against a lock named with their account (Operator.account).
    const member = p.op_id ? await this.tree.directory.member(p.op_id) : undefined;
    const op: Operator = { id: p.op_id, name: p.op_name, ...(member ? { account: member.account } : {}) };
    return async () => {
      // The step is taken (its row deleted) with the file's first statements, in one round trip on
      // PostgreSQL; a step gone meanwhile answers first, and rolls the file back.
      const taken = this.tree.db.get('DELETE FROM pending_uploads WHERE pathhash = ? RETURNING pathhash', [p.pathhash]);
      const row = this.tree.placeContent(p.library_id, p.fullpath, { sha1: p.filehash, size: p.filesize }, p.overwrite === 1, op, p.pathhash);
      const [step, file] = await Promise.allSettled([taken, row]);
      if (step.status === 'rejected') throw step.reason;
      if (!step.value) throw new ServiceFault(FaultCode.FileMissing, 'no pending upload with this pathhash');
      if (file.status === 'rejected') throw file.reason;
      await placed?.(file.value);
      return file.value;
    };
  }


  /** Forgets pending uploads older than PENDING_TTL_MS. */
  async expire(): Promise<number> {
    return (await this.tree.db.run('DELETE FROM pending_uploads WHERE created_ms < ?', [this.clock() - PENDING_TTL_MS])).changes;
  }
}
