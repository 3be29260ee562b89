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

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Waits until `cond` holds, failing with `what` after `ms`. */
async function until(cond: () => boolean, what: string): Promise<void> {
  await waitFor(what, cond, { timeoutMs: 20_000 });
}

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
    const link = new Connectivity({ stallMs: 200 });
    const client = new ServiceClient({ baseUrl: await silentServer(), credentials: { library: { org_client_id: 'id', org_client_secret: 'secret' } }, retries: 0, timeoutMs: 600_000 });
    cleanups.push(() => client.close());
    const remote = new ReportingRemote(new LibraryRemote({ client }), 'A', link);
    // A read is called off at the stall: its reader gets EIO instead of waiting for the call's own deadline.
    const err = await remote.list('').then(() => undefined, (e: unknown) => e as Error & { code?: string });
    expect(err?.code).toBe('EIO');
    expect(err?.message).toMatch(/has not answered/);
    expect(link.online('A')).toBe(false);
    expect(link.of('A').lastError).toMatch(/has not answered/);
  });

  it('while the service stays silent a read asks it only when nothing else does; the feed\'s poll always asks and finds it back', async () => {
    const link = new Connectivity({ stallMs: 200 });
    const inner = new MemoryRemote({ name: 'A', id: '1' });
    let silent = true;
    const list = inner.list.bind(inner);
    inner.list = (p: string, opts?: RemoteCallOptions): Promise<RemoteEntry[]> =>
      (silent ? new Promise<RemoteEntry[]>((_, reject) => opts?.signal?.addEventListener('abort', () => reject(opts.signal!.reason as Error))) : list(p));
    const remote = new ReportingRemote(inner, 'A', link);
    const first = await remote.list('').then(() => undefined, (e: Error & { code?: string }) => e);
    expect(first?.message).toMatch(/has not answered/);
    // One read asks (and waits); a read beside it fails at once, without a call.
    const asking = remote.list('').then(() => 'answered', (e: Error) => e.message);
    const beside = await remote.list('').then(() => 'answered', (e: Error & { code?: string }) => `${e.code} ${e.message}`);
    expect(beside).toMatch(/^EIO .*library offline/);
    silent = false;
    expect(await asking).toMatch(/has not answered/);
    // The feed's poll asks whatever else did: the service answers, the library is online, reads ask again.
    await remote.changes(0);
    expect(link.online('A')).toBe(true);
    expect(await remote.list('')).toEqual([]);
    await Promise.all([remote.list(''), remote.list('')]);
  });

  it('a change with no answer takes the library offline but waits for its own outcome', async () => {
    const link = new Connectivity({ stallMs: 200 });
    const client = new ServiceClient({ baseUrl: await silentServer(), credentials: { library: { org_client_id: 'id', org_client_secret: 'secret' } }, retries: 0, timeoutMs: 600_000 });
    cleanups.push(() => client.close());
    const remote = new ReportingRemote(new LibraryRemote({ client }), 'A', link);
    const stop = new AbortController();
    let settled = false;
    const call = remote.move('a.txt', 'b.txt', { signal: stop.signal }).finally(() => { settled = true; }).catch((e: unknown) => e);
    await until(() => !link.online('A'), 'the library to go offline');
    // Whether the service made the move is not known: the call is still waiting for its answer.
    expect(settled).toBe(false);
    stop.abort();
    await call;
  });

  it('a download whose body stops ends with EIO and takes the library offline; a reader that does not read is not a stall', async () => {
    const link = new Connectivity({ stallMs: 200 });
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
    const err = await failure as Error & { code?: string };
    expect(got).toBe(512 * 1024);
    expect(err.code).toBe('EIO');
    expect(link.online('A')).toBe(false);

    // A body its reader leaves unread for longer than the deadline is not cut.
    const link2 = new Connectivity({ stallMs: 100 });
    const full = new MemoryRemote({ name: 'B', id: '2' });
    let pieces = 0;
    // 64 pieces of 64 KiB, each as soon as it is asked for: only the reader sets the pace.
    full.openRange = async () => new Readable({ read() { this.push(pieces < 64 ? Buffer.alloc(64 * 1024, pieces++) : null); } });
    const unread = await new ReportingRemote(full, 'B', link2).openRange('f.bin', 0, (4 << 20) - 1);
    let paused = 0;
    for await (const c of unread) {
      paused += (c as Buffer).length;
      // eslint-disable-next-line no-restricted-syntax -- the claim is about time itself: a reader that pauses longer than the deadline
      if (paused === (c as Buffer).length) await new Promise((r) => setTimeout(r, 400));
    }
    expect(paused).toBe(4 << 20);
    expect(link2.online('B')).toBe(true);
  });
});
