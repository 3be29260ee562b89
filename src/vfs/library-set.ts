/**
 * LibrarySet: the libraries a gateway serves, each as one folder of the root, each reached through its
 * Remote. A folder is named after the library; names that collide get a stable suffix: ` (<library id>)`
 * on every library of the colliding group but the one with the smallest id.
 */
import type { Remote, RemoteInfo } from './remote.js';
import { checkName } from './gateway-path.js';
import type { VfsError } from './types.js';

export interface LibrarySpec {
  /** Folder name; default the library's name on the service. */
  name?: string;
  /** How the library is reached (src/remote/'s LibraryRemote over the service, a MemoryRemote in tests). */
  remote: Remote;
  /**
   * The library's id and name, asked already (not asked again); or as last seen, when the service
   * cannot be reached now (`unreachable` says what the call said): served offline from the start.
   */
  known?: RemoteInfo & { unreachable?: VfsError };
}

export interface ResolvedLibrary {
  /** Folder name in the gateway root. */
  name: string;
  /** Library id on the service. */
  id: string;
  remote: Remote;
  /** The service could not be reached when the library was named (from what was known of it): served offline from the start. */
  unreachable?: VfsError;
}

export async function resolveLibraries(specs: LibrarySpec[]): Promise<ResolvedLibrary[]> {
  const found: { wanted: string; explicit: boolean; id: string; remote: Remote; unreachable?: VfsError }[] = [];
  for (const spec of specs) {
    const remote = spec.remote;
    if (!remote) throw new TypeError('libraries: expected each library to have a remote, got none');
    const info = spec.known ?? await remote.info();
    found.push({ wanted: sanitize(spec.name ?? info.name, info.id), explicit: spec.name !== undefined, id: info.id, remote, ...(spec.known?.unreachable ? { unreachable: spec.known.unreachable } : {}) });
  }
  return nameLibraries(found);
}

/** Gives each library a unique folder name (stable: depends only on names and ids). */
export function nameLibraries<T extends { wanted: string; id: string }>(libs: T[]): (Omit<T, 'wanted'> & { name: string })[] {
  const groups = new Map<string, T[]>();
  for (const l of libs) groups.set(l.wanted, [...(groups.get(l.wanted) ?? []), l]);
  const taken = new Set<string>();
  const out: (Omit<T, 'wanted'> & { name: string })[] = [];
  for (const l of libs) {
    const group = groups.get(l.wanted)!;
    const first = [...group].sort((a, b) => compareIds(a.id, b.id))[0];
    let name = group.length === 1 || first === l ? l.wanted : `${l.wanted} (${l.id})`;
    for (let n = 2; taken.has(name); n++) name = `${l.wanted} (${l.id}-${n})`;
    taken.add(name);
    const { wanted: _w, ...rest } = l;
    out.push({ ...rest, name });
  }
  return out;
}

function compareIds(a: string, b: string): number {
  const na = Number(a);
  const nb = Number(b);
  if (Number.isFinite(na) && Number.isFinite(nb)) return na - nb;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A library name usable as a folder name. */
function sanitize(name: string, id: string): string {
  const cleaned = name.replace(/[/\0]/g, '_').trim();
  try {
    checkName(cleaned);
    return cleaned;
  } catch {
    return `library ${id}`;
  }
}
