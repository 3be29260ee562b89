/**
 * The streaming uploader: `create_file` (instant upload when the service already holds the content; a
 * small file's content goes with it, so one exchange places it),
 * else the chunked protocol on the upload server it names: `upload_init`, blocks with their CRC-32 read
 * off one stream into one reused buffer (memory: one block, whatever the size), resumption at the offset
 * the server expects (409 `expect`, or `upload_req` after a 500, a 410 or a dropped connection),
 * `upload_finish` polled while it answers 202, and `upload_abort` when it gives up.
 */
import { createHash } from 'node:crypto';
import { basename } from 'node:path/posix';
import { crc32 } from '../shared/crc32.js';
import { sleep, type ServiceClient } from './client.js';
import { backoff } from './retry-policy.js';
import { ServiceError, ErrorCode } from './errors.js';
import { normalizeServer } from './normalize.js';
import { BlockReader, SourceChangedError, checkSha1, sha1Of, type UploadSource } from './upload-source.js';
import { CRC_MISMATCH, UploadServerClient, type FinishAnswer } from './upload-server-client.js';

export { bufferSource, fileSource, sha1Of, SourceChangedError, type UploadSource } from './upload-source.js';
export { webUpload, type WebUploadArgs, type WebUploadResult } from './web-upload.js';

/** What the gateway sends with create_file as a multipart part (one round trip instead of four): files up to 256 KiB. */
export const INLINE_MAX_BYTES = 256 * 1024;
/** The official SDKs' limit for create_file with the content. */
const INLINE_LIMIT = 50 * 1024 * 1024;

/** Largest block the upload server takes (spec: "at most 10 MB"; decisions: 10 MiB). */
export const MAX_BLOCK_SIZE = 10 * 1024 * 1024;

export interface UploadOptions {
  /** Target path in the library. */
  fullpath: string;
  /** Replace an existing file (create_file `overwrite=1`); false lets the service pick a numbered name. Default true. */
  overwrite?: boolean;
  /** Operator shown by the service (library file API only). */
  operator?: { op_id?: string; op_name?: string };
  /** Set: upload with the user token to this storage space (`/m-api/2/file/create_file`). */
  mountId?: number;
  /**
   * Files up to this many bytes are sent with create_file itself (multipart, as the official SDKs'
   * createFile does: one exchange instead of create_file, upload_init, upload_part and upload_finish);
   * a service that does not take content so answers as usual and the chunked protocol follows. Library
   * file API only. Default 0 (off: the spec's protocol only); at most 50 MiB. The gateway's remote
   * sets INLINE_MAX_BYTES.
   */
  inlineMaxBytes?: number;
  /** Block size in bytes, 1 to 10 MiB. Default 8 MiB. */
  blockSize?: number;
  /** Called with the bytes the server holds and the total, after each block (and 0 at the start). */
  onProgress?: (sent: number, total: number) => void;
  /**
   * Stops the upload. An exchange that makes the file land (create_file, upload_init answering that the
   * server holds the content, upload_finish and its polls) is never cut: the abort is checked before it
   * and honoured after it. So once the returned promise settles the file has either landed (it resolves)
   * or will not land from this upload (it rejects), and a caller that moves or deletes the path next
   * never races a late commit.
   */
  signal?: AbortSignal;
  /** Wait between polls of `upload_finish` while it answers 202, ms. Default 2 000. */
  finishWaitMs?: number;
  /** Polls of `upload_finish` after the first while it answers 202. Default 10. */
  finishPolls?: number;
  /** Failed exchanges in a row (no byte accepted in between) before the upload gives up. Default 5. */
  retries?: number;
  /** First wait before resuming after a failure, ms; doubles per failure, with jitter, capped at 5 s. Default: the client's retryBaseMs. */
  retryBaseMs?: number;
}

export interface UploadResult {
  /** The file's `hash` (create_file's). */
  hash: string;
  fullpath: string;
  filehash: string;
  filesize: number;
  /** True when no byte was sent (the service already had the content). */
  instant: boolean;
}

interface Policy {
  total: number;
  blockSize: number;
  retries: number;
  retryBaseMs: number;
  finishWaitMs: number;
  finishPolls: number;
  signal?: AbortSignal;
  onProgress?: (sent: number, total: number) => void;
}

/** Uploads `source` to `opts.fullpath`. Throws ServiceError (what the service said), TypeError (bad options) or SourceChangedError. */
export async function uploadFile(client: ServiceClient, source: UploadSource, opts: UploadOptions): Promise<UploadResult> {
  const policy = checkOptions(client, source, opts);
  const inline = opts.mountId === undefined && source.size <= (opts.inlineMaxBytes ?? 0) && (opts.inlineMaxBytes ?? 0) > 0 ? await readWhole(source) : undefined;
  const filehash = inline ? inline.sha1 : source.filehash !== undefined ? checkSha1(source.filehash) : await sha1Of(source, opts.signal);
  if (inline && source.filehash !== undefined && checkSha1(source.filehash) !== inline.sha1) throw new SourceChangedError(source.size, source.size);
  opts.signal?.throwIfAborted();
  const created = inline ? await createFileWithContent(client, opts, filehash, inline.data) : await createFile(client, opts, filehash, source.size);
  const fullpath = typeof created.fullpath === 'string' && created.fullpath !== '' ? created.fullpath : opts.fullpath;
  const result = (instant: boolean): UploadResult => ({ hash: String(created.hash), fullpath, filehash, filesize: source.size, instant });
  if (Number(created.state) === 1) {
    opts.onProgress?.(source.size, source.size);
    return result(!inline);
  }
  const server = normalizeServer(String(created.server ?? ''));
  const endpoint = opts.mountId !== undefined ? 'user.create_file' : 'file.create_file';
  if (server === '') throw new ServiceError({ status: 503, code: ErrorCode.NoUploadServer, message: 'create_file named no upload server', endpoint });
  const caller = opts.mountId !== undefined
    ? { token: needToken(client) }
    : { orgClientId: client.credentials.library!.org_client_id };
  const wire = new UploadServerClient(client, server, caller);
  const upload = new ChunkedUpload(wire, source, policy);
  const init = await upload.init({ filename: basename(fullpath), pathhash: String(created.hash), filehash, filesize: source.size });
  if (init.kind === 'done') {
    opts.onProgress?.(source.size, source.size);
    return result(true);
  }
  try {
    await upload.run(init.session);
  } catch (err) {
    await wire.abort(init.session, AbortSignal.timeout(5_000)).catch(() => undefined); // giving up: best effort
    throw err;
  }
  return result(false);
}

function checkOptions(client: ServiceClient, source: UploadSource, opts: UploadOptions): Policy {
  if (typeof opts.fullpath !== 'string' || opts.fullpath.replace(/^\/+|\/+$/g, '') === '') {
    throw new TypeError(`fullpath: expected the path of a file, got ${JSON.stringify(opts.fullpath)}`);
  }
  if (!Number.isSafeInteger(source.size) || source.size < 0) throw new TypeError(`source.size: expected a byte count, got ${String(source.size)}`);
  const blockSize = opts.blockSize ?? 8 * 1024 * 1024;
  if (!Number.isInteger(blockSize) || blockSize < 1 || blockSize > MAX_BLOCK_SIZE) {
    throw new TypeError(`blockSize: expected an integer from 1 to ${MAX_BLOCK_SIZE} bytes, got ${String(opts.blockSize)}`);
  }
  if (opts.mountId !== undefined) {
    if (!Number.isSafeInteger(opts.mountId) || opts.mountId < 0) throw new TypeError(`mountId: expected a storage space id, got ${String(opts.mountId)}`);
    if (opts.operator?.op_id !== undefined || opts.operator?.op_name !== undefined) {
      throw new TypeError('operator: not supported with the user-token API (mountId set): the token names the user');
    }
  } else if (!client.credentials.library) {
    throw new TypeError('client: expected a library authorization (credentials.library) or mountId with a user token, got neither');
  }
  const inlineMax = opts.inlineMaxBytes ?? 0;
  if (!Number.isInteger(inlineMax) || inlineMax < 0 || inlineMax > INLINE_LIMIT) {
    throw new TypeError(`inlineMaxBytes: expected an integer from 0 to ${INLINE_LIMIT} bytes, got ${String(opts.inlineMaxBytes)}`);
  }
  const retries = opts.retries ?? 5;
  if (!Number.isInteger(retries) || retries < 0) throw new TypeError(`retries: expected a non-negative integer, got ${String(opts.retries)}`);
  const finishPolls = opts.finishPolls ?? 10;
  if (!Number.isInteger(finishPolls) || finishPolls < 0) throw new TypeError(`finishPolls: expected a non-negative integer, got ${String(opts.finishPolls)}`);
  const finishWaitMs = opts.finishWaitMs ?? 2_000;
  if (!(finishWaitMs >= 0)) throw new TypeError(`finishWaitMs: expected a non-negative number of ms, got ${String(opts.finishWaitMs)}`);
  return {
    total: source.size, blockSize, retries, finishPolls, finishWaitMs,
    retryBaseMs: opts.retryBaseMs ?? client.retryBaseMs, signal: opts.signal, onProgress: opts.onProgress,
  };
}

function needToken(client: ServiceClient): string {
  const token = client.credentials.user?.token;
  if (!token) throw new TypeError('client: mountId needs a user access token (credentials.user), got none');
  return token;
}

async function createFile(client: ServiceClient, opts: UploadOptions, filehash: string, filesize: number) {
  const overwrite = opts.overwrite === false ? 0 : 1;
  const call = {}; // lands the file when the content is known: never cut (see UploadOptions.signal)
  if (opts.mountId !== undefined) {
    return client.user.createFile({ mount_id: opts.mountId, fullpath: opts.fullpath, filehash, filesize, overwrite }, call);
  }
  const op: { op_id?: string; op_name?: string } = {};
  if (opts.operator?.op_id) op.op_id = opts.operator.op_id;
  if (opts.operator?.op_name) op.op_name = opts.operator.op_name;
  return client.file.createFile({ fullpath: opts.fullpath, filehash, filesize, overwrite, ...op }, call);
}

/** create_file with the content as its file part (library file API). */
function createFileWithContent(client: ServiceClient, opts: UploadOptions, filehash: string, data: Buffer) {
  const overwrite = opts.overwrite === false ? 0 : 1;
  const op: { op_id?: string; op_name?: string } = {};
  if (opts.operator?.op_id) op.op_id = opts.operator.op_id;
  if (opts.operator?.op_name) op.op_name = opts.operator.op_name;
  // Never cut: it lands the file (see UploadOptions.signal).
  return client.createFileWithContent({ fullpath: opts.fullpath, filehash, filesize: data.length, overwrite, ...op }, data, {});
}

/** A small source whole in memory, with its SHA-1; SourceChangedError when it is not `size` bytes long. */
async function readWhole(source: UploadSource): Promise<{ data: Buffer; sha1: string }> {
  const reader = new BlockReader(source.open(0), Math.max(1, source.size));
  try {
    const data = source.size === 0 ? Buffer.alloc(0) : await reader.read(source.size);
    if (data.length !== source.size) throw new SourceChangedError(source.size, data.length);
    if (await reader.hasMore()) throw new SourceChangedError(source.size, source.size + 1);
    return { data: Buffer.from(data), sha1: createHash('sha1').update(data).digest('hex') };
  } finally {
    reader.close();
  }
}

/** Whether a failed exchange may be resumed after asking the server what it holds. */
function resumable(err: ServiceError): boolean {
  return err.transport || err.status === 410 || err.status >= 500;
}

/** One upload session from init to finish. Only `run`'s caller touches it; nothing runs concurrently. */
class ChunkedUpload {
  /** Failed exchanges since a byte was last accepted. */
  private failures = 0;
  private reader?: BlockReader;
  /** Stream position of `reader`. */
  private readerAt = 0;
  /** The block in the reader's buffer and where it starts (-1: none). */
  private block?: Buffer;
  private blockAt = -1;
  /** An exchange that may make the file land is under way: the caller's abort waits for its end. */
  private landing = false;

  constructor(private readonly wire: UploadServerClient, private readonly source: UploadSource, private readonly p: Policy) {}

  /** upload_init; repeated after a failure that may be transient (the server resumes the same step's session). */
  async init(h: Parameters<UploadServerClient['init']>[0]) {
    for (;;) {
      this.p.signal?.throwIfAborted();
      let answer;
      this.landing = true; // the server may hold the content already and place the file at once
      try {
        answer = await this.wire.init(h);
      } catch (err) {
        this.landing = false;
        await this.failed(err);
        continue;
      }
      this.landing = false;
      return answer;
    }
  }

  /** The caller's signal, except while an exchange that may make the file land is under way. */
  private get signal(): AbortSignal | undefined {
    return this.landing ? undefined : this.p.signal;
  }

  async run(session: string): Promise<void> {
    try {
      let offset = 0;
      this.p.onProgress?.(0, this.p.total);
      for (;;) {
        await this.sendFrom(session, offset);
        this.p.signal?.throwIfAborted();
        let resumeAt;
        this.landing = true;
        try {
          resumeAt = await this.finish(session);
        } finally {
          this.landing = false;
        }
        if (resumeAt === undefined) return;
        offset = resumeAt;
      }
    } finally {
      this.reader?.close();
    }
  }

  /** Sends blocks from `offset` until the server holds the whole file (or says the file is complete). */
  private async sendFrom(session: string, start: number): Promise<void> {
    let offset = start;
    let crcRejects = 0;
    while (offset < this.p.total) {
      this.signal?.throwIfAborted();
      const block = await this.blockFrom(offset);
      let answer;
      try {
        answer = await this.wire.part(session, offset, block, crc32(block), this.signal);
      } catch (err) {
        if (err instanceof ServiceError && err.status === 400 && err.code === CRC_MISMATCH && !this.signal?.aborted) {
          // Corrupted on the way: the same bytes again, a bounded number of times.
          if (++crcRejects > this.p.retries) throw err;
          continue;
        }
        await this.failed(err);
        offset = await this.received(session);
        continue;
      }
      if (answer.kind === 'expect') {
        await this.failed(new ServiceError({ status: 409, code: 40900, message: `server expects offset ${answer.offset ?? '?'}, sent ${offset}`, endpoint: 'upload.upload_part' }), false);
        offset = answer.offset ?? (await this.received(session));
        continue;
      }
      offset += block.length;
      this.failures = 0;
      crcRejects = 0;
      this.p.onProgress?.(offset, this.p.total);
      if (answer.kind === 'complete') break;
    }
    if (offset >= this.p.total && this.reader && this.readerAt === this.p.total && (await this.reader.hasMore())) {
      throw new SourceChangedError(this.p.total, this.p.total + 1);
    }
  }

  /**
   * upload_finish, polled while it answers 202. Undefined when done; an offset when the server lacks
   * data (409) and the blocks from there must be sent again.
   */
  private async finish(session: string): Promise<number | undefined> {
    for (let polls = 0; ;) {
      let answer: FinishAnswer;
      try {
        answer = await this.wire.finish(session, this.signal);
      } catch (err) {
        await this.failed(err);
        continue;
      }
      if (answer.kind === 'done') return undefined;
      if (answer.kind === 'incomplete') {
        await this.failed(new ServiceError({ status: 409, code: 0, message: 'upload_finish: data incomplete', endpoint: 'upload.upload_finish' }), false);
        return answer.offset ?? (await this.received(session));
      }
      if (++polls > this.p.finishPolls) {
        throw new ServiceError({ status: 202, code: 0, message: `still processing after ${this.p.finishPolls} polls ${this.p.finishWaitMs} ms apart`, endpoint: 'upload.upload_finish' });
      }
      await sleep(this.p.finishWaitMs, this.signal);
    }
  }

  /** upload_req, repeated after transient failures; checked against the file's size. */
  private async received(session: string): Promise<number> {
    for (;;) {
      try {
        const n = await this.wire.received(session, this.signal);
        if (n > this.p.total) throw new ServiceError({ status: 200, code: 0, message: `server holds ${n} bytes, expected at most ${this.p.total}`, endpoint: 'upload.upload_req' });
        return n;
      } catch (err) {
        if (err instanceof ServiceError && err.status === 500) throw err; // not initialised: the session is gone
        await this.failed(err);
      }
    }
  }

  /**
   * Counts a failure: rethrows it when it is not resumable, when the caller aborted, or when the budget
   * is spent; otherwise waits the backoff (unless `wait` is false: the server told where to go on).
   */
  private async failed(err: unknown, wait = true): Promise<void> {
    if (!(err instanceof ServiceError) || this.signal?.aborted) throw err;
    if (err.status !== 409 && !resumable(err)) throw err;
    if (++this.failures > this.p.retries) throw err;
    if (wait) await sleep(backoff(this.p.retryBaseMs, this.failures - 1), this.signal);
  }

  /** The block that starts at `start`: the buffered one again, or read on from the stream (reopened when elsewhere). */
  private async blockFrom(start: number): Promise<Buffer> {
    if (this.block && this.blockAt === start) return this.block;
    if (!this.reader || this.readerAt !== start) {
      this.reader?.close();
      this.reader = new BlockReader(this.source.open(start), this.p.blockSize);
      this.readerAt = start;
    }
    const length = Math.min(this.p.blockSize, this.p.total - start);
    this.block = undefined;
    const block = await this.reader.read(length);
    if (block.length !== length) throw new SourceChangedError(this.p.total, start + block.length);
    this.readerAt += length;
    this.block = block;
    this.blockAt = start;
    return block;
  }
}
