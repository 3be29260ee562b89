/**
 * Connectivity: whether each library's service answers. Every call a library's Remote makes reports here
 * (through ReportingRemote): one that fails because the service could not be reached (no answer, a cut
 * connection, a gateway error of a proxy in front of it) takes the library offline; any answer brings it
 * back online. A call the gateway aborted itself is neither. While offline the gateway serves what it has — cached listings, attributes and content, the
 * journal — and takes new writes into the journal; `onOnline` is where the waiting work resumes.
 */
import { VfsError } from './types.js';
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
  /** A call (or a body) with no word from the service for this long takes its library offline, ms. */
  readonly stallMs: number;

  constructor(private readonly hooks: { onOffline?: (library: string, err: VfsError) => void; onOnline?: (library: string, offlineMs: number) => void; stallMs?: number } = {}) {
    this.stallMs = hooks.stallMs ?? DEFAULT_STALL_MS;
  }

  /**
   * A call of `library` waiting since `sinceMs` has had no answer for `stallMs`: when nothing else of the
   * library answered meanwhile, the service is not answering (stopped, overloaded, a network black
   * hole) and the library is offline. True when it was taken offline.
   */
  stalled(library: string, sinceMs: number): boolean {
    if ((this.lastAnswerMs.get(library) ?? 0) > sinceMs) return false;
    this.failed(library, new VfsError('EIO', `the service has not answered for ${Math.round(this.stallMs / 1000)} s`, { unreachable: true }));
    return true;
  }

  /** A call of `library` was answered (whatever the answer). */
  answered(library: string): void {
    this.lastAnswerMs.set(library, Date.now());
    const s = this.state.get(library);
    if (!s || s.online) return;
    const since = s.offlineSinceMs ?? Date.now();
    this.state.set(library, { library, online: true });
    this.hooks.onOnline?.(library, Date.now() - since);
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
    this.state.set(library, { library, online: false, offlineSinceMs: Date.now(), lastError: err.message });
    this.hooks.onOffline?.(library, err);
  }

  online(library: string): boolean {
    return this.state.get(library)?.online ?? true;
  }

  of(library: string): LibraryConnectivity {
    return { ...(this.state.get(library) ?? { library, online: true }) };
  }

  forget(library: string): void {
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

  info(opts?: RemoteCallOptions): Promise<RemoteInfo> { return this.run(() => this.inner.info(opts), opts); }
  list(p: string, opts?: RemoteCallOptions): Promise<RemoteEntry[]> { return this.run(() => this.inner.list(p, opts), opts); }
  stat(p: string, opts?: RemoteCallOptions): Promise<RemoteEntry | null> { return this.run(() => this.inner.stat(p, opts), opts); }
  async openRange(p: string, start: number, end: number, opts?: RangeCallOptions): Promise<Readable> {
    return this.watchBody(await this.run(() => this.inner.openRange(p, start, end, opts), opts));
  }

  // An upload's own exchanges (its chunks) are not seen here: its length says nothing of the service.
  commit(p: string, s: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> { return this.run(() => this.inner.commit(p, s, opts), opts, false); }
  mkdir(p: string, opts?: RemoteCallOptions): Promise<RemoteEntry> { return this.run(() => this.inner.mkdir(p, opts), opts); }
  move(a: string, b: string, opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.move(a, b, opts), opts); }
  copy(a: string, b: string, opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.copy(a, b, opts), opts); }
  remove(p: string, opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.remove(p, opts), opts); }
  changes(c: number, opts?: RemoteCallOptions): Promise<ChangesPage> { return this.run(() => this.inner.changes(c, opts), opts); }
  headCursor(opts?: RemoteCallOptions): Promise<number> { return this.run(() => this.inner.headCursor(opts), opts); }
  quota(opts?: RemoteCallOptions): Promise<RemoteQuota> { return this.run(() => this.inner.quota(opts), opts); }
  lock(p: string, l: boolean, opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.lock(p, l, opts), opts); }
  addTags(p: string, t: string[], opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.addTags(p, t, opts), opts); }
  removeTags(p: string, t: string[], opts?: RemoteCallOptions): Promise<void> { return this.run(() => this.inner.removeTags(p, t, opts), opts); }

  private async run<T>(call: () => Promise<T>, opts?: RemoteCallOptions, watch = true): Promise<T> {
    const startedMs = Date.now();
    const timer = watch ? setTimeout(() => this.link.stalled(this.library, startedMs), this.link.stallMs) : undefined;
    timer?.unref();
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
      if (timer) clearTimeout(timer);
    }
  }

  /**
   * A download's body: each piece is a word from the service; one that stops for `stallMs` while its
   * reader waits for more (a reader that does not read is not the service's stall) and while the
   * service answers nothing else takes the library offline and ends with EIO: the reader is not left waiting.
   */
  private watchBody(body: Readable): Readable {
    let lastMs = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const out = new Transform({
      transform(chunk: Buffer, _enc, done) { lastMs = Date.now(); done(null, chunk); },
    });
    const arm = (): void => {
      timer = setTimeout(() => {
        if (out.destroyed || out.writableFinished) return;
        // The reader has not taken what it was given: waiting on it, not on the service.
        if (out.readableLength >= out.readableHighWaterMark || body.readableLength > 0) lastMs = Date.now();
        if (Date.now() - lastMs < this.link.stallMs) return arm();
        this.link.stalled(this.library, lastMs);
        out.destroy(new VfsError('EIO', `download stalled: the service sent nothing for ${Math.round(this.link.stallMs / 1000)} s`, { unreachable: true }));
      }, Math.max(1, lastMs + this.link.stallMs - Date.now()));
      timer.unref();
    };
    pipeline(body, out, () => { if (timer) clearTimeout(timer); });
    arm();
    return out;
  }
}
