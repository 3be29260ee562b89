/**
 * FakeUploadServer: a small local HTTP server for the client's tests. It records every request (method,
 * path, query and form parameters, headers), answers the create_file step and the web upload key calls
 * of the service, and runs the chunked upload protocol and web upload with faults injected on command.
 * Content is kept in memory (small test files) or only hashed (`keepBytes: false`, for benchmarks).
 * Other paths answer what `respond()` set, else `{}`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createHash, type Hash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import busboy from 'busboy';
import { crc32 } from '../../src/shared/crc32.js';

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  /** Form fields (urlencoded or multipart) of the body; empty for other bodies. */
  form: Record<string, string>;
  headers: Record<string, string | string[] | undefined>;
  /** Bytes of a non-form body (upload_part), or of the multipart file part. */
  bodyLength: number;
}

/** What the next upload_part request meets (consumed one per request). */
export type PartFault =
  | 'crc' // 400 error_code 40001, block discarded
  | 'store-then-500' // block stored, then 500 (the client must ask upload_req)
  | '500' // 500, nothing stored
  | 'store-then-drop' // block stored, then the connection is destroyed without an answer
  | 'drop' // connection destroyed before reading the block
  | 'lose-last-block' // block discarded and the one before it too; answers 409 with expect
  | '410'; // 410, nothing stored

interface Session {
  id: string;
  pathhash: string;
  filehash: string;
  filesize: number;
  filename: string;
  committed: number;
  /** Committed bytes (keepBytes) — blocks in order. */
  chunks: Buffer[];
  sha1: Hash;
  finished: boolean;
  aborted: boolean;
}

export interface StoredFile { fullpath: string; filehash: string; filesize: number; content?: Buffer }

/** The answer of a service API path: status, JSON body, and a delay before answering (ms). */
export type Responder = (r: RecordedRequest) => { status: number; body: unknown; delayMs?: number };

export interface FakeUploadServerOptions {
  /** Keep uploaded bytes in memory (default true); false only hashes them. */
  keepBytes?: boolean;
  /** `server` of create_file: without scheme (as some services answer) when true. Default true. */
  bareServer?: boolean;
}

export class FakeUploadServer {
  readonly requests: RecordedRequest[] = [];
  /** Faults of the next upload_part requests, in order (undefined: answered normally). */
  readonly partFaults: (PartFault | undefined)[] = [];
  /** upload_finish answers 202 this many times before it finishes. */
  finishProcessing = 0;
  /** upload_init answers 202 (instant) for these filehashes. */
  readonly initInstant = new Set<string>();
  /** Contents the service holds (create_file answers state 1 for them). */
  readonly known = new Set<string>();
  /** Files completed through the fake, by fullpath. */
  readonly files = new Map<string, StoredFile>();
  readonly sessions = new Map<string, Session>();
  /** Peak bytes of one upload_part body. */
  maxBlock = 0;
  private readonly responders = new Map<string, Responder>();
  private readonly pathhashes = new Map<string, string>();
  private server?: Server;
  private seq = 0;
  private readonly keepBytes: boolean;
  private readonly bareServer: boolean;

  constructor(opts: FakeUploadServerOptions = {}) {
    this.keepBytes = opts.keepBytes ?? true;
    this.bareServer = opts.bareServer ?? true;
  }

  get url(): string {
    const a = this.server?.address() as AddressInfo | null;
    if (!a) throw new Error('fake upload server not started');
    return `http://127.0.0.1:${a.port}`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: Error) => {
        if (!res.headersSent) json(res, 500, { error_code: 50001, error_msg: err.message });
        else res.destroy();
      });
    });
    this.server.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return this;
  }

  async close(): Promise<void> {
    const s = this.server;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  /** Sets the answer of a path of the service API. */
  respond(path: string, fn: Responder): void {
    this.responders.set(path, fn);
  }

  /** Requests to paths ending with `suffix`. */
  calls(suffix: string): RecordedRequest[] {
    return this.requests.filter((r) => r.path.endsWith(suffix));
  }

  /** Forgets recorded requests, answers set by respond(), and pending faults. */
  reset(): void {
    this.requests.length = 0;
    this.partFaults.length = 0;
    this.finishProcessing = 0;
    this.responders.clear();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const rec: RecordedRequest = {
      method: req.method ?? '', path: url.pathname, query: Object.fromEntries(url.searchParams), form: {}, headers: req.headers, bodyLength: 0,
    };
    this.requests.push(rec);
    const h = (name: string) => String(req.headers[`x-svc-${name}`] ?? '');
    switch (url.pathname) {
      case '/up/upload_init': return this.init(req, res, h);
      case '/up/upload_part': return this.part(req, res, rec, h);
      case '/up/upload_req': {
        const s = this.sessions.get(h('upload-session'));
        return s ? text(res, 200, String(s.committed)) : json(res, 401, { error_code: 40100, error_msg: 'session parameter wrong' });
      }
      case '/up/upload_finish': return this.finish(res, h);
      case '/up/upload_abort': {
        const s = this.sessions.get(h('upload-session'));
        if (!s) return json(res, 401, { error_code: 40100, error_msg: 'session parameter wrong' });
        s.aborted = true;
        this.sessions.delete(s.id);
        return json(res, 200, {});
      }
      case '/up/2/web_upload': return this.webUpload(req, res, rec);
      default: break;
    }
    rec.form = await readForm(req);
    const params = { ...rec.query, ...rec.form };
    const custom = this.responders.get(url.pathname);
    if (custom) {
      const a = custom(rec);
      // eslint-disable-next-line no-restricted-syntax -- the latency a responder asks the fake server for, not a wait
      if (a.delayMs) await new Promise((resolve) => setTimeout(resolve, a.delayMs));
      if (!res.destroyed) json(res, a.status, a.body);
      return;
    }
    if (url.pathname === '/m-open/1/file/create_file' || url.pathname === '/m-api/2/file/create_file') {
      const pathhash = `h${++this.seq}`;
      this.pathhashes.set(pathhash, params.fullpath ?? '');
      const state = this.known.has(params.filehash ?? '') ? 1 : 0;
      if (state === 1) this.files.set(params.fullpath ?? '', { fullpath: params.fullpath ?? '', filehash: params.filehash ?? '', filesize: Number(params.filesize) });
      const host = this.url.replace(/^http:\/\//, '');
      return json(res, 200, { hash: pathhash, fullpath: params.fullpath, state: String(state), server: `${this.bareServer ? host : this.url}/up` });
    }
    if (url.pathname === '/m-open/1/file/upload_servers') return json(res, 200, { 'm-upload': [`${this.url}/up`], key: `key-${++this.seq}` });
    if (url.pathname === '/m-api/1/file/upload_server') return json(res, 200, { server: `${this.url}/up` });
    return json(res, 200, {});
  }

  private init(req: IncomingMessage, res: ServerResponse, h: (n: string) => string): void {
    req.resume();
    const filehash = h('upload-filehash');
    const filesize = Number(h('upload-filesize'));
    const pathhash = h('upload-pathhash');
    if (!filehash || !pathhash || !h('upload-filename') || !Number.isFinite(filesize)) return json(res, 400, { error_code: 40003, error_msg: 'missing parameter' });
    if (this.initInstant.has(filehash)) {
      this.store(pathhash, filehash, filesize);
      return json(res, 202, {});
    }
    const id = `s${++this.seq}`;
    this.sessions.set(id, {
      id, pathhash, filehash, filesize, filename: decodeURIComponent(h('upload-filename')), committed: 0, chunks: [], sha1: createHash('sha1'), finished: false, aborted: false,
    });
    json(res, 200, { session: id });
  }

  private async part(req: IncomingMessage, res: ServerResponse, rec: RecordedRequest, h: (n: string) => string): Promise<void> {
    const s = this.sessions.get(h('upload-session'));
    const fault = this.partFaults.shift();
    if (fault === 'drop') { req.socket.destroy(); return; }
    const body = await readBody(req);
    rec.bodyLength = body.length;
    this.maxBlock = Math.max(this.maxBlock, body.length);
    if (!s) return json(res, 401, { error_code: 40100, error_msg: 'session parameter wrong' });
    const m = /^(\d+)-(\d+)$/.exec(h('upload-range'));
    if (!m) return json(res, 416, { error_code: 41600, error_msg: 'range parameter wrong' });
    const start = Number(m[1]);
    const end = Number(m[2]);
    if (end - start + 1 !== body.length) return json(res, 400, { error_code: 40002, error_msg: `length ${body.length}, expected ${end - start + 1}` });
    if (fault === 'crc' || (h('upload-crc') !== '' && Number(h('upload-crc')) !== crc32(body))) {
      return json(res, 400, { error_code: 40001, error_msg: `crc received ${h('upload-crc')}, expected ${crc32(body)}` });
    }
    if (fault === '500') return json(res, 500, { error_code: 50001, error_msg: 'block write failed' });
    if (fault === '410') return json(res, 410, { error_code: 41000, error_msg: 'temporary file busy' });
    if (start !== s.committed) return json(res, 409, { error_code: 40900, error_msg: `expected ${s.committed}`, expect: s.committed });
    if (fault === 'lose-last-block') {
      const last = s.chunks.pop();
      if (last) this.rehash(s, s.committed - last.length);
      return json(res, 409, { error_code: 40900, error_msg: `expected ${s.committed}`, expect: s.committed });
    }
    s.committed += body.length;
    s.sha1.update(body);
    if (this.keepBytes) s.chunks.push(body);
    if (fault === 'store-then-500') return json(res, 500, { error_code: 50001, error_msg: 'block write failed' });
    if (fault === 'store-then-drop') { res.socket?.destroy(); return; }
    json(res, s.committed === s.filesize ? 202 : 200, {});
  }

  private finish(res: ServerResponse, h: (n: string) => string): void {
    const s = this.sessions.get(h('upload-session'));
    if (!s) return json(res, 401, { error_code: 40100, error_msg: 'session parameter wrong' });
    if (s.committed < s.filesize) return json(res, 409, { error_code: 40900, error_msg: 'data incomplete', expect: s.committed });
    if (this.finishProcessing > 0) { this.finishProcessing--; return json(res, 202, {}); }
    const sha1 = s.sha1.copy().digest('hex');
    if (sha1 !== s.filehash) return json(res, 400, { error_code: 40004, error_msg: `content sha1 ${sha1}, expected ${s.filehash}` });
    s.finished = true;
    this.store(s.pathhash, s.filehash, s.filesize, this.keepBytes ? Buffer.concat(s.chunks) : undefined);
    json(res, 200, {});
  }

  private store(pathhash: string, filehash: string, filesize: number, content?: Buffer): void {
    const fullpath = this.pathhashes.get(pathhash) ?? pathhash;
    this.files.set(fullpath, { fullpath, filehash, filesize, content });
    this.known.add(filehash);
  }

  private rehash(s: Session, committed: number): void {
    s.committed = committed;
    s.sha1 = createHash('sha1');
    for (const c of s.chunks) s.sha1.update(c);
  }

  private async webUpload(req: IncomingMessage, res: ServerResponse, rec: RecordedRequest): Promise<void> {
    const fields: Record<string, string> = {};
    const hash = createHash('sha1');
    const chunks: Buffer[] = [];
    let size = 0;
    await new Promise<void>((resolve, reject) => {
      const form = busboy({ headers: req.headers });
      form.on('field', (name, value) => { fields[name] = value; });
      form.on('file', (_name, stream) => {
        stream.on('data', (c: Buffer) => { size += c.length; hash.update(c); if (this.keepBytes) chunks.push(c); });
      });
      form.on('close', resolve);
      form.on('error', reject);
      req.pipe(form);
    });
    rec.form = fields;
    rec.bodyLength = size;
    const fullpath = fields.path ? `${fields.path}/${fields.name}` : (fields.name ?? '');
    if (!(fields.org_client_id && fields.key?.startsWith('key-')) && !(fields.token && fields.mount_id)) {
      return json(res, 401, { error_code: 40101, error_msg: 'credentials missing', fullpath });
    }
    const filehash = hash.digest('hex');
    this.files.set(fullpath, { fullpath, filehash, filesize: size, content: this.keepBytes ? Buffer.concat(chunks) : undefined });
    json(res, 200, { fullpath, filesize: String(size), hash: `w${++this.seq}` });
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const data = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
  res.end(data);
}

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks);
}

async function readForm(req: IncomingMessage): Promise<Record<string, string>> {
  const body = await readBody(req);
  if (!String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) return {};
  return Object.fromEntries(new URLSearchParams(body.toString('utf8')));
}
