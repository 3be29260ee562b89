/**
 * LatencyProxy: a TCP proxy that makes loopback look like a wide-area link (the kernel here has no netem).
 * Every byte is held `delayMs` each way; a new connection waits one round trip before its first byte
 * moves (the TCP handshake); each connection has `windowBytes` in flight per direction at most, a byte
 * counting until its acknowledgement would be back (one round trip after it left), so one connection
 * carries at most windowBytes per round trip, as one TCP stream with that window does; and an optional
 * `bytesPerSecond` caps each direction of the whole link (shared by all connections).
 *
 * The target may be set after the proxy listens (`setTarget`): a service whose public URL is the proxy's
 * address needs that address before it starts.
 *
 * Run on its own (a process of its own keeps its work off the measured process):
 *   node --import tsx scripts/bench/support/latency-proxy.ts --delay-ms 12.5 [--window-bytes N] [--bytes-per-second N]
 * prints `listening PORT`, then reads commands from stdin: `target HOST:PORT`, `stats` (answers one JSON
 * line), `link DELAY_MS WINDOW_BYTES` (new connections only: a setup step can go at loopback speed).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export interface LatencyProxyOptions {
  /** One-way delay, ms (the round trip is twice this). */
  delayMs: number;
  /** Bytes in flight per connection and direction (an emulated TCP window). Default 1 MiB. */
  windowBytes?: number;
  /** Cap of each direction of the whole link, bytes per second. Default none. */
  bytesPerSecond?: number;
  /** Where to forward; may be set later with setTarget. */
  target?: { host: string; port: number };
}

export interface LatencyProxyStats {
  /** Connections accepted so far. */
  connections: number;
  /** Connections open now. */
  open: number;
  /** Most connections open at once. */
  peakOpen: number;
  /** Bytes forwarded client → service and back. */
  bytesUp: number;
  bytesDown: number;
}

/** One direction of the link: when it is free again (bandwidth cap), shared by every connection. */
class LinkDirection {
  private freeAt = 0;
  constructor(private readonly bytesPerSecond: number | undefined) {}

  /** When a chunk of `bytes` leaving now has left the sender (serialised behind the chunks before it). */
  departure(now: number, bytes: number): number {
    if (!this.bytesPerSecond) return now;
    this.freeAt = Math.max(now, this.freeAt) + (bytes / this.bytesPerSecond) * 1000;
    return this.freeAt;
  }
}

export class LatencyProxy {
  private server: Server | undefined;
  private target: { host: string; port: number } | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly up: LinkDirection;
  private readonly down: LinkDirection;
  private windowBytes: number;
  readonly stats: LatencyProxyStats = { connections: 0, open: 0, peakOpen: 0, bytesUp: 0, bytesDown: 0 };

  constructor(private opts: LatencyProxyOptions) {
    if (!(opts.delayMs >= 0)) throw new TypeError(`delayMs: expected a delay >= 0 ms, got ${String(opts.delayMs)}`);
    this.windowBytes = opts.windowBytes ?? 1024 * 1024;
    this.checkLink();
    if (opts.bytesPerSecond !== undefined && !(opts.bytesPerSecond > 0)) throw new TypeError(`bytesPerSecond: expected a rate > 0, got ${String(opts.bytesPerSecond)}`);
    this.up = new LinkDirection(opts.bytesPerSecond);
    this.down = new LinkDirection(opts.bytesPerSecond);
    this.target = opts.target;
  }

  /** Delay and window of the connections accepted from now on. */
  setLink(delayMs: number, windowBytes: number): void {
    this.opts = { ...this.opts, delayMs };
    this.windowBytes = windowBytes;
    this.checkLink();
  }

  private checkLink(): void {
    if (!(this.opts.delayMs >= 0)) throw new TypeError(`delayMs: expected a delay >= 0 ms, got ${String(this.opts.delayMs)}`);
    if (!(this.windowBytes >= 1)) throw new TypeError(`windowBytes: expected a byte count >= 1, got ${String(this.windowBytes)}`);
  }

  setTarget(host: string, port: number): void {
    this.target = { host, port };
  }

  /** Listens on 127.0.0.1 (port 0: any); resolves with the port. */
  async listen(port = 0): Promise<number> {
    const server = createServer((client) => this.accept(client));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => { server.off('error', reject); resolve(); });
    });
    return (server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private accept(client: Socket): void {
    const target = this.target;
    const link = { delayMs: this.opts.delayMs, windowBytes: this.windowBytes };
    if (!target) {
      client.destroy();
      return;
    }
    this.stats.connections++;
    this.stats.open++;
    this.stats.peakOpen = Math.max(this.stats.peakOpen, this.stats.open);
    client.pause();
    const upstream = connect(target.port, target.host);
    upstream.pause();
    this.sockets.add(client);
    this.sockets.add(upstream);
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      this.stats.open--;
      this.sockets.delete(client);
      this.sockets.delete(upstream);
      // What is still on the way is delivered before the other side is ended.
      setTimeout(() => { client.destroy(); upstream.destroy(); }, link.delayMs + 1);
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    // The service closing cleanly: what is still on its way to the client is delivered first (the pipe
    // ends the client after its last chunk), and the client's close then ends the rest.
    upstream.on('close', (hadError: boolean) => {
      if (hadError) close();
    });
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    // The handshake: the first byte moves one round trip after the connection was asked for.
    setTimeout(() => {
      if (closed) return;
      this.pipe(client, upstream, this.up, link, (n) => { this.stats.bytesUp += n; });
      this.pipe(upstream, client, this.down, link, (n) => { this.stats.bytesDown += n; });
    }, 2 * link.delayMs);
  }

  /**
   * Forwards `from` to `to`, each chunk `delayMs` late, at most windowBytes unacknowledged. Chunks wait in
   * one queue a connection and direction, delivered in order by one timer: a timer a chunk would not keep
   * them in order (timers of slightly different lengths, a fraction of a millisecond apart from rounding,
   * can fire in either order).
   */
  private pipe(from: Socket, to: Socket, link: LinkDirection, conn: { delayMs: number; windowBytes: number }, count: (n: number) => void): void {
    const delay = conn.delayMs;
    const windowBytes = conn.windowBytes;
    let inFlight = 0;
    let waitingForDrain = false;
    // Chunks leave in order: each is delivered no earlier than the one before it.
    let lastDelivery = 0;
    const queue: { chunk: Buffer; at: number }[] = [];
    let timer: NodeJS.Timeout | undefined;
    let ended = false;
    const maybeResume = (): void => {
      if (inFlight < windowBytes && !waitingForDrain && !from.destroyed) from.resume();
    };
    const deliver = (chunk: Buffer): void => {
      count(chunk.length);
      if (!to.write(chunk) && !waitingForDrain) {
        waitingForDrain = true;
        from.pause();
        to.once('drain', () => { waitingForDrain = false; maybeResume(); });
      }
      // The acknowledgement is back one delay after delivery.
      setTimeout(() => { inFlight -= chunk.length; maybeResume(); }, delay);
    };
    const deliverDue = (): void => {
      timer = undefined;
      if (to.destroyed) return;
      const now = performance.now();
      while (queue.length > 0 && queue[0]!.at <= now) deliver(queue.shift()!.chunk);
      if (queue.length > 0) timer = setTimeout(deliverDue, queue[0]!.at - now);
      else if (ended) to.end();
    };
    from.on('data', (chunk: Buffer) => {
      const now = performance.now();
      inFlight += chunk.length;
      if (inFlight >= windowBytes) from.pause();
      const delivery = Math.max(lastDelivery, link.departure(now, chunk.length) + delay);
      lastDelivery = delivery;
      queue.push({ chunk, at: delivery });
      timer ??= setTimeout(deliverDue, Math.max(0, delivery - now));
    });
    // The end follows the last chunk.
    from.on('end', () => {
      ended = true;
      if (queue.length === 0 && !timer && !to.destroyed) to.end();
    });
    from.resume();
  }
}

/** Command line: see the header. */
async function main(argv: string[]): Promise<void> {
  const arg = (name: string): number | undefined => {
    const i = argv.indexOf(name);
    if (i < 0) return undefined;
    const v = Number(argv[i + 1]);
    if (!Number.isFinite(v)) throw new TypeError(`${name}: expected a number, got ${JSON.stringify(argv[i + 1])}`);
    return v;
  };
  const proxy = new LatencyProxy({ delayMs: arg('--delay-ms') ?? 12.5, windowBytes: arg('--window-bytes'), bytesPerSecond: arg('--bytes-per-second') });
  const port = await proxy.listen(arg('--port') ?? 0);
  process.stdout.write(`listening ${port}\n`);
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const [cmd, value] = line.trim().split(/\s+/);
    if (cmd === 'target' && value) {
      const at = value.lastIndexOf(':');
      proxy.setTarget(value.slice(0, at), Number(value.slice(at + 1)));
      process.stdout.write('ok\n');
    } else if (cmd === 'link' && value) {
      proxy.setLink(Number(value), Number(line.trim().split(/\s+/)[2]));
      process.stdout.write('ok\n');
    } else if (cmd === 'stats') {
      process.stdout.write(JSON.stringify(proxy.stats) + '\n');
    } else {
      process.stdout.write(`error: expected 'target HOST:PORT', 'link DELAY_MS WINDOW_BYTES' or 'stats', got ${JSON.stringify(line)}\n`);
    }
  }
  await proxy.close();
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).catch((err: Error) => {
    process.stderr.write(`latency-proxy: ${err.message}\n`);
    process.exit(1);
  });
}
