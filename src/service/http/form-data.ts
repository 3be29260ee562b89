/**
 * API parameters sent as multipart/form-data (the official Java and C# SDKs send create_file so, with the
 * file itself as a part). Fields become parameters like those of a URL-encoded body; a file part is
 * accepted only where the caller says so (`fileDir`), streamed to a temporary file there while its SHA-1
 * and size are computed, never held in memory, and bounded by `maxFileBytes`.
 */
import busboy from 'busboy';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { FaultCode, ServiceFault } from '../domain/fault.js';

/** A file part received with the parameters: where it is, and what it holds. */
export interface ReceivedFile {
  /** Form field name of the part. */
  field: string;
  /** File name the part declared (may be empty). */
  filename: string;
  tempFilePath: string;
  sha1: string;
  size: number;
}

export interface MultipartOptions {
  /** Largest total size of the non-file fields (bytes). */
  maxFieldBytes: number;
  /** Folder for a file part; without it a file part is refused (400/40003). */
  fileDir?: string;
  /** Largest file part (bytes); beyond it 413/41301. */
  maxFileBytes: number;
}

export function isMultipart(contentType: string): boolean {
  return contentType.toLowerCase().startsWith('multipart/form-data');
}

export async function readMultipart(req: IncomingMessage, params: Record<string, string>, opts: MultipartOptions): Promise<ReceivedFile | undefined> {
  let form: busboy.Busboy;
  try {
    form = busboy({ headers: req.headers, limits: { fields: 200, fieldSize: opts.maxFieldBytes, files: 1, parts: 201 } });
  } catch (e) {
    throw new ServiceFault(FaultCode.BadParam, `request body: expected multipart/form-data with a boundary, got ${JSON.stringify(req.headers['content-type'] ?? '')} (${(e as Error).message})`);
  }
  let fieldBytes = 0;
  let stored: Promise<ReceivedFile> | undefined;
  const tempPath = opts.fileDir ? join(opts.fileDir, `${randomBytes(16).toString('hex')}.form`) : undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      form.on('field', (name, value, info) => {
        fieldBytes += Buffer.byteLength(value);
        if (info.valueTruncated || fieldBytes > opts.maxFieldBytes) {
          reject(new ServiceFault(FaultCode.BodyTooLarge, `request body: form fields expected at most ${opts.maxFieldBytes} bytes, got more`));
          return;
        }
        params[name] = value;
      });
      form.on('file', (name, stream, info) => {
        if (!tempPath) {
          stream.resume();
          reject(new ServiceFault(FaultCode.BadParam, `form part '${name}': this endpoint takes no file`));
          return;
        }
        stored = storePart(stream, tempPath, opts.maxFileBytes).then((c) => ({ ...c, field: name, filename: info.filename ?? '' }));
        stored.catch((e) => { req.unpipe(form); stream.resume(); reject(e); });
      });
      form.on('close', resolve);
      form.on('error', (e) => reject(new ServiceFault(FaultCode.BadParam, `request body: malformed multipart/form-data (${(e as Error).message})`)));
      req.on('error', reject);
      req.pipe(form);
    });
    return stored ? await stored : undefined;
  } catch (e) {
    if (stored) await stored.catch(() => undefined);
    if (tempPath) await rm(tempPath, { force: true });
    throw e;
  }
}

async function storePart(stream: Readable, path: string, max: number): Promise<{ tempFilePath: string; sha1: string; size: number }> {
  const hash = createHash('sha1');
  let size = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      if (size > max) return cb(new ServiceFault(FaultCode.BodyTooLarge, `file part: expected at most ${max} bytes, got more`));
      hash.update(chunk);
      cb(null, chunk);
    },
  });
  await pipeline(stream, meter, createWriteStream(path, { flags: 'wx', mode: 0o600 }));
  return { tempFilePath: path, sha1: hash.digest('hex'), size };
}
