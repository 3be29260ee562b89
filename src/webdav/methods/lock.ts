/**
 * LOCK and UNLOCK (RFC 4918 §9.10-9.11): exclusive and shared write locks, depth 0 or infinity, refresh,
 * and locks on unmapped URLs (an empty file is created, RFC 4918 §7.3). An exclusive lock on a file also
 * takes the file's lock on the service, released on UNLOCK or when the lock times out.
 */
import { Readable } from 'node:stream';
import { DavRequest } from '../context.js';
import { DavError, vfsCodeOf } from '../errors.js';
import type { DavLock } from '../lock-table.js';
import { isTopLevel } from '../paths.js';
import { activeLockXml } from '../properties.js';
import { sendStatus, sendXml } from '../reply.js';
import { child, DAV, parseXml, serializeContent, XML_HEAD, XmlBodyError } from '../xml.js';

/** Longest lock lifetime granted, s (also what `Infinite` gets). */
export const MAX_LOCK_TIMEOUT_S = 7 * 24 * 3600;
/** Lifetime when the client names none, s. */
export const DEFAULT_LOCK_TIMEOUT_S = 3600;

/** Parses `Timeout: Second-600, Infinite` (the first usable value). */
export function parseTimeout(header: string | undefined): number {
  if (!header) return DEFAULT_LOCK_TIMEOUT_S;
  for (const part of header.split(',')) {
    const p = part.trim();
    if (/^infinite$/i.test(p)) return MAX_LOCK_TIMEOUT_S;
    const m = /^second-(\d+)$/i.exec(p);
    if (m) return Math.max(1, Math.min(Number(m[1]), MAX_LOCK_TIMEOUT_S));
  }
  return DEFAULT_LOCK_TIMEOUT_S;
}

function lockBody(r: DavRequest, lock: DavLock): string {
  return `${XML_HEAD}<D:prop xmlns:D="DAV:"><D:lockdiscovery>${activeLockXml(lock, r.shared.locks)}</D:lockdiscovery></D:prop>`;
}

export async function lock(r: DavRequest): Promise<void> {
  r.assertWritable();
  if (isTopLevel(r.path)) throw new DavError(403, `libraries cannot be locked: ${r.path}`);
  const timeoutS = parseTimeout(String(r.req.headers.timeout ?? '') || undefined);
  const body = await r.bodyText();
  if (body.trim() === '') {
    // Refresh: the lock is named by the If header.
    const tokens = r.tokens();
    const held = r.shared.locks.covering(r.path).find((l) => tokens.includes(l.token));
    if (!held) throw new DavError(412, 'expected an If header naming a lock of this resource to refresh, got none', 'lock-token-matches-request-uri');
    // Only the lock's holder refreshes it: knowing the token is not enough (as for UNLOCK).
    if (held.user !== null && held.user !== r.principal.user) throw new DavError(403, `the lock ${held.token} belongs to another user`);
    r.shared.locks.refresh(held, timeoutS);
    sendXml(r.res, 200, lockBody(r, held), { 'lock-token': `<${held.token}>` });
    return;
  }
  const info = parseXml(body);
  if (info.ns !== DAV || info.name !== 'lockinfo') throw new XmlBodyError(`expected a DAV:lockinfo element, got ${info.name}`);
  const scopeEl = child(info, DAV, 'lockscope')?.children[0];
  const scope = scopeEl?.ns === DAV && (scopeEl.name === 'exclusive' || scopeEl.name === 'shared') ? scopeEl.name : undefined;
  if (!scope) throw new XmlBodyError('expected lockscope exclusive or shared, got neither');
  const typeEl = child(info, DAV, 'locktype')?.children[0];
  if (typeEl?.ns !== DAV || typeEl.name !== 'write') throw new XmlBodyError('expected locktype write, got another');
  const owner = child(info, DAV, 'owner');
  const depthHeader = (r.req.headers.depth ?? 'infinity').toString().trim().toLowerCase();
  if (depthHeader !== '0' && depthHeader !== 'infinity') throw new DavError(400, `expected Depth 0 or infinity, got '${depthHeader}'`);

  let existing = await r.stat(r.path);
  // Not in the cache: asked of the service before a new empty file is made (another client may have made it since).
  if (!existing) existing = await r.stateForPreconditions(undefined);
  const depth: 0 | 'infinity' = depthHeader === '0' || !existing?.isDir ? 0 : 'infinity';
  const conflicting = r.shared.locks.conflict(r.path, depth, scope);
  if (conflicting) throw new DavError(423, `${r.path} is already locked`, 'no-conflicting-lock');
  r.assertNotLockedElsewhere(existing);
  let created = false;
  if (!existing) {
    await r.assertParentFolder(r.path);
    r.assertUnlocked(r.path, { parent: true });
    if (r.isJunk(r.path)) await r.shared.junk.write(r.path, Readable.from([]));
    else await r.vfs.writeFile(r.path, Buffer.alloc(0), r.call, { holdUploadMs: r.shared.emptyCreateGraceMs });
    created = true;
    existing = await r.stat(r.path);
  }
  let serviceLock = false;
  // A file not on the service yet (made by this LOCK, or written and still to upload) is locked too: the
  // gateway holds the lock at once, the service takes it with the file.
  if (scope === 'exclusive' && existing && !existing.isDir && !r.isJunk(r.path)) {
    try {
      await r.vfs.setLocked(r.path, true, r.call);
      serviceLock = true;
    } catch (err) {
      if (vfsCodeOf(err) === 'ELOCKED') throw new DavError(423, `${r.path} is locked by another member on the service`);
      // Not allowed to lock (a member without the right to change the file): refused, nothing held.
      if (vfsCodeOf(err) === 'EACCES') throw new DavError(403, `${r.path}: no permission to lock this file`);
      r.shared.logger.warn({ err, path: r.path }, 'webdav: the service lock could not be taken; the WebDAV lock holds alone');
    }
  }
  const l = r.shared.locks.create({
    root: r.path, depth, scope, ownerXml: owner ? serializeContent(owner) : '', timeoutS, user: r.principal.user, serviceLock,
  });
  sendXml(r.res, created ? 201 : 200, lockBody(r, l), { 'lock-token': `<${l.token}>` });
}

export async function unlock(r: DavRequest): Promise<void> {
  const header = r.req.headers['lock-token'];
  const token = typeof header === 'string' ? /^\s*<([^>]+)>\s*$/.exec(header)?.[1] : undefined;
  if (!token) throw new DavError(400, `expected a Lock-Token header like <opaquelocktoken:…>, got ${header === undefined ? 'none' : `'${String(header).slice(0, 100)}'`}`);
  const l = r.shared.locks.get(token);
  if (!l || !r.shared.locks.covering(r.path).includes(l)) throw new DavError(409, `no lock ${token} on ${r.path}`, 'lock-token-matches-request-uri');
  if (l.user !== null && l.user !== r.principal.user) throw new DavError(403, `the lock ${token} belongs to another user`);
  r.shared.locks.remove(token);
  if (l.serviceLock) await releaseServiceLock(r, l);
  sendStatus(r.res, 204);
}

export async function releaseServiceLock(r: Pick<DavRequest, 'vfs' | 'call' | 'shared'>, l: DavLock): Promise<void> {
  await r.vfs.setLocked(l.root, false, r.call).catch((err: unknown) => r.shared.logger.warn({ err, path: l.root }, 'webdav: releasing the service lock failed'));
}
