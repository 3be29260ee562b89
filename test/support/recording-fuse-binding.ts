/**
 * A recording stand-in for the native part of the FUSE engine (Fuse3Binding), to drive LowLevelMount
 * without a kernel: requests go in as the reader thread would hand them over, and each reply is taken as
 * `{ kind, args }` and settles the request it answers. Made for the in-memory Vfs: no spool, no read from a
 * descriptor, no journal (each throws if asked). Passthrough is granted only when asked for; backing
 * files are then as `overrides` register them (by default the kernel refuses them, ENOTSUP).
 */
import { Op, type Fuse3Binding, type KernelRequest, type NativeSession } from '../../src/fuse/engine/binding.js';

/** A reply of the engine: which reply function (`replyEntry` is `entry`) and its arguments after the id. */
export interface Reply {
  kind: string;
  args: unknown[];
}

export interface RecordingBindingOptions {
  /** Passthrough granted at INIT: opens may be answered with a backing file. Default false. */
  passthrough?: boolean;
  /** Functions of the binding replaced (say, to register backing files or hold a reply back). */
  overrides?: Partial<Fuse3Binding>;
}

export class RecordingBinding {
  readonly binding: Fuse3Binding;
  /** Inodes whose attributes the engine told the native part to forget (attrForget), in order. */
  readonly forgotten: number[] = [];
  private readonly waiting = new Map<number, (r: Reply) => void>();
  private onBatch: (batch: KernelRequest[]) => void = () => undefined;
  private nextId = 1;
  /** How many directory entries a READDIRPLUS reply takes (all by default). */
  private fits = Infinity;

  constructor(opts: RecordingBindingOptions = {}) {
    const passthrough = opts.passthrough ?? false;
    const answer = (kind: string) => (_s: NativeSession, id: number, ...args: unknown[]) => {
      const w = this.waiting.get(id);
      this.waiting.delete(id);
      // Copy typed arrays: the engine reuses its stat array.
      w?.({ kind, args: args.map((a) => (a instanceof Float64Array ? Array.from(a) : a)) });
      return w !== undefined;
    };
    const withoutPassthrough = (what: string) => () => { throw new Error(`${what}: not expected without passthrough`); };
    this.binding = {
      mount: (_m, _o, _s, cb) => {
        this.onBatch = cb;
        return {} as NativeSession;
      },
      unmount: async () => undefined,
      destroy: () => true,
      replyErr: answer('err'),
      replyEntry: answer('entry'),
      replyNegative: answer('negative'),
      replyAttr: answer('attr'),
      replyOpen: answer('open'),
      replyCreate: answer('create'),
      // The kernel takes no backing file unless `overrides` registers it.
      backingOpen: () => -95,
      backingClose: () => 0,
      attrLive: () => true,
      spoolFolder: () => undefined,
      replyOpenBacking: passthrough ? answer('openBacking') : withoutPassthrough('replyOpenBacking'),
      replyCreateBacking: passthrough ? answer('createBacking') : withoutPassthrough('replyCreateBacking'),
      replyWrite: answer('write'),
      replyXattrSize: answer('xattrSize'),
      replyData: (s, id, parts, limit) => answer('data')(s, id, Buffer.concat(parts as Buffer[]).subarray(0, limit)),
      // The in-memory Vfs holds no local files: no read is answered from a descriptor here.
      replyFd: () => { throw new Error('replyFd: not expected over the in-memory Vfs'); },
      replyDir: (s, id, _size, names) => {
        answer('dir')(s, id, [...names]);
        return names.length;
      },
      // Takes as many entries as `fitOnly` says (all by default), as the native part does with its buffer.
      replyDirPlus: (s, id, _size, names, stats) => {
        const n = Math.min(names.length, this.fits);
        answer('dirplus')(s, id, names.slice(0, n), Array.from(stats.subarray(0, n * 11)));
        return n;
      },
      replyStatfs: answer('statfs'),
      invalidateEntry: async () => 0,
      invalidateInode: async () => 0,
      notifyDelete: async () => 0,
      // The in-memory Vfs hands out no spool: every write goes through JavaScript here.
      spoolAttach: () => { throw new Error('spoolAttach: not expected over the in-memory Vfs'); },
      spoolDetach: () => undefined,
      spoolWrite: () => undefined,
      attrForget: (_s, ino) => void this.forgotten.push(ino),
      folderNames: () => false,
      namesForget: () => undefined,
      pathsKept: () => true,
      answeredCounts: () => ({ getattr: 0, writes: 0, times: 0, modes: 0, lookups: 0, creates: 0, closes: 0, spoolsMadeAhead: 0 }),
      spoolWritebacks: () => 0,
      spoolSyncs: () => 0,
      transport: () => ({ transport: 'dev', why: 'a recording binding', ringRequests: 0, devRequests: 0, queues: 0, depth: 16, passthrough }),
      takeQueued: () => [],
      journalSwitch: () => { throw new Error('journalSwitch: not expected over the in-memory Vfs'); },
      encodeCloseRecord: () => { throw new Error('encodeCloseRecord: not expected over the in-memory Vfs'); },
      ...opts.overrides,
    };
  }

  /** The kernel's INIT, once the mount is mounted (`writeback`: the writeback cache granted, 0 or 1). */
  init(writeback: number): void {
    this.onBatch([{ op: Op.INIT, id: 0, ino: 0, writeback, maxWrite: 1 << 20, maxReadahead: 1 << 20, maxBackground: 64 }]);
  }

  /** Hands `reqs` over in one batch, as the reader thread does; nothing waits for their answers. */
  readonly batch = (reqs: KernelRequest[]): void => this.onBatch(reqs);

  /** Hands over one request that takes no answer (FORGET, a close the engine answered). */
  readonly notify = (req: KernelRequest): void => this.onBatch([req]);

  /** Hands over `req` with the next id, in a batch of its own; settles with its reply. */
  readonly send = (req: Omit<KernelRequest, 'id'>): Promise<Reply> =>
    new Promise((resolve) => {
      const id = this.nextId++;
      this.waiting.set(id, resolve);
      this.onBatch([{ ...req, id }]);
    });

  /** From now on a READDIRPLUS reply takes at most `n` entries. */
  readonly fitOnly = (n: number): void => {
    this.fits = n;
  };
}
