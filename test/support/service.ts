/**
 * startTestService(): an embedded service on an ephemeral port with a temporary data folder, and a
 * ServiceClient holding the library authorization. `close()` stops both and removes the folder. With
 * CLOUDLIB_TEST_METADATA=postgresql (the suite's second run) the metadata lives in a database of the
 * run's PostgreSQL cluster, one per data folder (dropped with the folder).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ServiceClient } from '../../src/api/client.js';
import { inject } from 'vitest';
import { EmbeddedService, type EmbeddedServiceOptions } from '../../src/service/index.js';
import { serviceDatabase, testMetadataEngine } from './postgres-cluster.js';

export interface TestService {
  service: EmbeddedService;
  /** Client with the library authorization (credentials.library). */
  client: ServiceClient;
  dir: string;
  /** `--metadata URL` for `cloudlib service` commands on this service's data (empty on SQLite). */
  metadataArgs: string[];
  close(): Promise<void>;
}

export async function startTestService(opts: Partial<EmbeddedServiceOptions> = {}): Promise<TestService> {
  const dir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'cloudlib-svc-')));
  const database = opts.metadata === undefined && testMetadataEngine() === 'postgresql' ? await serviceDatabase(inject('postgresUrl'), dir) : undefined;
  const service = await EmbeddedService.start({ ...opts, dataDir: dir, ...(database ? { metadata: database.url } : {}) });
  const c = service.credentials;
  const client = new ServiceClient({
    baseUrl: service.baseUrl,
    credentials: { library: { org_client_id: c.library.org_client_id, org_client_secret: c.library.org_client_secret } },
    retries: 0,
    clock: opts.clock,
  });
  let closed = false;
  return {
    service, client, dir,
    metadataArgs: database ? ['--metadata', database.url] : [],
    async close() {
      if (closed) return;
      closed = true;
      await client.close();
      await service.close();
      if (!opts.dataDir) {
        await rm(dir, { recursive: true, force: true });
        await database?.drop();
      }
    },
  };
}

/** A client of the same service with other credentials (enterprise, partner, user). */
export function clientFor(t: TestService, role: 'enterprise' | 'partner' | 'user'): ServiceClient {
  const c = t.service.credentials;
  if (role === 'enterprise') return t.client.withCredentials({ enterprise: { client_id: c.enterprise.client_id, client_secret: c.enterprise.client_secret } });
  if (role === 'partner') return t.client.withCredentials({ partner: { client_id: c.partner.client_id, client_secret: c.partner.client_secret } });
  return t.client.withCredentials({ user: { token: c.member.token, client_secret: c.member.client_secret } });
}
