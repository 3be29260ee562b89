/** A WebDAV server over a Vfs over the embedded service (user alice/secret), for integration tests. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestVfs, type TestVfs } from './vfs.js';
import type { ServiceVfsOptions } from '../../src/remote/service-vfs.js';
import { createWebdavServer, type WebdavServerOptions } from '../../src/webdav/index.js';
import { silentLogger } from '../../src/shared/log.js';

export interface DavOverService {
  t: TestVfs;
  url: string;
  close(): Promise<void>;
}

export async function startDavOverService(opts: Partial<WebdavServerOptions> = {}, vfsOpts: Partial<ServiceVfsOptions> = {}): Promise<DavOverService> {
  const t = await startTestVfs(vfsOpts);
  const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-dav-int-'));
  const server = createWebdavServer({ vfs: t.vfs, users: [{ name: 'alice', password: 'secret', opName: 'Alice' }], dataDir, logger: silentLogger, ...opts });
  const url = await server.listen('127.0.0.1', 0);
  return {
    t, url,
    async close() {
      await server.close();
      await t.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
