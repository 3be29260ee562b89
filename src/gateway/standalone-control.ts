/**
 * The control socket of `cloudlib mount` and `cloudlib webdav` run on their own, at
 * `<data>/control.sock` like `cloudlib up`'s: status (pending uploads among it), flush, upload and
 * download, copies, history, and every method of the service the configuration has credentials for.
 * The libraries are the configuration's: `library add` and `library remove` answer that `cloudlib up`
 * does that.
 */
import { ServiceClient, type Credentials } from '../api/client.js';
import { ControlServer } from '../control/server.js';
import { endpointMethods } from '../control/methods.js';
import { gatewayMethods, type AdminVfs } from '../control/gateway-methods.js';
import { RpcErrorCode, RpcFailure } from '../control/protocol.js';
import { watchMethod } from '../control/watch-method.js';
import type { ServedLibrary } from '../remote/served-libraries.js';
import type { Logger } from '../shared/log.js';
import type { GatewayConfig } from './config.js';
import { controlSocketOf } from './data-folder.js';

export interface StandaloneControl {
  readonly socketPath: string;
  close(): Promise<void>;
}

export async function startStandaloneControl(opts: {
  command: 'mount' | 'webdav';
  config: GatewayConfig;
  vfs: AdminVfs;
  libraries: () => ServedLibrary[];
  logger: Logger;
  describe: () => Record<string, unknown>;
}): Promise<StandaloneControl> {
  const svc = opts.config.service;
  const clients: ServiceClient[] = [];
  const roleClient = (credentials: Credentials | undefined): ServiceClient | undefined => {
    if (!svc || !credentials) return undefined;
    const c = new ServiceClient({ baseUrl: svc.base_url, credentials, uploadHeaderPrefix: svc.upload_header_prefix });
    clients.push(c);
    return c;
  };
  const roles = {
    enterprise: roleClient(svc?.enterprise ? { enterprise: svc.enterprise } : undefined),
    partner: roleClient(svc?.partner ? { partner: svc.partner } : undefined),
    token: roleClient(svc?.user ? { user: svc.user } : undefined),
  };
  const notHere = async (): Promise<never> => {
    throw new RpcFailure(RpcErrorCode.InvalidParams, `\`cloudlib ${opts.command}\` serves the libraries of its configuration: libraries are added and removed at run time by \`cloudlib up\``);
  };
  const startedMs = Date.now();
  const target = {
    vfs: opts.vfs,
    libraries: opts.libraries,
    clientFor: (role: 'enterprise' | 'partner' | 'token') => roles[role],
    addLibrary: notHere,
    bindLibrary: notHere,
    removeLibrary: notHere,
    describe: () => ({ ...opts.describe(), service_url: svc?.base_url ?? null, embedded_service: false, uptime_s: Math.round((Date.now() - startedMs) / 1000) }),
  };
  const server = new ControlServer({
    socketPath: controlSocketOf(opts.config.data),
    methods: [...endpointMethods(target), ...gatewayMethods(target), watchMethod(opts.vfs.changes)],
    logger: opts.logger.child({ part: 'control' }),
  });
  try {
    await server.start();
  } catch (err) {
    await Promise.all(clients.map((c) => c.close()));
    throw err;
  }
  return {
    socketPath: server.socketPath,
    async close() {
      await server.close();
      await Promise.all(clients.map((c) => c.close()));
    },
  };
}
