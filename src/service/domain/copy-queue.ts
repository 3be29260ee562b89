/**
 * FileCopies: `copy` and `mcopy`. A file is copied at once (the copy references the same blob). A
 * folder's target is created at once and its content is copied by a queue in the background: batches
 * of entries, each batch one transaction (parents before children, so the tree is whole between
 * batches). Queue status: 0 queued → 1 running → 2 finished, or 3 failed (reason kept in `error`).
 *
 * The queue is in the metadata store and every process of a service works on it: a worker claims the
 * oldest queued item in one transaction (status 1, `lease_holder` = the process, `lease_until_ms`), so
 * two processes never run one item, and renews the lease after each batch. An item whose lease ran out
 * (its process stopped in the middle) is marked failed by the next worker that looks; a queued item is
 * run by whichever process looks first (the one that queued it, at once; any other within `pollMs`).
 */
import { randomBytes } from 'node:crypto';
import type { CopyResult, QueueStatus } from '../../shared/records.js';
import type { Logger } from '../../shared/log.js';
import { seconds, type EntryRow, type Operator } from './entries.js';
import { FaultCode, ServiceFault } from './fault.js';
import { Act, type FileTree } from './file-tree.js';
import type { LibraryContent } from './content.js';
import type { FileQueries } from './file-queries.js';
import { baseOf, isWithin, joinPath, parentOf } from './paths.js';

interface QueueRow {
  id: number; library_id: number; source_id: number; target_id: number; fullpath: string; status: number;
  op_id: number; op_name: string; error: string | null; add_ms: number; start_ms: number | null; finish_ms: number | null;
  lease_holder: string | null; lease_until_ms: number | null; claims: number;
}

export interface FileCopiesOptions {
  /** Entries copied per transaction. Default 500. */
  batchSize?: number;
  /** How long a claim holds an item without renewal (ms); renewed after each batch. Default 60 000. */
  leaseMs?: number;
  /** How often the worker looks for items queued by other processes and for expired leases (ms). Default 30 000. */
  pollMs?: number;
}

export class FileCopies {
  private running: Promise<void> | undefined;
  private closed = false;
  private readonly batchSize: number;
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private poll: NodeJS.Timeout | undefined;
  /** Set by each kick: the worker looks once more before it stops. */
  private kicked = false;
  /** This process, as `lease_holder` of the items it runs. */
  readonly holder = `${process.pid}-${randomBytes(6).toString('hex')}`;

  constructor(
    private readonly tree: FileTree, private readonly queries: FileQueries, private readonly content: LibraryContent,
    private readonly clock: () => number, private readonly log: Logger, opts: FileCopiesOptions = {},
  ) {
    this.batchSize = opts.batchSize ?? 500;
    this.leaseMs = opts.leaseMs ?? 60_000;
    this.pollMs = opts.pollMs ?? 30_000;
  }

  /**
   * Marks items whose process stopped in the middle as failed (on SQLite, the only process: every item
   * left running), starts on the queued ones and looks again every `pollMs`.
   */
  async open(): Promise<void> {
    if (this.tree.db.engine === 'sqlite') {
      await this.tree.db.run("UPDATE copy_queue SET status = 3, error = 'interrupted: the service stopped', finish_ms = ? WHERE status = 1", [this.clock()]);
    }
    await this.failExpired();
    this.poll = setInterval(() => this.kick(), this.pollMs);
    this.poll.unref();
    this.kick();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.poll) clearInterval(this.poll);
    await this.running;
  }

  /** Items running under a lease that ran out: their process stopped. */
  private async failExpired(): Promise<void> {
    await this.tree.db.run("UPDATE copy_queue SET status = 3, error = 'interrupted: the process running it stopped', finish_ms = ? WHERE status = 1 AND lease_until_ms <= ?", [this.clock(), this.clock()]);
  }

  /** Claims the oldest queued item for this process (one transaction: no other process gets it). */
  private async claim(): Promise<QueueRow | undefined> {
    return this.tree.db.tx(async (s) => {
      const next = await s.get<{ id: number }>('SELECT id FROM copy_queue WHERE status = 0 ORDER BY id LIMIT 1');
      if (!next) return undefined;
      const now = this.clock();
      return s.get<QueueRow>(
        'UPDATE copy_queue SET status = 1, start_ms = ?, lease_holder = ?, lease_until_ms = ?, claims = claims + 1 WHERE id = ? AND status = 0 RETURNING *',
        [now, this.holder, now + this.leaseMs, next.id],
      );
    });
  }

  /** Copies `from` to `to` (full path including the name). A taken name gets a number unless `overwrite`. */
  async copy(libraryId: number, from: string, to: string, overwrite: boolean, op: Operator): Promise<CopyResult> {
    const src = await this.tree.require(libraryId, from);
    if (src.dir && isWithin(to, from)) throw new ServiceFault(FaultCode.MoveIntoItself, `cannot copy ${JSON.stringify(from)} into itself (${JSON.stringify(to)})`);
    if (!src.dir) {
      const row = await this.content.reuse(libraryId, src.filehash, async () => {
        const existing = await this.tree.byPath(libraryId, to);
        if (existing?.dir && overwrite) await this.tree.remove(libraryId, to, false, op);
        return this.tree.placeContent(libraryId, to, { sha1: src.filehash, size: src.filesize }, overwrite, op);
      });
      return { hash: row.hash, fullpath: row.fullpath };
    }
    const result = await this.tree.tx(async () => {
      await this.tree.checkCapacity(libraryId, (await this.queries.folderTotals(src)).files_size);
      const existing = await this.tree.byPath(libraryId, to);
      if (existing && overwrite) await this.tree.remove(libraryId, to, false, op);
      const folder = parentOf(to);
      const parentId = await this.tree.ensureFolder(libraryId, folder, op);
      const name = existing && !overwrite ? await this.tree.freeName(libraryId, folder, baseOf(to), true) : baseOf(to);
      const target = await this.tree.insert(libraryId, parentId, joinPath(folder, name), { dir: 1, tags: src.tags }, op);
      await this.tree.event(target, Act.Create, op, { property: { copied_from: from } });
      const queueId = await this.tree.db.insert('INSERT INTO copy_queue (library_id, source_id, target_id, fullpath, op_id, op_name, add_ms) VALUES (?, ?, ?, ?, ?, ?, ?)', [libraryId, src.id, target.id, target.fullpath, op.id, op.name, this.clock()]);
      return { hash: target.hash, fullpath: target.fullpath, queue_id: String(queueId) };
    }, libraryId);
    this.kick();
    return result;
  }

  /** `mcopy`: each source into its destination folder (one folder for all, or one per source). */
  async mcopy(libraryId: number, froms: string[], folders: string[], op: Operator): Promise<CopyResult[]> {
    if (folders.length !== 1 && folders.length !== froms.length) {
      throw new ServiceFault(FaultCode.BadParam, `parameter 'paths': expected 1 or ${froms.length} folders (one per source), got ${folders.length}`);
    }
    const out: CopyResult[] = [];
    for (let i = 0; i < froms.length; i++) {
      const folder = folders.length === 1 ? folders[0]! : folders[i]!;
      if (folder !== '') await this.tree.folderId(libraryId, folder);
      out.push(await this.copy(libraryId, froms[i]!, joinPath(folder, baseOf(froms[i]!)), false, op));
    }
    return out;
  }

  async status(libraryId: number, queueId: string): Promise<QueueStatus> {
    const row = /^\d+$/.test(queueId) ? await this.tree.db.get('SELECT * FROM copy_queue WHERE id = ? AND library_id = ?', [Number(queueId), libraryId]) as QueueRow | undefined : undefined;
    if (!row) throw new ServiceFault(FaultCode.QueueItemMissing, `no copy queue item ${JSON.stringify(queueId)}`);
    return {
      status: row.status, fullpath: row.fullpath, add_dateline: seconds(row.add_ms),
      start_dateline: row.start_ms ? seconds(row.start_ms) : 0, finish_dateline: row.finish_ms ? seconds(row.finish_ms) : 0,
    };
  }

  /** Waits until the queue is empty (tests). */
  async drained(): Promise<void> {
    while (this.running) await this.running;
  }

  private kick(): void {
    this.kicked = true;
    if (this.running || this.closed) return;
    this.running = (async () => {
      await new Promise((r) => setImmediate(r));
      await this.failExpired();
      for (;;) {
        if (this.closed || !this.tree.db.open) return;
        this.kicked = false;
        const item = await this.claim();
        if (item) await this.run(item);
        else if (!this.kicked) return; // an item queued while the claim looked is taken on the next turn
      }
    })().catch((err: unknown) => this.log.error({ err }, 'copy queue worker failed'))
      .finally(() => { this.running = undefined; });
  }

  /** Extends this process's lease on the item; false when it lost it (the lease ran out and the item was failed). */
  private async renew(id: number): Promise<boolean> {
    return (await this.tree.db.run('UPDATE copy_queue SET lease_until_ms = ? WHERE id = ? AND status = 1 AND lease_holder = ?', [this.clock() + this.leaseMs, id, this.holder])).changes > 0;
  }

  private async run(item: QueueRow): Promise<void> {
    const db = this.tree.db;
    try {
      const source = await this.tree.byId(item.source_id);
      if (!source || source.state !== 0) throw new Error('the source folder no longer exists');
      const sourcePath = source.fullpath;
      const pending = (await this.tree.subtree(source)).map((r) => r.id);
      const targetOf = new Map<number, number>([[source.id, item.target_id]]);
      const op = { id: item.op_id, name: item.op_name };
      for (let i = 0; i < pending.length; i += this.batchSize) {
        if (this.closed) throw new Error('interrupted: the service stopped');
        if (!await this.renew(item.id)) throw new Error('interrupted: the lease on the item ran out');
        await this.tree.tx(async () => {
          const target = await this.tree.byId(item.target_id);
          if (!target || target.state !== 0) throw new Error('the target folder was removed during the copy');
          for (const id of pending.slice(i, i + this.batchSize)) {
            const s = await this.tree.byId(id);
            if (!s || s.state !== 0 || !isWithin(s.fullpath, sourcePath)) continue;
            const parentTarget = s.parent_id === null ? undefined : targetOf.get(s.parent_id);
            if (parentTarget === undefined) continue;
            const fullpath = target.fullpath + s.fullpath.slice(sourcePath.length);
            if (!s.dir) await this.tree.checkCapacity(item.library_id, s.filesize);
            const copy = await this.copyRow(s, parentTarget, fullpath, op);
            targetOf.set(s.id, copy.id);
          }
        }, item.library_id);
        await new Promise((r) => setImmediate(r));
      }
      await db.run('UPDATE copy_queue SET status = 2, finish_ms = ? WHERE id = ? AND lease_holder = ?', [this.clock(), item.id, this.holder]);
    } catch (err) {
      this.log.warn({ err, queueId: item.id }, 'folder copy failed');
      await db.run('UPDATE copy_queue SET status = 3, error = ?, finish_ms = ? WHERE id = ? AND lease_holder = ?', [(err as Error).message, this.clock(), item.id, this.holder]);
    }
  }

  private async copyRow(s: EntryRow, parentId: number, fullpath: string, op: Operator): Promise<EntryRow> {
    const existing = await this.tree.byPath(s.library_id, fullpath);
    if (existing) return existing;
    const row = await this.tree.insert(s.library_id, parentId, fullpath, { dir: s.dir, content: s.dir ? undefined : { sha1: s.filehash, size: s.filesize }, tags: s.tags }, op);
    await this.tree.event(row, Act.Create, op);
    return row;
  }
}
