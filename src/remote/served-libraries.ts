/**
 * The libraries a gateway serves, built once: each with its folder name, its id on the service, the
 * client holding its library authorization and the LibraryRemote over that client. The Vfs serves these
 * very entries (name, id, remote); the control socket calls the service with their clients. Libraries
 * added or removed at run time change this set and the Vfs together.
 */
import type { ServiceClient } from '../api/client.js';
import { resolveLibraries, type ResolvedLibrary } from '../vfs/index.js';
import { LibraryRemote } from './library-remote.js';

export interface ServedLibrary extends ResolvedLibrary {
  /** The client holding the library's authorization (`credentials.library`). */
  client: ServiceClient;
}

/** Names the libraries of these clients (folder names unique, as resolveLibraries gives them), in order. */
export async function serveLibraries(specs: { name?: string; client: ServiceClient }[]): Promise<ServedLibrary[]> {
  const resolved = await resolveLibraries(specs.map((s) => ({ name: s.name, remote: new LibraryRemote({ client: s.client }) })));
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
