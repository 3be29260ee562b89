/**
 * Web upload (`POST {upload_server}/2/web_upload`, multipart/form-data): the library form (org_client_id +
 * the temporary key of upload_servers) and the user form (token + mount_id). The file part is streamed to
 * a temporary file while its SHA-1 and size are computed; it is never held in memory whole. When the
 * credential fields precede the file (as browsers send a form in order) the caller is authorized and the
 * library's remaining capacity enforced while the bytes arrive; otherwise both are checked once the form
 * is read, before anything is stored in the library.
 */
import busboy from 'busboy';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from '../../shared/log.js';
import { UploadError, UploadErrorCode, isStatusError, missingParam } from './errors.js';
import type { UploadCaller, UploadHost, UploadedFile, VerifiedContent } from './types.js';
import type { WebUploadKeys } from './upload-keys.js';

export interface WebUploadContext {
  host: UploadHost;
  keys: WebUploadKeys;
  /** Directory for the temporary files of web uploads. */
  tempDir: string;
  log: Logger;
}

interface Grant { caller: UploadCaller; libraryId: number }

/** Largest non-file form field (bytes). */
const FIELD_LIMIT = 64 * 1024;

export async function receiveWebUpload(req: IncomingMessage, ctx: WebUploadContext): Promise<UploadedFile> {
  const fields: Record<string, string> = {};
  const tempPath = join(ctx.tempDir, `${randomBytes(16).toString('hex')}.upload`);
  let fileField: string | undefined;
  let stored: Promise<VerifiedContent> | undefined;
  let early: Promise<Grant> | undefined;
  try {
    let form: busboy.Busboy;
    try {
      form = busboy({ headers: req.headers, limits: { fields: 64, fieldSize: FIELD_LIMIT, files: 1, parts: 80 } });
    } catch (e) {
      throw new UploadError(400, UploadErrorCode.BadParam, `expected a multipart/form-data body, got ${JSON.stringify(req.headers['content-type'] ?? '')} (${(e as Error).message})`);
    }
    const parsed = new Promise<void>((resolve, reject) => {
      form.on('field', (name, value, info) => {
        if (info.valueTruncated) reject(new UploadError(400, UploadErrorCode.BadParam, `form field '${name}' expected at most ${FIELD_LIMIT} bytes`));
        fields[name] = value;
      });
      form.on('file', (name, stream) => {
        fileField = name;
        if (hasCredentials(fields)) early = authorize(fields, ctx);
        stored = storeFile(stream, tempPath, early, ctx);
        // a refused or failed file part ends the request at once (the rest of the body is discarded)
        stored.catch((e) => { req.unpipe(form); stream.resume(); reject(e); });
      });
      form.on('close', resolve);
      form.on('error', (e) => reject(new UploadError(400, UploadErrorCode.BadParam, `malformed multipart body: ${(e as Error).message}`)));
      req.on('error', reject);
    });
    req.pipe(form);
    await parsed;
    const expectedField = fields.filefield ?? 'file';
    if (!stored || fileField !== expectedField) throw missingParam(expectedField);
    const name = fields.name ?? '';
    if (!name || name.includes('/') || name === '.' || name === '..') {
      throw new UploadError(400, UploadErrorCode.BadParam, `form field 'name' expected a file name without '/', got ${JSON.stringify(name)}`);
    }
    const folder = (fields.path ?? '').replace(/^\/+|\/+$/g, '');
    const fullpath = folder ? `${folder}/${name}` : name;
    try {
      const content = await stored;
      const grant = await (early ?? authorize(fields, ctx));
      const remaining = await ctx.host.remainingCapacity(grant.libraryId);
      if (content.size > remaining) throw capacityError(content.size, remaining);
      const overwrite = fields.overwrite === '1';
      const result = await ctx.host.webUpload(grant.caller, {
        libraryId: grant.libraryId, folder, name, overwrite, opId: fields.op_id, opName: fields.op_name,
      }, content);
      ctx.log.info({ fullpath: result.fullpath, size: content.size }, 'web upload');
      return result;
    } catch (e) {
      if (isStatusError(e)) throw new UploadError(e.status, e.code, e.message, { ...(e.extra ?? {}), fullpath });
      throw e;
    }
  } finally {
    if (stored) await stored.catch(() => undefined);
    await rm(tempPath, { force: true });
  }
}

function hasCredentials(fields: Record<string, string>): boolean {
  return (fields.org_client_id !== undefined && fields.key !== undefined) || (fields.token !== undefined && fields.mount_id !== undefined);
}

/** Library form: org_client_id + a key of that library; user form: token + mount_id. */
async function authorize(fields: Record<string, string>, ctx: WebUploadContext): Promise<Grant> {
  if (fields.org_client_id !== undefined) {
    if (fields.key === undefined) throw missingParam('key');
    const caller = await ctx.host.authorizeLibrary(fields.org_client_id);
    const grant = await ctx.keys.resolve(fields.key);
    if (caller.kind !== 'library' || grant.libraryId !== caller.libraryId) {
      throw new UploadError(401, UploadErrorCode.KeyInvalid, 'web upload key was not issued for this library');
    }
    return { caller, libraryId: grant.libraryId };
  }
  if (fields.token !== undefined) {
    const mountText = fields.mount_id ?? '';
    if (!/^\d+$/.test(mountText)) throw new UploadError(400, UploadErrorCode.BadParam, `form field 'mount_id' expected an integer, got ${JSON.stringify(mountText)}`);
    const caller = await ctx.host.authorizeToken(fields.token);
    return { caller, libraryId: await ctx.host.libraryOfMount(caller, Number(mountText)) };
  }
  throw missingParam("org_client_id' or 'token");
}

function capacityError(size: number, remaining: number): UploadError {
  return new UploadError(403, UploadErrorCode.CapacityExceeded, `library capacity exceeded: upload needs ${size} bytes, ${Math.max(0, remaining)} left`);
}

/** Streams the file part to `path`; stops early when an early grant fails or the capacity is passed. */
function storeFile(stream: Readable, path: string, early: Promise<Grant> | undefined, ctx: WebUploadContext): Promise<VerifiedContent> {
  return streamFilePart(stream, path, early?.then((g) => ctx.host.remainingCapacity(g.libraryId)));
}

/**
 * Streams a form's file part to a new file at `path`, computing SHA-1 and size. `limit` (bytes, when it
 * resolves) stops the transfer with 403/40321 once passed; its rejection stops it with that error.
 */
export async function streamFilePart(stream: Readable, path: string, limitPromise?: Promise<number>): Promise<VerifiedContent> {
  const hash = createHash('sha1');
  let size = 0;
  let limit = Infinity;
  let refusal: unknown;
  limitPromise?.then((r) => { limit = r; }, (e) => { refusal = e; });
  const meter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      if (refusal !== undefined) return cb(refusal as Error);
      if (size > limit) return cb(capacityError(size, limit));
      hash.update(chunk);
      cb(null, chunk);
    },
  });
  const out = createWriteStream(path, { flags: 'wx', mode: 0o600 });
  try {
    await pipeline(stream, meter, out);
  } catch (err) {
    // The stream opens its file asynchronously: a transfer stopped early may fail before the file exists.
    // Removed once the stream is closed, so no file appears after the caller's cleanup.
    if (!out.closed) await once(out, 'close').catch(() => undefined);
    await rm(path, { force: true });
    throw err;
  }
  if (refusal !== undefined) throw refusal;
  return { tempFilePath: path, sha1: hash.digest('hex'), size };
}
