/**
 * LibrarySet: the libraries a gateway serves, each as one folder of the root. From configured library
 * authorizations, or from an enterprise credential (org/ls lists the libraries, org/bind authorizes each).
 * A folder is named after the library; names that collide get a stable suffix: ` (<library id>)` on every
 * library of the colliding group but the one with the smallest id.
 */
import type { ServiceClient } from '../api/client.js';
import { LibraryRemote } from '../api/remote.js';
import type { Remote } from './remote.js';
import { checkName } from './gateway-path.js';

export interface LibrarySpec {
  /** Folder name; default the library's name on the service. */
  name?: string;
  /** A client holding this library's authorization. */
  client?: ServiceClient;
  /** Or any Remote (tests, MemoryRemote). */
  remote?: Remote;
}

export interface ResolvedLibrary {
  /** Folder name in the gateway root. */
  name: string;
  /** Library id on the service. */
  id: string;
  remote: Remote;
}

/** The application title under which an enterprise gateway binds libraries. */
export const BIND_TITLE = 'cloudlib gateway';

export async function resolveLibraries(specs: LibrarySpec[]): Promise<ResolvedLibrary[]> {
  const found: { wanted: string; explicit: boolean; id: string; remote: Remote }[] = [];
  for (const spec of specs) {
    const remote = spec.remote ?? (spec.client ? new LibraryRemote({ client: spec.client }) : undefined);
    if (!remote) throw new TypeError('libraries: expected each library to have a client or a remote, got neither');
    const info = await remote.info();
    found.push({ wanted: sanitize(spec.name ?? info.name, info.id), explicit: spec.name !== undefined, id: info.id, remote });
  }
  return nameLibraries(found);
}

/** Lists the enterprise's libraries and binds each (one authorization per library; repeated binds return it). */
export async function enterpriseLibraries(client: ServiceClient, opts: { title?: string } = {}): Promise<LibrarySpec[]> {
  const { list } = await client.org.ls({});
  const out: LibrarySpec[] = [];
  for (const lib of list ?? []) {
    const auth = await client.org.bind({ org_id: String(lib.org_id), title: opts.title ?? BIND_TITLE });
    out.push({ client: client.withCredentials({ ...client.credentials, library: { org_client_id: auth.org_client_id, org_client_secret: auth.org_client_secret } }) });
  }
  return out;
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
