/**
 * A write beyond the largest file allowed (EFBIG) or beyond the library's free space (ENOSPC) is refused
 * at the write, before anything of it is journaled; through WebDAV a declared length beyond them is 507
 * before any byte of the body is taken.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createVfs, MemoryRemote, type GatewayVfs } from '../../../src/vfs/index.js';
import { createWebdavServer } from '../../../src/webdav/index.js';
import { silentLogger } from '../../../src/shared/log.js';
import { vfsCode } from '../../support/vfs.js';
import { dav } from '../../support/dav-http.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function gateway(remote: MemoryRemote, maxFileBytes?: number): Promise<{ vfs: GatewayVfs; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'cloudlib-limits-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir: dir, feedIntervalMs: 0, maxFileBytes });
  cleanups.push(() => vfs.close());
  return { vfs, dir };
}

const GiB = 1024 ** 3;

describe('size limits at the write', () => {
  it('a 3-byte write at 100 GiB is refused with EFBIG beyond the largest file; nothing is journaled', async () => {
    const { vfs } = await gateway(new MemoryRemote({ name: 'A', id: '1' }), 1024 * 1024);
    const h = await vfs.open('/A/sparse.bin', { write: true, create: true });
    expect(await vfsCode(h.write(100 * GiB, Buffer.from('END')))).toBe('EFBIG');
    expect(await vfsCode(h.truncate(100 * GiB))).toBe('EFBIG');
    expect(await h.write(0, Buffer.from('small'))).toBe(5);
    await h.release();
    expect((await vfs.stat('/A/sparse.bin')).size).toBe(5);
    expect(await vfsCode(vfs.writeFile('/A/whole.bin', Buffer.alloc(2 * 1024 * 1024)))).toBe('EFBIG');
    expect(await vfsCode(vfs.stat('/A/whole.bin'))).toBe('ENOENT');
    expect(vfs.status().uploads.map((u) => u.fullpath)).not.toContain('whole.bin');
  });

  it('growth beyond the library\'s free space is ENOSPC: a sparse write, a declared length, a body that goes on', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1', capacity: 1000 });
    remote.putFile('there.txt', Buffer.alloc(400));
    const { vfs } = await gateway(remote);
    const h = await vfs.open('/A/new.bin', { write: true, create: true });
    expect(await vfsCode(h.write(100 * GiB, Buffer.from('END')))).toBe('ENOSPC');
    expect(await h.write(0, Buffer.alloc(500))).toBe(500);
    await h.release();
    expect(await vfsCode(vfs.writeFile('/A/declared.bin', Buffer.alloc(0), undefined, { size: 10 * GiB }))).toBe('ENOSPC');
    async function* body() { for (let i = 0; i < 10; i++) yield Buffer.alloc(100); }
    expect(await vfsCode(vfs.writeFile('/A/streamed.bin', body()))).toBe('ENOSPC');
    expect(await vfsCode(vfs.stat('/A/declared.bin'))).toBe('ENOENT');
    expect(await vfsCode(vfs.stat('/A/streamed.bin'))).toBe('ENOENT');
    // Rewriting a file within its own size needs no more room.
    await vfs.writeFile('/A/there.txt', Buffer.alloc(300));
  });

  it('through WebDAV a declared length beyond the library\'s free space is 507, the file unchanged', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1', capacity: 1000 });
    const { vfs, dir } = await gateway(remote);
    const server = createWebdavServer({ vfs, users: [{ name: 'alice', password: 'secret' }], dataDir: join(dir, 'webdav'), logger: silentLogger });
    const url = await server.listen('127.0.0.1', 0);
    cleanups.push(() => server.close());
    const put = await dav(url, 'PUT', '/A/big.bin', { body: Buffer.alloc(2000) });
    expect(put.status).toBe(507);
    expect((await dav(url, 'GET', '/A/big.bin')).status).toBe(404);
    expect((await dav(url, 'PUT', '/A/fits.bin', { body: Buffer.alloc(900) })).status).toBe(201);
  });
});
