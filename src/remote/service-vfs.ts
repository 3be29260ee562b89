/**
 * The gateway's Vfs over the service: each library reached through a LibraryRemote over a ServiceClient
 * holding its authorization, given one by one or all of an enterprise's (org/ls lists them, org/bind
 * authorizes each).
 */
import type { ServiceClient } from '../api/client.js';
import { openVfs, type CreateVfsOptions } from '../vfs/index.js';
import type { GatewayVfs } from '../vfs/gateway-vfs.js';
import { serveLibraries, type ServedLibrary } from './served-libraries.js';

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
}

/** The application title under which an enterprise gateway binds libraries. */
export const BIND_TITLE = 'cloudlib gateway';

/** The Vfs over the service's libraries, and the set of served libraries it serves (for the control socket). */
export async function createServedVfs(opts: ServiceVfsOptions): Promise<{ vfs: GatewayVfs; libraries: ServedLibrary[] }> {
  const specs: ServiceLibrarySpec[] = [...(opts.libraries ?? [])];
  if (opts.enterprise) specs.push(...(await enterpriseLibraries(opts.enterprise.client, { title: opts.enterprise.title })));
  if (specs.length === 0) throw new TypeError('createServiceVfs: expected at least one library (libraries or enterprise), got none');
  const libraries = await serveLibraries(specs);
  const { libraries: _l, enterprise: _e, ...rest } = opts;
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
