/**
 * `library add` and `library remove` outlive a restart: the next start on the same data folder serves
 * the libraries added at run time (with the uploads journaled for them) and not the removed ones.
 */
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ControlClient } from '../../../src/control/client.js';
import { loadConfig } from '../../../src/gateway/config.js';
import { Gateway } from '../../../src/gateway/gateway.js';
import { silentLogger } from '../../../src/shared/log.js';

let dir: string;
let gateway: Gateway | undefined;

async function start(stopFlushMs?: number): Promise<Gateway> {
  const config = await loadConfig({ data: dir, webdav: 'off', noMount: true, serviceListen: '127.0.0.1:0', adminListen: '127.0.0.1:0' }, {}, { fuseUsable: false });
  config.admin_listen = null;
  config.feed.interval_ms = 200;
  gateway = await Gateway.start({ config, logger: silentLogger, stopFlushMs });
  return gateway;
}

async function call(method: string, params: Record<string, unknown> = {}): Promise<any> {
  const ctl = await ControlClient.connect(join(dir, 'control.sock'));
  try {
    return await ctl.call(method, params);
  } finally {
    ctl.close();
  }
}

afterAll(async () => {
  await gateway?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('library add and remove across a restart', { timeout: 60_000 }, () => {
  it('serves the added library again, its journaled upload with it; the removed one stays removed', async () => {
    dir = await mkdtemp(join(tmpdir(), 'cloudlib-libs-'));
    let g = await start(0);
    const demo = g.vfs.libraryNames()[0]!;
    await call('org.create', { org_name: 'Archive' });
    // by name in the enterprise (the gateway binds it); either that or an authorization, not both
    await expect(call('library.add', { org: 'Archive', org_client_id: 'x' })).rejects.toThrow(/either/);
    await expect(call('library.add', { org: 'Nowhere' })).rejects.toThrow(/no library 'Nowhere'.*Archive/);
    expect(await call('library.add', { org: 'Archive' })).toMatchObject({ name: 'Archive' });
    expect((await stat(join(dir, 'libraries.json'))).mode & 0o777).toBe(0o600);
    // One set of served libraries: the Vfs serves its entries, the control socket calls with their clients.
    expect(g.libraries.list().map((l) => l.name)).toEqual(g.vfs.libraryNames());
    for (const l of g.libraries.list()) expect(g.vfs.remoteOf(l.name)).toBe(l.remote);
    await call('file.create_folder', { library: 'Archive', fullpath: 'made by ctl' });
    expect((await g.vfs.stat('/Archive/made by ctl')).isDir).toBe(true);

    // A file journaled for Archive; the stop does not wait for its upload (stopFlushMs 0).
    await g.vfs.writeFile('/Archive/kept.txt', Buffer.from('kept across the restart'));
    await g.stop();
    g = await start();
    expect(g.vfs.libraryNames()).toEqual([demo, 'Archive']);
    expect(g.vfs.status().stranded).toEqual([]);
    await call('flush');
    const chunks: Buffer[] = [];
    for await (const c of await g.vfs.createReadStream('/Archive/kept.txt')) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('kept across the restart');
    expect(g.vfs.status().uploads).toEqual([]);

    // Removing the configured library (here the embedded one) is remembered too; adding it back undoes that.
    expect(await call('library.remove', { name: demo })).toEqual({ removed: demo });
    expect(g.libraries.list().map((l) => l.name)).toEqual(['Archive']);
    await expect(call('file.ls', { library: demo, fullpath: '' })).rejects.toThrow(demo);
    await g.stop();
    g = await start();
    expect(g.vfs.libraryNames()).toEqual(['Archive']);
    const file = JSON.parse(await readFile(join(dir, 'libraries.json'), 'utf8')) as { removed: string[] };
    expect(file.removed).toEqual([demo]);
    const creds = g.service!.credentials.library;
    await call('library.add', { org_client_id: creds.org_client_id, org_client_secret: creds.org_client_secret });
    await g.stop();
    g = await start();
    expect(g.vfs.libraryNames().sort()).toEqual(['Archive', demo].sort());
  });
});
