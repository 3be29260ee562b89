/**
 * startTestVfs(): a GatewayVfs over a real embedded service on an ephemeral port, with a temporary data
 * folder; `close()` stops both and removes the folders. The service comes from test/support/service.ts.
 */
import { access, mkdtemp, rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServiceClient } from '../../src/api/client.js';
import { VfsError } from '../../src/vfs/index.js';
import type { GatewayVfs } from '../../src/vfs/gateway-vfs.js';
import { createServiceVfs, type ServiceVfsOptions } from '../../src/remote/service-vfs.js';

/** What test/support/service.ts returns (the part used here). */
export interface TestService {
  service: unknown;
  client: ServiceClient;
  dir: string;
  close(): Promise<void>;
}

export interface TestVfs {
  vfs: GatewayVfs;
  service: unknown;
  /** A client of the same library (acts as "another client" of the service). */
  client: ServiceClient;
  /** The service's test handle (start another Vfs on it with `openVfs`). */
  testService: TestService;
  /** The Vfs's data folder. */
  dataDir: string;
  /** Another Vfs on the same library with its own data folder (closed by `close()`). */
  openVfs(opts?: Partial<ServiceVfsOptions>): Promise<GatewayVfs>;
  close(): Promise<void>;
}

/** True when the embedded service's test support is part of this tree (integration tests need it). */
export async function serviceAvailable(): Promise<boolean> {
  try {
    await access(fileURLToPath(new URL('./service.ts', import.meta.url)));
    return true;
  } catch {
    return false;
  }
}

export async function startTestService(): Promise<TestService> {
  const mod: typeof import('./service.js') = await import('./service.js');
  return mod.startTestService();
}

export async function startTestVfs(opts: Partial<ServiceVfsOptions> & { testService?: TestService } = {}): Promise<TestVfs> {
  const { testService: given, ...vfsOpts } = opts;
  const testService = given ?? (await startTestService());
  const extra: { vfs: GatewayVfs; dir: string }[] = [];
  const open = async (o: Partial<ServiceVfsOptions> = {}): Promise<{ vfs: GatewayVfs; dir: string }> => {
    const dir = o.dataDir ?? (await mkdtemp(join(tmpdir(), 'cloudlib-testvfs-')));
    const vfs = await createServiceVfs({
      libraries: [{ name: 'Library', client: testService.client }],
      feedIntervalMs: 200,
      upload: { retryBaseMs: 50, retryMaxMs: 500 },
      ...o,
      dataDir: dir,
    });
    return { vfs, dir };
  };
  const first = await open(vfsOpts);
  return {
    vfs: first.vfs,
    service: testService.service,
    client: testService.client,
    testService,
    dataDir: first.dir,
    async openVfs(o = {}) {
      const v = await open(o);
      extra.push(v);
      return v.vfs;
    },
    async close() {
      for (const v of [first, ...extra]) {
        await v.vfs.close().catch(() => undefined);
        await rm(v.dir, { recursive: true, force: true });
      }
      if (!given) await testService.close();
    },
  };
}

/** The VfsError code a call ends with, or 'ok' (other errors are rethrown). */
export async function vfsCode(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    if (err instanceof VfsError) return err.code;
    throw err;
  }
}

/** A file's whole content through a read handle of the Vfs, as text. */
export async function readAll(vfs: GatewayVfs, path: string): Promise<string> {
  const h = await vfs.open(path, { read: true });
  try {
    return (await h.read(0, (await h.stat()).size + 1)).toString();
  } finally {
    await h.release();
  }
}
