/**
 * A gateway started while its service cannot be reached: with the data folder of an earlier run it starts,
 * says it is offline (ctl status, the status page, /healthz), serves what was journaled, takes an edit
 * of it into the journal and goes online by itself once the service answers, uploading both. A first start has
 * nothing to serve: it is refused in one line.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../../src/api/client.js';
import { ControlClient } from '../../../src/control/client.js';
import { Gateway } from '../../../src/gateway/gateway.js';
import { EmbeddedService } from '../../../src/service/index.js';
import { silentLogger } from '../../../src/shared/log.js';
import { dav } from '../../support/dav-http.js';
import { gatewayConfigOver, TempDirs } from '../../support/gateway-over-service.js';
import { serviceReader } from '../../support/drive-scenarios.js';
import { waitFor } from '../../support/wait-for.js';

const dirs = new TempDirs();
let service: EmbeddedService | undefined;
let gateway: Gateway | undefined;
let client: ServiceClient | undefined;

afterAll(async () => {
  await gateway?.stop();
  await client?.close();
  await service?.close();
  await dirs.removeAll();
});

describe('a gateway started while the service is away', { timeout: 60_000 }, () => {
  it('serves its journal offline, takes writes, goes online and uploads when the service answers', async () => {
    const serviceDir = await dirs.make('cloudlib-svc-');
    service = await EmbeddedService.start({ dataDir: serviceDir, logger: silentLogger });
    const port = new URL(service.baseUrl).port;
    const data = await dirs.make('cloudlib-offline-');
    const config = await gatewayConfigOver(data, service);

    // An earlier run: one file uploaded, then the service goes away and one more is journaled, not uploaded.
    gateway = await Gateway.start({ config, logger: silentLogger, stopFlushMs: 0 });
    const lib = gateway.vfs.libraryNames()[0]!;
    await gateway.vfs.writeFile(`/${lib}/uploaded.txt`, Buffer.from('uploaded before'));
    await gateway.vfs.flushAll();
    // The listing seen before the outage lets a new name be created while the service is away.
    expect((await gateway.vfs.readdir(`/${lib}`)).map((a) => a.name)).toEqual(['uploaded.txt']);
    await service.close();
    service = undefined;
    await gateway.vfs.writeFile(`/${lib}/journaled.txt`, Buffer.from('journaled while away'));
    await gateway.stop();
    gateway = undefined;

    // A first start (an empty data folder) has nothing to serve offline: refused, in one line.
    const fresh = { ...config, data: await dirs.make('cloudlib-first-') };
    const refused = await Gateway.start({ config: fresh, logger: silentLogger }).then(() => undefined, (err: Error) => err);
    expect(refused?.message).toMatch(/cannot be reached .* never served from this data folder: nothing to serve offline yet/);
    expect(refused?.message).not.toContain('\n');

    // The same data folder: starts, offline, serving the journal; a write goes to the journal.
    gateway = await Gateway.start({ config, logger: silentLogger });
    expect(gateway.vfs.libraryNames()).toEqual([lib]);
    expect(gateway.vfs.status().libraries[0]).toMatchObject({ library: lib, online: false });
    const ctl = await ControlClient.connect(join(data, 'control.sock'));
    try {
      const status = (await ctl.call('status')) as { libraries: { name: string; online: boolean }[] };
      expect(status.libraries).toEqual([expect.objectContaining({ name: lib, online: false })]);
    } finally {
      ctl.close();
    }
    const health = await fetch(`${gateway.adminUrl}/healthz`);
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ status: 'degraded', offline: [expect.objectContaining({ library: lib })] });
    expect(await (await fetch(`${gateway.adminUrl}/`)).text()).toMatch(/class="state offline">offline</);
    const url = gateway.webdavUrl!;
    expect((await dav(url, 'GET', `/${lib}/journaled.txt`)).body).toBe('journaled while away');
    // Nothing of the service's listings outlives a restart: the journaled file is what there is to write to.
    expect((await dav(url, 'PUT', `/${lib}/journaled.txt`, { body: 'edited offline' })).status).toBe(204);
    expect((await dav(url, 'GET', `/${lib}/journaled.txt`)).body).toBe('edited offline');

    // The service answers again (same address, same data): online by itself, both files uploaded.
    service = await EmbeddedService.start({ dataDir: serviceDir, listen: `127.0.0.1:${port}`, logger: silentLogger });
    const g = gateway;
    await waitFor('the library to be online again', () => g.vfs.status().libraries[0]!.online);
    const creds = service.credentials.library;
    client = new ServiceClient({ baseUrl: service.baseUrl, credentials: { library: { org_client_id: creds.org_client_id, org_client_secret: creds.org_client_secret } }, retries: 0 });
    const reader = serviceReader(() => client!);
    // Uploaded by itself (no flush asked).
    await waitFor('the edit made offline on the service', async () => (await reader.read('journaled.txt')).toString(), { until: (t) => t === 'edited offline', timeoutMs: 20_000, detail: () => JSON.stringify(g.vfs.status().uploads) });
    expect(g.vfs.status().uploads).toEqual([]);
    expect((await reader.read('journaled.txt')).toString()).toBe('edited offline');
    expect((await reader.read('uploaded.txt')).toString()).toBe('uploaded before');
  });
});
