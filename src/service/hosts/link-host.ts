/**
 * LibraryLinkHost: the LinkHost of the share-link pages over the service's storage.
 */
import { Transform, pipeline, type Readable } from 'node:stream';
import type { LinkEntry, LinkHost } from '../links/types.js';
import type { UploadedFile, VerifiedContent } from '../upload/types.js';
import type { FileTree } from '../domain/file-tree.js';
import type { FileQueries } from '../domain/file-queries.js';
import type { LibraryContent } from '../domain/content.js';
import { seconds, type EntryRow } from '../domain/entries.js';
import { FaultCode, ServiceFault } from '../domain/fault.js';
import { joinPath } from '../domain/paths.js';
import { uploaded } from './upload-host.js';

export class LibraryLinkHost implements LinkHost {
  constructor(
    readonly tempDir: string,
    private readonly tree: FileTree,
    private readonly queries: FileQueries,
    private readonly content: LibraryContent,
    private readonly clock: () => number,
    /** Counts the bytes of share-link downloads in the traffic statistics. */
    private readonly countTraffic?: (libraryId: number, kind: 'link', bytes: number) => void,
    /** Throws when the library's enterprise may serve no more share-link traffic today. */
    private readonly checkLinkTraffic?: (libraryId: number) => Promise<void>,
    /** Throws when the library may not change now (its enterprise's subscription ended). */
    private readonly checkChange?: (libraryId: number) => Promise<void>,
  ) {}

  async entryByPath(libraryId: number, fullpath: string): Promise<LinkEntry | undefined> {
    if (fullpath === '') return { hash: '', dir: true, fullpath: '', filename: '', filesize: 0, filehash: '', lastDateline: 0 };
    const row = await this.tree.byPath(libraryId, fullpath);
    return row ? linkEntry(row) : undefined;
  }

  async entryByHash(libraryId: number, hash: string): Promise<LinkEntry | undefined> {
    if (hash === '') return this.entryByPath(libraryId, '');
    const row = await this.tree.byHash(libraryId, hash);
    return row ? linkEntry(row) : undefined;
  }

  async listFolder(libraryId: number, fullpath: string): Promise<LinkEntry[]> {
    const out: LinkEntry[] = [];
    for (let start = 0; ; start += 1000) {
      const page = await this.queries.ls(libraryId, fullpath, { start, size: 1000 });
      for (const r of page.list) {
        out.push({ hash: r.hash, dir: r.dir === 1, fullpath: r.fullpath, filename: r.filename, filesize: r.filesize, filehash: r.filehash, lastDateline: r.last_dateline });
      }
      if (page.list.length < 1000) return out;
    }
  }

  async openContent(libraryId: number, filehash: string): Promise<Readable> {
    if (!await this.tree.blobStored(filehash)) throw new ServiceFault(FaultCode.FileMissing, 'content no longer stored');
    await this.checkLinkTraffic?.(libraryId);
    const stream = this.content.blobs.read(filehash);
    const count = this.countTraffic;
    if (!count) return stream;
    // Counted as it passes on to the page. Not a 'data' listener on the blob's stream: that would start
    // it flowing before the page pipes it (the page awaits its log line first), losing the chunks.
    const counted = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        count(libraryId, 'link', chunk.length);
        done(null, chunk);
      },
    });
    return pipeline(stream, counted, () => { /* an error destroys both; the page's pipeline reports it */ });
  }

  async remainingCapacity(libraryId: number): Promise<number> {
    return this.tree.remainingCapacity(libraryId);
  }

  async storeUpload(libraryId: number, folder: string, name: string, content: VerifiedContent, opName: string): Promise<UploadedFile> {
    await this.checkChange?.(libraryId);
    const row = await this.content.ingest(libraryId, content, async (c) => this.tree.placeContent(libraryId, joinPath(folder, name), c, false, { id: 0, name: opName }));
    return uploaded(row);
  }

  async log(libraryId: number, act: number, fullpath: string, operator: { opId?: string; opName?: string; ip?: string }): Promise<void> {
    const row = await this.tree.byPath(libraryId, fullpath);
    await this.tree.db.run('INSERT INTO file_events (library_id, entry_id, hash, act, dir, fullpath, member_id, member_name, ms, property) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', [libraryId, row?.id ?? null, row?.hash ?? '', act, row?.dir ?? 0, fullpath, Number(operator.opId) || 0, operator.opName ?? '', this.clock(), JSON.stringify({ ip: operator.ip ?? '' })]);
  }
}

function linkEntry(row: EntryRow): LinkEntry {
  return { hash: row.hash, dir: row.dir === 1, fullpath: row.fullpath, filename: row.name, filesize: row.filesize, filehash: row.filehash, lastDateline: seconds(row.last_ms) };
}
