/**
 * Gateway paths: `/` lists the libraries, `/<library>/<fullpath>` is an object inside one. Parsing
 * validates every component against what the service accepts (no NUL, at most 255 UTF-8 bytes, not `.`
 * or `..`), so a refused name fails here, before anything is changed.
 */
import { MAX_NAME_BYTES, VfsError } from './types.js';

export { MAX_NAME_BYTES };

export interface GatewayPath {
  /** Normalised gateway path (`/`, `/Lib`, `/Lib/a/b`). */
  path: string;
  /** Library folder name, or undefined for the root. */
  library?: string;
  /** Library-relative path ('' = the library's root). */
  fullpath: string;
}

/** Checks one name; throws EINVAL / ENAMETOOLONG with "expected X, got Y". */
export function checkName(name: string): void {
  if (name === '' || name === '.' || name === '..') throw new VfsError('EINVAL', `expected a file or folder name, got '${name}'`);
  if (name.includes('\0')) throw new VfsError('EINVAL', `expected a name without NUL characters, got ${JSON.stringify(name)}`);
  if (name.includes('/')) throw new VfsError('EINVAL', `expected a name without '/', got '${name}'`);
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > MAX_NAME_BYTES) throw new VfsError('ENAMETOOLONG', `expected a name of at most ${MAX_NAME_BYTES} UTF-8 bytes, got ${bytes} bytes`);
}

export function parseGatewayPath(path: string): GatewayPath {
  if (typeof path !== 'string' || !path.startsWith('/')) throw new VfsError('EINVAL', `expected an absolute path starting with '/', got ${JSON.stringify(path)}`);
  const parts = path.split('/').filter((p) => p !== '');
  for (const p of parts) checkName(p);
  if (parts.length === 0) return { path: '/', fullpath: '' };
  return { path: `/${parts.join('/')}`, library: parts[0], fullpath: parts.slice(1).join('/') };
}

/** The gateway path of a library-relative path. */
export function gatewayPathOf(library: string, fullpath: string): string {
  return fullpath === '' ? `/${library}` : `/${library}/${fullpath}`;
}
