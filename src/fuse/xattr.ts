/**
 * Extended attributes the mount exposes: the service's tags and lock of a file or folder.
 *
 * - `user.cloudlib.tags`: the tags separated by `;` (the service's own separator), UTF-8. Setting it
 *   replaces all tags; an empty value or removing the attribute clears them.
 * - `user.cloudlib.lock`: `1` when locked on the service, else `0`. Set `1`/`0` (also `true`/`false`,
 *   `locked`/`unlocked`) to lock or unlock; removing it unlocks.
 * - `user.cloudlib.state`: the file's state (src/vfs/file-state.ts: `synced`, `pending`, `uploading`,
 *   `offline-only`, `conflict`, `locked-by <name>`), read-only (setting or removing it is EPERM); folders
 *   and versions have none (ENODATA).
 * - `user.cloudlib.pin`: `1` when kept on this machine (pinned, or inside a pinned folder), else `0`.
 *   Set `1`/`0` (also `true`/`false`) to pin or unpin; removing it unpins.
 * No other attribute is stored: reading one answers ENODATA, setting one ENOTSUP.
 */
import { FuseOpError } from './errno.js';

export const XATTR_TAGS = 'user.cloudlib.tags';
export const XATTR_LOCK = 'user.cloudlib.lock';
export const XATTR_STATE = 'user.cloudlib.state';
export const XATTR_PIN = 'user.cloudlib.pin';
/** The attributes that can be set. */
export const XATTR_NAMES: readonly string[] = [XATTR_TAGS, XATTR_LOCK, XATTR_PIN];
/** Every attribute (the state is read-only). */
export const XATTR_READABLE: readonly string[] = [...XATTR_NAMES, XATTR_STATE];

/** Largest value accepted for an attribute, bytes. */
export const XATTR_VALUE_MAX = 64 * 1024;

/** setxattr flags (linux/xattr.h). */
export const XATTR_CREATE = 1;
export const XATTR_REPLACE = 2;

export function encodeTags(tags: readonly string[]): Buffer {
  return Buffer.from(tags.join(';'), 'utf8');
}

/** Parses a tags value: `;`-separated (newlines and commas are accepted too), trimmed, empty and duplicate names dropped. */
export function decodeTags(value: Buffer): string[] {
  const text = value.toString('utf8');
  if (text.includes('\0')) throw new FuseOpError('EINVAL', `${XATTR_TAGS}: expected text without NUL bytes, got ${value.length} bytes with NUL`);
  const tags: string[] = [];
  for (const raw of text.split(/[;\n,]/)) {
    const tag = raw.trim();
    if (tag && !tags.includes(tag)) tags.push(tag);
  }
  return tags;
}

export function encodeLock(locked: boolean): Buffer {
  return Buffer.from(locked ? '1' : '0');
}

export function decodeLock(value: Buffer): boolean {
  const text = value.toString('utf8').trim().toLowerCase();
  if (text === '1' || text === 'true' || text === 'locked') return true;
  if (text === '0' || text === 'false' || text === 'unlocked') return false;
  throw new FuseOpError('EINVAL', `${XATTR_LOCK}: expected 1 or 0, got '${text.slice(0, 40)}'`);
}

export function decodePin(value: Buffer): boolean {
  const text = value.toString('utf8').trim().toLowerCase();
  if (text === '1' || text === 'true') return true;
  if (text === '0' || text === 'false') return false;
  throw new FuseOpError('EINVAL', `${XATTR_PIN}: expected 1 or 0, got '${text.slice(0, 40)}'`);
}

/** Copies `value` into the kernel's buffer the getxattr/listxattr way: size 0 asks for the length; too small is ERANGE. */
export function fillXattrBuffer(target: Buffer, value: Buffer): number {
  if (target.length === 0) return value.length;
  if (value.length > target.length) throw new FuseOpError('ERANGE', `attribute value of ${value.length} bytes, buffer of ${target.length}`);
  value.copy(target);
  return value.length;
}

/** The NUL-terminated name list of listxattr. */
export function encodeXattrNames(names: readonly string[]): Buffer {
  return Buffer.from(names.map((n) => `${n}\0`).join(''), 'utf8');
}
