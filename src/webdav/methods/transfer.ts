/**
 * COPY and MOVE (RFC 4918 §9.8-9.9) with Overwrite and Depth. A file moved or copied onto an existing file
 * replaces its content (a new version of the same object on the service, so its history and id stay) when
 * it is small enough to stream through the gateway; anything else is the Vfs's copy or rename.
 */
import type { Attr } from '../../vfs/types.js';
import { DavRequest } from '../context.js';
import { DavError } from '../errors.js';
import { isWithin } from '../lock-table.js';
import { hrefOf, isTopLevel } from '../paths.js';
import { MULTISTATUS_CLOSE, MULTISTATUS_OPEN, statusResponse } from '../properties.js';
import { sendStatus, sendXml } from '../reply.js';
import { removeTree } from './write.js';

/** Largest file whose content is streamed into an existing target (keeping the target's history), bytes. */
export const REPLACE_IN_PLACE_MAX_BYTES = 64 * 1024 * 1024;

async function replaceContent(r: DavRequest, src: Attr, dest: string): Promise<void> {
  const source = r.isJunk(src.path) ? r.shared.junk.read(src.path) : await r.vfs.createReadStream(src.path, {}, r.call);
  if (r.isJunk(dest)) await r.shared.junk.write(dest, source);
  else await r.vfs.writeFile(dest, source, r.call);
}

export async function transfer(r: DavRequest, move: boolean): Promise<void> {
  r.assertWritable();
  const dest = r.destination();
  const src = await r.stat(r.path);
  if (!src) throw new DavError(404, `no such file or folder: ${r.path}`);
  if (dest === r.path) throw new DavError(403, 'expected a Destination other than the source, got the same');
  if (isTopLevel(dest) || (move && isTopLevel(r.path))) throw new DavError(403, `libraries cannot be ${move ? 'moved' : 'copied'} or replaced: ${r.path} → ${dest}`);
  if (src.isDir && isWithin(dest, r.path)) throw new DavError(403, `cannot ${move ? 'move' : 'copy'} ${r.path} into itself`);
  const depthHeader = (r.req.headers.depth ?? 'infinity').toString().trim().toLowerCase();
  if (depthHeader !== 'infinity' && (move || depthHeader !== '0')) throw new DavError(400, `expected Depth ${move ? 'infinity' : '0 or infinity'}, got '${depthHeader}'`);
  const overwriteHeader = (r.req.headers.overwrite ?? 'T').toString().trim().toUpperCase();
  if (overwriteHeader !== 'T' && overwriteHeader !== 'F') throw new DavError(400, `expected Overwrite T or F, got '${overwriteHeader}'`);
  await r.assertParentFolder(dest);
  const existing = await r.stat(dest);
  if (existing && overwriteHeader === 'F') throw new DavError(412, `${dest} exists (Overwrite: F)`);
  if (move) {
    r.assertUnlocked(r.path, { members: true, parent: true });
    r.assertNotLockedElsewhere(src);
  }
  r.assertUnlocked(dest, { members: !!existing, parent: true });
  r.assertNotLockedElsewhere(existing);

  const crossStore = r.isJunk(r.path) !== r.isJunk(dest);
  const inPlace = existing && !existing.isDir && !src.isDir && (src.size <= REPLACE_IN_PLACE_MAX_BYTES || crossStore);
  if (existing && !inPlace) {
    const failures = await removeTree(r, existing);
    if (failures.length > 0) {
      sendXml(r.res, 207, MULTISTATUS_OPEN + failures.map((f) => statusResponse(f.href, f.status)).join('') + MULTISTATUS_CLOSE);
      return;
    }
  }
  if (inPlace || (crossStore && !src.isDir)) {
    await replaceContent(r, src, dest);
    const after = await r.stat(dest);
    if (after) await r.shared.props.copy(src, after);
    if (move) await removeTree(r, src);
  } else if (move) {
    const held = r.shared.locks.within(r.path).filter((l) => l.serviceLock);
    if (r.isJunk(r.path)) await r.shared.junk.move(r.path, dest);
    else {
      await r.vfs.rename(r.path, dest, { noReplace: true }, r.call);
      if (src.isDir) await r.shared.junk.move(r.path, dest);
    }
    // Properties follow the object's id; those kept by path (no id yet) are carried over.
    if (!src.id) {
      const after = await r.stat(dest);
      if (after) await r.shared.props.copy(src, after);
      await r.shared.props.remove(src);
    }
    for (const l of r.shared.locks.within(r.path)) r.shared.locks.remove(l.token);
    for (const l of held) {
      const moved = dest + l.root.slice(r.path.length);
      await r.vfs.setLocked(moved, false, r.call).catch((err: unknown) => r.shared.logger.warn({ err, path: moved }, 'webdav: releasing the service lock of a moved file failed'));
    }
  } else if (src.isDir && depthHeader === '0') {
    await r.vfs.mkdir(dest, r.call);
    const after = await r.stat(dest);
    if (after) await r.shared.props.copy(src, after);
  } else {
    if (r.isJunk(r.path)) await r.shared.junk.write(dest, r.shared.junk.read(r.path));
    else await r.vfs.copy(r.path, dest, { noReplace: true }, r.call);
    let after = await r.stat(dest);
    // A copy of a file we hold the service lock of is not locked: the lock stays with the original.
    if (after && !after.isDir && after.locked && r.shared.locks.covering(r.path).some((l) => l.serviceLock)) {
      await r.vfs.setLocked(dest, false, r.call);
      after = await r.stat(dest);
    }
    if (after) await r.shared.props.copy(src, after);
  }
  if (move) for (const l of r.shared.locks.within(r.path)) r.shared.locks.remove(l.token);
  sendStatus(r.res, existing ? 204 : 201, existing ? {} : { location: hrefOf(dest, src.isDir) });
}
