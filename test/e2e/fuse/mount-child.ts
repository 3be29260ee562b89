/**
 * Child process of the FUSE e2e tests: builds a Vfs, mounts it, and answers commands over IPC, so the
 * test process itself only ever does async I/O on the mount (a process serving a mount must never make a
 * synchronous call on it).
 *
 * argv: MOUNTPOINT; env FUSE_TEST_OPTIONS: JSON of extra mountVfs options; FUSE_TEST_BACKEND: `memory`
 * (default until a service-backed test Vfs exists) or `service`.
 */
import { mountVfs, type MountedVfs } from '../../../src/fuse/index.js';
import { createLogger } from '../../../src/shared/log.js';
import type { Vfs } from '../../../src/vfs/types.js';
import { MemoryVfs } from './memory-vfs.js';

/** What a test can ask of the backend behind the mount ("another client" of the service). */
interface Backend {
  vfs: Vfs;
  remoteWrite(path: string, data: Buffer): Promise<void>;
  remoteRead(path: string): Promise<Buffer>;
  remoteList(path: string): Promise<string[]>;
  remoteStat(path: string): Promise<{ size: number; isDir: boolean; tags?: string[]; locked?: boolean } | null>;
  setFaults(faults: { delayMs?: number; failWith?: string }): void;
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
    async close() {},
  };
}

async function main(): Promise<void> {
  const mountpoint = process.argv[2];
  if (!mountpoint || !process.send) throw new Error('usage: forked with IPC, argv MOUNTPOINT');
  const logger = createLogger({ name: 'fuse-test', level: process.env.FUSE_TEST_LOG ?? 'warn' });
  const extra = JSON.parse(process.env.FUSE_TEST_OPTIONS ?? '{}') as Record<string, unknown>;
  const backend = memoryBackend();
  const state: { mounted?: MountedVfs } = {};

  const stop = async (): Promise<void> => {
    await state.mounted?.unmount();
    await backend.vfs.close();
    await backend.close();
  };
  process.once('SIGTERM', () => void stop().then(() => process.exit(0)));
  process.once('SIGINT', () => void stop().then(() => process.exit(0)));

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
        case 'flushAll': return backend.vfs.flushAll({ timeoutMs: 30_000 });
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
  process.exit(1);
});
