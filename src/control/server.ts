/**
 * ControlServer: JSON-RPC 2.0 over a Unix domain socket (newline-delimited), mode 0600. A bad message,
 * an oversized one, or an unknown method gets an error answer; nothing a client sends takes the gateway
 * down.
 */
import { createServer, createConnection, type Server, type Socket } from 'node:net';
import { chmod, unlink, lstat } from 'node:fs/promises';
import type { Logger } from '../shared/log.js';
import { silentLogger } from '../shared/log.js';
import { LineSplitter, RpcErrorCode, RpcFailure, type RpcRequest, type RpcResponse } from './protocol.js';
import { RPC_METHODS, toRpcFailure, type ControlMethod, type MethodInfo } from './methods.js';

export interface ControlServerOptions {
  /** Socket path, e.g. `<data>/control.sock`. */
  socketPath: string;
  methods: ControlMethod[];
  logger?: Logger;
}

/** Bytes of notifications a client may leave unread before a call that streams them to it is ended. */
const MAX_EVENT_BACKLOG_BYTES = 4 * 1024 * 1024;

export class ControlServer {
  private readonly methods = new Map<string, ControlMethod>();
  private server?: Server;
  /** Set once this server listens on the path: only then is the socket file ours to remove. */
  private listening = false;
  private readonly sockets = new Set<Socket>();
  private readonly log: Logger;
  readonly socketPath: string;

  constructor(opts: ControlServerOptions) {
    this.socketPath = opts.socketPath;
    this.log = opts.logger ?? silentLogger;
    for (const m of opts.methods) this.add(m);
    this.add({ ...RPC_METHODS, handler: async () => this.describe() });
  }

  add(method: ControlMethod): void {
    if (this.methods.has(method.name)) throw new Error(`control method '${method.name}' registered twice`);
    this.methods.set(method.name, method);
  }

  describe(): MethodInfo[] {
    return [...this.methods.values()].map(({ name, summary, params, oneOf }) => ({ name, summary, params, oneOf }));
  }

  async start(): Promise<void> {
    await clearStaleSocket(this.socketPath);
    const server = createServer((sock) => this.onConnection(sock));
    this.server = server;
    const oldMask = process.umask(0o177);
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(this.socketPath, () => { server.off('error', reject); resolve(); });
      });
    } finally {
      process.umask(oldMask);
    }
    this.listening = true;
    await chmod(this.socketPath, 0o600);
    server.on('error', (err) => this.log.error({ err }, 'control socket error'));
    this.log.info({ socket: this.socketPath }, 'control socket listening');
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    if (this.server?.listening) await new Promise<void>((r) => this.server!.close(() => r()));
    // A server that never listened (another instance holds the path) leaves the path alone.
    if (this.listening) await unlink(this.socketPath).catch(() => {});
    this.listening = false;
  }

  private onConnection(sock: Socket): void {
    this.sockets.add(sock);
    const abort = new AbortController();
    /** Writes `msg`; the bytes still waiting to reach the client. */
    const send = (msg: unknown): number => {
      if (!sock.destroyed && sock.writable) sock.write(JSON.stringify(msg) + '\n');
      return sock.writableLength;
    };
    const splitter = new LineSplitter(
      (line) => void this.onMessage(line, send, abort.signal),
      () => send({ jsonrpc: '2.0', id: null, error: { code: RpcErrorCode.TooLarge, message: 'message exceeds 1 MiB' } }),
    );
    sock.on('data', (chunk: Buffer) => {
      try {
        splitter.push(chunk);
      } catch (err) {
        this.log.error({ err }, 'control message handling failed');
      }
    });
    sock.on('error', () => {});
    sock.on('close', () => { abort.abort(new Error('control client disconnected')); this.sockets.delete(sock); });
  }

  private async onMessage(line: string, send: (m: unknown) => number, signal: AbortSignal): Promise<void> {
    let msg: unknown;
    try {
      msg = JSON.parse(line);
    } catch {
      send({ jsonrpc: '2.0', id: null, error: { code: RpcErrorCode.ParseError, message: 'parse error: not valid JSON' } });
      return;
    }
    if (Array.isArray(msg)) {
      if (msg.length === 0) {
        send({ jsonrpc: '2.0', id: null, error: { code: RpcErrorCode.InvalidRequest, message: 'empty batch' } });
        return;
      }
      const answers = (await Promise.all(msg.map((m) => this.dispatch(m, send, signal)))).filter((a): a is RpcResponse => a !== undefined);
      if (answers.length) send(answers);
      return;
    }
    const answer = await this.dispatch(msg, send, signal);
    if (answer) send(answer);
  }

  /** Runs one request; returns the response, or undefined for a notification. */
  private async dispatch(msg: unknown, send: (m: unknown) => number, signal: AbortSignal): Promise<RpcResponse | undefined> {
    const req = msg as RpcRequest;
    const hasId = typeof msg === 'object' && msg !== null && 'id' in msg;
    const id = hasId && (typeof req.id === 'string' || typeof req.id === 'number' || req.id === null) ? req.id : null;
    if (typeof msg !== 'object' || msg === null || req.jsonrpc !== '2.0' || typeof req.method !== 'string') {
      return { jsonrpc: '2.0', id, error: { code: RpcErrorCode.InvalidRequest, message: 'invalid request: expected {"jsonrpc":"2.0","method":string,...}' } };
    }
    const started = Date.now();
    try {
      const method = this.methods.get(req.method);
      if (!method) throw new RpcFailure(RpcErrorCode.MethodNotFound, `unknown method '${req.method}'`);
      const params = req.params ?? {};
      if (typeof params !== 'object' || Array.isArray(params)) {
        throw new RpcFailure(RpcErrorCode.InvalidParams, 'params must be an object of named parameters');
      }
      const result = await method.handler({ ...params }, {
        signal,
        progress: (p) => void (hasId && send({ jsonrpc: '2.0', method: 'progress', params: { id, ...p } })),
        event: (e) => hasId && send({ jsonrpc: '2.0', method: 'event', params: { id, ...e } }) <= MAX_EVENT_BACKLOG_BYTES,
      });
      this.log.debug({ method: req.method, ms: Date.now() - started }, 'control call');
      return hasId ? { jsonrpc: '2.0', id, result: result ?? null } : undefined;
    } catch (err) {
      const f = toRpcFailure(err);
      this.log.info({ method: req.method, code: f.code, ms: Date.now() - started, error: f.message }, 'control call failed');
      return hasId ? { jsonrpc: '2.0', id, error: { code: f.code, message: f.message, ...(f.data !== undefined ? { data: f.data } : {}) } } : undefined;
    }
  }
}

/**
 * Removes a socket file left behind by a dead instance; refuses when a live instance answers on it or
 * when the path is not a socket.
 */
export async function clearStaleSocket(path: string): Promise<void> {
  const st = await lstat(path).catch(() => undefined);
  if (!st) return;
  if (!st.isSocket()) throw new Error(`control socket path ${path} exists and is not a socket; refusing to replace it`);
  const live = await new Promise<boolean>((resolve) => {
    const c = createConnection(path);
    c.once('connect', () => { c.destroy(); resolve(true); });
    c.once('error', () => resolve(false));
  });
  if (live) throw new Error(`another cloudlib instance is serving the control socket ${path}`);
  await unlink(path);
}
