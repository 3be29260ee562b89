/**
 * The gateway core's entry points: `createVfs()` builds the Vfs that both front ends serve, over the
 * library file API (configured library authorizations, or every library of an enterprise), and
 * `createMemoryVfs()` the same Vfs over in-memory libraries (front-end tests).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ServiceClient, type ClientOptions } from '../api/client.js';
import type { GatewayConfig } from '../gateway/config.js';
import { silentLogger, type Logger } from '../shared/log.js';
import { GatewayVfs, type GatewayVfsOptions } from './gateway-vfs.js';
import { enterpriseLibraries, resolveLibraries, type LibrarySpec } from './library-set.js';
import { MemoryRemote } from './memory-remote.js';
import { FaultyRemote } from './faulty-remote.js';

export { GatewayVfs, type GatewayStatus, type GatewayVfsOptions } from './gateway-vfs.js';
export { MemoryRemote } from './memory-remote.js';
export { FaultyRemote, type FaultRule } from './faulty-remote.js';
export { DiskFaults } from './disk-faults.js';
export type { Remote, RemoteEntry } from './remote.js';
export type { LibrarySpec } from './library-set.js';
export * from './types.js';

export interface CreateVfsOptions extends Omit<GatewayVfsOptions, 'libraries' | 'logger' | 'onClose'> {
  /** Libraries by authorization: `{ name?, client }` (a client holding `credentials.library`), or `{ name?, remote }`. */
  libraries?: LibrarySpec[];
  /** Every library of an enterprise: listed with org/ls and bound with org/bind. */
  enterprise?: { client: ServiceClient; title?: string };
  /** Wrap every library's Remote in a FaultyRemote (fault injection on command). Default false. */
  faults?: boolean;
  logger?: Logger;
  /** Called when the Vfs is closed (close what the caller opened for it). */
  onClose?: () => Promise<void>;
}

/** The gateway's Vfs. Also accepts `{ config, logger }` (a GatewayConfig, as `cloudlib mount` passes). */
export async function createVfs(opts: CreateVfsOptions | { config: GatewayConfig; logger: Logger; onExchange?: ClientOptions['onExchange'] }): Promise<GatewayVfs> {
  if ('config' in opts) return createVfsFromConfig(opts.config, opts.logger, opts.onExchange);
  const specs: LibrarySpec[] = [...(opts.libraries ?? [])];
  if (opts.enterprise) specs.push(...(await enterpriseLibraries(opts.enterprise.client, { title: opts.enterprise.title })));
  if (specs.length === 0) throw new TypeError('createVfs: expected at least one library (libraries or enterprise), got none');
  const libraries = await resolveLibraries(specs);
  const { libraries: _l, enterprise: _e, faults, logger, ...rest } = opts;
  return GatewayVfs.open({
    ...rest,
    libraries: faults ? libraries.map((l) => ({ ...l, remote: new FaultyRemote(l.remote) })) : libraries,
    logger: logger ?? silentLogger,
  });
}

async function createVfsFromConfig(config: GatewayConfig, logger: Logger, onExchange?: ClientOptions['onExchange']): Promise<GatewayVfs> {
  if (!config.service) {
    throw new Error('not supported: a gateway over the embedded service is started by `cloudlib up`; give a remote service (service.base_url and libraries) to mount alone');
  }
  const svc = config.service;
  const clients: ServiceClient[] = [];
  const client = (credentials: ConstructorParameters<typeof ServiceClient>[0]['credentials']): ServiceClient => {
    const c = new ServiceClient({ baseUrl: svc.base_url, credentials, uploadHeaderPrefix: svc.upload_header_prefix, onExchange });
    clients.push(c);
    return c;
  };
  const libraries: LibrarySpec[] = svc.libraries.map((l) => ({ name: l.name, client: client({ library: { org_client_id: l.org_client_id, org_client_secret: l.org_client_secret } }) }));
  return createVfs({
    libraries,
    enterprise: svc.enterprise && libraries.length === 0 ? { client: client({ enterprise: svc.enterprise }) } : undefined,
    dataDir: resolve(config.data, 'gateway'),
    feedIntervalMs: config.feed.interval_ms,
    durability: { mode: config.journal.durability, groupCommitMs: config.journal.group_commit_ms },
    cache: {
      metadataEntries: config.cache.metadata_entries,
      blockBytes: config.cache.block_cache_mb * 1024 * 1024,
      diskBytes: config.cache.disk_cache_mb * 1024 * 1024,
    },
    readOnly: config.mount.read_only,
    logger,
    onClose: async () => { await Promise.all(clients.map((c) => c.close())); },
  });
}

export interface MemoryVfsOptions extends Omit<CreateVfsOptions, 'libraries' | 'enterprise' | 'dataDir'> {
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
