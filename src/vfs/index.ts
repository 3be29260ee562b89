/**
 * The gateway core's entry points: `createVfs()` builds the Vfs that both front ends serve over a set of
 * libraries, each a Remote (the service-backed one is src/remote/: `createServiceVfs`), and
 * `createMemoryVfs()` the same Vfs over in-memory libraries (front-end tests). The Vfs knows nothing of
 * the service's client or the gateway's configuration.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger, type Logger } from '../shared/log.js';
import { GatewayVfs, type GatewayVfsOptions } from './gateway-vfs.js';
import { resolveLibraries, type LibrarySpec, type ResolvedLibrary } from './library-set.js';
import { MemoryRemote } from './memory-remote.js';
import { FaultyRemote } from './faulty-remote.js';

export { GatewayVfs, type GatewayStatus, type GatewayVfsOptions } from './gateway-vfs.js';
export { MemoryRemote } from './memory-remote.js';
export { FaultyRemote, type FaultRule } from './faulty-remote.js';
export { DiskFaults } from './disk-faults.js';
export type { Remote, RemoteEntry } from './remote.js';
export { resolveLibraries, type LibrarySpec, type ResolvedLibrary } from './library-set.js';
export * from './types.js';
export { ChangeEvents } from './change-events.js';
export type { PinStatus } from './pinned-content.js';

export interface CreateVfsOptions extends Omit<GatewayVfsOptions, 'libraries' | 'logger' | 'onClose'> {
  /** The libraries, `{ name?, remote }` each (the folder name defaults to the library's name). */
  libraries: LibrarySpec[];
  /** Wrap every library's Remote in a FaultyRemote (fault injection on command). Default false. */
  faults?: boolean;
  logger?: Logger;
  /** Called when the Vfs is closed (close what the caller opened for it). */
  onClose?: () => Promise<void>;
}

/** The gateway's Vfs over a set of libraries. */
export async function createVfs(opts: CreateVfsOptions): Promise<GatewayVfs> {
  if (opts.libraries.length === 0) throw new TypeError('createVfs: expected at least one library, got none');
  return openVfs({ ...opts, libraries: await resolveLibraries(opts.libraries) });
}

/** The gateway's Vfs over libraries already named (`resolveLibraries`): the very entries are served. */
export async function openVfs(opts: Omit<CreateVfsOptions, 'libraries'> & { libraries: ResolvedLibrary[] }): Promise<GatewayVfs> {
  if (opts.libraries.length === 0) throw new TypeError('openVfs: expected at least one library, got none');
  const { libraries, faults, logger, ...rest } = opts;
  return GatewayVfs.open({
    ...rest,
    libraries: faults ? libraries.map((l) => ({ ...l, remote: new FaultyRemote(l.remote) })) : libraries,
    logger: logger ?? silentLogger,
  });
}

export interface MemoryVfsOptions extends Omit<CreateVfsOptions, 'libraries' | 'dataDir'> {
  /** Library names (one MemoryRemote each). Default `['Library']`. */
  names?: string[];
  /** Data folder; default a temporary folder removed on close. */
  dataDir?: string;
}

/** The gateway's Vfs over in-memory libraries; `remotes` lets a test act as another client. */
export async function createMemoryVfs(opts: MemoryVfsOptions = {}): Promise<{ vfs: GatewayVfs; remotes: Map<string, MemoryRemote>; dataDir: string }> {
  const names = opts.names ?? ['Library'];
  const remotes = new Map(names.map((n, i) => [n, new MemoryRemote({ name: n, id: String(i + 1) })]));
  const ownDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'cloudlib-vfs-')));
  const { names: _n, dataDir: _d, onClose, ...rest } = opts;
  const vfs = await createVfs({
    ...rest,
    feedIntervalMs: opts.feedIntervalMs ?? 0,
    libraries: names.map((n) => ({ name: n, remote: remotes.get(n)! })),
    dataDir,
    onClose: async () => {
      await onClose?.();
      if (ownDir) await rm(dataDir, { recursive: true, force: true });
    },
  });
  return { vfs, remotes, dataDir };
}
