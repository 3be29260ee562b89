/**
 * The gateway's data folder is the owner's only, down to each file: with the usual umask (022) every
 * file a running gateway leaves there (feed cursors, the content cache, the journal and spool, the
 * embedded service's data, endpoints.json, the control socket) is 0600 and every folder 0700.
 */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/gateway/config.js';
import { Gateway } from '../../../src/gateway/gateway.js';
import { silentLogger } from '../../../src/shared/log.js';
import { waitFor } from '../../support/wait-for.js';

let dir: string | undefined;
let gateway: Gateway | undefined;
const umask = process.umask(0o022);

afterAll(async () => {
  await gateway?.stop();
  process.umask(umask);
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Entries under `root` whose mode is not 0600 (files, sockets) or 0700 (folders). */
async function notPrivate(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      const mode = (await stat(p)).mode & 0o777;
      if (mode !== (e.isDirectory() ? 0o700 : 0o600)) out.push(`${p.slice(root.length + 1)} ${mode.toString(8)}`);
      if (e.isDirectory()) await walk(p);
    }
  };
  await walk(root);
  return out;
}

describe('the data folder', { timeout: 60_000 }, () => {
  it('holds only owner-only files (0600) and folders (0700) once the gateway has written, read and polled', async () => {
    dir = await mkdtemp(join(tmpdir(), 'cloudlib-modes-'));
    const config = await loadConfig({ data: dir, webdav: 'off', noMount: true }, {}, { fuseUsable: false });
    config.admin_listen = null;
    config.feed.interval_ms = 100;
    gateway = await Gateway.start({ config, logger: silentLogger, stopFlushMs: 5000 });
    const lib = gateway.vfs.libraryNames()[0]!;
    await gateway.vfs.writeFile(`/${lib}/modes.txt`, Buffer.from('owner only'));
    await gateway.vfs.flushAll();
    // a read through the content cache, and a feed cursor saved after the upload's change was polled
    const stream = await gateway.vfs.createReadStream(`/${lib}/modes.txt`);
    for await (const _ of stream) { /* drained */ }
    const feeds = join(dir, 'gateway', 'feeds');
    await waitFor(`a feed cursor in ${feeds}`, async () => (await readdir(feeds).catch(() => [])).length > 0, { timeoutMs: 20_000 });
    await gateway.stop();
    gateway = undefined;
    expect(await notPrivate(dir)).toEqual([]);
  });
});
