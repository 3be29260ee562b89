/**
 * Mounts over one service and one data folder kept across them, as successive starts of a gateway: each
 * mount a child (startMount) serving the service's library as `Lib`, with the journal and caches in the
 * same data folder, so a mount started after another finds what the earlier one left. `stop()`, in the
 * teardown, stops every mount started here, removes the data folder and closes the service.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServiceClient } from '../../../src/api/client.js';
import { startMount, type MountHarness, type StartMountOptions } from './harness.js';

/** A service the mounts reach: in this process (startTestService) or in its own (startServiceProcess). */
export interface MountedService {
  client: ServiceClient;
  close(): Promise<void>;
}

export class MountsOverService<S extends MountedService> {
  private readonly started: MountHarness[] = [];

  private constructor(readonly service: S, readonly dataDir: string) {}

  /** `service` (closed again when the data folder cannot be made) and a fresh data folder named `prefix`…. */
  static async start<S extends MountedService>(service: S, prefix: string): Promise<MountsOverService<S>> {
    try {
      return new MountsOverService(service, await mkdtemp(join(tmpdir(), prefix)));
    } catch (err) {
      await service.close();
      throw err;
    }
  }

  /** Starts a mount child over the service and the data folder; `opts.env` is added to what names them. */
  async mount(opts: Omit<StartMountOptions, 'mountpoint'> = {}): Promise<MountHarness> {
    const { baseUrl, credentials } = this.service.client;
    const h = await startMount({
      mount: opts.mount,
      env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_DATA_DIR: this.dataDir, ...opts.env, FUSE_TEST_SERVICE: JSON.stringify({ baseUrl, credentials }) },
    });
    this.started.push(h);
    return h;
  }

  /** Teardown: every mount started here stopped (again, if a test stopped it), the data folder removed, the service closed. */
  async stop(): Promise<void> {
    for (const h of this.started.splice(0)) await h.stop();
    await rm(this.dataDir, { recursive: true, force: true });
    await this.service.close();
  }
}
