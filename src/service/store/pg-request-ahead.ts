/**
 * RequestAhead: what one request of the service has asked PostgreSQL to do ahead of its work, carried by
 * the request's asynchronous context (PgMetadataStore.request).
 *
 * - A statement ahead (`queue`) is a statement by itself (autocommitted) whose answer the request needs
 *   before anything it changes commits, not before it starts: the replay guard's record of a change.
 *   It goes in the round trip of the request's first transaction, before BEGIN and committed there on
 *   its own (`…; COMMIT; BEGIN …`), or of its first plain read; before a plain write it goes by itself.
 *   It must be idempotent: when the round trip it shared fails, it is sent again by itself, so a failure
 *   of the work never passes for its own.
 * - A gate (`gate`) is a promise every transaction of the request waits for before COMMIT: the request's
 *   changes commit only once the guard let the call through, and roll back when it refuses.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface AheadStatement {
  /** The statement with `$n` placeholders, and its values. */
  sql: string;
  params: readonly unknown[];
  resolve(rows: unknown[]): void;
  reject(err: unknown): void;
}

interface RequestState {
  pending: AheadStatement[];
  gates: Promise<unknown>[];
}

export class RequestAhead {
  private readonly current = new AsyncLocalStorage<RequestState>();

  run<T>(fn: () => Promise<T>): Promise<T> {
    return this.current.run({ pending: [], gates: [] }, fn);
  }

  /** True inside a request. */
  active(): boolean {
    return this.current.getStore() !== undefined;
  }

  /** Queues a statement ahead; its rows once sent. Only inside a request. */
  queue(sql: string, params: readonly unknown[]): Promise<unknown[]> {
    const state = this.current.getStore();
    if (!state) throw new Error('a statement ahead needs a request (PgMetadataStore.request)');
    return new Promise((resolve, reject) => state.pending.push({ sql, params, resolve, reject }));
  }

  /** The statements ahead not sent yet, now the caller's to send. */
  take(): AheadStatement[] {
    const state = this.current.getStore();
    if (!state || state.pending.length === 0) return [];
    const taken = state.pending;
    state.pending = [];
    return taken;
  }

  gate(p: Promise<unknown>): void {
    const state = this.current.getStore();
    if (!state) throw new Error('a gate needs a request (PgMetadataStore.request)');
    p.catch(() => undefined); // awaited by the commits; a failure meanwhile is not unhandled
    state.gates.push(p);
  }

  /** The gates of the request in progress here. */
  gates(): readonly Promise<unknown>[] {
    return this.current.getStore()?.gates ?? [];
  }
}
