/**
 * The gateway core against a real embedded service: every Vfs operation, two gateways on one library
 * seeing each other's changes through the updates feed, an outage in the middle of an upload, and a
 * kill -9 with an acknowledged upload pending.
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startTestVfs, startTestService, serviceAvailable, vfsCode, type TestVfs } from '../../support/vfs.js';
import { type FaultyRemote, type GatewayVfs } from '../../../src/vfs/index.js';
import { LibraryRemote } from '../../../src/remote/library-remote.js';
import { createServiceVfs } from '../../../src/remote/service-vfs.js';
import { waitFor } from '../../support/wait-for.js';

async function readAll(vfs: GatewayVfs, path: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of await vfs.createReadStream(path)) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const withService = await serviceAvailable();

describe.skipIf(!withService)('GatewayVfs over the embedded service', { timeout: 60_000 }, () => {
  let t: TestVfs;
  beforeAll(async () => { t = await startTestVfs({ faults: true }); });
  afterAll(async () => { await t?.close(); });

  it('every operation: mkdir, write, stat, readdir, read, rename, copy, unlink, rmdir, statfs, tags, lock', async () => {
    const { vfs, client } = t;
    expect((await vfs.readdir('/')).map((a) => a.name)).toEqual(['Library']);
    await vfs.mkdir('/Library/ops');
    expect(await vfsCode(vfs.mkdir('/Library/ops'))).toBe('EEXIST');
    const data = randomBytes(300_000);
    await vfs.writeFile('/Library/ops/a.bin', data);
    expect((await vfs.stat('/Library/ops/a.bin')).size).toBe(300_000);
    await vfs.flushAll();
    const info = await client.file.info({ fullpath: 'ops/a.bin', attribute: 10 });
    expect(info.filehash).toBe(createHash('sha1').update(data).digest('hex'));
    expect((await readAll(vfs, '/Library/ops/a.bin')).equals(data)).toBe(true);
    const h = await vfs.open('/Library/ops/a.bin', { read: true });
    expect((await h.read(123_456, 10)).equals(data.subarray(123_456, 123_466))).toBe(true);
    await h.release();
    await vfs.rename('/Library/ops/a.bin', '/Library/ops/b.bin');
    expect((await vfs.readdir('/Library/ops')).map((a) => a.name)).toEqual(['b.bin']);
    await vfs.copy('/Library/ops/b.bin', '/Library/ops/c.bin');
    expect((await readAll(vfs, '/Library/ops/c.bin')).equals(data)).toBe(true);
    expect(await vfsCode(vfs.rmdir('/Library/ops'))).toBe('ENOTEMPTY');
    await vfs.setTags('/Library/ops/c.bin', ['x', 'y']);
    expect((await vfs.getTags('/Library/ops/c.bin')).sort()).toEqual(['x', 'y']);
    await vfs.setLocked('/Library/ops/c.bin', true);
    await vfs.setLocked('/Library/ops/c.bin', false);
    const fs = await vfs.statfs('/Library');
    expect(fs.used).toBeGreaterThanOrEqual(300_000);
    await vfs.unlink('/Library/ops/b.bin');
    await vfs.unlink('/Library/ops/c.bin');
    await vfs.rmdir('/Library/ops');
    expect(await vfsCode(vfs.stat('/Library/ops'))).toBe('ENOENT');
    const ls = await client.file.ls({ fullpath: '' });
    expect(ls.list.map((r) => r.filename)).not.toContain('ops');
  });

  it('a partial write into the middle of an existing file uploads the whole file', async () => {
    const { vfs, client } = t;
    const data = randomBytes(200_000);
    await vfs.writeFile('/Library/patch.bin', data);
    await vfs.flushAll();
    const h = await vfs.open('/Library/patch.bin', { write: true });
    await h.write(100_000, Buffer.from('PATCH'));
    await h.release();
    await vfs.flushAll();
    data.write('PATCH', 100_000);
    const info = await client.file.info({ fullpath: 'patch.bin', attribute: 10 });
    expect(Number(info.filesize)).toBe(200_000);
    expect(info.filehash).toBe(createHash('sha1').update(data).digest('hex'));
  });

  it('deleted files go to the recycle bin', async () => {
    const { vfs, client } = t;
    await vfs.writeFile('/Library/trash-me.txt', Buffer.from('bin'));
    await vfs.flushAll();
    await vfs.unlink('/Library/trash-me.txt');
    const bin = await client.file.recycle({});
    expect(bin.list.map((r) => r.fullpath)).toContain('trash-me.txt');
  });

  it('the local version keeps the name, the other is its conflict copy and in history', async () => {
    const { vfs, client } = t;
    await vfs.writeFile('/Library/conflict.txt', Buffer.from('v1'));
    await vfs.flushAll();
    const h = await vfs.open('/Library/conflict.txt', { write: true });
    await h.write(0, Buffer.from('local'));
    // Another client replaces the file meanwhile.
    const other = await t.openVfs({ feedIntervalMs: 0 });
    await other.writeFile('/Library/conflict.txt', Buffer.from('remote'));
    await other.flushAll();
    await h.release();
    await vfs.flushAll();
    // `other` runs without a feed: what it cached (its own write) is trusted for the TTL (1 s), then asked again.
    await waitFor('the other gateway to read the local version', async () => (await readAll(other, '/Library/conflict.txt')).toString(), { until: (text) => text === 'local', timeoutMs: 3000 });
    const history = await client.file.history({ fullpath: 'conflict.txt', size: 100 });
    const hashes = history.list.map((x) => x.filehash);
    expect(hashes).toContain(createHash('sha1').update('remote').digest('hex'));
    const names = (await client.file.ls({ fullpath: '', start: 0, size: 100 })).list.map((e) => e.filename);
    expect(names.filter((n) => n.startsWith('conflict (conflict '))).toHaveLength(1);
  });

  it('a read handle keeps the version it opened', async () => {
    const { vfs } = t;
    const first = randomBytes(3 * 1024 * 1024);
    await vfs.writeFile('/Library/version.bin', first);
    await vfs.flushAll();
    const h = await vfs.open('/Library/version.bin', { read: true });
    expect((await h.read(0, 1000)).equals(first.subarray(0, 1000))).toBe(true);
    const other = await t.openVfs({ feedIntervalMs: 0 });
    await other.writeFile('/Library/version.bin', randomBytes(3 * 1024 * 1024));
    await other.flushAll();
    expect((await h.read(2 * 1024 * 1024, 1000)).equals(first.subarray(2 * 1024 * 1024, 2 * 1024 * 1024 + 1000))).toBe(true);
    await h.release();
  });

  it('two gateways on one library see each other\'s changes through the feed within an interval', async () => {
    const other = await t.openVfs({ feedIntervalMs: 200 });
    expect((await other.readdir('/Library')).map((a) => a.name)).not.toContain('from-first.txt');
    await t.vfs.writeFile('/Library/from-first.txt', Buffer.from('hello'));
    await t.vfs.flushAll();
    const t0 = Date.now();
    await waitFor('the other gateway to list from-first.txt', async () => (await other.readdir('/Library')).map((a) => a.name), { until: (names) => names.includes('from-first.txt'), timeoutMs: 5000 });
    expect(Date.now() - t0).toBeLessThan(1500);
    expect((await readAll(other, '/Library/from-first.txt')).toString()).toBe('hello');
    await other.unlink('/Library/from-first.txt');
    await waitFor('the first gateway to drop from-first.txt', async () => (await t.vfs.readdir('/Library')).map((a) => a.name), { until: (names) => !names.includes('from-first.txt'), timeoutMs: 5000 });
    await other.mkdir('/Library/dir-from-other');
    await waitFor('the first gateway to list dir-from-other', async () => (await t.vfs.readdir('/Library')).map((a) => a.name), { until: (names) => names.includes('dir-from-other'), timeoutMs: 5000 });
  });

  it('an outage in the middle of an upload: retried until the service is back, then finished', async () => {
    const outageMs = Number(process.env.CLOUDLIB_TEST_OUTAGE_MS ?? 2000);
    const faulty = t.vfs.remoteOf('Library') as FaultyRemote;
    const data = randomBytes(1_000_000);
    const t0 = Date.now();
    await t.vfs.writeFile('/Library/outage.bin', data);
    faulty.down(outageMs, { cutInFlight: true });
    expect(t.vfs.status().uploads).toHaveLength(1);
    await waitFor('the upload queue to empty after the outage', () => t.vfs.status().uploads, { until: (u) => u.length === 0, timeoutMs: outageMs + 10_000 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(outageMs - 50);
    expect(faulty.injected.fail).toBeGreaterThan(0);
    const info = await t.client.file.info({ fullpath: 'outage.bin', attribute: 10 });
    expect(info.filehash).toBe(createHash('sha1').update(data).digest('hex'));
  });
});

describe.skipIf(!withService)('crash safety', { timeout: 60_000 }, () => {
  it('kill -9 with an acknowledged upload pending: the next start uploads it', async () => {
    const svc = await startTestService();
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-crash-'));
    try {
      const content = randomBytes(50_000).toString('base64');
      const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./crash-child.ts', import.meta.url)), JSON.stringify({
        baseUrl: svc.client.baseUrl, credentials: svc.client.credentials, dataDir, path: '/Library/crash.txt', content,
      })], { stdio: ['ignore', 'pipe', 'inherit'] });
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child.stdout!.on('data', (c: Buffer) => {
          out += c.toString();
          if (out.includes('ACK')) resolve();
        });
        child.on('exit', (c) => reject(new Error(`child exited early with ${c}`)));
      });
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      // Killed before any upload: the service does not have the file yet.
      expect(await new LibraryRemote({ client: svc.client }).stat('crash.txt')).toBeNull();
      const vfs = await createServiceVfs({ libraries: [{ name: 'Library', client: svc.client }], dataDir, feedIntervalMs: 0 });
      await vfs.flushAll({ timeoutMs: 20_000 });
      await vfs.close();
      const info = await svc.client.file.info({ fullpath: 'crash.txt', attribute: 10 });
      expect(info.filehash).toBe(createHash('sha1').update(content).digest('hex'));
    } finally {
      await rm(dataDir, { recursive: true, force: true });
      await svc.close();
    }
  });
});
