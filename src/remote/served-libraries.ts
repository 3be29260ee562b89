/**
 * The libraries a gateway serves, built once: each with its folder name, its id on the service, the
 * client holding its library authorization and the LibraryRemote over that client. The Vfs serves these
 * very entries (name, id, remote); the control socket calls the service with their clients. Libraries
 * added or removed at run time change this set and the Vfs together.
 */
import type { ServiceClient } from '../api/client.js';
import { resolveLibraries, VfsError, type LibrarySpec, type ResolvedLibrary } from '../vfs/index.js';
import { LibraryRemote } from './library-remote.js';
import { libraryKey, type KnownLibraries } from './known-libraries.js';
import type { BandwidthLimit } from '../shared/bandwidth-limit.js';

export interface ServedLibrary extends ResolvedLibrary {
  /** The client holding the library's authorization (`credentials.library`). */
  client: ServiceClient;
}

/**
 * The service could not be reached at start and a library is not known from an earlier run: there is
 * nothing to name its folder by, nothing to serve offline. One line, for the person starting the gateway.
 */
export class ServiceUnreachableAtStart extends Error {}

/**
 * Names the libraries of these clients (folder names unique, as resolveLibraries gives them), in order.
 * With `known`, what the service says of each library is remembered there, and a library the service
 * cannot be reached for now is named as it was last seen and served offline (`unreachable`); one never
 * seen is a ServiceUnreachableAtStart.
 */
export async function serveLibraries(specs: { name?: string; client: ServiceClient }[], known?: KnownLibraries, bandwidth?: BandwidthLimit): Promise<ServedLibrary[]> {
  const named: LibrarySpec[] = [];
  const seen: Parameters<KnownLibraries['remember']>[0] = [];
  for (const s of specs) {
    const remote = new LibraryRemote({ client: s.client, bandwidth });
    const orgClientId = s.client.credentials.library?.org_client_id;
    if (!known || orgClientId === undefined) {
      named.push({ name: s.name, remote });
      continue;
    }
    const key = libraryKey(orgClientId);
    try {
      const info = await remote.info();
      seen.push({ key, info });
      named.push({ name: s.name, remote, known: info });
    } catch (err) {
      if (!(err instanceof VfsError) || !err.unreachable) throw err;
      const last = known.get(key);
      if (!last) {
        throw new ServiceUnreachableAtStart(`the service at ${s.client.baseUrl} cannot be reached (${err.cause instanceof Error ? err.cause.message : err.message}) and library ${s.name !== undefined ? `'${s.name}'` : `of org_client_id ${orgClientId}`} was never served from this data folder: nothing to serve offline yet; start again once the service answers`);
      }
      named.push({ name: s.name, remote, known: { ...last, unreachable: err } });
    }
  }
  await known?.remember(seen);
  const resolved = await resolveLibraries(named);
  return resolved.map((r, i) => ({ ...r, client: specs[i]!.client }));
}

/** The served libraries by folder name, in the order they were added. */
export class ServedLibraries {
  private readonly byName = new Map<string, ServedLibrary>();

  constructor(libraries: ServedLibrary[]) {
    for (const l of libraries) this.add(l);
  }

  list(): ServedLibrary[] {
    return [...this.byName.values()];
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  add(library: ServedLibrary): void {
    if (this.byName.has(library.name)) throw new TypeError(`libraries: expected unique folder names, got '${library.name}' twice`);
    this.byName.set(library.name, library);
  }

  remove(name: string): void {
    this.byName.delete(name);
  }
}
