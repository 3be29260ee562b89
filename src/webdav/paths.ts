/**
 * Request URLs ↔ gateway paths. Every segment is percent-decoded and checked (no `/`, NUL, `.` or `..`
 * inside a segment); hrefs are written back percent-encoded, folders with a trailing slash.
 */
import { DavError } from './errors.js';

/** The gateway path of a request target (`/` for the root). Throws DavError 400 on a malformed path. */
export function pathFromUrl(url: string): string {
  let pathname = url;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    try {
      pathname = new URL(url).pathname;
    } catch {
      throw new DavError(400, `expected a valid URL, got '${url.slice(0, 200)}'`);
    }
  }
  const q = pathname.search(/[?#]/);
  if (q >= 0) pathname = pathname.slice(0, q);
  if (!pathname.startsWith('/')) throw new DavError(400, `expected an absolute path, got '${pathname.slice(0, 200)}'`);
  const segments: string[] = [];
  for (const raw of pathname.split('/')) {
    if (raw === '') continue;
    let s: string;
    try {
      s = decodeURIComponent(raw);
    } catch {
      throw new DavError(400, `expected a percent-encoded path segment, got '${raw.slice(0, 200)}'`);
    }
    if (s === '.' || s === '..' || s.includes('/') || s.includes('\0')) throw new DavError(400, `expected a file or folder name, got '${raw.slice(0, 200)}'`);
    segments.push(s);
  }
  return '/' + segments.join('/');
}

/** The href of a gateway path (folders end with `/`). */
export function hrefOf(path: string, isDir: boolean): string {
  if (path === '/') return '/';
  const enc = path.split('/').map((s) => encodeURIComponent(s)).join('/');
  return isDir ? enc + '/' : enc;
}

export function parentPath(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

export function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** Joins a folder path and a child name. */
export function childPath(folder: string, name: string): string {
  return folder === '/' ? `/${name}` : `${folder}/${name}`;
}

/** A path is a library folder or the root (not created, removed or replaced through WebDAV). */
export function isTopLevel(path: string): boolean {
  return path.split('/').filter((s) => s !== '').length <= 1;
}
