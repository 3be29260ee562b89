/**
 * A whole gateway over an embedded service in this process, for integration tests: the gateway's
 * configuration serving the service's library, and the temporary folders a test file makes for both
 * (removed in its teardown).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type GatewayConfig } from '../../src/gateway/config.js';
import type { EmbeddedService } from '../../src/service/index.js';

/** Temporary folders of a test file: each made by `make`, all removed by `removeAll` in its teardown. */
export class TempDirs {
  private readonly dirs: string[] = [];

  async make(prefix: string): Promise<string> {
    const d = await mkdtemp(join(tmpdir(), prefix));
    this.dirs.push(d);
    return d;
  }

  async removeAll(): Promise<void> {
    for (const d of this.dirs.splice(0)) await rm(d, { recursive: true, force: true });
  }
}

/**
 * The configuration of a gateway with its data in `data` serving the library of `svc`: WebDAV (user
 * `alice`, password `secret`) and the admin listener on free ports of 127.0.0.1, no mount, the updates
 * feed polled every 100 ms.
 */
export async function gatewayConfigOver(data: string, svc: EmbeddedService): Promise<GatewayConfig> {
  const config = await loadConfig({ data, webdav: '127.0.0.1:0', noMount: true, adminListen: '127.0.0.1:0' }, {}, { fuseUsable: false });
  const lib = svc.credentials.library;
  config.service = { base_url: svc.baseUrl, upload_header_prefix: 'x-svc-', libraries: [{ org_client_id: lib.org_client_id, org_client_secret: lib.org_client_secret }] };
  config.webdav.users = [{ name: 'alice', password: 'secret' }];
  config.feed.interval_ms = 100;
  return config;
}
