/**
 * The latency proxy of the benchmarks and of the far-service tests keeps every byte in order: chunks
 * arriving close together (several in one turn of the event loop) come out in the order they went in,
 * and the end follows the last of them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { LatencyProxy } from '../../../scripts/bench/support/latency-proxy.js';

let servers: Server[] = [];
let proxies: LatencyProxy[] = [];
afterEach(async () => {
  for (const p of proxies) await p.close();
  for (const s of servers) await new Promise<void>((r) => s.close(() => r()));
  proxies = [];
  servers = [];
});

/** A server that sends `data` at once and ends: the proxy reads it in many chunks a turn of the event loop. */
async function sender(data: Buffer): Promise<number> {
  const server = createServer((socket: Socket) => socket.end(data));
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return (server.address() as AddressInfo).port;
}

describe('LatencyProxy', () => {
  it('delivers a stream of many small chunks whole and in order, then the end', async () => {
    const data = Buffer.alloc(32 * 1024 * 1024);
    for (let i = 0; i < data.length; i += 4) data.writeUInt32LE(i / 4, i);
    const port = await sender(data);
    const proxy = new LatencyProxy({ delayMs: 2.3, windowBytes: 8 * 1024 * 1024, target: { host: '127.0.0.1', port } });
    proxies.push(proxy);
    const proxyPort = await proxy.listen();
    const got = await new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      const c = connect(proxyPort, '127.0.0.1');
      c.on('data', (b: Buffer) => chunks.push(b));
      c.on('end', () => { resolve(Buffer.concat(chunks)); c.destroy(); });
      c.on('error', reject);
    });
    expect(got.length).toBe(data.length);
    const at = got.findIndex((v, i) => v !== data[i]);
    expect(at).toBe(-1);
  });
});
