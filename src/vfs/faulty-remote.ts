/**
 * FaultyRemote: a Remote wrapper that fails, delays or cuts calls on command (fault injection as part of
 * the product: the control socket and the benches use it as much as the tests). With no rule active it
 * forwards every call unchanged.
 *
 * - `fail`: the call throws `code` (default EIO) without reaching the inner remote.
 * - `delay`: the call waits `delayMs` first (abortable by the call's signal).
 * - `cut`: a connection lost mid-way. openRange streams `afterBytes` bytes then error; any other call
 *   reaches the inner remote and then throws EIO, so the caller does not know the outcome.
 */
import { Readable } from 'node:stream';
import { systemClock, type Clock } from './clock.js';
import { VfsError, type VfsErrorCode } from './types.js';
import type { RangeCallOptions, ChangesPage, CommitOptions, CommitSource, Remote, RemoteCallOptions, RemoteEntry, RemoteInfo, RemoteQuota } from './remote.js';

export type RemoteMethod = keyof Remote;

export interface FaultRule {
  kind: 'fail' | 'delay' | 'cut';
  /** Methods the rule applies to; default all. */
  methods?: RemoteMethod[];
  /** Only calls whose (first) path starts with this prefix; default any path. */
  pathPrefix?: string;
  /** Error code of `fail`. Default EIO. */
  code?: VfsErrorCode;
  /** Wait of `delay`, ms. Default 1000. */
  delayMs?: number;
  /** Bytes delivered before a `cut` of openRange. Default 0. */
  afterBytes?: number;
  /** Number of calls the rule applies to, then it is removed; default unlimited. */
  times?: number;
  /** Absolute time (ms, the wrapper's clock) after which the rule is removed; default never. */
  untilMs?: number;
  /** The failure says the service could not be reached (as a refused connection does). Default false. */
  unreachable?: boolean;
}

interface ActiveRule extends FaultRule { id: number; hits: number }

export class FaultyRemote implements Remote {
  private rules: ActiveRule[] = [];
  /** Calls under way, each with the controller that cuts it off. */
  private readonly inFlight = new Set<AbortController>();
  private nextId = 1;
  /** Calls affected by a rule, per kind (for tests and the status output). */
  readonly injected = { fail: 0, delay: 0, cut: 0 };

  /** Present when the inner remote has it (an optional ability, forwarded with the rules applied). */
  readonly checkWrite?: Remote['checkWrite'];
  readonly tags?: Remote['tags'];
  readonly history?: Remote['history'];

  /** `clock`: the time of the rules' ends and of the injected delays. */
  constructor(readonly inner: Remote, private readonly clock: Clock = systemClock) {
    if (inner.tags) this.tags = (p, opts) => this.run('tags', p, opts, (o) => inner.tags!(p, o));
    if (inner.history) this.history = (p, max, opts) => this.run('history', p, opts, (o) => inner.history!(p, max, o));
    if (inner.checkWrite) this.checkWrite = (p, existing, opts) => this.run('checkWrite', p, opts, (o) => inner.checkWrite!(p, existing, o));
  }

  /** Adds a rule; returns a function that removes it. */
  inject(rule: FaultRule): () => void {
    const active: ActiveRule = { ...rule, id: this.nextId++, hits: 0 };
    this.rules.push(active);
    return () => { this.rules = this.rules.filter((r) => r.id !== active.id); };
  }

  /**
   * The service unreachable for `ms` milliseconds: every call fails with EIO. With `cutInFlight`, calls
   * under way (an upload, a range) are aborted too, like connections dropped.
   */
  down(ms: number, opts: { cutInFlight?: boolean } = {}): void {
    this.inject({ kind: 'fail', code: 'EIO', untilMs: this.clock.now() + ms, unreachable: true });
    if (opts.cutInFlight) {
      for (const flight of this.inFlight) flight.abort(new VfsError('EIO', 'connection cut (injected outage)', { unreachable: true }));
      this.injected.cut += this.inFlight.size;
    }
  }

  /** Removes every rule. */
  heal(): void {
    this.rules = [];
  }

  /** Rules still active. */
  activeRules(): FaultRule[] {
    this.expire();
    return this.rules.map(({ id: _id, hits: _hits, ...r }) => r);
  }

  info(opts?: RemoteCallOptions): Promise<RemoteInfo> { return this.run('info', '', opts, (o) => this.inner.info(o)); }
  list(p: string, opts?: RemoteCallOptions): Promise<RemoteEntry[]> { return this.run('list', p, opts, (o) => this.inner.list(p, o)); }
  stat(p: string, opts?: RemoteCallOptions): Promise<RemoteEntry | null> { return this.run('stat', p, opts, (o) => this.inner.stat(p, o)); }
  commit(p: string, s: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> { return this.run('commit', p, opts, (o) => this.inner.commit(p, s, o)); }
  mkdir(p: string, opts?: RemoteCallOptions): Promise<RemoteEntry> { return this.run('mkdir', p, opts, (o) => this.inner.mkdir(p, o)); }
  move(a: string, b: string, opts?: RemoteCallOptions): Promise<void> { return this.run('move', a, opts, (o) => this.inner.move(a, b, o)); }
  copy(a: string, b: string, opts?: RemoteCallOptions): Promise<void> { return this.run('copy', a, opts, (o) => this.inner.copy(a, b, o)); }
  remove(p: string, opts?: RemoteCallOptions): Promise<void> { return this.run('remove', p, opts, (o) => this.inner.remove(p, o)); }
  changes(c: number, opts?: RemoteCallOptions): Promise<ChangesPage> { return this.run('changes', '', opts, (o) => this.inner.changes(c, o)); }
  headCursor(opts?: RemoteCallOptions): Promise<number> { return this.run('headCursor', '', opts, (o) => this.inner.headCursor(o)); }
  quota(opts?: RemoteCallOptions): Promise<RemoteQuota> { return this.run('quota', '', opts, (o) => this.inner.quota(o)); }
  lock(p: string, l: boolean, opts?: RemoteCallOptions): Promise<void> { return this.run('lock', p, opts, (o) => this.inner.lock(p, l, o)); }
  addTags(p: string, t: string[], opts?: RemoteCallOptions): Promise<void> { return this.run('addTags', p, opts, (o) => this.inner.addTags(p, t, o)); }
  removeTags(p: string, t: string[], opts?: RemoteCallOptions): Promise<void> { return this.run('removeTags', p, opts, (o) => this.inner.removeTags(p, t, o)); }

  async openRange(p: string, start: number, end: number, opts?: RangeCallOptions): Promise<Readable> {
    const cut = this.match('openRange', p, 'cut');
    const stream = await this.run('openRange', p, opts, (o) => this.inner.openRange(p, start, end, { ...opts, ...o }), ['fail', 'delay']);
    if (!cut) return stream;
    this.injected.cut++;
    return cutAfter(stream, cut.afterBytes ?? 0);
  }

  private async run<T>(method: RemoteMethod, path: string, opts: RemoteCallOptions | undefined, call: (o: RemoteCallOptions) => Promise<T>, kinds: FaultRule['kind'][] = ['fail', 'delay', 'cut']): Promise<T> {
    // Each call can be cut off while under way (`down(ms, { cutInFlight: true })`), delays included.
    const flight = new AbortController();
    const onAbort = (): void => flight.abort(opts?.signal?.reason);
    opts?.signal?.addEventListener('abort', onAbort, { once: true });
    // Aborted before it began (the caller gave up between two calls): it never waits.
    if (opts?.signal?.aborted) onAbort();
    this.inFlight.add(flight);
    const cutOff = (): boolean => flight.signal.aborted && !opts?.signal?.aborted;
    let result: T;
    try {
      if (kinds.includes('delay')) {
        const delay = this.match(method, path, 'delay');
        if (delay) {
          this.injected.delay++;
          await wait(this.clock, delay.delayMs ?? 1000, flight.signal);
        }
      }
      if (kinds.includes('fail')) {
        const fail = this.match(method, path, 'fail');
        if (fail) {
          this.injected.fail++;
          throw new VfsError(fail.code ?? 'EIO', `${method} '${path}': injected failure${fail.unreachable ? ' (service unreachable)' : ''}`, { unreachable: fail.unreachable });
        }
      }
      const cut = kinds.includes('cut') ? this.match(method, path, 'cut') : undefined;
      result = await call({ ...opts, signal: flight.signal });
      if (cut) {
        this.injected.cut++;
        throw new VfsError('EIO', `${method} '${path}': connection cut (injected), outcome unknown`);
      }
    } catch (err) {
      if (cutOff()) throw new VfsError('EIO', `${method} '${path}': connection cut (injected outage)`, { cause: err, unreachable: true });
      throw err;
    } finally {
      this.inFlight.delete(flight);
      opts?.signal?.removeEventListener('abort', onAbort);
    }
    // Cut off while under way, by a remote that did not stop: the caller never hears the outcome.
    if (cutOff()) throw new VfsError('EIO', `${method} '${path}': connection cut (injected outage), outcome unknown`, { unreachable: true });
    return result;
  }

  /** The first active rule of `kind` for this call; counts the hit. */
  private match(method: RemoteMethod, path: string, kind: FaultRule['kind']): ActiveRule | undefined {
    this.expire();
    const rule = this.rules.find((r) => r.kind === kind && (!r.methods || r.methods.includes(method)) && (!r.pathPrefix || path.startsWith(r.pathPrefix)));
    if (!rule) return undefined;
    rule.hits++;
    if (rule.times !== undefined && rule.hits >= rule.times) this.rules = this.rules.filter((r) => r !== rule);
    return rule;
  }

  private expire(): void {
    const now = this.clock.now();
    this.rules = this.rules.filter((r) => r.untilMs === undefined || r.untilMs > now);
  }
}

function wait(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new VfsError('EIO', 'aborted'));
    const t = clock.after(ms, () => { signal?.removeEventListener('abort', onAbort); resolve(); });
    const onAbort = (): void => { t.cancel(); reject(new VfsError('EIO', 'aborted')); };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** A stream that delivers `limit` bytes of `source` and then fails like a dropped connection. */
function cutAfter(source: Readable, limit: number): Readable {
  let sent = 0;
  async function* gen(): AsyncGenerator<Buffer> {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      const room = limit - sent;
      if (chunk.length >= room) {
        if (room > 0) yield chunk.subarray(0, room);
        source.destroy();
        throw new VfsError('EIO', `connection cut after ${limit} bytes (injected)`);
      }
      sent += chunk.length;
      yield chunk;
    }
    throw new VfsError('EIO', `connection cut after ${sent} bytes (injected)`);
  }
  return Readable.from(gen(), { objectMode: false });
}
