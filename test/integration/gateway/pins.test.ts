/**
 * Pins through a whole gateway over the embedded service: `ctl pin --wait` fetches a folder with progress,
 * `ctl status` and the status page show it; the service goes away and the gateway restarts, and WebDAV
 * still lists and reads everything pinned; `ctl evict` frees what is not pinned; bad input is refused.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ControlClient } from '../../../src/control/client.js';
import type { GatewayConfig } from '../../../src/gateway/config.js';
import { Gateway } from '../../../src/gateway/gateway.js';
import { EmbeddedService } from '../../../src/service/index.js';
import { silentLogger } from '../../../src/shared/log.js';
import { dav } from '../../support/dav-http.js';
import { gatewayConfigOver, TempDirs } from '../../support/gateway-over-service.js';

const dirs = new TempDirs();
let service: EmbeddedService | undefined;
let gateway: Gateway | undefined;

async function gatewayConfig(data: string, svc: EmbeddedService): Promise<GatewayConfig> {
  const config = await gatewayConfigOver(data, svc);
  config.cache.disk_cache_mb = 8;
  config.cache.min_free_percent = 0; // the machine's disk is not the test's
  return config;
}

async function ctl<T>(data: string, method: string, params: Record<string, unknown> = {}, onProgress?: (p: Record<string, unknown>) => void): Promise<T> {
  const c = await ControlClient.connect(join(data, 'control.sock'));
  try {
    return (await c.call(method, params, onProgress)) as T;
  } finally {
    c.close();
  }
}

afterAll(async () => {
  await gateway?.stop();
  await service?.close();
  await dirs.removeAll();
});

describe('pins through the gateway', { timeout: 60_000 }, () => {
  it('pin --wait, status, then with the service gone and the gateway restarted WebDAV reads all of it', async () => {
    service = await EmbeddedService.start({ dataDir: await dirs.make('cloudlib-svc-'), logger: silentLogger });
    const data = await dirs.make('cloudlib-pins-');
    const config = await gatewayConfig(data, service);
    gateway = await Gateway.start({ config, logger: silentLogger, stopFlushMs: 0 });
    const lib = gateway.vfs.libraryNames()[0]!;
    const files = new Map<string, string>();
    for (let i = 0; i < 12; i++) files.set(`keep/${i % 3 === 0 ? 'deep/' : ''}f${i}.txt`, `content of file ${i} `.repeat(200 + i));
    await gateway.vfs.mkdir(`/${lib}/keep`);
    await gateway.vfs.mkdir(`/${lib}/keep/deep`);
    for (const [p, text] of files) await gateway.vfs.writeFile(`/${lib}/${p}`, Buffer.from(text));
    await gateway.vfs.writeFile(`/${lib}/loose.txt`, Buffer.from('not pinned'));
    await gateway.vfs.flushAll();

    // Bad input: refused, nothing pinned.
    await expect(ctl(data, 'pin', { path: `/${lib}/keep`, wait: 'yes' })).rejects.toThrow(/parameter 'wait': expected 0 or 1/);
    await expect(ctl(data, 'pin', { path: `/${lib}/missing` })).rejects.toThrow(/no such file or folder/);
    await expect(ctl(data, 'pin', { path: `/${lib}/keep`, color: 'red' })).rejects.toThrow(/unknown parameter 'color'/);

    const progress: Record<string, unknown>[] = [];
    const total = [...files.values()].reduce((n, t) => n + Buffer.byteLength(t), 0);
    const pinned = await ctl<{ path: string; files: number; bytes: number }>(data, 'pin', { path: `/${lib}/keep`, wait: 1 }, (p) => progress.push(p));
    expect(pinned).toEqual({ path: `/${lib}/keep`, files: files.size, bytes: total });
    expect(progress.at(-1)).toMatchObject({ done: total, total, unit: 'bytes', files: { done: files.size, total: files.size } });
    const status = await ctl<{ pins: { pins: string[]; files: number; bytes: number; pendingFiles: number; errors: unknown[] } }>(data, 'status');
    expect(status.pins).toMatchObject({ pins: [`/${lib}/keep`], files: files.size, bytes: total, pendingFiles: 0, errors: [] });
    expect(await (await fetch(`${gateway.adminUrl}/`)).text()).toContain('<td>/' + lib + '/keep</td><td>pinned</td>');

    // The service goes away, the gateway restarts: everything pinned is listed and read through WebDAV.
    await service.close();
    service = undefined;
    await gateway.stop();
    gateway = await Gateway.start({ config, logger: silentLogger });
    expect(gateway.vfs.status().libraries[0]).toMatchObject({ online: false });
    const url = gateway.webdavUrl!;
    const listing = await dav(url, 'PROPFIND', `/${lib}/keep/`, { headers: { Depth: '1' } });
    expect(listing.status).toBe(207);
    for (const p of files.keys()) if (!p.includes('deep/')) expect(listing.body).toContain(p.split('/').pop());
    for (const [p, text] of files) expect((await dav(url, 'GET', `/${lib}/${p}`)).body).toBe(text);
    expect((await dav(url, 'GET', `/${lib}/loose.txt`)).status).toBeGreaterThanOrEqual(500);

    // Free up space keeps what is pinned.
    expect(await ctl(data, 'evict', { path: `/${lib}/keep` })).toEqual({ path: `/${lib}/keep`, files: 0, bytes: 0 });
    expect((await dav(url, 'GET', `/${lib}/keep/f1.txt`)).body).toBe(files.get('keep/f1.txt'));
  });
});
