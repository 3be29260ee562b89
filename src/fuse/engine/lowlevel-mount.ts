/**
 * LowLevelMount: serves FuseOperations through the libfuse 3 engine — the session (mount, unmount, the
 * native readers' end, the engine's counters). Requests arrive by inode number in batches (one crossing
 * from the native reader thread per batch); each is answered by RequestDispatch (request-dispatch.ts). The
 * records of what the engine answered itself are replayed apart (EngineRecords, engine-records.ts), in
 * order with the requests about the same inodes.
 */
import type { Logger } from 'pino';
import type { FuseOperations } from '../operations.js';
import type { AnsweredCounts, Fuse3Binding, KernelRequest, NativeSession, SessionSettings, TransportState } from './binding.js';
import { InodeTable } from './inode-table.js';
import { EngineRecords } from './engine-records.js';
import { RequestDispatch, type NegotiatedSession } from './request-dispatch.js';
import type { DirectWriteCounters } from './spool-writes.js';
import { KernelInvalidation, type KernelInvalidationCounters } from './kernel-invalidation.js';
import type { ChangeSource } from '../../vfs/types.js';

export interface LowLevelMountOptions {
  binding: Fuse3Binding;
  operations: FuseOperations;
  mountpoint: string;
  /** libfuse mount options (`-o` list). */
  mountOptions: string[];
  settings: SessionSettings;
  /** Seconds the kernel keeps names, attributes and negative lookups. */
  attrTimeoutS: number;
  logger: Logger;
  /** Changes made elsewhere: the kernel forgets what it cached of them (kernel-invalidation.ts). */
  changes?: ChangeSource;
}

/** The engine's direct spool writes, and the requests it answered itself (see docs/fuse.md, The engine). */
export interface EngineCounters extends DirectWriteCounters {
  answered: AnsweredCounts;
  /** Notifications of the kernel about changes made elsewhere (kernel-invalidation.ts). */
  elsewhere: KernelInvalidationCounters;
  /** How the kernel's requests reach the engine (after unmount: as they did). */
  transport: TransportState;
}

export class LowLevelMount {
  readonly inodes = new InodeTable();
  private readonly binding: Fuse3Binding;
  private readonly operations: FuseOperations;
  private readonly logger: Logger;
  private session: NativeSession | undefined;
  /** The kernel's requests, answered (request-dispatch.ts). */
  private readonly dispatch: RequestDispatch;
  /** What the engine answered itself, replayed into the Vfs (engine-records.ts). */
  private readonly records: EngineRecords;
  /** Stops telling the kernel of changes made elsewhere. */
  private stopFollowingChanges: (() => void) | undefined;
  private elsewhere: KernelInvalidation | undefined;
  private endedResolve!: () => void;
  /** Resolves when the native readers have stopped (connection gone). */
  readonly ended = new Promise<void>((resolve) => (this.endedResolve = resolve));
  private startedResolve!: () => void;
  /** Resolves once the kernel's INIT is answered (its transport chosen), or the session ended first. */
  readonly started = new Promise<void>((resolve) => (this.startedResolve = resolve));
  negotiated: NegotiatedSession | undefined;
  /** The transport as it was when the session went (counters after unmount). */
  private lastTransport: TransportState | undefined;

  constructor(private readonly opts: LowLevelMountOptions) {
    this.binding = opts.binding;
    this.operations = opts.operations;
    this.logger = opts.logger;
    const d = this.dispatch = new RequestDispatch({
      binding: this.binding,
      inodes: this.inodes,
      operations: this.operations,
      logger: this.logger,
      timeout: opts.attrTimeoutS,
      session: () => this.session,
      records: () => this.records,
      initialized: (negotiated) => {
        this.negotiated = negotiated;
        this.startedResolve();
      },
      ended: () => {
        this.startedResolve();
        this.endedResolve();
      },
    });
    this.records = new EngineRecords({
      inodes: this.inodes,
      binding: this.binding,
      session: () => this.session,
      operations: this.operations,
      ops: d.ops,
      logger: this.logger,
      live: d.passthrough.live,
      openInodes: d.openInodes,
      directCounts: d.directCounts,
      dispatch: (req) => d.dispatchSafely(req),
      listingReleased: (fh) => d.listings.released(fh),
      write: (req, answered) => d.writes.write(req, answered),
      answeredUnmadeAdd: (req) => d.writes.answeredUnmadeAdd(req),
      answeredMade: (req) => d.writes.answeredMade(req),
      releaseHandle: (ino, fh, done) => d.files.releaseHandle(ino, fh, done),
      forgetHandle: (fh) => d.files.forgetHandle(fh),
      notLive: (ino, entry) => d.passthrough.notLive(ino, entry),
      invalidate: (node) => d.invalidate(node),
      staleKernelTimes: (node, path) => d.staleKernelTimes(node, path),
      shown: (node, st) => d.shown(node, st),
      safePath: (ino) => d.safePath(ino),
      pullQueued: () => {
        if (this.session) this.onBatch(this.binding.takeQueued(this.session));
      },
    }, { passthrough: !!opts.settings.passthrough, mountpoint: opts.mountpoint });
  }

  mount(): void {
    this.session = this.binding.mount(this.opts.mountpoint, this.opts.mountOptions, this.opts.settings, (batch) => this.onBatch(batch));
    this.records.pullQuietRecords();
    const elsewhere = this.elsewhere = new KernelInvalidation({
      binding: this.binding, inodes: this.inodes, session: () => this.session, isLive: (ino) => this.dispatch.passthrough.writesItself(ino), logger: this.logger,
      notify: (what, call) => this.dispatch.notifyKernel(what, call),
    });
    this.stopFollowingChanges = this.opts.changes?.subscribe((event) => elsewhere.changed(event));
  }

  /** Unmounts (lazily, off the main thread); the readers stop once the kernel lets go of the connection. */
  async unmount(): Promise<void> {
    this.stopFollowingChanges?.();
    if (this.session) await this.binding.unmount(this.session);
  }

  /**
   * After `ended`: joins the readers, answers anything still pending with EIO, frees the session. A
   * reader still blocked on the device (the kernel kept the connection) is left as it is: logged, and
   * the session no longer keeps the process alive.
   */
  destroy(): void {
    this.records.stopPulling();
    if (!this.session) return;
    this.lastTransport = this.binding.transport(this.session);
    if (!this.binding.destroy(this.session)) {
      this.logger.warn({ mountpoint: this.opts.mountpoint }, 'fuse: the connection is still held by the kernel; leaving its reader thread');
      this.dispatch.writes.dropHashesDue();
      return;
    }
    this.session = undefined;
    this.dispatch.writes.dropHashesDue();
    this.dispatch.passthrough.endCacheFiles();
  }

  get counters(): EngineCounters {
    const answered = this.session ? this.binding.answeredCounts(this.session) : { getattr: 0, writes: 0, times: 0, modes: 0, lookups: 0, creates: 0, closes: 0, spoolsMadeAhead: 0 };
    const se = this.session;
    const transport = se ? this.binding.transport(se) : (this.lastTransport ?? { transport: 'dev', why: 'not mounted', ringRequests: 0, devRequests: 0, queues: 0, depth: 0, passthrough: false });
    const elsewhere = { ...(this.elsewhere?.counters ?? { entries: 0, inodes: 0, deletes: 0, dropped: 0 }) };
    return { ...this.dispatch.directCounts, spoolWritebacks: se ? this.binding.spoolWritebacks(se) : 0, spoolSyncs: se ? this.binding.spoolSyncs(se) : 0, answered, transport, elsewhere };
  }

  private onBatch(batch: KernelRequest[]): void {
    if (batch.length > 0) this.operations.serving();
    this.records.route(batch);
  }

  /**
   * Applies what the engine queued and has not handed over (answered writes and times wait for the next
   * request to travel with it), and resolves once every answered request is applied: at unmount, before
   * open files are flushed.
   */
  async applyQueued(): Promise<void> {
    if (this.session) this.onBatch(this.binding.takeQueued(this.session));
    await this.records.applied();
  }

  /**
   * Lets the engine answer the closes of small files it created (see docs/fuse.md, Closes answered by the
   * engine) when the Vfs has a journal for their records: from now on it writes them to a side log.
   */
  answerCloses(): Promise<void> {
    return this.records.answerCloses();
  }

  /**
   * The engine answers no more closes; once every close it answered is applied, the journal is told.
   * Bounded by `waitMs` (a close still being applied then leaves its record for the next start).
   */
  stopAnsweringCloses(waitMs: number): Promise<void> {
    return this.records.stopAnsweringCloses(waitMs);
  }
}
