/**
 * Connectivity: whether each library's service answers. Every call a library's Remote makes reports here
 * (through ReportingRemote): one that fails because the service could not be reached (no answer, a cut
 * connection, a gateway error of a proxy in front of it) takes the library offline; any answer brings it
 * back online. A call the gateway aborted itself is neither. While offline the gateway serves what it has — cached listings, attributes and content, the
 * journal — and takes new writes into the journal; `onOnline` is where the waiting work resumes.
 */
import { VfsError } from './types.js';
import { systemClock, type Clock, type ClockTimer } from './clock.js';
import type { ChangesPage, CommitOptions, CommitSource, RangeCallOptions, Remote, RemoteCallOptions, RemoteEntry, RemoteInfo, RemoteQuota } from './remote.js';
import { pipeline, Transform, type Readable } from 'node:stream';

export interface LibraryConnectivity {
  library: string;
  online: boolean;
  /** Since when it is offline, ms since the epoch. */
  offlineSinceMs?: number;
  /** What the last unreachable call said. */
  lastError?: string;
}

/** How long a call (or a download's body) may go without a word from the service before its library is offline, ms. */
export const DEFAULT_STALL_MS = 15_000;

export class Connectivity {
  private readonly state = new Map<string, LibraryConnectivity>();
  /** When each library's service last answered anything, ms since the epoch. */
  private readonly lastAnswerMs = new Map<string, number>();
  /** Libraries whose service stopped answering (a stall), until it answers again; the calls asking it meanwhile, and when one last started. */
  private readonly silent = new Set<string>();
  private readonly askingNow = new Map<string, number>();
  private readonly lastAskedMs = new Map<string, number>();
  /** A call (or a body) with no word from the service for this long takes its library offline, ms. */
  readonly stallMs: number;
  /** The time of the answers, outages and stall deadlines. */
  readonly clock: Clock;

  constructor(private readonly hooks: { onOffline?: (library: string, err: VfsError) => void; onOnline?: (library: string, offlineMs: number) => void; stallMs?: number; clock?: Clock } = {}) {
    this.stallMs = hooks.stallMs ?? DEFAULT_STALL_MS;
    this.clock = hooks.clock ?? systemClock;
  }

  /**
   * A call of `library` waiting since `sinceMs` has had no answer for `stallMs`: when nothing else of the
   * library answered meanwhile, the service is not answering (stopped, overloaded, a network black
   * hole) and the library is offline. True when it was taken offline.
   */
  stalled(library: string, sinceMs: number): boolean {
    if ((this.lastAnswerMs.get(library) ?? 0) > sinceMs) return false;
    this.silent.add(library);
    this.failed(library, new VfsError('EIO', `the service has not answered for ${Math.round(this.stallMs / 1000)} s`, { unreachable: true }));
    return true;
  }

  /**
   * A call of `library` starts. While its service is silent (offline after a stall, nothing answered
   * since), a read (`probe` false) asks it only when no other call did for `stallMs` (the updates feed's
   * polls usually do, and find it back): otherwise it fails at once instead of waiting out the stall
   * deadline (undefined). `done` ends the call's turn.
   */
  asking(library: string, probe: boolean): { done: () => void } | undefined {
    if (!this.silent.has(library)) return { done: () => undefined };
    const now = this.clock.now();
    const calls = this.askingNow.get(library) ?? 0;
    if (!probe && (calls > 0 || now - (this.lastAskedMs.get(library) ?? 0) < this.stallMs)) return undefined;
    this.askingNow.set(library, calls + 1);
    this.lastAskedMs.set(library, now);
    let ended = false;
    return {
      done: () => {
        if (ended) return;
        ended = true;
        const left = (this.askingNow.get(library) ?? 1) - 1;
        if (left > 0) this.askingNow.set(library, left);
        else this.askingNow.delete(library);
      },
    };
  }

  /** A call of `library` was answered (whatever the answer). */
  answered(library: string): void {
    if (this.silent.delete(library)) this.lastAskedMs.delete(library);
    const now = this.clock.now();
    this.lastAnswerMs.set(library, now);
    const s = this.state.get(library);
    if (!s || s.online) return;
    const since = s.offlineSinceMs ?? now;
    this.state.set(library, { library, online: true });
    this.hooks.onOnline?.(library, now - since);
  }

  /** A call of `library` failed: offline when the failure says the service could not be reached. */
  failed(library: string, err: unknown): void {
    if (!(err instanceof VfsError) || !err.unreachable) {
      // The service answered with an error: it is there.
      if (err instanceof VfsError) this.answered(library);
      return;
    }
    const s = this.state.get(library);
    if (s && !s.online) {
      s.lastError = err.message;
      return;
    }
    this.state.set(library, { library, online: false, offlineSinceMs: this.clock.now(), lastError: err.message });
    this.hooks.onOffline?.(library, err);
  }

  online(library: string): boolean {
    return this.state.get(library)?.online ?? true;
  }

  of(library: string): LibraryConnectivity {
    return { ...(this.state.get(library) ?? { library, online: true }) };
  }

  forget(library: string): void {
    this.silent.delete(library);
    this.askingNow.delete(library);
    this.lastAskedMs.delete(library);
    this.state.delete(library);
    this.lastAnswerMs.delete(library);
  }
}

/** A Remote that reports every call's outcome to a Connectivity. */
export class ReportingRemote implements Remote {
  /** Present when the inner remote has it (an optional ability, forwarded as it is). */
  readonly prepareReads?: Remote['prepareReads'];
  readonly checkWrite?: Remote['checkWrite'];
  readonly tags?: Remote['tags'];
  readonly history?: Remote['history'];

  constructor(readonly inner: Remote, private readonly library: string, private readonly link: Connectivity) {
    if (inner.tags) this.tags = (p, opts) => this.run(() => inner.tags!(p, opts), opts);
    if (inner.history) this.history = (p, max, opts) => this.run(() => inner.history!(p, max, opts), opts);
    if (inner.prepareReads) this.prepareReads = (files, opts) => inner.prepareReads!(files, opts);
    if (inner.checkWrite) this.checkWrite = (p, existing, opts) => this.run(() => inner.checkWrite!(p, existing, opts), opts);
  }

  // Reads end at the stall (EIO): a reader is not left waiting for a service that does not answer.
  info(opts?: RemoteCallOptions): Promise<RemoteInfo> { return this.read((o) => this.inner.info(o), opts); }
  list(p: string, opts?: RemoteCallOptions): Promise<RemoteEntry[]> { return this.read((o) => this.inner.list(p, o), opts); }
  stat(p: string, opts?: RemoteCallOptions): Promise<RemoteEntry | null> { return this.read((o) => this.inner.stat(p, o), opts); }
  async openRange(p: string, start: number, end: number, opts?: RangeCallOptions): Promise<Readable> {
    return this.watchBody(await this.read((o) => this.inner.openRange(p, start, end, { ...opts, ...o }), opts));
  }
  // The updates feed's polls always ask: they find a silent service back.
  changes(c: number, opts?: RemoteCallOptions): Promise<ChangesPage> { return this.read((o) => this.inner.changes(c, o), opts, true); }
  headCursor(opts?: RemoteCallOptions): Promise<number> { return this.read((o) => this.inner.headCursor(o), opts, true); }
  quota(opts?: RemoteCallOptions): Promise<RemoteQuota> { return this.read((o) => this.inner.quota(o), opts); }

  // A change waits for its answer (its outcome is not known before it): the stall only takes the library offline.
  // An upload's own exchanges (its chunks) are not seen here: its length says nothing of the service.
  commit(p: string, s: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> { return this.run(() => this.inner.commit(p, s, opts), opts, false); }
  mkdir(p: string, opts?: RemoteCallOptions): Promise<RemoteEntry> { return this.run(() => this.inner.mkdir(p, opts), opts); }
  move(a: string, b: string, opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.move(a, b, opts), opts); }
  copy(a: string, b: string, opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.copy(a, b, opts), opts); }
  remove(p: string, opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.remove(p, opts), opts); }
  lock(p: string, l: boolean, opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.lock(p, l, opts), opts); }
  addTags(p: string, t: string[], opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.addTags(p, t, opts), opts); }
  removeTags(p: string, t: string[], opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.removeTags(p, t, opts), opts); }

  /**
   * A call that only reads: when it has had no answer for `stallMs` and that takes the library offline,
   * it is called off (its request aborted) and fails with EIO at once; while the service stays silent,
   * a read asks it only when nothing else did lately, and otherwise fails at once (Connectivity.asking).
   */
  private async read<T>(call: (opts: RemoteCallOptions) => Promise<T>, opts?: RemoteCallOptions, probe = false): Promise<T> {
    const turn = this.link.asking(this.library, probe);
    if (!turn) throw new VfsError('EIO', `library offline: the service has not answered for ${Math.round(this.link.stallMs / 1000)} s`, { unreachable: true });
    try {
      return await this.cutAtStall(call, opts);
    } finally {
      turn.done();
    }
  }

  private cutAtStall<T>(call: (opts: RemoteCallOptions) => Promise<T>, opts?: RemoteCallOptions): Promise<T> {
    const stop = new AbortController();
    const signal = opts?.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
    let cut: ((err: VfsError) => void) | undefined;
    const stalled = new Promise<never>((_, reject) => { cut = reject; });
    stalled.catch(() => undefined);
    return this.run(() => Promise.race([call({ ...opts, signal }), stalled]), opts, true, () => {
      const err = new VfsError('EIO', `the service has not answered for ${Math.round(this.link.stallMs / 1000)} s`, { unreachable: true });
      cut?.(err);
      stop.abort(err);
    });
  }

  /** `onStall`: the call had no answer for `stallMs` and its library went offline for it. */
  private async run<T>(call: () => Promise<T>, opts?: RemoteCallOptions, watch = true, onStall?: () => void): Promise<T> {
    const startedMs = this.link.clock.now();
    const timer = watch ? this.link.clock.after(this.link.stallMs, () => { if (this.link.stalled(this.library, startedMs)) onStall?.(); }) : undefined;
    try {
      const result = await call();
      this.link.answered(this.library);
      return result;
    } catch (err) {
      // A call the gateway itself called off (an upload cancelled because the file changed, a read no one
      // waits for) says nothing about the service: its failure is not an outage.
      if (!opts?.signal?.aborted) this.link.failed(this.library, err);
      throw err;
    } finally {
      timer?.cancel();
    }
  }

  /**
   * A download's body: each piece is a word from the service; one that stops for `stallMs` while its
   * reader waits for more (a reader that does not read is not the service's stall) and while the
   * service answers nothing else takes the library offline and ends with EIO: the reader is not left waiting.
   */
  private watchBody(body: Readable): Readable {
    const clock = this.link.clock;
    let lastMs = clock.now();
    let timer: ClockTimer | undefined;
    const out = new Transform({
      transform(chunk: Buffer, _enc, done) { lastMs = clock.now(); done(null, chunk); },
    });
    const arm = (): void => {
      timer = clock.after(Math.max(1, lastMs + this.link.stallMs - clock.now()), () => {
        if (out.destroyed || out.writableFinished) return;
        // The reader has not taken what it was given: waiting on it, not on the service.
        if (out.readableLength >= out.readableHighWaterMark || body.readableLength > 0) lastMs = clock.now();
        if (clock.now() - lastMs < this.link.stallMs) return arm();
        this.link.stalled(this.library, lastMs);
        out.destroy(new VfsError('EIO', `download stalled: the service sent nothing for ${Math.round(this.link.stallMs / 1000)} s`, { unreachable: true }));
      });
    };
    pipeline(body, out, () => { timer?.cancel(); });
    arm();
    return out;
  }
}
