/**
 * Writes of the mount's file handles. A write that reaches JavaScript goes to the Vfs, those of one handle
 * one at a time; once the handle's version can take its writes directly (its spool on disk, this handle
 * its only writer), the engine makes the following ones itself into the spool (DirectSpool) and reports
 * each (WROTE), hashing the content on its own thread (HASHED). Writes the engine answered itself come
 * here too from the record replay (engine-records.ts), with where their outcome goes.
 */
import type { FuseOperations } from '../operations.js';
import type { NativeCallback } from '../reply.js';
import type { Fuse3Binding, KernelRequest, NativeSession } from './binding.js';
import type { InodeNode } from './inode-table.js';
import type { DirectSpool } from '../../vfs/engine-lease.js';

/** The engine's direct spool writes so far. */
export interface DirectWriteCounters {
  /** Handles (versions) whose writes the engine took over. */
  spoolsAttached: number;
  /** Writes it made (reported; failed ones included). */
  directWrites: number;
  /** Attachments that ended with the SHA-1 of the whole content computed by the engine. */
  hashedByEngine: number;
  /** Reads answered from a local file's descriptor by the engine (LeasedHandle.localRange). */
  fdReads: number;
  /** Files handed to the kernel (passthrough: it read and wrote their spools itself), and the opens answered with a backing file. */
  passthroughFiles: number;
  passthroughOpens: number;
  /** Of those, files the engine created, had written and closed before JavaScript saw them, made closed in one step (EngineLease.createClosed). */
  madeClosed: number;
  /** Read-only opens answered with the content cache's file as their backing file (the kernel reads it). */
  passthroughReads: number;
  /** Times the engine started the writeback to disk of spool bytes it wrote and hashed. */
  spoolWritebacks: number;
  /** Background fdatasyncs the engine made of spools it wrote. */
  spoolSyncs: number;
}

/** What the writes need of the mount. */
export interface WritesMount {
  readonly binding: Fuse3Binding;
  /** The session while mounted. */
  session(): NativeSession | undefined;
  readonly operations: FuseOperations;
  readonly openInodes: Map<number, { node: InodeNode; writable: boolean }>;
  readonly directCounts: Omit<DirectWriteCounters, 'spoolWritebacks' | 'spoolSyncs'>;
  safePath(ino: number): string;
}

export class SpoolWrites {
  /** File handles whose writes the engine makes into their spools, and the number their records are above. */
  private readonly direct = new Map<number, { spool: DirectSpool; base: number }>();
  /** Hashes of detached spools the engine's hash thread is finishing, by their HASHED record's number. */
  private readonly hashesDue = new Map<number, { end: number; resolve: (sha1: string | undefined) => void }>();
  /** File handles with a write under way through JavaScript, and the writes waiting behind it. */
  private readonly writesWaiting = new Map<number, KernelRequest[]>();
  /** Writes the engine answered already, and where their outcome goes. */
  private readonly answeredWrites = new WeakMap<KernelRequest, NativeCallback>();
  /**
   * Writes the engine answered that are not made here yet, by handle. The handle gets no spool while it
   * has any: the kernel, told they were done, may send a later write over the same bytes, which the
   * engine would put in the spool before them.
   */
  private readonly answeredUnmade = new Map<number, Set<KernelRequest>>();

  constructor(private readonly mount: WritesMount) {}

  private get se(): NativeSession {
    return this.mount.session()!;
  }

  /** The engine's record of a write it made into a handle's spool (WROTE). */
  wroteRecord(req: KernelRequest): void {
    const d = this.direct.get(req.fh!);
    this.mount.directCounts.directWrites++;
    if (d && req.seq! > d.base) d.spool.wrote(req.offset!, req.size!, req.errno!);
    this.wroteTo(req.fh!);
  }

  /** The engine's hash thread finished the hash of a detached spool (HASHED). */
  hashed(req: KernelRequest): void {
    const due = this.hashesDue.get(req.seq!);
    if (!due) return;
    this.hashesDue.delete(req.seq!);
    if (req.name !== undefined && req.size === due.end) this.mount.directCounts.hashedByEngine++;
    due.resolve(req.name);
  }

  /** Handle `fh` is released: the engine makes no more writes into its spool. */
  released(fh: number): void {
    this.direct.get(fh)?.spool.end();
  }

  /** The session is gone (or going): hashes still due will not come; their versions hash their spools. */
  dropHashesDue(): void {
    for (const due of this.hashesDue.values()) due.resolve(undefined);
    this.hashesDue.clear();
  }

  /**
   * A write that reached JavaScript. Those of one handle go to the Vfs one at a time (the version takes
   * them one at a time anyway), the others waiting here in order: after each, the handle may get its
   * spool (offerSpool), and then the waiting ones and all that follow are made by the engine.
   */
  write(req: KernelRequest, answered?: NativeCallback): void {
    const fh = req.fh!;
    if (answered) this.answeredWrites.set(req, answered);
    if (this.direct.has(fh) && this.writeDirect(req)) return;
    const waiting = this.writesWaiting.get(fh);
    if (waiting) return void waiting.push(req);
    this.writesWaiting.set(fh, []);
    this.writeThroughVfs(req);
  }

  answeredUnmadeAdd(req: KernelRequest): void {
    const fh = req.fh!;
    const unmade = this.answeredUnmade.get(fh);
    if (unmade) unmade.add(req);
    else this.answeredUnmade.set(fh, new Set([req]));
  }

  /** An answered write is made (or will never be): it no longer holds its handle's spool back. */
  answeredMade(req: KernelRequest): void {
    const unmade = this.answeredUnmade.get(req.fh!);
    if (unmade?.delete(req) && unmade.size === 0) this.answeredUnmade.delete(req.fh!);
  }

  /** Answers a write: the kernel, or (a write the engine answered) whoever applies it. */
  private wrote(req: KernelRequest, code: number): void {
    const answered = this.answeredWrites.get(req);
    if (answered) {
      this.answeredWrites.delete(req);
      this.answeredMade(req);
      return answered(code);
    }
    if (code < 0) this.mount.binding.replyErr(this.se, req.id, -code);
    else this.mount.binding.replyWrite(this.se, req.id, code);
  }

  private writeThroughVfs(req: KernelRequest): void {
    const fh = req.fh!;
    this.mount.operations.writeOwned(this.mount.safePath(req.ino), fh, req.data!, req.offset!, (code) => {
      if (code < 0) this.wrote(req, code);
      else {
        this.wrote(req, code);
        this.wroteTo(fh);
        this.offerSpool(fh);
      }
      const waiting = this.writesWaiting.get(fh) ?? [];
      let next = waiting.shift();
      while (next && this.direct.has(fh) && this.writeDirect(next)) next = waiting.shift();
      if (next) this.writeThroughVfs(next);
      else this.writesWaiting.delete(fh);
    });
  }

  /** A write made the engine's way (the handle has its spool); false when it no longer has one. */
  private writeDirect(req: KernelRequest): boolean {
    const se = this.mount.session();
    if (!se) return false;
    const n = this.mount.binding.spoolWrite(se, req.fh!, req.data!, req.offset!);
    if (n === undefined) return false;
    this.wrote(req, n);
    return true;
  }

  /** What this mount wrote is no change made elsewhere: compare again from the next attributes shown. */
  private wroteTo(fh: number): void {
    const open = this.mount.openInodes.get(fh);
    if (open) open.node.shown = undefined;
  }

  /**
   * After a write made through JavaScript: when the handle's version can take its writes directly now
   * (its spool on disk, this handle its only writer, no write the engine answered still to be made), the
   * engine makes the following ones itself.
   */
  private offerSpool(fh: number): void {
    const se = this.mount.session();
    if (!se || this.direct.has(fh) || this.answeredUnmade.has(fh)) return;
    let spool: DirectSpool | undefined;
    try {
      spool = this.mount.operations.handles.get(fh).handle.directSpool?.();
    } catch {
      return; // released meanwhile
    }
    if (!spool) return;
    const base = this.mount.binding.spoolAttach(se, fh, spool.fd, spool.hashFrom);
    if (base === undefined) return; // an answered write of the handle is still queued: offered again at the next write
    const entry = { spool, base };
    this.direct.set(fh, entry);
    this.mount.directCounts.spoolsAttached++;
    spool.begin(() => {
      if (this.direct.get(fh) === entry) this.direct.delete(fh);
      const now = this.mount.session();
      const done = now ? this.mount.binding.spoolDetach(now, fh) : undefined;
      if (!done) return undefined;
      if (done.sha1 !== undefined && done.hashed === done.end) this.mount.directCounts.hashedByEngine++;
      const { hashing, ...rest } = done;
      if (hashing === undefined) return rest;
      // The hash thread is still behind the last writes: the version waits for its HASHED record.
      const sha1Later = new Promise<string | undefined>((resolve) => this.hashesDue.set(hashing, { end: done.end, resolve }));
      return { ...rest, sha1Later };
    });
  }
}
