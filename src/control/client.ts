/** ControlClient: calls methods on a gateway's control socket (used by `cloudlib ctl` and scripts). */
import { createConnection, type Socket } from 'node:net';
import { LineSplitter, type RpcError, type RpcResponse } from './protocol.js';

export class ControlCallError extends Error {
  constructor(readonly code: number, message: string, readonly data?: unknown) {
    super(message);
    this.name = 'ControlCallError';
  }
}

export class ControlClient {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void; onProgress?: (p: Record<string, unknown>) => void; onEvent?: (e: Record<string, unknown>) => void }>();
  private closed?: Error;

  private constructor(private readonly sock: Socket) {
    const splitter = new LineSplitter((line) => this.onLine(line), () => this.failAll(new Error('control answer exceeds 1 MiB')), 64 * 1024 * 1024);
    sock.on('data', (c: Buffer) => splitter.push(c));
    sock.on('error', (err) => this.failAll(err));
    sock.on('close', () => this.failAll(new Error('control socket closed')));
  }

  static connect(socketPath: string, timeoutMs = 5_000): Promise<ControlClient> {
    return new Promise((resolve, reject) => {
      const sock = createConnection(socketPath);
      const t = setTimeout(() => { sock.destroy(); reject(new Error(`no answer on control socket ${socketPath} within ${timeoutMs} ms`)); }, timeoutMs);
      sock.once('connect', () => { clearTimeout(t); resolve(new ControlClient(sock)); });
      sock.once('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(t);
        const why = err.code === 'ENOENT' || err.code === 'ECONNREFUSED' ? 'is the gateway running?' : err.message;
        reject(new Error(`cannot connect to control socket ${socketPath}: ${why}`));
      });
    });
  }

  /** `onEvent`: the event notifications of a call that streams them (`watch`), each as it comes. */
  call(method: string, params: Record<string, unknown> = {}, onProgress?: (p: Record<string, unknown>) => void, onEvent?: (e: Record<string, unknown>) => void): Promise<unknown> {
    if (this.closed) return Promise.reject(this.closed);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onProgress, onEvent });
      this.sock.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    });
  }

  close(): void {
    this.sock.end();
  }

  private onLine(line: string): void {
    let msg: RpcResponse & { method?: string; params?: Record<string, unknown> };
    try { msg = JSON.parse(line); } catch { return; }
    if (msg.method === 'progress' && msg.params) {
      this.pending.get(Number(msg.params.id))?.onProgress?.(msg.params);
      return;
    }
    if (msg.method === 'event' && msg.params) {
      const { id, ...event } = msg.params;
      this.pending.get(Number(id))?.onEvent?.(event);
      return;
    }
    const p = this.pending.get(Number(msg.id));
    if (!p) return;
    this.pending.delete(Number(msg.id));
    if (msg.error) {
      const e: RpcError = msg.error;
      p.reject(new ControlCallError(e.code, e.message, e.data));
    } else {
      p.resolve(msg.result);
    }
  }

  private failAll(err: Error): void {
    this.closed ??= err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}
