/**
 * UploadServer: the embedded service's upload server (spec section G, "Chunked upload protocol", and web
 * upload). A request handler the service mounts under its upload address; it owns upload sessions,
 * temporary files, block checks and content verification, and calls its UploadHost to authorize callers
 * and to commit verified content.
 *
 * Sessions are shared by every process of a service (upload-sessions.ts): their records in the metadata
 * store, their bytes in the blob store's StagedUploads (a staging folder beside a folder store, the
 * bucket of an S3 store), so upload_init, the parts and upload_finish of one session may each reach a
 * different process. What a process keeps of a session is a cache: the SHA-1 state over the bytes it has
 * seen (recomputed by reading the staged bytes back when another process wrote since) and its running
 * commit.
 */
import type { Hash } from 'node:crypto';
import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import type { MetadataStore } from '../store/metadata-store.js';
import { FolderStagedUploads, sha1OfStaged, type StagedUploads } from '../store/staged-uploads.js';
import { join } from 'node:path';
import { silentLogger, type Logger } from '../../shared/log.js';
import { parseCrc32 } from '../../shared/crc32.js';
import type { UploadServers } from '../../shared/records.js';
import { UploadError, UploadErrorCode, isStatusError, missingParam } from './errors.js';
import { UploadSessions, type SessionBusy, type SessionRecord, type StoredFailure } from './upload-sessions.js';
import type { PendingUpload, UploadCaller, UploadedFile, UploadHost } from './types.js';
import { WebUploadKeys } from './upload-keys.js';
import { receiveWebUpload } from './web-upload.js';
import { stageBlock } from './block-receiver.js';

export interface UploadServerOptions {
  /** The metadata store that holds the session records and web upload keys (shared by the service's processes). */
  db: MetadataStore;
  /**
   * Where the sessions' bytes wait (the blob store's `stagedUploads`). Processes that share `db` must reach
   * the same. Default a FolderStagedUploads in `<host.tempDir>/sessions`.
   */
  staging?: StagedUploads;
  /**
   * How long a part or a finish holds a session's temporary file at most (ms): a lease left by a process
   * that died is taken over after it. Default 900 000 (15 min).
   */
  busyLeaseMs?: number;
  /**
   * Prefix of the protocol's headers. Default `x-svc-`. The vendor's prefix `x-gk-` (what the official
   * SDKs send) is accepted besides it, always.
   */
  headerPrefix?: string;
  /** An open session with no request for this long expires and its temporary file is removed (ms). Default 86 400 000 (24 h). */
  sessionTtlMs?: number;
  /** A finished session answers repeated upload_finish calls for this long (ms). Default 600 000 (10 min). */
  finishedTtlMs?: number;
  /** Interval of the expiry sweep (ms). Default min(sessionTtlMs / 4, 300 000). */
  sweepIntervalMs?: number;
  /** Largest accepted block (bytes). Default 10 MiB. */
  maxBlock?: number;
  /** How long upload_finish waits for the commit before answering 202 (ms). Default 1 500. */
  finishWaitMs?: number;
  /** Clock in milliseconds. Default Date.now. */
  clock?: () => number;
  logger?: Logger;
}

/**
 * What this process keeps of a session, a cache beside its record: the record says who holds the
 * temporary file (`busy`, one writer at a time across processes), this the SHA-1 state and the commit.
 */
interface LiveSession {
  record: SessionRecord;
  /** SHA-1 over the first `hashedBytes` of the temporary file; recomputed from the file when stale. */
  hash?: Hash;
  hashedBytes: number;
  /** The running commit of upload_finish, in this process. */
  finishing?: Promise<void>;
  /** The result this process committed and recorded for the session. */
  committed?: UploadedFile;
}

const SHA1_RE = /^[0-9a-f]{40}$/;
/** A part's block, its session claimed; `writingFrom` as the claim left it in the record (-1: unknown). */
interface ClaimedPart { s: LiveSession; start: number; length: number; crc: number | undefined; writingFrom: number }

/** The `upload-range` header: `<first>-<last>` byte positions. */
const RANGE_RE = /^\s*(?:bytes[= ])?(\d+)-(\d+)\s*$/;

/** A session file without journal is removed once it has not changed for this long (ms): 10 minutes. */
const STRAY_GRACE_MS = 600_000;

/** Header prefix of the deployments the official SDKs talk to; accepted besides the configured one. */
export const VENDOR_HEADER_PREFIX = 'x-gk-';

export class UploadServer {
  private readonly prefix: string;
  /** Every accepted header prefix: the configured one first (named in errors), then the vendor's. */
  private readonly prefixes: string[];
  private readonly sessionTtlMs: number;
  private readonly finishedTtlMs: number;
  private readonly maxBlock: number;
  private readonly finishWaitMs: number;
  private readonly clock: () => number;
  private readonly log: Logger;
  private readonly journal: UploadSessions;
  private readonly webDir: string;
  /**
   * Sessions this process served (a cache: the records in the store decide); the sweep drops those whose
   * record is gone, so it holds at most the sessions that exist.
   */
  private readonly sessions = new Map<string, LiveSession>();
  private readonly busyLeaseMs: number;
  private readonly shared: boolean;
  private readonly sweepIntervalMs: number;
  private sweepTimer: NodeJS.Timeout | undefined;
  /** This process, as holder of the sweep's lease. */
  private readonly holder = `${process.pid}-${randomBytes(6).toString('hex')}`;
  readonly webUploadKeys: WebUploadKeys;

  constructor(private readonly host: UploadHost, opts: UploadServerOptions) {
    this.prefix = (opts.headerPrefix ?? 'x-svc-').toLowerCase();
    this.prefixes = [...new Set([this.prefix, 'x-svc-', VENDOR_HEADER_PREFIX])];
    this.sessionTtlMs = opts.sessionTtlMs ?? 86_400_000;
    this.finishedTtlMs = opts.finishedTtlMs ?? 600_000;
    this.sweepIntervalMs = opts.sweepIntervalMs ?? Math.min(this.sessionTtlMs / 4, 300_000);
    this.maxBlock = opts.maxBlock ?? 10 * 1024 * 1024;
    this.finishWaitMs = opts.finishWaitMs ?? 1_500;
    this.clock = opts.clock ?? Date.now;
    this.log = (opts.logger ?? silentLogger).child({ component: 'upload-server' });
    this.journal = new UploadSessions(opts.db, opts.staging ?? new FolderStagedUploads(join(host.tempDir, 'sessions')));
    this.busyLeaseMs = opts.busyLeaseMs ?? 900_000;
    this.shared = opts.db.engine === 'postgresql';
    this.webDir = join(host.tempDir, 'web');
    this.webUploadKeys = new WebUploadKeys(opts.db, { clock: this.clock });
  }

  /**
   * Removes expired sessions (the others resume), starts the expiry sweep. On SQLite, where this is the
   * only process, a temporary file still held by a request of the previous run is given back.
   */
  async open(): Promise<void> {
    await this.journal.open();
    await mkdir(this.webDir, { recursive: true, mode: 0o700 });
    if (!this.shared) await this.journal.releaseAll();
    await this.sweep();
    this.sweepTimer = setInterval(() => void this.sweep().catch((e) => this.log.warn({ err: e }, 'upload sweep failed')), this.sweepIntervalMs);
    this.sweepTimer.unref();
    this.log.info({ sessions: (await this.journal.count()).all, staging: this.journal.staging.location }, 'upload server open');
  }

  /**
   * Stops the sweep, waits for running commits and gives the sweep's lease back. Sessions stay staged for
   * the next run.
   */
  async close(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
    await Promise.allSettled([...this.sessions.values()].map((s) => s.finishing));
    await this.journal.releaseLease('upload-sweep', this.holder).catch((err) => this.log.warn({ err }, 'giving the sweep lease back failed'));
  }

  /** Open (unfinished) sessions of the service; for tests and metrics. */
  async openSessions(): Promise<number> {
    return (await this.journal.count()).open;
  }

  /**
   * The `upload_servers` endpoint's answer, after the service checked the call's signature and params:
   * a new web upload key for `libraryId` and this server's address.
   */
  async issueWebUploadKey(args: { libraryId: number; fullpath: string; timeoutSec: number; serverUrl: string }): Promise<UploadServers> {
    const key = await this.webUploadKeys.issue(args.libraryId, args.fullpath, args.timeoutSec);
    return { 'm-upload': [args.serverUrl], key };
  }

  /** Handles one request; `path` is the request path below the upload server's mount point. */
  async handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const route = path.replace(/\/+$/, '') || '/';
    try {
      if (req.method === 'POST' && route === '/upload_init') return await this.init(req, res);
      if ((req.method === 'PUT' || req.method === 'POST') && route === '/upload_part') return await this.part(req, res);
      // upload_req: the spec says POST; the official Java SDK asks with GET. upload_abort: the C# SDK
      // sends GET with the session as a URL parameter.
      if ((req.method === 'POST' || req.method === 'GET') && route === '/upload_req') return await this.req(req, res);
      if (req.method === 'POST' && route === '/upload_finish') return await this.finish(req, res);
      if ((req.method === 'POST' || req.method === 'GET') && route === '/upload_abort') return await this.abort(req, res);
      if (req.method === 'POST' && route === '/2/web_upload') {
        const result = await receiveWebUpload(req, { host: this.host, keys: this.webUploadKeys, tempDir: this.webDir, log: this.log });
        return sendJson(res, 200, result);
      }
      sendJson(res, 404, { error_code: 40400, error_msg: `no upload endpoint ${req.method} ${route}` });
    } catch (e) {
      this.sendError(res, e, route);
    }
  }

  private sendError(res: ServerResponse, e: unknown, route: string): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (isStatusError(e)) {
      if (e.status >= 500) this.log.error({ err: e, route }, 'upload request failed');
      else this.log.debug({ route, status: e.status, code: e.code, error: e.message }, 'upload request refused');
      sendJson(res, e.status, { error_code: e.code, error_msg: e.message, ...(e.extra ?? {}) });
      return;
    }
    this.log.error({ err: e, route }, 'upload request failed');
    sendJson(res, 500, { error_code: UploadErrorCode.Internal, error_msg: 'internal error' });
  }

  /** The protocol header `name` under any accepted prefix (`x-svc-`, `x-gk-`, the configured one). */
  private header(req: IncomingMessage, name: string): string | undefined {
    for (const prefix of this.prefixes) {
      const v = req.headers[prefix + name];
      const text = Array.isArray(v) ? v[0] : v;
      if (text !== undefined && text !== '') return text;
    }
    return undefined;
  }

  private requireHeader(req: IncomingMessage, name: string): string {
    const v = this.header(req, name);
    if (v === undefined) throw missingParam(this.prefix + name);
    return v;
  }

  /**
   * The create_file step `pathhash` when it is pending for the caller: with a library's authorization,
   * both read in one statement when the host can.
   */
  private async pendingUpload(req: IncomingMessage, pathhash: string): Promise<PendingUpload | undefined> {
    const orgClientId = new URL(req.url ?? '/', 'http://upload').searchParams.get('org_client_id');
    if (orgClientId && this.host.pendingUploadOfLibrary) return this.host.pendingUploadOfLibrary(orgClientId, pathhash);
    return this.host.pendingUpload(await this.caller(req), pathhash);
  }

  private async caller(req: IncomingMessage): Promise<UploadCaller> {
    const orgClientId = new URL(req.url ?? '/', 'http://upload').searchParams.get('org_client_id');
    if (orgClientId) return this.host.authorizeLibrary(orgClientId);
    const token = this.header(req, 'token');
    if (token) return this.host.authorizeToken(token);
    throw missingParam(`org_client_id' or '${this.prefix}token`);
  }

  /**
   * The session a request names, its record read from the store (another process may have changed it)
   * and, with `touch`, its last request set to now in the same statement; 400 without the header,
   * 401/40104 when unknown.
   */
  private async session(req: IncomingMessage, opts: { touch?: boolean } = {}): Promise<LiveSession> {
    const id = this.header(req, 'upload-session') ?? this.sessionParam(req);
    if (id === undefined) throw missingParam(this.prefix + 'upload-session');
    const record = opts.touch ? await this.journal.loadTouched(id, this.clock()) : await this.journal.load(id);
    if (!record) {
      this.sessions.delete(id);
      throw new UploadError(401, UploadErrorCode.SessionUnknown, 'upload session unknown, expired, finished or aborted');
    }
    return this.live(record);
  }

  /** This process's cache entry of a session, with the record just read. */
  private live(record: SessionRecord): LiveSession {
    const s = this.sessions.get(record.id);
    if (s) {
      s.record = record;
      return s;
    }
    const fresh: LiveSession = { record, hashedBytes: -1 };
    this.sessions.set(record.id, fresh);
    return fresh;
  }

  /** Whether a request (of any process) holds the session's temporary file now. */
  private busyNow(r: SessionRecord): SessionBusy | null {
    return r.busy !== null && r.busyUntil > this.clock() ? r.busy : null;
  }

  /** The session id as a URL parameter (`x-gk-upload-session=` / `x-svc-upload-session=`), as the C# SDK's abort sends it. */
  private sessionParam(req: IncomingMessage): string | undefined {
    const query = new URL(req.url ?? '/', 'http://upload').searchParams;
    for (const prefix of this.prefixes) {
      const v = query.get(prefix + 'upload-session');
      if (v) return v;
    }
    return undefined;
  }

  private async committed(s: LiveSession): Promise<number> {
    const n = await this.journal.committedBytes(s.record.id);
    if (n === undefined) {
      throw new UploadError(500, UploadErrorCode.NotInitialised, 'upload session not initialised (temporary file missing): call upload_init again');
    }
    return n;
  }

  private async init(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const filenameRaw = this.requireHeader(req, 'upload-filename');
    const pathhash = this.requireHeader(req, 'upload-pathhash');
    const filehash = this.requireHeader(req, 'upload-filehash').toLowerCase();
    const filesizeText = this.requireHeader(req, 'upload-filesize');
    // The C# SDK sends the name as it is, not URL-encoded: a name that does not decode is taken as sent
    // (it is informational; the file's name comes from create_file).
    let filename: string;
    try {
      filename = decodeURIComponent(filenameRaw);
    } catch {
      filename = filenameRaw;
    }
    if (!SHA1_RE.test(filehash)) throw new UploadError(400, UploadErrorCode.BadParam, `${this.prefix}upload-filehash expected 40 hex characters (SHA-1), got ${JSON.stringify(filehash)}`);
    if (!/^\d+$/.test(filesizeText)) throw new UploadError(400, UploadErrorCode.BadParam, `${this.prefix}upload-filesize expected a non-negative integer, got ${JSON.stringify(filesizeText)}`);
    const filesize = Number(filesizeText);
    const pending = await this.pendingUpload(req, pathhash);
    if (!pending) throw new UploadError(404, UploadErrorCode.PathhashUnknown, `no pending create_file step with hash ${JSON.stringify(pathhash)} for this caller`);
    if (pending.filehash !== filehash || pending.filesize !== filesize) {
      throw new UploadError(400, UploadErrorCode.BadParam,
        `upload declares filehash ${filehash} and filesize ${filesize}, expected ${pending.filehash} and ${pending.filesize} as given to create_file`);
    }
    // A session already open for this create_file step is resumed, not duplicated.
    const { resumed, idle } = await this.journal.forStep(pathhash, pending.libraryId, pending.fullpath, filehash, filesize, this.clock());
    if (resumed) {
      await this.journal.touch(resumed.id, this.clock());
      this.log.info({ session: resumed.id.slice(0, 8), fullpath: pending.fullpath }, 'upload session resumed');
      return sendJson(res, 200, { session: resumed.id });
    }
    // A client that lost its session (the service restarted under it, a connection failed) repeats
    // create_file, which gives a new file a new pathhash. The open session for the same content and target
    // is taken over by the new step, so the bytes it holds are kept (upload_req reports them) instead of
    // starting again from byte 0 and leaving the old temporary file behind.
    const adopted = await this.adopt(pathhash, pending.fullpath, idle);
    if (adopted) return sendJson(res, 200, { session: adopted.id });
    if (pending.blobStored ?? await this.host.blobExists(filehash)) {
      const result = await this.host.completeUpload(pathhash, null);
      this.log.info({ fullpath: result.fullpath, size: filesize }, 'instant upload');
      return sendJson(res, 202, result);
    }
    const remaining = pending.remaining ?? await this.host.remainingCapacity(pending.libraryId);
    if (filesize > remaining) {
      throw new UploadError(403, UploadErrorCode.CapacityExceeded, `library capacity exceeded: upload needs ${filesize} bytes, ${Math.max(0, remaining)} left`);
    }
    const now = this.clock();
    const record: SessionRecord = {
      id: UploadSessions.newId(), pathhash, libraryId: pending.libraryId, fullpath: pending.fullpath, filename,
      filehash, filesize, createdAt: now, touchedAt: now, busy: null, busyUntil: 0, receivedKnown: true, writingFrom: 0,
    };
    await this.journal.staging.create(record.id);
    await this.journal.create(record);
    this.sessions.set(record.id, { record, hash: createHash('sha1'), hashedBytes: 0 });
    this.log.info({ session: record.id.slice(0, 8), fullpath: record.fullpath, size: filesize }, 'upload session open');
    sendJson(res, 200, { session: record.id });
  }

  /**
   * Moves one of the idle unfinished sessions for the same library, path and content (`idle`, see
   * UploadSessions.forStep) to the create_file step `pathhash`.
   */
  private async adopt(pathhash: string, fullpath: string, idle: readonly SessionRecord[]): Promise<SessionRecord | undefined> {
    for (const r of idle) {
      if (this.sessions.get(r.id)?.finishing) continue;
      if ((await this.journal.committedBytes(r.id)) === undefined) continue;
      if (!await this.journal.movePathhash(r.id, r.pathhash, pathhash, this.clock())) continue;
      this.log.info({ session: r.id.slice(0, 8), fullpath, previous: r.pathhash.slice(0, 8) }, 'upload session taken over by a repeated create_file');
      return { ...r, pathhash };
    }
    return undefined;
  }

  /** Takes the session's temporary file for this request, or refuses with 410 naming who holds it. */
  private async claim(s: LiveSession, busy: SessionBusy): Promise<void> {
    if (await this.journal.claim(s.record.id, busy, this.clock(), this.busyLeaseMs)) return;
    const now = (await this.journal.load(s.record.id)) ?? s.record;
    if (now.result) throw new UploadError(410, UploadErrorCode.TempFileBusy, 'upload already finished');
    throw new UploadError(410, UploadErrorCode.TempFileBusy, `temporary file busy (${now.busy === 'part' ? 'another block is being written' : 'being finished'})`);
  }

  private parseRange(text: string, filesize: number): { start: number; length: number } {
    const m = RANGE_RE.exec(text);
    if (!m) throw new UploadError(416, UploadErrorCode.BadRange, `${this.prefix}upload-range expected "<first>-<last>" byte positions, got ${JSON.stringify(text)}`);
    const start = Number(m[1]);
    const end = Number(m[2]);
    if (end < start || end >= filesize) {
      throw new UploadError(416, UploadErrorCode.BadRange, `${this.prefix}upload-range expected a range within 0-${filesize - 1}, got ${JSON.stringify(text)}`);
    }
    return { start, length: end - start + 1 };
  }

  /**
   * A part whose headers are well formed, claimed in the statement that reads its session (one round
   * trip): taken only when the session is unfinished, free and long enough for the block. Undefined
   * otherwise, and nothing changed: `checkedPart` then gives the answer it always gave.
   */
  private async claimedPart(req: IncomingMessage): Promise<ClaimedPart | undefined> {
    const id = this.header(req, 'upload-session') ?? this.sessionParam(req);
    const rangeText = this.header(req, 'upload-range');
    const m = rangeText === undefined ? null : RANGE_RE.exec(rangeText);
    if (id === undefined || !m) return undefined;
    const start = Number(m[1]);
    const end = Number(m[2]);
    const length = end - start + 1;
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (!Number.isSafeInteger(end) || end < start || length > this.maxBlock || declared > this.maxBlock) return undefined;
    const crcText = this.header(req, 'upload-crc');
    const crc = crcText === undefined ? undefined : parseCrc32(crcText);
    if (crcText !== undefined && crc === undefined) return undefined;
    const record = await this.journal.claimPart(id, end, this.clock(), this.busyLeaseMs);
    return record && { s: this.live(record), start, length, crc, writingFrom: record.writingFrom };
  }

  /** A part's session read, its headers checked in the order of the protocol's answers, then claimed. */
  private async checkedPart(req: IncomingMessage): Promise<ClaimedPart> {
    const s = await this.session(req);
    const rangeText = this.requireHeader(req, 'upload-range');
    const crcText = this.header(req, 'upload-crc');
    if (s.record.result) throw new UploadError(410, UploadErrorCode.TempFileBusy, 'upload already finished');
    const holder = this.busyNow(s.record);
    if (holder) throw new UploadError(410, UploadErrorCode.TempFileBusy, `temporary file busy (${holder === 'part' ? 'another block is being written' : 'being finished'})`);
    const { start, length } = this.parseRange(rangeText, s.record.filesize);
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (length > this.maxBlock || declared > this.maxBlock) {
      throw new UploadError(413, UploadErrorCode.BlockTooLarge, `block too large: ${Math.max(length, declared || 0)} bytes, at most ${this.maxBlock}`);
    }
    let crc: number | undefined;
    if (crcText !== undefined) {
      crc = parseCrc32(crcText);
      if (crc === undefined) throw new UploadError(400, UploadErrorCode.BadParam, `${this.prefix}upload-crc expected an unsigned 32-bit integer, got ${JSON.stringify(crcText)}`);
    }
    await this.claim(s, 'part');
    return { s, start, length, crc, writingFrom: -1 };
  }

  private async part(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { s, start, length, crc, writingFrom } = await this.claimedPart(req) ?? await this.checkedPart(req);
    // The bytes staged when the part leaves, when it is sure of them: then the next part's claim takes
    // them as its `writing_from` and need not write it.
    let received: number | undefined;
    try {
      const committed = await this.committed(s);
      // What upload_req answers while the block is written: the claim may have set it already.
      if (writingFrom !== committed) await this.journal.setWritingFrom(s.record.id, committed);
      if (start !== committed) {
        received = committed;
        throw new UploadError(409, UploadErrorCode.UnexpectedOffset, `block starts at ${start}, expected ${committed}`, { expect: committed });
      }
      if (!s.hash || s.hashedBytes !== committed) {
        s.hash = await sha1OfStaged(this.journal.staging, s.record.id, committed);
        s.hashedBytes = committed;
      }
      s.hash = await stageBlock(this.journal.staging, s.record.id, req, { start, length, crc }, s.hash);
      s.hashedBytes = committed + length;
      received = committed + length;
    } catch (e) {
      if (!isStatusError(e) && (req.destroyed || req.readableAborted)) {
        this.log.info({ session: s.record.id.slice(0, 8), start }, 'block cut off by the client; temporary file kept at its start');
        return;
      }
      throw e;
    } finally {
      if (received === undefined) await this.journal.release(s.record.id, 'part', this.clock());
      else await this.journal.releasePart(s.record.id, received, this.clock());
    }
    const complete = start + length === s.record.filesize;
    sendJson(res, complete ? 202 : 200, {});
  }

  private async req(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const s = await this.session(req, { touch: true });
    // while a block is being written, only the bytes before it are committed
    const r = s.record;
    const n = r.result ? r.filesize : this.busyNow(r) === 'part' && r.writingFrom >= 0 ? r.writingFrom : await this.committed(s);
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': String(String(n).length) });
    res.end(String(n));
  }

  private async finish(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const s = await this.session(req, { touch: true });
    if (s.record.result) return sendJson(res, 200, s.record.result);
    const failure = s.record.failure;
    if (failure !== undefined) {
      // reported once; a refusal ends the session, a fault leaves it for another finish
      if (await this.journal.takeFailure(s.record.id, failure)) {
        if (failure.status < 500) await this.journal.remove(s.record.id);
        throw new UploadError(failure.status, failure.code, failure.message, failure.extra);
      }
      return this.finish(req, res);
    }
    if (!s.finishing) {
      const holder = this.busyNow(s.record);
      // another process is committing this session: ask again
      if (holder === 'finish') return sendJson(res, 202, {});
      if (holder) throw new UploadError(410, UploadErrorCode.TempFileBusy, 'temporary file busy (a block is being written)');
      const committed = await this.committed(s);
      if (committed < s.record.filesize) {
        throw new UploadError(409, UploadErrorCode.UnexpectedOffset, `data incomplete: ${committed} of ${s.record.filesize} bytes received`, { expect: committed });
      }
      await this.claim(s, 'finish');
      s.finishing = this.commit(s)
        .catch((e) => this.onCommitFailure(s, e))
        .finally(() => { s.finishing = undefined; });
    }
    const current = s.finishing;
    let timer: NodeJS.Timeout | undefined;
    const done = await Promise.race([
      current.then(() => true),
      new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), this.finishWaitMs); }),
    ]);
    clearTimeout(timer);
    if (!done) return sendJson(res, 202, {});
    // Committed here: the result just recorded is the answer, without reading it back.
    if (s.committed) return sendJson(res, 200, s.committed);
    return this.finish(req, res);
  }

  /**
   * Verifies size and SHA-1 of the staged bytes (read back when this process did not see them all), then
   * hands them to the host to commit.
   */
  private async commit(s: LiveSession): Promise<void> {
    const { record } = s;
    const size = await this.committed(s);
    if (!s.hash || s.hashedBytes !== size) s.hash = await sha1OfStaged(this.journal.staging, record.id, size);
    const sha1 = s.hash.copy().digest('hex');
    if (size !== record.filesize || sha1 !== record.filehash) {
      throw new UploadError(400, UploadErrorCode.ContentMismatch,
        `content mismatch: received ${size} bytes with SHA-1 ${sha1}, expected ${record.filesize} bytes with SHA-1 ${record.filehash}`,
        { received: sha1, expected: record.filehash });
    }
    // The result is recorded in the transaction that writes the file, when the host runs it there.
    let recorded = false;
    const result = await this.host.completeUpload(record.pathhash, await this.journal.staging.finished(record.id, sha1, size), async (file) => {
      await this.journal.finished(record.id, file, this.clock());
      recorded = true;
    });
    record.result = result;
    if (!recorded) await this.journal.finished(record.id, result, this.clock());
    s.committed = result;
    await this.journal.removePart(record.id);
    this.log.info({ session: record.id.slice(0, 8), fullpath: result.fullpath, size }, 'upload finished');
  }

  /** A refused commit (bad content, host refusal) ends the session; a fault keeps it for another finish. */
  private async onCommitFailure(s: LiveSession, e: unknown): Promise<void> {
    const failure: StoredFailure = isStatusError(e)
      ? { status: e.status, code: e.code, message: e.message, ...(e.extra ? { extra: e.extra } : {}) }
      : { status: 500, code: UploadErrorCode.Internal, message: 'internal error' };
    if (isStatusError(e) && e.status < 500) {
      this.log.warn({ session: s.record.id.slice(0, 8), code: e.code, error: e.message }, 'upload refused at finish');
      await this.journal.removePart(s.record.id).catch((err) => this.log.warn({ err }, 'removing a refused session failed'));
    } else {
      this.log.error({ err: e, session: s.record.id.slice(0, 8) }, 'upload commit failed');
    }
    await this.journal.failed(s.record.id, failure, this.clock()).catch((err) => this.log.error({ err }, 'recording a failed finish failed'));
  }

  private async abort(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const s = await this.session(req);
    const holder = this.busyNow(s.record);
    if (holder || s.finishing) throw new UploadError(410, UploadErrorCode.TempFileBusy, `temporary file busy (${holder === 'part' ? 'a block is being written' : 'being finished'})`);
    this.sessions.delete(s.record.id);
    await this.journal.remove(s.record.id);
    this.log.info({ session: s.record.id.slice(0, 8), fullpath: s.record.fullpath }, 'upload aborted');
    sendJson(res, 200, {});
  }

  /**
   * Removes expired sessions with their staged bytes, and staged bytes of no session; one process of a
   * service at a time (the lease `upload-sweep`, held for a sweep interval, so each interval one process
   * sweeps). Every process forgets the sessions that ended elsewhere and its own web upload leftovers.
   */
  async sweep(): Promise<void> {
    const now = this.clock();
    if (await this.journal.takeLease('upload-sweep', this.holder, now, this.sweepIntervalMs)) {
      for (const r of await this.journal.expired(now, this.sessionTtlMs, this.finishedTtlMs)) {
        if (this.sessions.get(r.id)?.finishing) continue;
        this.sessions.delete(r.id);
        await this.journal.remove(r.id);
        if (!r.result) this.log.info({ session: r.id.slice(0, 8), fullpath: r.fullpath }, 'upload session expired');
      }
      // Staged bytes without their record (the process died inside upload_init, or between removing a
      // session's bytes and its record) can never be resumed: they go once still for STRAY_GRACE_MS
      // (another process may be between the two writes of an upload_init).
      const strays = await this.journal.staging.removeStrays((id) => this.journal.exists(id), now, Math.min(this.sessionTtlMs, STRAY_GRACE_MS));
      if (strays > 0) this.log.info({ strays }, 'staged bytes of no session removed');
    }
    // The cache keeps only sessions that still exist (another process may have ended or expired one).
    for (const [id, s] of this.sessions) {
      if (!s.finishing && !await this.journal.load(id)) this.sessions.delete(id);
    }
    // A web upload's file goes after the session TTL.
    for (const name of await readdir(this.webDir).catch(() => [] as string[])) {
      const path = join(this.webDir, name);
      const mtime = await stat(path).then((st) => st.mtimeMs, () => undefined);
      if (mtime !== undefined && now - mtime >= this.sessionTtlMs) await rm(path, { force: true, recursive: true });
    }
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}
