/**
 * A service that stops answering (stopped, overloaded, a network black hole) is noticed: a call with no
 * word from it for the stall deadline takes its library offline, and a download whose body stops ends
 * with EIO instead of leaving its reader waiting.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { Connectivity, ReportingRemote } from '../../../src/vfs/connectivity.js';
import { MemoryRemote } from '../../../src/vfs/memory-remote.js';
import type { RemoteCallOptions, RemoteEntry } from '../../../src/vfs/remote.js';
import { ServiceClient } from '../../../src/api/client.js';
import { LibraryRemote } from '../../../src/remote/library-remote.js';
import { waitFor } from '../../support/wait-for.js';
import { ManualClock } from '../../support/manual-clock.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A server that takes connections and never answers: a stopped service's kernel still accepts. */
async function silentServer(): Promise<string> {
  const sockets: Socket[] = [];
  const server: Server = createServer((s) => { sockets.push(s); s.on('error', () => undefined); });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }));
  const a = server.address();
  if (!a || typeof a === 'string') throw new Error('no port');
  return `http://127.0.0.1:${a.port}`;
}

describe('a stalled service', () => {
  it('a read with no answer for the stall deadline ends with EIO and takes the library offline, long before the call\'s own deadline', async () => {
    const clock = new ManualClock();
    const link = new Connectivity({ stallMs: 200, clock });
    const client = new ServiceClient({ baseUrl: await silentServer(), credentials: { library: { org_client_id: 'id', org_client_secret: 'secret' } }, retries: 0, timeoutMs: 600_000 });
    cleanups.push(() => client.close());
    const remote = new ReportingRemote(new LibraryRemote({ client }), 'A', link);
    // A read is called off at the stall: its reader gets EIO instead of waiting for the call's own deadline.
    const call = remote.list('').then(() => undefined, (e: unknown) => e as Error & { code?: string });
    clock.advance(199);
    expect(link.online('A')).toBe(true);
    clock.advance(1);
    expect(link.online('A')).toBe(false);
    const err = await call;
    expect(err?.code).toBe('EIO');
    expect(err?.message).toMatch(/has not answered/);
    expect(link.of('A').lastError).toMatch(/has not answered/);
  });

  it('while the service stays silent a read asks it only when nothing else does; the feed\'s poll always asks and finds it back', async () => {
    const clock = new ManualClock();
    const link = new Connectivity({ stallMs: 200, clock });
    const inner = new MemoryRemote({ name: 'A', id: '1' });
    let silent = true;
    const list = inner.list.bind(inner);
    inner.list = (p: string, opts?: RemoteCallOptions): Promise<RemoteEntry[]> =>
      (silent ? new Promise<RemoteEntry[]>((_, reject) => opts?.signal?.addEventListener('abort', () => reject(opts.signal!.reason as Error))) : list(p));
    const remote = new ReportingRemote(inner, 'A', link);
    const first = remote.list('').then(() => undefined, (e: Error & { code?: string }) => e);
    clock.advance(200);
    expect((await first)?.message).toMatch(/has not answered/);
    // One read asks (and waits); a read beside it fails at once, without a call.
    const asking = remote.list('').then(() => 'answered', (e: Error) => e.message);
    const beside = await remote.list('').then(() => 'answered', (e: Error & { code?: string }) => `${e.code} ${e.message}`);
    expect(beside).toMatch(/^EIO .*library offline/);
    silent = false;
    clock.advance(200);
    expect(await asking).toMatch(/has not answered/);
    // The feed's poll asks whatever else did: the service answers, the library is online, reads ask again.
    await remote.changes(0);
    expect(link.online('A')).toBe(true);
    expect(await remote.list('')).toEqual([]);
    await Promise.all([remote.list(''), remote.list('')]);
  });

  it('a change with no answer takes the library offline but waits for its own outcome', async () => {
    const clock = new ManualClock();
    const link = new Connectivity({ stallMs: 200, clock });
    const client = new ServiceClient({ baseUrl: await silentServer(), credentials: { library: { org_client_id: 'id', org_client_secret: 'secret' } }, retries: 0, timeoutMs: 600_000 });
    cleanups.push(() => client.close());
    const remote = new ReportingRemote(new LibraryRemote({ client }), 'A', link);
    const stop = new AbortController();
    const call = remote.move('a.txt', 'b.txt', { signal: stop.signal }).then(() => undefined, (e: Error) => e);
    clock.advance(200);
    expect(link.online('A')).toBe(false);
    // Whether the service made the move is not known: the call still waits for its answer, and ends only
    // when its caller calls it off (not with the stall's EIO).
    stop.abort(new Error('called off by the test'));
    expect((await call)?.message).not.toMatch(/has not answered/);
  });

  it('a download whose body stops ends with EIO and takes the library offline; a reader that does not read is not a stall', async () => {
    const clock = new ManualClock();
    const link = new Connectivity({ stallMs: 200, clock });
    const inner = new MemoryRemote({ name: 'A', id: '1' });
    // The first piece comes, then nothing: the body of a service stopped mid-download.
    let ended = false;
    const stuck = new Readable({ read() { if (!ended) { ended = true; this.push(Buffer.alloc(512 * 1024, 1)); } } });
    inner.openRange = async () => stuck;
    const remote = new ReportingRemote(inner, 'A', link);
    const body = await remote.openRange('big.bin', 0, 1 << 30);
    let got = 0;
    const failure = new Promise<unknown>((resolve) => {
      body.on('data', (c: Buffer) => { got += c.length; });
      body.on('error', resolve);
    });
    await waitFor('the first piece read', () => got, { until: (n) => n === 512 * 1024 });
    clock.advance(200);
    const err = await failure as Error & { code?: string };
    expect(got).toBe(512 * 1024);
    expect(err.code).toBe('EIO');
    expect(link.online('A')).toBe(false);

    // A body its reader leaves unread for longer than the deadline is not cut.
    const link2 = new Connectivity({ stallMs: 100, clock });
    const full = new MemoryRemote({ name: 'B', id: '2' });
    let pieces = 0;
    // 64 pieces of 64 KiB, each as soon as it is asked for: only the reader sets the pace.
    full.openRange = async () => new Readable({ read() { this.push(pieces < 64 ? Buffer.alloc(64 * 1024, pieces++) : null); } });
    const unread = await new ReportingRemote(full, 'B', link2).openRange('f.bin', 0, (4 << 20) - 1);
    let paused = 0;
    for await (const c of unread) {
      paused += (c as Buffer).length;
      if (paused !== (c as Buffer).length) continue;
      // The reader pauses four deadlines long once the body has filled what it may hold for it.
      await waitFor('the body to fill the unread buffer', () => unread.readableLength, { until: (n) => n >= unread.readableHighWaterMark });
      clock.advance(400);
    }
    expect(paused).toBe(4 << 20);
    expect(link2.online('B')).toBe(true);
  });
});
