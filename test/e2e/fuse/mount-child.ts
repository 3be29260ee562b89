/**
 * Child process of the FUSE e2e tests: builds a Vfs, mounts it, and answers commands over IPC, so the
 * test process itself only ever does async I/O on the mount (a process serving a mount must never make a
 * synchronous call on it).
 *
 * argv: MOUNTPOINT; env FUSE_TEST_OPTIONS: JSON of extra mountVfs options; FUSE_TEST_BACKEND: `memory`
 * (default: an in-memory Vfs), `service` (the gateway's Vfs over a real embedded service in this
 * process) or `service-process` (the same with the service in a process of its own, its data in memory,
 * as beside a production gateway: what the benchmarks use); FUSE_TEST_UPLOAD_DELAY_MS: the write-back
 * delay of the service backends (default 0: uploads start at the last close); FUSE_TEST_FEED_INTERVAL_MS:
 * how often their updates feed polls (default 300); FUSE_TEST_DATA_PARENT: the
 * folder the service backends' data folder (spools, journal) is made in (default: the system's tmpdir);
 * FUSE_TEST_DATA_DIR: that data folder itself (kept after the child ends: a test opens it again, as the
 * next start of a gateway would); FUSE_TEST_SERVICE: JSON { baseUrl, credentials } of a service the test
 * runs (backend `service`: none is started here); FUSE_TEST_DISK_CACHE_BYTES: the service backends'
 * content cache on disk (default 64 MiB; 0: none).
 */
import { tuneGarbageCollector } from '../../../src/shared/gc-tuning.js';
import { mountVfs, type MountedVfs } from '../../../src/fuse/index.js';
import { loadFuse3Binding } from '../../../src/fuse/engine/binding.js';
import { createLogger } from '../../../src/shared/log.js';
import type { FileHandle, Vfs } from '../../../src/vfs/types.js';
import { MemoryVfs } from '../../support/memory-vfs.js';
import { Readable } from 'node:stream';
import { existsSync, writeFileSync } from 'node:fs';
import { request } from 'undici';

/** What a test can ask of the backend behind the mount ("another client" of the service). */
interface Backend {
  vfs: Vfs;
  remoteWrite(path: string, data: Buffer): Promise<void>;
  remoteRead(path: string): Promise<Buffer>;
  remoteList(path: string): Promise<string[]>;
  remoteStat(path: string): Promise<{ size: number; isDir: boolean; tags?: string[]; locked?: boolean } | null>;
  /** Memory backend: delays and failures; service backend: `down` takes the service away (an outage) or brings it back. */
  setFaults(faults: { delayMs?: number; failWith?: string; down?: boolean }): void;
  /** Sizes of the file's versions on the service, newest first. */
  remoteHistory(path: string): Promise<number[]>;
  /** Service backend: deletes or moves a file or folder through the service's API, as another client. */
  remoteDelete(path: string): Promise<void>;
  remoteMove(from: string, to: string): Promise<void>;
  /** Locks or unlocks a file through the gateway as another front end (WebDAV) would. */
  lockAs(path: string, locked: boolean, holder: string): Promise<void>;
  /** Service-process backend: sends `signal` to the service's process (SIGSTOP: a service that stops answering). */
  signalService?(signal: NodeJS.Signals): void;
  close(): Promise<void>;
}

function memoryBackend(): Backend {
  const vfs = new MemoryVfs(['Lib', 'Other']);
  // "Another client": same data, different path into it.
  const other = new MemoryVfs([]);
  Object.assign(other, { root: vfs.root });
  return {
    vfs,
    async remoteWrite(path, data) {
      await other.writeFile(path, data);
    },
    async remoteRead(path) {
      const h = await other.open(path, { read: true });
      return h.read(0, (await h.stat()).size);
    },
    async remoteList(path) {
      return (await other.readdir(path)).map((a) => a.name).sort();
    },
    async remoteStat(path) {
      try {
        const a = await other.stat(path);
        return { size: a.size, isDir: a.isDir, tags: a.tags, locked: a.locked };
      } catch {
        return null;
      }
    },
    setFaults(faults) {
      vfs.faults.delayMs = faults.delayMs ?? 0;
      vfs.faults.failWith = faults.failWith as never;
    },
    async remoteHistory() {
      throw new Error('not supported: file history needs the service backend');
    },
    async lockAs() {
      throw new Error('not supported: lock holders need the service backend');
    },
    async remoteDelete() {
      throw new Error('not supported: deletes made elsewhere need the service backend');
    },
    async remoteMove() {
      throw new Error('not supported: moves made elsewhere need the service backend');
    },
    async close() {},
  };
}

/**
 * The gateway's Vfs over a real embedded service (library folder `Lib`); "another client" is the
 * project's ServiceClient on the same library, so what the mount did is verified through the API.
 */
async function serviceBackend(ownProcess: boolean): Promise<Backend> {
  const { startTestService } = await import('../../support/service.js');
  const { startServiceProcess } = await import('../../support/service-process.js');
  const { createServiceVfs } = await import('../../../src/remote/service-vfs.js');
  const { uploadFile } = await import('../../../src/api/upload.js');
  const { mkdtemp, rm } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { ServiceClient } = await import('../../../src/api/client.js');
  const given = process.env.FUSE_TEST_SERVICE ? JSON.parse(process.env.FUSE_TEST_SERVICE) as { baseUrl: string; credentials: import('../../../src/api/client.js').Credentials } : undefined;
  const svc = given ? { client: new ServiceClient(given), close: async () => undefined } : ownProcess ? await startServiceProcess({ memoryData: true }) : await startTestService();
  const keptDir = process.env.FUSE_TEST_DATA_DIR;
  const dataDir = keptDir ?? await mkdtemp(join(process.env.FUSE_TEST_DATA_PARENT ?? tmpdir(), 'cloudlib-fuse-vfs-'));
  const vfs = await createServiceVfs({ libraries: [{ name: 'Lib', client: svc.client }], dataDir, feedIntervalMs: Number(process.env.FUSE_TEST_FEED_INTERVAL_MS ?? 300), upload: { retryBaseMs: 50, retryMaxMs: 500, delayMs: Number(process.env.FUSE_TEST_UPLOAD_DELAY_MS ?? 0) }, faults: true, cache: { diskBytes: Number(process.env.FUSE_TEST_DISK_CACHE_BYTES ?? 64 * 1024 * 1024) } });
  const faulty = vfs.remoteOf('Lib') as import('../../../src/vfs/index.js').FaultyRemote;
  const fullpath = (path: string): string => {
    if (!path.startsWith('/Lib')) throw new Error(`the service backend has only the library folder /Lib, got ${path}`);
    return path.slice('/Lib'.length).replace(/^\/+/, '');
  };
  return {
    vfs,
    async remoteWrite(path, data) {
      await uploadFile(svc.client, { size: data.length, open: (start) => Readable.from([data.subarray(start)]) }, { fullpath: fullpath(path) });
    },
    async remoteRead(path) {
      const { urls } = await svc.client.file.downloadUrl({ fullpath: fullpath(path) });
      const res = await request(urls[0]!);
      return Buffer.from(await res.body.arrayBuffer());
    },
    async remoteList(path) {
      const names: string[] = [];
      for (let start = 0; ; start += 100) {
        const page = await svc.client.file.ls({ fullpath: fullpath(path), start, size: 100 });
        names.push(...page.list.map((e) => e.filename));
        if (page.list.length < 100) break;
      }
      return names.sort();
    },
    async remoteStat(path) {
      try {
        const i = await svc.client.file.info({ fullpath: fullpath(path) });
        return { size: Number(i.filesize), isDir: Number(i.dir) === 1, tags: i.tag ? String(i.tag).split(';').filter(Boolean) : [] };
      } catch {
        return null;
      }
    },
    setFaults(faults) {
      if (faults.down === undefined) throw new Error('not supported: the service backend takes { down: boolean } only');
      if (faults.down) faulty.down(3_600_000);
      else faulty.heal();
    },
    async remoteDelete(path) {
      await svc.client.file.del({ fullpath: fullpath(path) });
    },
    async remoteMove(from, to) {
      await svc.client.file.move({ fullpath: fullpath(from), dest_fullpath: fullpath(to) });
    },
    async remoteHistory(path) {
      const h = await svc.client.file.history({ fullpath: fullpath(path) });
      return h.list.map((v) => Number(v.filesize));
    },
    async lockAs(path, locked, holder) {
      await vfs.setLocked(path, locked, { lockHolder: holder });
    },
    signalService(signal) {
      if (!('pid' in svc)) throw new Error('not supported: only the service-process backend has a process to signal');
      process.kill(svc.pid, signal);
    },
    async close() {
      if ('pid' in svc) process.kill(svc.pid, 'SIGCONT');
      await svc.close();
      if (!keptDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Creates `count` empty files `f00000`… in folder `path` (for listing benchmarks). */
/** A file written through the Vfs itself, as another front end of the gateway (WebDAV, ctl) writes one. */
async function vfsWrite(vfs: Vfs, path: string, data: Buffer): Promise<void> {
  const w = await vfs.open(path, { write: true, create: true, truncate: true });
  try {
    await w.write(0, data);
  } finally {
    await w.release();
  }
}

async function populate(vfs: Vfs, path: string, count: number): Promise<void> {
  await vfs.mkdir(path).catch(() => undefined);
  for (let i = 0; i < count; i++) await (await vfs.open(`${path}/f${String(i).padStart(5, '0')}`, { write: true, create: true })).release();
}

/**
 * The baselines of the mount: a sequential write of `bytes` through the Vfs itself, `chunkBytes` at a time,
 * made durable the way a `dd conv=fsync` through the mount makes it (fsync, then close); and a sequential
 * read, `chunkBytes` at a time. Each answers the milliseconds it took.
 */
async function benchDirectWrite(vfs: Vfs, path: string, bytes: number, chunkBytes: number): Promise<number> {
  const chunk = Buffer.alloc(chunkBytes, 0x5a);
  const t0 = performance.now();
  const w = await vfs.open(path, { write: true, create: true, truncate: true });
  for (let pos = 0; pos < bytes; pos += chunk.length) await w.write(pos, chunk.subarray(0, Math.min(chunk.length, bytes - pos)));
  await w.fsync();
  await w.release();
  return performance.now() - t0;
}

async function benchDirectRead(vfs: Vfs, path: string, chunkBytes: number): Promise<number> {
  const t0 = performance.now();
  const r = await vfs.open(path, { read: true });
  const size = (await r.stat()).size;
  for (let pos = 0; pos < size; pos += chunkBytes) await r.read(pos, chunkBytes);
  await r.release();
  return performance.now() - t0;
}

/**
 * The WebDAV front end over the same Vfs (and so the same service) as the mount, as `cloudlib up` serves
 * both: what the benchmarks point rclone's mount at. User `alice`, password `secret`. Answers the URL.
 */
async function serveWebdav(vfs: Vfs, state: { webdav?: { close(): Promise<void> } }): Promise<string> {
  const { createWebdavServer } = await import('../../../src/webdav/index.js');
  const { GatewayMetrics } = await import('../../../src/gateway/metrics.js');
  const { silentLogger } = await import('../../../src/shared/log.js');
  const { mkdtemp, rm } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-fuse-dav-'));
  const server = createWebdavServer({ vfs, metrics: new GatewayMetrics(), users: [{ name: 'alice', password: 'secret', opName: 'Alice' }], dataDir, logger: silentLogger });
  const url = await server.listen('127.0.0.1', 0);
  state.webdav = {
    async close() {
      await server.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return url;
}

/**
 * Holds the main thread inside the engine's next spoolAttach, before it is made: writes `marker`, then
 * waits (busy: nothing of JavaScript runs) until the file `release` exists, at most 60 s. What the
 * attach answered is kept in `heldAttach` (`attached`: whether the handle got its spool).
 */
function holdSpoolAttach(marker: string, release: string, state: { heldAttach?: { attached: boolean } }): boolean {
  const binding = loadFuse3Binding();
  const attach = binding.spoolAttach;
  binding.spoolAttach = (...args) => {
    binding.spoolAttach = attach;
    writeFileSync(marker, 'held');
    const until = Date.now() + 60_000;
    while (!existsSync(release) && Date.now() < until) { /* held on purpose */ }
    const base = attach(...args);
    state.heldAttach = { attached: base !== undefined };
    return base;
  };
  return true;
}

async function main(): Promise<void> {
  tuneGarbageCollector(); // as the cloudlib command does
  const mountpoint = process.argv[2];
  if (!mountpoint || !process.send) throw new Error('usage: forked with IPC, argv MOUNTPOINT');
  const logger = createLogger({ name: 'fuse-test', level: process.env.FUSE_TEST_LOG ?? 'warn' });
  const extra = JSON.parse(process.env.FUSE_TEST_OPTIONS ?? '{}') as Record<string, unknown>;
  const kind = process.env.FUSE_TEST_BACKEND ?? 'memory';
  if (!['memory', 'service', 'service-process'].includes(kind)) throw new Error(`FUSE_TEST_BACKEND: expected memory, service or service-process, got ${kind}`);
  const backend = kind === 'memory' ? memoryBackend() : await serviceBackend(kind === 'service-process');
  const state: { mounted?: MountedVfs; webdav?: { close(): Promise<void> }; heldAttach?: { attached: boolean } } = {};
  /** Write handles of the Vfs held open by path (vfsHold, vfsRelease): another front end's writer. */
  const held = new Map<string, FileHandle>();

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      await state.mounted?.unmount();
      await state.webdav?.close();
      await backend.vfs.close();
      await backend.close();
    })());
  process.once('SIGTERM', () => void stop().then(() => process.exit(0)));
  process.once('SIGINT', () => void stop().then(() => process.exit(0)));
  // The test process went away (crashed, killed): never leave a mount behind.
  process.once('disconnect', () => void stop().then(() => process.exit(0)));

  process.on('message', (msg: { id: number; cmd: string; args: Record<string, any> }) => {
    const reply = (result: unknown, error?: string): void => {
      if (!process.connected) return;
      process.send?.({ id: msg.id, result, error }, () => {
        if (msg.cmd === 'unmount') process.exit(error ? 1 : 0);
      });
    };
    (async () => {
      const a = msg.args ?? {};
      switch (msg.cmd) {
        case 'remoteWrite': return backend.remoteWrite(a.path, Buffer.from(a.data, 'base64'));
        case 'remoteRead': return (await backend.remoteRead(a.path)).toString('base64');
        case 'remoteList': return backend.remoteList(a.path);
        case 'remoteStat': return backend.remoteStat(a.path);
        case 'faults': return backend.setFaults(a);
        case 'remoteHistory': return backend.remoteHistory(a.path);
        case 'lockAs': return backend.lockAs(a.path, !!a.locked, String(a.holder));
        case 'signalService': {
          if (!backend.signalService) throw new Error('not supported: the memory backend has no service process');
          return backend.signalService(String(a.signal) as NodeJS.Signals);
        }
        case 'remoteDelete': return backend.remoteDelete(a.path);
        case 'remoteMove': return backend.remoteMove(a.from, a.to);
        case 'flushAll': return backend.vfs.flushAll({ timeoutMs: typeof a.timeoutMs === 'number' ? a.timeoutMs : 30_000 });
        case 'populate': return populate(backend.vfs, a.path, a.count);
        case 'vfsWrite': return vfsWrite(backend.vfs, a.path, Buffer.from(a.data, 'base64'));
        case 'benchDirectWrite': return benchDirectWrite(backend.vfs, a.path, a.bytes, a.chunkBytes);
        case 'benchDirectRead': return benchDirectRead(backend.vfs, a.path, a.chunkBytes);
        case 'serveWebdav': return serveWebdav(backend.vfs, state);
        case 'mountCounters': return state.mounted?.counters;
        case 'stall': {
          // Holds the main thread (JavaScript answers nothing) for `ms`, once `marker` is written; with
          // `release`, only until that file exists.
          setTimeout(() => {
            writeFileSync(a.marker, 'stalled');
            const until = Date.now() + a.ms;
            while (Date.now() < until && !(a.release && existsSync(a.release))) { /* stalled on purpose */ }
          }, 0);
          return true;
        }
        case 'holdSpoolAttach': return holdSpoolAttach(a.marker, a.release, state);
        case 'heldSpoolAttach': return state.heldAttach;
        case 'localStat': return backend.vfs.stat(a.path);
        case 'evict': return (backend.vfs as Vfs & { evict(path: string): Promise<unknown> }).evict(a.path);
        case 'pin': {
          const v = backend.vfs as Vfs & { setPinned(path: string, pinned: boolean): Promise<unknown>; pinsFetched(): Promise<void> };
          await v.setPinned(a.path, a.pinned !== false);
          return v.pinsFetched();
        }
        case 'refresh': return (backend.vfs as Vfs & { refresh(): Promise<void> }).refresh();
        case 'vfsHold': {
          // Creates (or empties) the file, writes `data` and keeps the handle open, as a writer of another front end.
          const w = await backend.vfs.open(a.path, { write: true, create: true, truncate: true });
          held.set(a.path, w);
          return w.write(0, Buffer.from(a.data, 'base64'));
        }
        case 'vfsHeldWrite': return held.get(a.path)!.write(a.at, Buffer.from(a.data, 'base64'));
        case 'vfsRelease': {
          const w = held.get(a.path);
          held.delete(a.path);
          return w?.release();
        }
        case 'vfsStatus': return (backend.vfs as Vfs & { status?(): unknown }).status?.();
        case 'unmount': return stop();
        default: throw new Error(`unknown command ${msg.cmd}`);
      }
    })().then((r) => reply(r ?? null), (err: Error) => reply(null, err.message));
  });

  const mounted = await mountVfs({ vfs: backend.vfs, mountpoint, logger, ...extra });
  state.mounted = mounted;
  process.send({ ready: true, mountpoint: mounted.mountpoint });
}

main().catch((err: Error) => {
  process.stderr.write(`mount-child: ${err.stack ?? err.message}\n`);
  // The parent's startMount rejects with why.
  if (process.send) process.send({ failed: err.message }, () => process.exit(1));
  else process.exit(1);
});
