/**
 * Library paths and names: normalisation (no leading/trailing slash, no empty segment) and the name
 * rules (no `/`, no NUL, not `.` or `..`, not empty, at most 255 UTF-8 bytes).
 */
import { badParam } from './fault.js';

export const MAX_NAME_BYTES = 255;

/** Why `name` is not a valid file or folder name, or undefined when it is. */
export function nameProblem(name: string): string | undefined {
  if (name === '') return 'a non-empty name';
  if (name === '.' || name === '..') return "a name other than '.' and '..'";
  if (name.includes('/')) return "a name without '/'";
  if (name.includes('\0')) return 'a name without NUL';
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES) return `a name of at most ${MAX_NAME_BYTES} UTF-8 bytes`;
  return undefined;
}

/**
 * Normalises a path parameter: backslashes are kept (they are legal in names), leading, trailing and
 * repeated slashes are dropped; every segment must be a valid name. The root is ''.
 */
export function normalizePath(param: string, raw: string, opts: { allowRoot?: boolean } = {}): string {
  const segments = raw.split('/').filter((s) => s !== '');
  for (const s of segments) {
    const problem = nameProblem(s);
    if (problem) throw badParam(param, `a path whose every segment is ${problem}`, raw);
  }
  const path = segments.join('/');
  if (path === '' && !opts.allowRoot) throw badParam(param, 'a path other than the root', raw);
  return path;
}

export function parentOf(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? '' : path.slice(0, i);
}

/** `path` and every folder above it, nearest first (the root, '', is not among them). */
export function pathAndAncestors(path: string): string[] {
  const out: string[] = [];
  for (let p = path; p !== ''; p = parentOf(p)) out.push(p);
  return out;
}

export function baseOf(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

export function joinPath(folder: string, name: string): string {
  return folder === '' ? name : `${folder}/${name}`;
}

/** True when `path` is `ancestor` or below it. */
export function isWithin(path: string, ancestor: string): boolean {
  return ancestor === '' || path === ancestor || path.startsWith(`${ancestor}/`);
}

/** `name (n).ext` — the numbered name of the n-th duplicate (`report (1).docx`, `photos (2)`). */
export function numberedName(name: string, n: number, isDir: boolean): string {
  const dot = isDir ? -1 : name.lastIndexOf('.');
  if (dot <= 0) return `${name} (${n})`;
  return `${name.slice(0, dot)} (${n})${name.slice(dot)}`;
}
