/** PUT (streamed into the Vfs write path), MKCOL and DELETE (a folder with everything in it). */
import type { Attr } from '../../vfs/types.js';
import { DavRequest, etagOf } from '../context.js';
import { DavError, statusOf, vfsCodeOf } from '../errors.js';
import { OC_MTIME_ACCEPTED, OC_MTIME_HEADER, ocMtimeOf } from '../oc-mtime.js';
import { hrefOf, isTopLevel } from '../paths.js';
import { MULTISTATUS_CLOSE, MULTISTATUS_OPEN, statusResponse } from '../properties.js';
import { sendStatus, sendXml } from '../reply.js';

export async function put(r: DavRequest): Promise<void> {
  r.assertWritable();
  if (isTopLevel(r.path)) throw new DavError(405, `files cannot be put at the top level: ${r.path}`);
  if (r.req.headers['content-range'] !== undefined) throw new DavError(400, 'expected a whole body, got Content-Range (partial PUT is not supported)');
  const mtimeMs = ocMtimeOf(r.req.headers[OC_MTIME_HEADER]);
  const existing = await r.stat(r.path);
  if (existing?.isDir) throw new DavError(405, `${r.path} is a folder`);
  if (!existing) await r.assertParentFolder(r.path);
  r.assertUnlocked(r.path, { parent: !existing });
  r.assertNotLockedElsewhere(existing);
  // Preconditions against the service's current state, not a cache that may predate another client's change.
  const im = r.req.headers['if-match'];
  const inm = r.req.headers['if-none-match'];
  if (im !== undefined || inm !== undefined) {
    const current = await r.stateForPreconditions(existing);
    if (inm !== undefined) {
      if (inm.trim() === '*' && current) throw new DavError(412, `${r.path} exists (If-None-Match: *)`);
      if (inm.trim() !== '*' && current && !current.isDir && inm.split(',').some((t) => t.trim() === etagOf(current))) throw new DavError(412, 'If-None-Match matches the current entity tag');
    }
    if (im !== undefined && im.trim() !== '*' && (!current || current.isDir || !im.split(',').some((t) => t.trim() === etagOf(current)))) throw new DavError(412, 'If-Match does not match the current entity tag');
    if (im?.trim() === '*' && !current) throw new DavError(412, `${r.path} does not exist (If-Match: *)`);
  }

  if (r.isJunk(r.path)) {
    await r.shared.junk.write(r.path, r.req);
    sendStatus(r.res, existing ? 204 : 201);
    return;
  }
  const empty = r.req.headers['content-length'] === '0' || (r.req.headers['content-length'] === undefined && r.req.headers['transfer-encoding'] === undefined);
  // The body goes to a version of its own: the file changes only once the whole body is in and journaled;
  // a cut-off body leaves the file as it was. An empty new file is journaled at once too, its upload held
  // briefly: the content that usually follows replaces it unsent (Explorer and Finder create files so).
  // The declared length is checked before any byte is taken: beyond the largest file or the library's free space, 507.
  const declared = r.req.headers['content-length'] !== undefined && /^\d+$/.test(r.req.headers['content-length']) ? Number(r.req.headers['content-length']) : undefined;
  const attr = await r.vfs.writeFile(r.path, bodyPieces(r), r.call, { holdUploadMs: !existing && empty ? r.shared.emptyCreateGraceMs : 0, size: declared });
  if (mtimeMs === undefined) {
    sendStatus(r.res, existing ? 204 : 201, { etag: etagOf(attr) });
    return;
  }
  // The source's time, applied as PROPPATCH applies one: through the Vfs. The body is in either way; a
  // time not applied is told by the missing `accepted` (the client then sees the upload's time).
  const applied = await r.vfs.setTimes(r.path, mtimeMs, r.call).then(() => true, (err: unknown) => {
    r.shared.logger.warn({ err, path: r.path }, 'webdav: X-OC-Mtime not applied');
    return false;
  });
  const shown = applied ? { ...attr, mtimeMs } : attr;
  sendStatus(r.res, existing ? 204 : 201, { etag: etagOf(shown), ...(applied ? { [OC_MTIME_HEADER]: OC_MTIME_ACCEPTED } : {}) });
}

/** Bytes gathered from the request body before one write into the Vfs. */
const WRITE_PIECE_BYTES = 1024 * 1024;

/**
 * The request body in pieces of WRITE_PIECE_BYTES (socket reads are small, 64 KiB), from two buffers used
 * in turn: the Vfs writes one while the body fills the other (it writes a piece before it asks for the one
 * after next), nothing allocated per piece. A body that ends before its declared length throws.
 */
async function* bodyPieces(r: DavRequest): AsyncGenerator<Buffer> {
  const buffers = [Buffer.allocUnsafeSlow(WRITE_PIECE_BYTES), Buffer.allocUnsafeSlow(WRITE_PIECE_BYTES)];
  let current = 0;
  let filled = 0;
  for await (const chunk of r.req as AsyncIterable<Buffer>) {
    r.shared.countBodyBytes?.(chunk.length);
    for (let at = 0; at < chunk.length;) {
      const n = chunk.copy(buffers[current]!, filled, at);
      filled += n;
      at += n;
      if (filled === WRITE_PIECE_BYTES) {
        yield buffers[current]!;
        current = 1 - current;
        filled = 0;
      }
    }
  }
  if (!r.req.complete || r.req.readableAborted) throw new DavError(400, 'the request body ended before its declared length: nothing was changed');
  if (filled > 0) yield buffers[current]!.subarray(0, filled);
}

export async function mkcol(r: DavRequest): Promise<void> {
  r.assertWritable();
  if (r.hasBody()) throw new DavError(415, 'expected MKCOL without a body, got one');
  if (await r.stat(r.path)) throw new DavError(405, `${r.path} exists`);
  if (isTopLevel(r.path)) throw new DavError(403, `${r.path}: the root lists the libraries, one folder each, and libraries are not created through WebDAV; create folders inside a library (/<library>/…), and point clients and test suites such as litmus at a library URL`);
  await r.assertParentFolder(r.path);
  r.assertUnlocked(r.path, { parent: true });
  await r.vfs.mkdir(r.path, r.call);
  sendStatus(r.res, 201);
}

/**
 * Removes a file or a folder with everything in it, children first. Returns the failures (href, status);
 * a folder whose content could not all be removed is kept.
 */
export async function removeTree(r: DavRequest, a: Attr): Promise<{ href: string; status: number }[]> {
  if (!a.isDir) {
    if (r.isJunk(a.path)) await r.shared.junk.remove(a.path);
    else await r.vfs.unlink(a.path, r.call);
    await r.shared.props.remove(a).catch(() => undefined);
    return [];
  }
  const failures: { href: string; status: number }[] = [];
  for (const c of await r.vfs.readdir(a.path, r.call)) {
    try {
      failures.push(...(await removeTree(r, c)));
    } catch (err) {
      failures.push({ href: hrefOf(c.path, c.isDir), status: statusOf(err) });
    }
  }
  if (failures.length > 0) return failures;
  await r.shared.junk.remove(a.path);
  try {
    await r.vfs.rmdir(a.path, r.call);
  } catch (err) {
    if (vfsCodeOf(err) !== 'ENOENT') throw err;
  }
  await r.shared.props.remove(a).catch(() => undefined);
  return [];
}

export async function del(r: DavRequest): Promise<void> {
  r.assertWritable();
  const a = await r.stat(r.path);
  if (!a) throw new DavError(404, `no such file or folder: ${r.path}`);
  if (isTopLevel(r.path)) throw new DavError(403, `libraries are not removed through WebDAV: ${r.path}`);
  r.assertUnlocked(r.path, { members: true, parent: true });
  r.assertNotLockedElsewhere(a);
  const failures = await removeTree(r, a);
  if (failures.length > 0) {
    sendXml(r.res, 207, MULTISTATUS_OPEN + failures.map((f) => statusResponse(f.href, f.status)).join('') + MULTISTATUS_CLOSE);
    return;
  }
  for (const l of r.shared.locks.within(r.path)) r.shared.locks.remove(l.token);
  sendStatus(r.res, 204);
}
