/**
 * The gateway's own control methods over a real socket, on a gateway core over memory libraries:
 * status, flush with progress, cache.drop, library.ls/remove, upload, download and copy with progress,
 * both path forms, bad input, the socket's mode, two clients at once.
 */
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryVfs, type FaultyRemote, type GatewayVfs, type MemoryRemote } from '../../../src/vfs/index.js';
import { ControlServer } from '../../../src/control/server.js';
import { ControlClient, ControlCallError } from '../../../src/control/client.js';
import { gatewayMethods, type GatewayControlTarget } from '../../../src/control/gateway-methods.js';
import { RpcErrorCode } from '../../../src/control/protocol.js';
import { waitFor } from '../../support/wait-for.js';
import { conflictCopyPath } from '../../../src/vfs/write-back/conflicts.js';

let dir: string;
let vfs: GatewayVfs;
let remotes: Map<string, MemoryRemote>;
let server: ControlServer;
let client: ControlClient;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ctl-'));
  ({ vfs, remotes } = await createMemoryVfs({ names: ['A', 'B'], upload: { retryBaseMs: 20, retryMaxMs: 100 }, faults: true }));
  const target: GatewayControlTarget = {
    vfs,
    libraries: () => vfs.libraryNames().map((name) => ({ name, client: undefined as never })),
    clientFor: () => undefined,
    addLibrary: async () => { throw new Error('not supported over memory libraries'); },
    bindLibrary: async () => { throw new Error('not supported over memory libraries'); },
    removeLibrary: (name) => vfs.removeLibrary(name),
    describe: () => ({ webdav_url: 'http://127.0.0.1:1/' }),
  };
  server = new ControlServer({ socketPath: join(dir, 'control.sock'), methods: gatewayMethods(target) });
  await server.start();
  client = await ControlClient.connect(server.socketPath);
});

afterEach(async () => {
  client.close();
  await server.close();
  await vfs.close();
  await rm(dir, { recursive: true, force: true });
});

async function failure(p: Promise<unknown>): Promise<ControlCallError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ControlCallError);
  return err as ControlCallError;
}

describe('gateway control methods', { timeout: 20_000 }, () => {
  it('the socket is owner-only (0600)', async () => {
    expect((await stat(server.socketPath)).mode & 0o777).toBe(0o600);
  });

  it('status reports libraries, feeds, caches with hit rates, and pending uploads', async () => {
    await vfs.writeFile('/A/x.txt', Buffer.from('x'));
    const s = (await client.call('status')) as Record<string, any>;
    expect(s.libraries.map((l: { name: string }) => l.name)).toEqual(['A', 'B']);
    expect(s.webdav_url).toBe('http://127.0.0.1:1/');
    expect(s.caches.metadata).toHaveProperty('hitRate');
    expect(typeof s.uploads.pending).toBe('number');
  });

  it('an edit uploaded with ctl and one made at the service meanwhile: both kept, the conflict in ctl status', async () => {
    const local = join(dir, 'doc.txt');
    await writeFile(local, 'v1');
    await client.call('upload', { local, path: '/A/doc.txt' });
    // The service refuses uploads for a while: the edit waits in the journal, another client edits the file.
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    faulty.inject({ kind: 'fail', code: 'EIO', methods: ['commit'] });
    await writeFile(local, 'edited with ctl');
    expect((await failure(client.call('upload', { local, path: '/A/doc.txt' }))).message).toMatch(/kept for upload/);
    const theirs = remotes.get('A')!.putFile('doc.txt', Buffer.from('edited elsewhere'), { operator: { opName: 'Bob' } });
    faulty.heal();
    await vfs.flushAll();
    const copy = conflictCopyPath('doc.txt', 'Bob', theirs.mtimeMs);
    expect(remotes.get('A')!.read('doc.txt').toString()).toBe('edited with ctl');
    expect(remotes.get('A')!.read(copy).toString()).toBe('edited elsewhere');
    const s = (await client.call('status')) as { conflicts: Record<string, unknown>[] };
    expect(s.conflicts).toMatchObject([{ library: 'A', fullpath: 'doc.txt', kind: 'changed', copy, otherBy: 'Bob' }]);
  });

  it('upload copies a local file to a gateway path and returns once it is on the service, with progress', async () => {
    const local = join(dir, 'in.bin');
    const body = Buffer.alloc(300_000, 7);
    await writeFile(local, body);
    const progress: Record<string, unknown>[] = [];
    const res = await client.call('upload', { local, path: '/A/docs/in.bin' }, (p) => progress.push(p));
    expect(res).toEqual({ path: '/A/docs/in.bin', size: body.length });
    expect(remotes.get('A')!.read('docs/in.bin').equals(body)).toBe(true);
    expect(progress.at(-1)).toMatchObject({ done: body.length, total: body.length, unit: 'bytes', what: 'uploaded' });
    expect(progress.some((p) => p.what === 'read')).toBe(true);
  });

  it('path parameters take a gateway path, or a path inside `library`', async () => {
    const local = join(dir, 'in.txt');
    await writeFile(local, 'by library');
    expect(await client.call('upload', { local, path: 'docs/by-lib.txt', library: 'B' })).toEqual({ path: '/B/docs/by-lib.txt', size: 10 });
    expect(remotes.get('B')!.read('docs/by-lib.txt').toString()).toBe('by library');
    const out = join(dir, 'out.txt');
    expect(await client.call('download', { path: 'docs/by-lib.txt', library: 'B', local: out })).toEqual({ local: out, size: 10 });
    expect(await client.call('download', { path: '/B/docs/by-lib.txt', library: 'B', local: out })).toEqual({ local: out, size: 10 });
    // Two libraries served: a bare path names none of them.
    expect((await failure(client.call('download', { path: 'docs/by-lib.txt', local: out }))).data).toMatchObject({ param: 'library' });
    expect((await failure(client.call('download', { path: '/A/docs/by-lib.txt', library: 'B', local: out }))).data).toMatchObject({ param: 'library' });
  });

  it('copy across libraries goes through the gateway with byte progress; within a library the service copies', async () => {
    remotes.get('A')!.putFile('src.bin', Buffer.alloc(200_000, 1));
    const progress: Record<string, unknown>[] = [];
    expect(await client.call('copy', { from: '/A/src.bin', to: '/B/copy.bin' }, (p) => progress.push(p))).toEqual({ from: '/A/src.bin', to: '/B/copy.bin', files: 1, size: 200_000 });
    expect(remotes.get('B')!.read('copy.bin').equals(Buffer.alloc(200_000, 1))).toBe(true);
    expect(progress[0]).toMatchObject({ done: 0, total: 200_000, unit: 'bytes', what: 'copied' });
    expect(progress.at(-1)).toMatchObject({ done: 200_000, total: 200_000 });
    // the bytes as they move: read into the journal, then those the service has
    expect(progress.filter((p) => p.what === 'read').at(-1)).toMatchObject({ done: 200_000, total: 200_000 });
    expect(progress.findIndex((p) => p.what === 'read')).toBeLessThan(progress.length - 1);
    expect(await client.call('copy', { from: 'src.bin', to: 'again.bin', library: 'A' })).toMatchObject({ to: '/A/again.bin', files: 1 });
    expect(remotes.get('A')!.read('again.bin').length).toBe(200_000);
    // A folder across libraries: every file, bytes summed.
    await remotes.get('A')!.mkdir('dir');
    remotes.get('A')!.putFile('dir/one.txt', Buffer.from('one'));
    remotes.get('A')!.putFile('dir/two.txt', Buffer.from('two!'));
    expect(await client.call('copy', { from: '/A/dir', to: '/B/dir-copy' })).toMatchObject({ files: 2, size: 7 });
    expect(remotes.get('B')!.read('dir-copy/two.txt').toString()).toBe('two!');
    // The target exists: refused unless overwrite=1, and nothing changes.
    remotes.get('B')!.putFile('keep.txt', Buffer.from('keep'));
    expect((await failure(client.call('copy', { from: '/A/src.bin', to: '/B/keep.txt' }))).data).toMatchObject({ code: 'EEXIST' });
    expect(remotes.get('B')!.read('keep.txt').toString()).toBe('keep');
    expect((await failure(client.call('copy', { from: '/A/src.bin', to: '/B/keep.txt', overwrite: 2 }))).data).toMatchObject({ param: 'overwrite' });
    await client.call('copy', { from: '/A/src.bin', to: '/B/keep.txt', overwrite: 1 });
    expect(remotes.get('B')!.read('keep.txt').length).toBe(200_000);
  });

  it('status shows an upload under way with its size and the bytes the service has; flush reports bytes as they reach the service', async () => {
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    faulty.inject({ kind: 'delay', methods: ['commit'], delayMs: 400, times: 2 });
    await vfs.writeFile('/A/slow1.txt', Buffer.from('slow!'));
    await vfs.writeFile('/A/slow2.txt', Buffer.from('slow'));
    await waitFor('both uploads under way', () => vfs.status().uploads.map((u) => u.state), { until: (states) => states.length === 2 && states.every((st) => st === 'uploading') });
    const s = (await client.call('status')) as { uploads: { pending: number; list: { fullpath: string; state: string; size: number; sentBytes: number }[] } };
    expect(s.uploads.pending).toBe(2);
    expect(s.uploads.list.find((u) => u.fullpath === 'slow1.txt')).toMatchObject({ state: 'uploading', size: 5, sentBytes: 0 });
    // Nothing taken yet: how long that has been is shown (a stalled upload says so).
    expect((s.uploads.list.find((u) => u.fullpath === 'slow1.txt') as unknown as { stalledMs: number }).stalledMs).toBeGreaterThanOrEqual(0);
    const progress: Record<string, unknown>[] = [];
    expect(await client.call('flush', {}, (p) => progress.push(p))).toEqual({ pending: 0 });
    expect(progress.length).toBeGreaterThan(0);
    expect(progress[0]).toMatchObject({ done: 0, total: 9, unit: 'bytes', what: 'uploaded (0 of 2 files)' });
    expect(progress.at(-1)).toMatchObject({ done: 9, total: 9, what: 'uploaded (2 of 2 files)' });
  });

  it('download writes a local file whole', async () => {
    remotes.get('B')!.putFile('r.txt', Buffer.from('remote bytes'));
    const local = join(dir, 'out.txt');
    expect(await client.call('download', { path: '/B/r.txt', local })).toEqual({ local, size: 12 });
    expect(await readFile(local, 'utf8')).toBe('remote bytes');
  });

  it('bad input is refused with invalid-params naming the parameter, and changes nothing', async () => {
    expect((await failure(client.call('upload', { local: 'relative.txt', path: '/A/x' }))).data).toMatchObject({ param: 'local' });
    expect((await failure(client.call('upload', { local: join(dir, 'missing'), path: '/A/x' }))).code).toBe(RpcErrorCode.InvalidParams);
    expect((await failure(client.call('download', { path: '/A', local: join(dir, 'o') }))).data).toMatchObject({ param: 'path' });
    expect((await failure(client.call('upload', { local: join(dir, 'missing'), path: 'x', library: 'Z' }))).data).toMatchObject({ param: 'library' });
    expect((await failure(client.call('copy', { from: '/A/none', to: '/B/x', extra: 1 }))).data).toMatchObject({ param: 'extra' });
    expect((await failure(client.call('status', { extra: 1 }))).data).toMatchObject({ param: 'extra' });
    expect((await failure(client.call('flush', { timeout_s: -1 }))).data).toMatchObject({ param: 'timeout_s' });
    expect((await failure(client.call('no.such.method'))).code).toBe(RpcErrorCode.MethodNotFound);
    expect(remotes.get('A')!.paths()).toEqual([]);
  });

  it('a download of a missing file is a gateway error with its code, and leaves no local file', async () => {
    const local = join(dir, 'never.txt');
    const err = await failure(client.call('download', { path: '/A/none.txt', local }));
    expect(err.code).toBe(RpcErrorCode.GatewayError);
    expect(err.data).toMatchObject({ code: 'ENOENT' });
    await expect(stat(local)).rejects.toThrow();
  });

  it('flush waits for pending uploads; cache.drop empties the caches', async () => {
    await vfs.writeFile('/A/f1.txt', Buffer.from('1'));
    await vfs.writeFile('/A/f2.txt', Buffer.from('2'));
    expect(await client.call('flush')).toEqual({ pending: 0 });
    expect(remotes.get('A')!.paths().sort()).toEqual(['f1.txt', 'f2.txt']);
    await vfs.stat('/A/f1.txt');
    expect(await client.call('cache.drop')).toEqual({ dropped: true });
    expect(vfs.status().metadata.entries).toBe(0);
  });

  it('library.ls lists, library.remove stops serving one', async () => {
    expect(((await client.call('library.ls')) as { name: string }[]).map((l) => l.name)).toEqual(['A', 'B']);
    expect(await client.call('library.remove', { name: 'B' })).toEqual({ removed: 'B' });
    expect(vfs.libraryNames()).toEqual(['A']);
    const err = await failure(client.call('library.remove', { name: 'B' }));
    expect(err.data).toMatchObject({ code: 'ENOENT' });
  });

  it('two clients at once are answered independently', async () => {
    const other = await ControlClient.connect(server.socketPath);
    try {
      const [a, b] = await Promise.all([client.call('library.ls'), other.call('status')]);
      expect(a).toHaveLength(2);
      expect(b).toHaveProperty('libraries');
    } finally {
      other.close();
    }
  });
});
