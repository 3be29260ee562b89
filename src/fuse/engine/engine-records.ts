/**
 * EngineRecords: the replay of what the engine answered itself (see docs/fuse.md, The engine). The engine
 * answers some requests on its reader thread (small writes, times, modes, releases, creates in folders
 * whose names it knows, the closes of small files it created) and queues a record of each, some quietly
 * (they travel with the next request); here each record is applied to the Vfs, in order with what the
 * kernel sends afterwards about the same inodes (`settle`), a failure kept for the handle's next flush or
 * fsync (`lateErrors`). Files whose whole life came in one batch are made closed in one step. The
 * requests themselves go to the mount's dispatch (LowLevelMount), which this file knows only through
 * RecordsMount.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import { Errno, errnoOf } from '../errno.js';
import type { FuseOperations } from '../operations.js';
import type { NativeCallback } from '../reply.js';
import type { KernelStat } from '../stat.js';
import { Op, type Fuse3Binding, type KernelRequest, type NativeSession } from './binding.js';
import type { InodeNode, InodeTable } from './inode-table.js';
import { AnsweredCloses } from './answered-closes.js';
import type { DirectWriteCounters } from './spool-writes.js';
import type { LiveInode } from './passthrough-files.js';
import { answerOf, type Answer, type PathOperations } from './path-operations.js';
import { StrayedSpools } from './strayed-spools.js';
import type { PassthroughSpool, SideJournal } from '../../vfs/engine-lease.js';

/** What the replay needs of the mount: its tables, and the steps of dispatch a record goes through too. */
export interface RecordsMount {
  readonly inodes: InodeTable;
  readonly binding: Fuse3Binding;
  /** The session while mounted. */
  session(): NativeSession | undefined;
  readonly operations: FuseOperations;
  readonly ops: PathOperations;
  readonly logger: Logger;
  /** Inodes handed to the kernel (passthrough), file handles and their inodes, the engine's counters. */
  readonly live: Map<number, LiveInode>;
  readonly openInodes: Map<number, { node: InodeNode; writable: boolean }>;
  readonly directCounts: Omit<DirectWriteCounters, 'spoolWritebacks' | 'spoolSyncs'>;
  /** A request (not a record): dispatched, its failure answered. */
  dispatch(req: KernelRequest): void;
  /** A directory handle the engine released: its listing goes. */
  listingReleased(fh: number): void;
  /** A write, made in its handle's order; `answered`: where its outcome goes (the engine answered it). */
  write(req: KernelRequest, answered: NativeCallback): void;
  /** An answered write not made yet holds its handle's spool back; made (or never to be): no longer. */
  answeredUnmadeAdd(req: KernelRequest): void;
  answeredMade(req: KernelRequest): void;
  releaseHandle(ino: number, fh: number, done: NativeCallback): void;
  forgetHandle(fh: number): { node: InodeNode; writable: boolean } | undefined;
  notLive(ino: number, entry: LiveInode): number;
  invalidate(node: InodeNode): void;
  staleKernelTimes(node: InodeNode, path: string): Promise<boolean>;
  shown(node: InodeNode, st: KernelStat): void;
  safePath(ino: number): string;
  /** Hands over what the engine queued and has not handed over yet (records queued quietly). */
  pullQueued(): void;
}

/**
 * The flush (a close the engine journaled) and the release of a file created in the same batch, and the
 * modes the engine answered between its create and its release (an fchmod of the open file, as rsync
 * makes): wholeLives.
 */
interface WholeLife {
  flush: KernelRequest;
  release: KernelRequest;
  modes: KernelRequest[];
}

/** A file of a whole life (WholeLife) whose inode and handle are bound, with its backing file (createdWhole). */
interface BoundCreate {
  req: KernelRequest;
  life: WholeLife;
  node: InodeNode;
  live: LiveInode;
  decide?: () => void;
}

// setattr `valid` bits (FUSE_SET_ATTR_*).
const SET_MODE = 1 << 0;
const SET_CTIME = 1 << 10;
// open(2) flags.
const O_EXCL = 0o200;
const O_TRUNC = 0o1000;
/** An answered RELEASE's flags: the create it closes was interrupted, the kernel never got the file. */
const RELEASE_NEVER_GIVEN = 1;
/** How long a record the engine queued quietly waits for a request to travel with, at most. */
const QUIET_RECORDS_MS = 200;

export class EngineRecords {
  private readonly inodes: InodeTable;
  private readonly binding: Fuse3Binding;
  private readonly operations: FuseOperations;
  private readonly ops: PathOperations;
  private readonly logger: Logger;
  private readonly live: Map<number, LiveInode>;
  private readonly openInodes: Map<number, { node: InodeNode; writable: boolean }>;
  private readonly directCounts: Omit<DirectWriteCounters, 'spoolWritebacks' | 'spoolSyncs'>;
  /**
   * Inodes with requests the engine answered still being applied here (a small write, times written
   * back): what the kernel sends afterwards about the inode waits for them, in order.
   */
  private readonly settling = new Map<number, Promise<void>>();
  /** File handles whose answered write or times failed here: the errno their next flush or fsync answers. */
  private readonly lateErrors = new Map<number, number>();
  /** Handles of files the engine created that the Vfs refused (until released), with the errno it refused with. */
  private readonly refusedCreates = new Map<number, number>();
  /** The closes the engine answers, and the journal their records go to (answerCloses). */
  private closes: { writer: AnsweredCloses; journal: SideJournal } | undefined;
  private quietRecords: NodeJS.Timeout | undefined;
  /** Handles of files the engine created whose spool the Vfs could not take over (strayed-spools.ts). */
  private readonly strayed: StrayedSpools;

  constructor(private readonly mount: RecordsMount, private readonly opts: { passthrough: boolean; mountpoint: string }) {
    this.inodes = mount.inodes;
    this.binding = mount.binding;
    this.operations = mount.operations;
    this.ops = mount.ops;
    this.logger = mount.logger;
    this.live = mount.live;
    this.openInodes = mount.openInodes;
    this.directCounts = mount.directCounts;
    this.strayed = new StrayedSpools({
      handleOf: (fh) => {
        try {
          return this.operations.handles.get(fh).handle;
        } catch {
          return undefined;
        }
      },
      dropSpool: (id) => this.closes?.journal.dropSpool(id) ?? Promise.resolve(),
      logger: this.logger,
    });
  }

  private get session(): NativeSession | undefined {
    return this.mount.session();
  }

  /**
   * Records the engine queues quietly travel with the next request; one that none follows (a file
   * created and held open) reaches the Vfs within a second all the same.
   */
  pullQuietRecords(): void {
    this.quietRecords = setInterval(() => this.mount.pullQueued(), QUIET_RECORDS_MS);
    this.quietRecords.unref();
  }

  stopPulling(): void {
    clearInterval(this.quietRecords);
  }

  /** Resolves once every record handed over so far is applied. */
  async applied(): Promise<void> {
    await Promise.all([...this.settling.values()]);
  }

  /** The failure of an answered request of `fh` its flush or fsync answers (taken), if any. */
  takeLateError(fh: number): number | undefined {
    const late = this.lateErrors.get(fh);
    this.lateErrors.delete(fh);
    return late;
  }

  /**
   * The errno the Vfs refused the file of handle `fh` with, when the engine created it and the Vfs did
   * not take it: every later request of the handle but its release answers it (the kernel may still send
   * some, such as the times it writes back before an fsync).
   */
  refusalOf(fh: number): number | undefined {
    return this.refusedCreates.get(fh);
  }

  /** `fh` is released: nothing of it is kept any longer. */
  handleReleased(fh: number): void {
    this.lateErrors.delete(fh);
    this.refusedCreates.delete(fh);
    void this.strayed.released(fh);
  }

  /**
   * Before a flush, fsync or release of `fh`: a file the kernel writes into a spool the Vfs could not take
   * over has what the spool holds written into its version (strayed-spools.ts). Undefined for any other
   * handle; else resolves with the errno its writer hears, if any.
   */
  copyStrayed(fh: number): Promise<number | undefined> | undefined {
    return this.strayed.has(fh) ? this.strayed.copy(fh) : undefined;
  }

  /** Whether the engine answers closes (answerCloses). */
  get answersCloses(): boolean {
    return this.closes !== undefined;
  }

  /**
   * Routes a batch: each record of what the engine answered is replayed here, and every request goes to
   * the mount's dispatch, after the records about the inodes it is about are applied.
   */
  route(batch: KernelRequest[]): void {
    const whole = this.wholeLives(batch);
    // Whole lives in a row in one folder, nothing else between them: made closed together.
    let run: { req: KernelRequest; life: WholeLife }[] = [];
    const endRun = (): void => {
      if (run.length > 0) this.createdWhole(run);
      run = [];
    };
    for (const req of batch) {
      const life = whole?.get(req);
      if (life && req.op === Op.CREATE) {
        if (run.length > 0 && run[0]!.req.ino !== req.ino) endRun();
        run.push({ req, life });
        continue;
      }
      if (life) {
        // The flush or release of a file created in this batch too: applied with its create.
        if (req.op === Op.FLUSH) this.closes?.writer.seen(req.record!);
        continue;
      }
      endRun();
      if (req.answered && req.op === Op.CREATE) {
        this.createdByEngine(req);
        continue;
      }
      if (req.answered && req.op === Op.RELEASEDIR) {
        // Answered by the engine (the kernel does not wait for it): the listing it held goes.
        this.mount.listingReleased(req.fh!);
        continue;
      }
      if (req.answered && req.op === Op.FLUSH) {
        this.closes?.writer.seen(req.record!);
        this.settle(req.ino, () => this.applyAnsweredClose(req));
        continue;
      }
      if (req.answered) {
        if (req.op === Op.WRITE) this.mount.answeredUnmadeAdd(req);
        this.settle(req.ino, () => this.applyAnswered(req));
        continue;
      }
      const busy = this.settlingInodes(req);
      if (busy.length > 0) this.settle(busy[0]!, () => this.mount.dispatch(req), ...busy.slice(1));
      else this.mount.dispatch(req);
    }
    endRun();
  }

  /**
   * The inodes `req` is about whose answered requests are still being applied, if any: its own, and that
   * of a file it names (a lookup; an unlink, which must come after a close the engine answered is
   * journaled, or a crash could bring back what it removed). A rename of a file waits for the file and
   * the one it replaces; of a folder (or of a name not known here), for all of them: it may move a folder
   * holding a file whose close the engine answered (its record has the old path).
   */
  private settlingInodes(req: KernelRequest): number[] {
    if (this.settling.size === 0) return [];
    let named: (number | undefined)[];
    if (req.op === Op.RENAME) {
      const moved = this.inodes.find(req.ino, req.name!);
      if (!moved || moved.isDir) return [...this.settling.keys()];
      named = [moved.ino, this.inodes.find(req.newparent!, req.newname!)?.ino];
    } else {
      named = [req.ino, req.op === Op.LOOKUP || req.op === Op.UNLINK ? this.inodes.find(req.ino, req.name!)?.ino : undefined];
    }
    return [...new Set(named)].filter((ino) => ino !== undefined && this.settling.has(ino)) as number[];
  }

  /**
   * Runs `work` once what is settling for `ino` (and `also`) is done (at once when nothing is); later
   * requests about either wait for it.
   */
  private settle(ino: number, work: () => Promise<void> | void, ...also: number[]): void {
    const run = async (): Promise<void> => {
      try {
        await work();
      } catch (err) {
        this.logger.warn({ ino, err: String(err) }, 'fuse: applying an answered request failed');
      }
    };
    const inos = [ino, ...also];
    const prev = inos.map((i) => this.settling.get(i)).filter((p) => p !== undefined);
    const next = prev.length === 0 ? run() : prev.length === 1 ? prev[0]!.then(run) : Promise.all(prev).then(run);
    for (const i of inos) this.settling.set(i, next);
    void next.then(() => {
      for (const i of inos) if (this.settling.get(i) === next) this.settling.delete(i);
    });
  }

  /**
   * Files the engine created with passthrough whose whole life reached JavaScript in `batch`: the create,
   * the first flush (a close the engine journaled, with the spool's time) and the release, with no other
   * record of the file or its inode in between. Keyed by the create, with its flush and release (also
   * keys, mapped to the same): each such file is made in one step (createdByEngine). Undefined for none.
   */
  private wholeLives(batch: KernelRequest[]): Map<KernelRequest, WholeLife> | undefined {
    let open: Map<number, { create: KernelRequest; flush?: KernelRequest; modes: KernelRequest[] }> | undefined;
    let whole: Map<KernelRequest, WholeLife> | undefined;
    for (const r of batch) {
      if (r.answered && r.op === Op.CREATE) {
        if (r.backingId && r.journalId && this.closes) (open ??= new Map()).set(r.newIno!, { create: r, modes: [] });
        continue;
      }
      const f = open?.get(r.ino);
      if (!f) continue;
      if (r.fh === f.create.fh && r.answered && r.op === Op.FLUSH && !f.flush && r.spoolMtimeNs !== undefined && r.closeRecord) {
        f.flush = r;
        continue;
      }
      if (r.answered && r.op === Op.SETATTR && r.valid! & SET_MODE && !(r.valid! & ~(SET_MODE | SET_CTIME))) {
        f.modes.push(r);
        continue;
      }
      open!.delete(r.ino);
      if (r.fh === f.create.fh && r.answered && r.op === Op.RELEASE && f.flush && !(r.flags! & RELEASE_NEVER_GIVEN)) {
        const life = { flush: f.flush, release: r, modes: f.modes };
        whole ??= new Map();
        for (const k of [f.create, f.flush, ...f.modes, r]) whole.set(k, life);
      }
    }
    return whole;
  }

  /**
   * A file the engine created in a folder whose names it knew (see docs/fuse.md, The engine): its inode
   * and handle are bound at once, and the file is made in the Vfs before any later request about it or
   * its folder. Should that fail, the handle's next flush or fsync answers the error and the kernel
   * forgets the name.
   */
  private createdByEngine(req: KernelRequest): void {
    const made = this.bindCreated(req);
    if (!made) return;
    this.settle(made.node.ino, () => this.applyCreate(this.inodes.pathOf(made.node), made.node, req, made.live, made.decide), req.ino);
  }

  /**
   * Files the engine created in one folder whose whole lives came in a row (wholeLives), bound as
   * `createdByEngine` binds each: made closed together when the Vfs can (createClosed), the rest by the
   * three steps each, in order.
   */
  private createdWhole(run: readonly { req: KernelRequest; life: WholeLife }[]): void {
    const bound: BoundCreate[] = [];
    for (const { req, life } of run) {
      const made = this.bindCreated(req);
      if (!made) {
        // Not bound (no folder here): its flush and release are applied as records.
        this.applyLife(life);
        continue;
      }
      // A whole life's create always came with a backing file (wholeLives).
      bound.push({ ...made, live: made.live!, req, life });
    }
    if (bound.length === 0) return;
    this.settle(run[0]!.req.ino, async () => {
      const made = await this.madeClosed(bound);
      for (let i = 0; i < bound.length; i++) {
        if (made[i]) {
          bound[i]!.decide?.();
          await this.keepModes(bound[i]!);
        } else await this.applyThreeSteps(bound[i]!);
      }
    }, ...bound.map((b) => b.node.ino));
  }

  /** A file made closed in one step: the modes set on it while open, kept as any chmod's. */
  private async keepModes(b: BoundCreate): Promise<void> {
    for (const m of b.life.modes) {
      const path = this.inodes.pathOf(b.node);
      const [code] = await answerOf((cb) => this.ops.chmod(path, m.mode!, cb));
      if (code < 0) this.logger.warn({ path, errno: -code }, 'fuse: a mode the engine answered could not be kept');
    }
  }

  /** A whole life not made closed in one step: its create, modes, flush and release applied in turn. */
  private async applyThreeSteps(b: BoundCreate): Promise<void> {
    await this.applyCreate(this.inodes.pathOf(b.node), b.node, b.req, b.live, b.decide);
    for (const m of b.life.modes) await this.applyAnswered(m);
    await this.applyAnsweredClose(b.life.flush);
    await this.applyAnswered(b.life.release);
  }

  /**
   * The inode and handle of a file the engine created, bound at once (with its backing file, when the
   * engine gave it one); undefined when its folder is not known here (its close then answers the error).
   */
  private bindCreated(req: KernelRequest): { node: InodeNode; live?: LiveInode; decide?: () => void } | undefined {
    const parent = req.ino;
    const name = req.name!;
    const fh = req.fh!;
    let node: InodeNode;
    try {
      node = this.inodes.rememberAt(parent, name, req.newIno!);
    } catch (err) {
      this.lateErrors.set(fh, -errnoOf(err));
      this.refusedCreates.set(fh, -errnoOf(err));
      this.logger.warn({ parent, name, err: String(err) }, 'fuse: a file the engine created has no folder here');
      return undefined;
    }
    node.shown = { size: 0, mtimeMs: req.mtimeMs! };
    this.inodes.opened(node, true);
    this.openInodes.set(fh, { node, writable: true });
    // Handed to the kernel with a spool the engine made: every open of the inode is, until the last closes.
    let decide: (() => void) | undefined;
    const live: LiveInode | undefined = req.backingId ? { backingId: req.backingId, handles: new Set([fh]), decided: new Promise<void>((r) => (decide = r)) } : undefined;
    if (live) this.live.set(node.ino, live);
    return { node, live, decide };
  }

  /** The flush and release of a file whose create could not be bound: applied as records. */
  private applyLife(life: WholeLife): void {
    for (const m of life.modes) this.settle(m.ino, () => this.applyAnswered(m));
    this.settle(life.flush.ino, () => this.applyAnsweredClose(life.flush));
    this.settle(life.release.ino, () => this.applyAnswered(life.release));
  }

  /**
   * Files the engine created, the kernel wrote and the engine closed, all before JavaScript saw any of
   * them: made in the Vfs as closed (EngineLease.createClosed, all in one call); for each made, the handle and the
   * backing file are done with, as at a release. For each, false when the Vfs leaves it to the three steps.
   */
  private async madeClosed(files: readonly BoundCreate[]): Promise<boolean[]> {
    const closes = this.closes;
    if (!closes) return files.map(() => false);
    const asked = files.map((f) => ({ path: this.inodes.pathOf(f.node), mode: f.req.mode!, journalId: f.req.journalId!, closed: { record: f.life.flush.closeRecord!, spoolMtimeNs: f.life.flush.spoolMtimeNs! } }));
    const [code, made] = await answerOf((cb) => this.operations.createClosed(asked, cb));
    const took: boolean[] = code >= 0 && Array.isArray(made) ? files.map((_f, i) => made[i] === true) : files.map(() => false);
    const se = this.session;
    for (let i = 0; i < files.length; i++) {
      if (!took[i]) continue;
      const { req, life, live, node } = files[i]!;
      try {
        await closes.journal.sideRecordSettled(req.journalId!);
      } finally {
        closes.writer.settled(life.flush.record!);
      }
      this.directCounts.passthroughFiles++;
      this.directCounts.passthroughOpens++;
      this.directCounts.madeClosed++;
      const fh = req.fh!;
      this.mount.notLive(node.ino, live);
      node.shown = undefined;
      if (se) {
        this.binding.backingClose(se, live.backingId);
        this.binding.attrLive(se, node.ino, false);
      }
      this.lateErrors.delete(fh);
      const open = this.mount.forgetHandle(fh);
      if (open) this.inodes.closed(open.node, open.writable);
    }
    return took;
  }

  /** The create of `createdByEngine` made in the Vfs, its spool taken over. */
  private async applyCreate(path: string, node: InodeNode, req: KernelRequest, live: LiveInode | undefined, decide: (() => void) | undefined): Promise<void> {
    const parent = req.ino;
    const name = req.name!;
    const fh = req.fh!;
    let code: number;
    try {
      // Exclusive: the kernel was shown a new empty file; a name made elsewhere meanwhile is not taken over.
      const create = (flags: number): Promise<Answer> => answerOf((cb) => this.operations.createWithFlags(path, flags, req.mode!, cb, fh, req.journalId === undefined ? undefined : { journalId: req.journalId, spoolMade: live !== undefined }));
      [code] = await create(req.flags! | O_EXCL);
      // Unless the program asked for an exclusive create: a file made at the name meanwhile through another
      // front end (a WebDAV PUT) is opened emptied, as the program's O_CREAT open would have (no error a
      // local file system would not give); its new empty file is what the kernel was shown.
      if (code === -Errno.EEXIST && !(req.flags! & O_EXCL)) [code] = await create(req.flags! | O_TRUNC);
      if (code >= 0 && live) await this.adoptEngineSpool(path, req, live);
    } finally {
      decide?.();
    }
    if (code >= 0) return;
    // The spool the engine made for it is nobody's (the kernel's writes to it stay until the release).
    if (live && req.journalId && this.closes) void this.closes.journal.dropSpool(req.journalId).catch(() => undefined);
    this.lateErrors.set(fh, -code);
    this.refusedCreates.set(fh, -code);
    this.logger.warn({ path, errno: -code }, 'fuse: making a file the engine created failed; its close answers the error');
    if (this.session) this.binding.namesForget(this.session, parent);
    this.mount.invalidate(node);
    if (!node.detached) this.inodes.removeName(parent, name);
  }

  /**
   * A file the engine created with passthrough: the spool it made (the kernel writes it) becomes the
   * version's. Should that fail (the name was made meanwhile elsewhere and is held open there), the
   * kernel's bytes are not the version's: each flush and fsync of the handle saves them whole from the
   * spool (strayed-spools.ts).
   */
  private async adoptEngineSpool(path: string, req: KernelRequest, live: LiveInode): Promise<void> {
    const fh = req.fh!;
    let spool: PassthroughSpool | undefined;
    try {
      spool = await this.operations.handles.get(fh).handle.adoptSpool?.();
    } catch {
      spool = undefined;
    }
    if (spool) {
      live.end = spool.end;
      this.directCounts.passthroughFiles++;
      this.directCounts.passthroughOpens++;
      return;
    }
    if (this.closes && req.journalId) {
      this.strayed.add(fh, join(this.closes.journal.spoolFolderPath(), req.journalId), req.journalId);
      this.logger.warn({ path }, 'fuse: the spool of a file the engine created could not be taken over (its name was made meanwhile elsewhere); its closes write it into the file');
      return;
    }
    this.lateErrors.set(fh, Errno.EIO);
    this.logger.error({ path }, 'fuse: the spool of a file the engine created could not be taken over; its close answers EIO');
  }

  /**
   * A request the engine answered already: a small write (made as any write of its handle, in order),
   * the times the kernel wrote back, or a mode set on a file handed to the kernel. A failure is kept for
   * the handle's next flush or fsync.
   */
  private async applyAnswered(req: KernelRequest): Promise<void> {
    const fh = req.fh!;
    const failed = (code: number): void => {
      if (code < 0 && !this.lateErrors.has(fh)) this.lateErrors.set(fh, -code);
    };
    if (req.op === Op.WRITE) {
      try {
        // The file the engine created for this handle was refused: its close answers that, nothing applies.
        if (this.refusedCreates.has(fh)) return;
        const [code] = await answerOf((cb) => this.mount.write(req, cb));
        return failed(code);
      } finally {
        this.mount.answeredMade(req);
      }
    }
    if (this.refusedCreates.has(fh) && req.op !== Op.RELEASE) return;
    if (req.op === Op.RELEASE) {
      // A file the engine created whose create was interrupted: the kernel never got it.
      if (req.flags! & RELEASE_NEVER_GIVEN) this.inodes.forget(req.ino, 1);
      return void (await answerOf((cb) => this.mount.releaseHandle(req.ino, fh, cb)));
    }
    const node = this.inodes.get(req.ino);
    const path = this.inodes.pathOf(node);
    if (req.valid! & SET_MODE) {
      // A mode set on a file handed to the kernel: kept as any chmod's (an fchmod comes without its handle).
      const [code] = await answerOf((cb) => this.ops.chmod(path, req.mode!, cb));
      if (req.fh !== undefined) return failed(code);
      if (code < 0) this.logger.warn({ path, errno: -code }, 'fuse: a mode the engine answered could not be kept');
      return;
    }
    if (await this.mount.staleKernelTimes(node, path)) return;
    const [code] = await answerOf((cb) => this.ops.utimens(path, req.mtimeMs!, req.mtimeMs!, cb));
    failed(code);
    if (code < 0 || node.shown !== undefined) return;
    // The engine answers the getattrs that follow (the kernel keeps its own size and times of the file):
    // what it shows now is the handle's, the base a change made elsewhere is told from.
    const [statCode, st] = await answerOf((cb) => this.ops.fgetattr(path, fh, cb));
    if (statCode >= 0 && node.shown === undefined) this.mount.shown(node, st as KernelStat);
  }

  /**
   * Lets the engine answer the closes of small files it created (see docs/fuse.md, Closes answered by the
   * engine) when the Vfs has a journal for their records: from now on it writes them to a side log.
   */
  async answerCloses(): Promise<void> {
    const journal = this.operations.sideJournal();
    if (!journal || !this.session || this.closes) return;
    const se = this.session;
    const writer = new AnsweredCloses((path) => this.binding.journalSwitch(se, path), () => this.mount.pullQueued());
    await journal.attachSideWriter(writer);
    this.closes = { writer, journal };
    // With passthrough, the files the engine creates get their spools there and go to the kernel at once.
    if (this.opts.passthrough) {
      try {
        await journal.startSpoolPool();
        this.binding.spoolFolder(se, journal.spoolFolderPath());
      } catch (err) {
        this.logger.warn({ err: String(err) }, 'fuse: the engine cannot make spools; files are created by JavaScript');
      }
    }
  }

  /**
   * The engine answers no more closes; once every close it answered is applied, the journal is told.
   * Bounded by `waitMs` (a close still being applied then leaves its record for the next start).
   */
  async stopAnsweringCloses(waitMs: number): Promise<void> {
    const closes = this.closes;
    if (!closes) return;
    // Still set meanwhile: the closes applied while it waits settle their records through it.
    if (await closes.writer.stop(waitMs)) closes.journal.detachSideWriter(closes.writer);
    else this.logger.error({ mountpoint: this.opts.mountpoint }, 'fuse: closes the engine answered were not all applied in time; their records stay in the journal for the next start');
  }

  /**
   * A close the engine answered once the file's close record was written: the flush is made here as
   * any other, which journals the same version under the same id. Should the file have been refused, or
   * the flush fail, nobody is left to tell: the engine's record is kept as it is for the next start.
   */
  private async applyAnsweredClose(req: KernelRequest): Promise<void> {
    const fh = req.fh!;
    const closes = this.closes;
    try {
      let errno: number | undefined;
      if (this.refusedCreates.has(fh)) {
        errno = await this.replaceRefused(req);
        if (errno === undefined) this.lateErrors.delete(fh);
      } else if (this.strayed.has(fh)) {
        // The bytes the record has (those the kernel wrote) go into the handle's version, which the flush journals.
        const put = this.closes?.journal.sideRecordContent(req.closeRecord!);
        errno = put ? await this.strayed.copyBytes(fh, put.data) : Errno.EIO;
        if (errno === undefined) {
          const [code] = await answerOf((cb) => this.ops.flush(this.mount.safePath(req.ino), fh, cb));
          errno = this.lateErrors.get(fh) ?? (code < 0 ? -code : undefined);
        }
        this.lateErrors.delete(fh);
      } else {
        const closed = req.closeRecord ? { record: req.closeRecord, spoolMtimeNs: req.spoolMtimeNs } : undefined;
        const [code] = await answerOf((cb) => this.ops.flush(this.mount.safePath(req.ino), fh, cb, closed));
        errno = this.lateErrors.get(fh) ?? (code < 0 ? -code : undefined);
        this.lateErrors.delete(fh);
      }
      // The Vfs's own version has another id when written anew (replaceRefused): the record's removal says so.
      if (errno === undefined) await closes?.journal.sideRecordSettled(req.journalId ?? '');
      else {
        this.logger.error({ path: this.mount.safePath(req.ino), errno }, 'fuse: a close the engine answered could not be applied; what its close record put is kept in the journal for the next start');
        await closes?.journal.keepSideRecord(req.closeRecord!);
      }
    } finally {
      closes?.writer.settled(req.record!);
    }
  }

  /**
   * A close the engine answered of a file whose exclusive create the Vfs refused (a name made elsewhere
   * meanwhile): the closed bytes win, as a later writer's would (the record has them). Answers the errno
   * when that fails too.
   */
  private async replaceRefused(req: KernelRequest): Promise<number | undefined> {
    const put = this.closes?.journal.sideRecordContent(req.closeRecord!);
    if (!put) return Errno.EIO;
    const path = `/${put.library}/${put.fullpath}`;
    const [code] = await answerOf((cb) => this.operations.replaceWith(path, put.data, cb));
    if (code < 0) return -code;
    this.logger.warn({ path }, 'fuse: a file made elsewhere under the name of a file closed through the mount was replaced by it (the later close wins)');
    return undefined;
  }
}
