/**
 * A WebDAV server over an in-memory Vfs in this process, for e2e tests and conformance runs:
 * `tsx test/support/serve-memory-dav.ts [PORT]` prints the URL; user `alice`, password `secret`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryVfs, type MemoryVfsOptions } from '../../src/vfs/index.js';
import { createWebdavServer, type WebdavServer, type WebdavServerOptions } from '../../src/webdav/index.js';
import { silentLogger, type Logger } from '../../src/shared/log.js';
import { GatewayMetrics } from '../../src/gateway/metrics.js';

export interface MemoryDav {
  url: string;
  server: WebdavServer;
  vfs: Awaited<ReturnType<typeof createMemoryVfs>>['vfs'];
  remotes: Awaited<ReturnType<typeof createMemoryVfs>>['remotes'];
  dataDir: string;
  /** The metrics the server counts into (as `cloudlib up` passes them). */
  metrics: GatewayMetrics;
  close(): Promise<void>;
}

export async function startMemoryDav(opts: { port?: number; names?: string[]; logger?: Logger; emptyCreateGraceMs?: number; server?: Partial<WebdavServerOptions>; vfsOptions?: MemoryVfsOptions } = {}): Promise<MemoryDav> {
  const { vfs, remotes } = await createMemoryVfs({ ...opts.vfsOptions, names: opts.names ?? ['Library'] });
  const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-dav-'));
  const metrics = new GatewayMetrics();
  const server = createWebdavServer({
    vfs,
    metrics,
    users: [{ name: 'alice', password: 'secret', opName: 'Alice' }, { name: 'reader', password: 'secret', readOnly: true }],
    dataDir,
    logger: opts.logger ?? silentLogger,
    emptyCreateGraceMs: opts.emptyCreateGraceMs,
    ...opts.server,
  });
  const url = await server.listen('127.0.0.1', opts.port ?? 0);
  return {
    url, server, vfs, remotes, dataDir, metrics,
    async close() {
      await server.close();
      await vfs.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const { createLogger } = await import('../../src/shared/log.js');
  const dav = await startMemoryDav({ port: Number(process.argv[2] ?? 0), logger: createLogger({ level: process.env.LOG_LEVEL ?? 'warn' }) });
  process.stdout.write(`${dav.url}\n`);
  const stop = (): void => { void dav.close().then(() => process.exit(0)); };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
