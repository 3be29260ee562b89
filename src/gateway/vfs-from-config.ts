/** The gateway's Vfs for a configuration naming a remote service (`cloudlib mount`, `cloudlib webdav`, `cloudlib up`). */
import { bandwidthLimitOf, type BandwidthLimit } from '../shared/bandwidth-limit.js';
import { resolve } from 'node:path';
import { ServiceClient, type ClientOptions } from '../api/client.js';
import type { Logger } from '../shared/log.js';
import type { GatewayVfs } from '../vfs/gateway-vfs.js';
import { createServedVfs, type ServiceLibrarySpec } from '../remote/service-vfs.js';
import type { ServedLibrary } from '../remote/served-libraries.js';

export { ServiceUnreachableAtStart } from '../remote/served-libraries.js';
import type { GatewayConfig } from './config.js';

/** The Vfs of a configuration, and the served libraries it was built over (the same entries). */
export async function vfsFromConfig(config: GatewayConfig, logger: Logger, onExchange?: ClientOptions['onExchange'], bandwidth: BandwidthLimit = bandwidthLimitOf(config.bwlimit)): Promise<{ vfs: GatewayVfs; libraries: ServedLibrary[]; bandwidth: BandwidthLimit }> {
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
  const libraries: ServiceLibrarySpec[] = svc.libraries.map((l) => ({ name: l.name, client: client({ library: { org_client_id: l.org_client_id, org_client_secret: l.org_client_secret } }) }));
  const served = await createServedVfs({
    libraries,
    enterprise: svc.enterprise && libraries.length === 0 ? { client: client({ enterprise: svc.enterprise }) } : undefined,
    dataDir: resolve(config.data, 'gateway'),
    knownLibrariesFile: resolve(config.data, 'gateway', 'known-libraries.json'),
    feedIntervalMs: config.feed.interval_ms,
    durability: { mode: config.journal.durability, groupCommitMs: config.journal.group_commit_ms },
    upload: { delayMs: config.journal.upload_delay_ms, concurrency: config.journal.upload_concurrency, smallConcurrency: config.journal.small_upload_concurrency },
    cache: {
      metadataEntries: config.cache.metadata_entries,
      blockBytes: config.cache.block_cache_mb * 1024 * 1024,
      diskBytes: config.cache.disk_cache_mb * 1024 * 1024,
      minFreePercent: config.cache.min_free_percent,
    },
    readOnly: config.mount.read_only,
    bandwidth,
    maxFileBytes: config.journal.max_file_mb * 1024 * 1024,
    maxPendingBytes: config.journal.max_pending_mb * 1024 * 1024,
    logger,
    onClose: async () => { await Promise.all(clients.map((c) => c.close())); },
  });
  return { ...served, bandwidth };
}
