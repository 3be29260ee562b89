/**
 * LibraryContent: brings verified bytes into a library (ingest a temporary file into the BlobStore, or
 * have it place an upload staged in it, and write the file record in one transaction) and collects blobs nothing references any more. A blob's
 * ingest and its collection run under the per-blob lock (the BlobStore's in one process, a row of
 * `blob_locks` between the processes of a service), so a collection never removes a file that a
 * concurrent ingest has just put in place. Reusing a stored blob takes no such lock: the transaction that
 * references it first locks its row (FileTree.placeContent), so the collection's removal of that row
 * either commits before (the reuse finds the blob gone) or waits and finds the new reference.
 */
import { removeFileIfPresent } from '../../shared/atomic-file.js';
import type { Logger } from '../../shared/log.js';
import type { BlobStore } from '../store/blob-store.js';
import type { BlobLocks } from '../store/blob-locks.js';
import type { FinishedUpload } from '../store/staged-uploads.js';
import type { EntryRow } from './entries.js';
import type { Content, FileTree } from './file-tree.js';

/**
 * Verified content: a local temporary file (the blob store moves it in), or an upload staged in the blob
 * store itself (it places the staged bytes; the upload server removes them afterwards).
 */
export type VerifiedFile = FinishedUpload;

/** What an ingest needs, read under the blob's lock (LibraryContent.ingestPrepared). */
export interface PreparedIngest {
  /** The library whose transaction records the file. */
  libraryId: number;
  /** Whether the blob is stored already. */
  stored: boolean;
  /** Writes the file that references the content, in that transaction. */
  place: (content: Content) => Promise<EntryRow>;
}

export class LibraryContent {
  private collecting: Promise<void> | undefined;
  private again = false;

  /**
   * `locks`: the per-blob lock; the BlobStore's own (one process) unless the processes of a service
   * share the metadata (store/blob-locks.ts).
   */
  constructor(private readonly tree: FileTree, readonly blobs: BlobStore, private readonly log: Logger, private readonly locks: BlobLocks = blobs) {}

  /**
   * Ingests `file` (its SHA-1 and size verified by the caller) and runs `place` in the same transaction
   * that records the blob. On refusal nothing stays: neither the record nor the bytes.
   */
  async ingest(libraryId: number, file: VerifiedFile, place: (content: Content) => Promise<EntryRow>): Promise<EntryRow> {
    return this.ingestPrepared(file, async () => ({ libraryId, stored: await this.tree.blobStored(file.sha1), place }));
  }

  /**
   * As `ingest`, with the library and the placement given under the blob's lock by `prepare`, which
   * reads whether the blob is stored (as FileTree.blobStored) with what it needs, in one statement.
   * What it throws refuses the content as `place` would: nothing stays.
   */
  async ingestPrepared(file: VerifiedFile, prepare: () => Promise<PreparedIngest>): Promise<EntryRow> {
    const content = { sha1: file.sha1, size: file.size };
    try {
      return await this.locks.lock(file.sha1, async (hold) => {
        const { libraryId, stored: known, place } = await prepare();
        if ('staged' in file) {
          if (!known) await file.staged.place();
        } else if (known) await removeFileIfPresent(file.tempFilePath);
        else await this.blobs.ingest(file.tempFilePath, file.sha1, file.size);
        try {
          return await this.tree.tx(async () => {
            await this.tree.addBlob(content);
            const row = await place(content);
            await hold?.releaseAtCommit();
            return row;
          }, libraryId);
        } catch (err) {
          if (!await this.tree.blobStored(file.sha1)) await this.blobs.remove(file.sha1);
          throw err;
        }
      });
    } finally {
      if ('tempFilePath' in file) await removeFileIfPresent(file.tempFilePath);
      this.scheduleCollect();
    }
  }

  /**
   * Runs `place` against a blob already stored (instant upload, copy) in a transaction of library
   * `libraryId`; `place` must reference the blob through FileTree.placeContent (which pins its row).
   */
  async reuse(libraryId: number, sha1: string, place: () => Promise<EntryRow>): Promise<EntryRow> {
    return this.tree.tx(place, libraryId);
  }

  /** Starts a collection soon (coalesced); errors are logged. */
  scheduleCollect(): void {
    if (this.collecting) {
      this.again = true;
      return;
    }
    this.collecting = (async () => {
      do {
        this.again = false;
        await this.collect().catch((err: unknown) => this.log.error({ err }, 'blob collection failed'));
      } while (this.again);
    })().finally(() => { this.collecting = undefined; });
  }

  /** Waits for a running collection (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.collecting) await this.collecting;
  }

  /** Removes every blob with no reference left; returns how many. */
  async collect(): Promise<number> {
    const rows = await this.tree.db.all('SELECT sha1 FROM blobs WHERE refs <= 0') as { sha1: string }[];
    let removed = 0;
    for (const { sha1 } of rows) {
      await this.locks.lock(sha1, async () => {
        const gone = await this.tree.tx(async () => (await this.tree.db.run('DELETE FROM blobs WHERE sha1 = ? AND refs <= 0', [sha1])).changes > 0);
        if (gone) {
          await this.blobs.remove(sha1);
          removed++;
        }
      });
    }
    if (removed) this.log.debug({ removed }, 'unreferenced blobs removed');
    return removed;
  }
}
