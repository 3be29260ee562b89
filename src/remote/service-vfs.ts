/**
 * The gateway's Vfs over the service: each library reached through a LibraryRemote over a ServiceClient
 * holding its authorization, given one by one or all of an enterprise's (org/ls lists them, org/bind
 * authorizes each).
 */
import type { ServiceClient } from '../api/client.js';
import { openVfs, type CreateVfsOptions } from '../vfs/index.js';
import type { GatewayVfs } from '../vfs/gateway-vfs.js';
import { toVfsError } from './library-remote.js';
import { serveLibraries, ServiceUnreachableAtStart, type ServedLibrary } from './served-libraries.js';
import { KnownLibraries } from './known-libraries.js';
import type { BandwidthLimit } from '../shared/bandwidth-limit.js';

/** A library by authorization: a client holding `credentials.library`. */
export interface ServiceLibrarySpec {
  /** Folder name; default the library's name on the service. */
  name?: string;
  client: ServiceClient;
}

export interface ServiceVfsOptions extends Omit<CreateVfsOptions, 'libraries'> {
  libraries?: ServiceLibrarySpec[];
  /** Every library of an enterprise: listed with org/ls and bound with org/bind. */
  enterprise?: { client: ServiceClient; title?: string };
  /**
   * Where each library's id and name are kept as last seen: a start while the service cannot be reached
   * serves the libraries known there offline (served-libraries.ts). None: every start needs the service.
   */
  knownLibrariesFile?: string;
  /** The bandwidth limit of every library's uploads and downloads (LibraryRemote). Default none. */
  bandwidth?: BandwidthLimit;
}

/** The application title under which an enterprise gateway binds libraries. */
export const BIND_TITLE = 'cloudlib gateway';

/** The Vfs over the service's libraries, and the set of served libraries it serves (for the control socket). */
export async function createServedVfs(opts: ServiceVfsOptions): Promise<{ vfs: GatewayVfs; libraries: ServedLibrary[] }> {
  const specs: ServiceLibrarySpec[] = [...(opts.libraries ?? [])];
  if (opts.enterprise) {
    try {
      specs.push(...(await enterpriseLibraries(opts.enterprise.client, { title: opts.enterprise.title })));
    } catch (err) {
      const e = toVfsError(err, '');
      if (!e.unreachable) throw err;
      throw new ServiceUnreachableAtStart(`the service at ${opts.enterprise.client.baseUrl} cannot be reached (${e.message}): the enterprise's libraries are listed by the service at every start; name them under service.libraries to start without it`);
    }
  }
  if (specs.length === 0) throw new TypeError('createServiceVfs: expected at least one library (libraries or enterprise), got none');
  const known = opts.knownLibrariesFile ? await KnownLibraries.open(opts.knownLibrariesFile) : undefined;
  const libraries = await serveLibraries(specs, known, opts.bandwidth);
  const { libraries: _l, enterprise: _e, knownLibrariesFile: _k, bandwidth: _b, ...rest } = opts;
  return { vfs: await openVfs({ ...rest, libraries }), libraries };
}

export async function createServiceVfs(opts: ServiceVfsOptions): Promise<GatewayVfs> {
  return (await createServedVfs(opts)).vfs;
}

/** Lists the enterprise's libraries and binds each (one authorization per library; repeated binds return it). */
export async function enterpriseLibraries(client: ServiceClient, opts: { title?: string } = {}): Promise<ServiceLibrarySpec[]> {
  const { list } = await client.org.ls({});
  const out: ServiceLibrarySpec[] = [];
  for (const lib of list ?? []) {
    const auth = await client.org.bind({ org_id: String(lib.org_id), title: opts.title ?? BIND_TITLE });
    out.push({ client: client.withCredentials({ ...client.credentials, library: { org_client_id: auth.org_client_id, org_client_secret: auth.org_client_secret } }) });
  }
  return out;
}
