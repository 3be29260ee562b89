/**
 * The gateway's own control methods: `status`, `flush`, `cache.drop`, `library.ls|add|remove`,
 * `upload`, `download`, `version.restore`. They act on the running gateway (its Vfs and its clients);
 * the endpoint methods (methods.ts) reach the service directly.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { isAbsolute } from 'node:path';
import { replaceFile } from '../shared/atomic-file.js';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import type { ServiceClient } from '../api/client.js';
import type { GatewayStatus, Vfs } from '../vfs/index.js';
import type { HistoryItem } from '../shared/records.js';
import { RpcErrorCode, RpcFailure } from './protocol.js';
import { resolveLibrary, type CallEnv, type Progress, type ControlMethod, type ControlTarget, type MethodParamHelp, type ServedLibrary } from './methods.js';

/**
 * What the control methods use of the gateway's file system: the Vfs's file operations, the gateway's
 * status and its cache controls (an interface of control's own, not the Vfs class).
 */
export interface AdminVfs extends Pick<Vfs, 'stat' | 'readdir' | 'mkdir' | 'copy' | 'createReadStream' | 'writeFile' | 'flushAll'> {
  status(): GatewayStatus;
  /** Drops cached metadata and blocks (not local files or pending uploads). */
  dropCaches(): void;
  /** Polls every library's updates feed now. */
  refresh(): Promise<void>;
}

/** What the gateway methods need from the running gateway. */
export interface GatewayControlTarget extends ControlTarget {
  vfs: AdminVfs;
  /** Serves one more library, by its library authorization. Returns the folder name it got. */
  addLibrary(auth: { org_client_id: string; org_client_secret: string; name?: string }): Promise<{ name: string; id: string }>;
  /** A library authorization for a library of the enterprise, by its name or org_id (needs enterprise credentials). */
  bindLibrary(org: string): Promise<{ org_client_id: string; org_client_secret: string }>;
  /** Stops serving a library folder (refused while it has pending files). */
  removeLibrary(name: string): Promise<void>;
  /** Addresses and facts of the running gateway (service URL, WebDAV URL, mount point, start time). */
  describe(): Record<string, unknown>;
  /** The journals of the members' open sessions (members acting as themselves), when there are members. */
  members?: MemberJournals;
}

type UploadStatus = GatewayStatus['uploads'][number];

/** The uploads waiting in the members' own journals: `status` lists them, `flush` waits for them too. */
export interface MemberJournals {
  uploads(): (UploadStatus & { member: string })[];
  flushAll(opts?: { timeoutMs?: number }): Promise<void>;
}

const FLUSH_POLL_MS = 200;
/** Shortest time between two progress notifications of one call. */
const PROGRESS_MS = 100;
const PATH_PARAM = param('path', 'string', true, 'gateway path /<library>/<path>, or a path inside `library`');
const LIBRARY_PARAM = param('library', 'string', false, 'library name, when `path` is not a gateway path (may be left out when the gateway serves one library)');

function param(name: string, type = 'string', required = true, note?: string): MethodParamHelp {
  return { name, required, type, ...(note ? { note } : {}) };
}

function text(params: Record<string, unknown>, name: string, opts: { optional?: boolean } = {}): string {
  const v = params[name];
  if (v === undefined || v === null || v === '') {
    if (opts.optional) return '';
    throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter '${name}' is required`, { param: name });
  }
  if (typeof v !== 'string') throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter '${name}': expected a string, got ${typeof v} ${JSON.stringify(v)}`, { param: name });
  return v;
}

function onlyKnown(params: Record<string, unknown>, known: string[], method: string): void {
  for (const k of Object.keys(params)) {
    if (!known.includes(k)) throw new RpcFailure(RpcErrorCode.InvalidParams, `${method}: unknown parameter '${k}' (expected ${known.join(', ') || 'none'})`, { param: k });
  }
}

function localPath(params: Record<string, unknown>, name: string): string {
  const p = text(params, name);
  if (!isAbsolute(p)) throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter '${name}': expected an absolute local path, got '${p}'`, { param: name });
  return p;
}

/**
 * A path parameter of a gateway method: a gateway path `/<library>/<path>`, or a fullpath with
 * `library` (which may be left out when the gateway serves one library).
 */
function gatewayPath(target: ControlTarget, params: Record<string, unknown>, name: string): { path: string; lib: ServedLibrary; fullpath: string } {
  const p: Record<string, unknown> = { fullpath: text(params, name), ...(params.library !== undefined ? { library: params.library } : {}) };
  const lib = resolveLibrary(target, p);
  const fullpath = String(p.fullpath).replace(/^\/+|\/+$/g, '');
  if (fullpath === '') throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter '${name}': expected a path inside a library, got '${String(params[name])}'`, { param: name });
  return { path: `/${lib.name}/${fullpath}`, lib, fullpath };
}

/** Reports progress at most every PROGRESS_MS, and always when `final`. */
function throttledProgress(env: CallEnv, total: number, unit: Progress['unit'], what: string): (done: number, final?: boolean) => void {
  let last = 0;
  return (done, final = false) => {
    const now = Date.now();
    if (!final && now - last < PROGRESS_MS) return;
    last = now;
    env.progress({ done, total, unit, what });
  };
}

/** Counts the bytes that pass and reports them as progress. */
function progressCounter(env: CallEnv, total: number, what: string): Transform {
  let done = 0;
  const report = throttledProgress(env, total, 'bytes', what);
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      done += chunk.length;
      report(done);
      cb(null, chunk);
    },
    flush(cb) {
      report(done, true);
      cb();
    },
  });
}

/** Bytes and files under a gateway path (a file: itself). */
async function treeSize(vfs: AdminVfs, path: string): Promise<{ bytes: number; files: number }> {
  const attr = await vfs.stat(path);
  if (!attr.isDir) return { bytes: attr.size, files: 1 };
  let bytes = 0;
  let files = 0;
  for (const child of await vfs.readdir(path)) {
    const sub = await treeSize(vfs, `${path}/${child.name}`);
    bytes += sub.bytes;
    files += sub.files;
  }
  return { bytes, files };
}

/** Creates the missing folders above a gateway path (like the service's create_file does). */
async function mkdirParents(vfs: AdminVfs, path: string): Promise<void> {
  const parts = path.split('/').filter(Boolean).slice(0, -1);
  for (let i = 2; i <= parts.length; i++) {
    const dir = '/' + parts.slice(0, i).join('/');
    const st = await vfs.stat(dir).catch(() => undefined);
    if (st?.isDir) continue;
    if (st) throw new RpcFailure(RpcErrorCode.InvalidParams, `'${dir}' is a file, not a folder`, { param: 'path' });
    await vfs.mkdir(dir);
  }
}

/**
 * One file copied to another library with its bytes reported as they move: read into the gateway's
 * journal (progress `read`), then uploaded like any written file (progress `copied`: the bytes the
 * service has). Returns once the service has it; refuses an existing target unless replacing.
 */
async function copyFileAcross(vfs: AdminVfs, from: string, to: string, noReplace: boolean, size: number, env: CallEnv): Promise<void> {
  if (noReplace && (await vfs.stat(to).catch(() => undefined))) throw new RpcFailure(RpcErrorCode.GatewayError, `${to} exists (overwrite=1 replaces it)`, { code: 'EEXIST' });
  const source = await vfs.createReadStream(from);
  const counted = source.pipe(progressCounter(env, size, 'read'));
  source.on('error', (err) => counted.destroy(err));
  await vfs.writeFile(to, counted);
  const report = throttledProgress(env, size, 'bytes', 'copied');
  const timer = setInterval(() => {
    const u = vfs.status().uploads.find((x) => `/${x.library}/${x.fullpath}` === to);
    if (u?.sentBytes !== undefined) report(u.sentBytes);
  }, PROGRESS_MS);
  try {
    await vfs.flushAll();
  } finally {
    clearInterval(timer);
  }
  const left = vfs.status().uploads.filter((u) => `/${u.library}/${u.fullpath}` === to);
  if (left.length) throw new RpcFailure(RpcErrorCode.GatewayError, `'${to}' is kept for upload but not on the service yet: ${left[0]!.lastError ?? 'retrying'}`);
}

/** Finds a history version of a file by its id (`hid`) or content hash. */
async function findVersion(client: ServiceClient, fullpath: string, version: string): Promise<HistoryItem> {
  const pageSize = 100;
  for (let start = 0; ; start += pageSize) {
    const page = await client.file.history({ fullpath, start, size: pageSize });
    const hit = page.list.find((h) => h.hid === version || h.filehash === version.toLowerCase());
    if (hit) return hit;
    if (page.list.length < pageSize || start + pageSize >= page.count) break;
  }
  throw new RpcFailure(RpcErrorCode.InvalidParams, `no version '${version}' in the history of '${fullpath}'`, { param: 'version' });
}

export function gatewayMethods(target: GatewayControlTarget): ControlMethod[] {
  const vfs = target.vfs;
  /** Every upload waiting: the gateway's journal and each member's (those name their member). */
  const allUploads = (): (UploadStatus & { member?: string })[] => [...vfs.status().uploads, ...(target.members?.uploads() ?? [])];
  const flushEvery = async (opts: { timeoutMs?: number } = {}): Promise<void> => {
    const results = await Promise.allSettled([vfs.flushAll(opts), target.members?.flushAll(opts) ?? Promise.resolve()]);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  };
  const where = (u: UploadStatus & { member?: string }): string => `/${u.library}/${u.fullpath}${u.member ? ` (member ${u.member})` : ''}`;
  return [
    {
      name: 'status',
      summary: 'Libraries served, feed cursors and health, caches and hit rates, pending uploads and errors',
      params: [],
      handler: async (params) => {
        onlyKnown(params, [], 'status');
        const s = vfs.status();
        const rate = (h: number, m: number) => (h + m === 0 ? null : h / (h + m));
        return {
          ...target.describe(),
          libraries: target.libraries().map((l) => {
            const c = s.libraries.find((x) => x.library === l.name);
            return { name: l.name, online: c?.online ?? true, offlineSinceMs: c?.offlineSinceMs, offlineError: c?.lastError, pendingUploads: c?.pendingUploads ?? 0 };
          }),
          feeds: s.feeds.map((f) => ({ ...f, lagMs: f.lastPollMs ? Date.now() - f.lastPollMs : null })),
          // An upload under way says how long it has not moved: a stalled one (a full or stopped service) shows it.
          uploads: {
            pending: s.uploads.length + (target.members?.uploads().length ?? 0),
            list: allUploads().map((u) => (u.state === 'uploading' && u.progressMs !== undefined ? { ...u, stalledMs: Math.max(0, Date.now() - u.progressMs) } : u)),
          },
          stranded: s.stranded,
          localFiles: s.localFiles,
          caches: {
            metadata: { ...s.metadata, hitRate: rate(s.metadata.hits, s.metadata.misses) },
            blocks: { ...s.blocks, hitRate: rate(s.blocks.hits, s.blocks.misses) },
            ...(s.disk ? { disk: { ...s.disk, hitRate: rate(s.disk.hits, s.disk.misses) } } : {}),
          },
        };
      },
    },
    {
      name: 'flush',
      summary: 'Waits until every pending upload is on the service, members\' journals included (progress: bytes the service has of those pending)',
      params: [param('timeout_s', 'number', false, 'give up waiting after this many seconds (the uploads go on); default: wait')],
      handler: async (params, env) => {
        onlyKnown(params, ['timeout_s'], 'flush');
        const t = params.timeout_s === undefined ? undefined : Number(params.timeout_s);
        if (t !== undefined && !(Number.isFinite(t) && t > 0)) throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter 'timeout_s': expected a number of seconds > 0, got ${JSON.stringify(params.timeout_s)}`, { param: 'timeout_s' });
        // Every upload seen pending while waiting counts, by its size (known once hashed); the bytes done
        // are those the service has: all of a finished upload, `sentBytes` of one under way.
        const seen = new Map<string, number>();
        const report = (): void => {
          const pending = allUploads();
          const key = (u: { id: string; member?: string }): string => `${u.member ?? ''}\0${u.id}`;
          const now = new Map(pending.map((u) => [key(u), u]));
          for (const u of pending) seen.set(key(u), Math.max(seen.get(key(u)) ?? 0, u.size ?? 0));
          let total = 0;
          let done = 0;
          let filesDone = 0;
          for (const [id, size] of seen) {
            total += size;
            const u = now.get(id);
            if (!u) { done += size; filesDone++; } else done += Math.min(size, u.sentBytes ?? 0);
          }
          env.progress({ done, total, unit: 'bytes', what: `uploaded (${filesDone} of ${seen.size} files)` });
        };
        report();
        const timer = setInterval(report, FLUSH_POLL_MS);
        let failure: string | undefined;
        try {
          await flushEvery({ timeoutMs: t === undefined ? undefined : t * 1000 });
        } catch (err) {
          failure = (err as Error).message; // uploads failing: they stay queued, reported below
        } finally {
          clearInterval(timer);
        }
        report();
        const left = allUploads();
        if (left.length > 0) {
          const why = failure ?? (t === undefined ? 'still pending' : `still pending after ${t} s`);
          throw new RpcFailure(RpcErrorCode.GatewayError, `${left.length} upload(s) not on the service: ${why} (they go on; see status)`, { pending: left.map(where) });
        }
        return { pending: 0 };
      },
    },
    {
      name: 'cache.drop',
      summary: 'Drops the cached metadata and blocks (local files and pending uploads are kept)',
      params: [],
      handler: async (params) => {
        onlyKnown(params, [], 'cache.drop');
        vfs.dropCaches();
        return { dropped: true };
      },
    },
    {
      name: 'library.ls',
      summary: 'Libraries served by the gateway, with their feed state',
      params: [],
      handler: async (params) => {
        onlyKnown(params, [], 'library.ls');
        const feeds = new Map(vfs.status().feeds.map((f) => [f.library, f]));
        return target.libraries().map((l) => ({ name: l.name, feed: feeds.get(l.name) ?? null }));
      },
    },
    {
      name: 'library.add',
      summary: 'Serves one more library, by its library authorization or by its name in the enterprise (also at later starts)',
      params: [param('org_client_id', 'string', false, 'with org_client_secret: the library authorization'), param('org_client_secret', 'string', false),
        param('org', 'string', false, 'instead: a library of the enterprise by name or org_id (the gateway binds it with its enterprise credentials)'),
        param('name', 'string', false, 'folder name; default the library name')],
      handler: async (params) => {
        onlyKnown(params, ['org_client_id', 'org_client_secret', 'org', 'name'], 'library.add');
        const org = text(params, 'org', { optional: true });
        const byAuth = params.org_client_id !== undefined || params.org_client_secret !== undefined;
        if (!!org === byAuth) throw new RpcFailure(RpcErrorCode.InvalidParams, 'library.add: give either org_client_id and org_client_secret, or org', { param: org ? 'org' : 'org_client_id' });
        const auth = org ? await target.bindLibrary(org) : { org_client_id: text(params, 'org_client_id'), org_client_secret: text(params, 'org_client_secret') };
        return target.addLibrary({ ...auth, name: text(params, 'name', { optional: true }) || undefined });
      },
    },
    {
      name: 'library.remove',
      summary: 'Stops serving a library, also at later starts (refused while files are pending; the service keeps its data)',
      params: [param('name')],
      handler: async (params) => {
        onlyKnown(params, ['name'], 'library.remove');
        const name = text(params, 'name');
        await target.removeLibrary(name);
        return { removed: name };
      },
    },
    {
      name: 'upload',
      summary: 'Copies a local file to a gateway path /<library>/<path> and waits until it is on the service',
      params: [param('local', 'string', true, 'absolute local path'), PATH_PARAM, LIBRARY_PARAM],
      handler: async (params, env) => {
        onlyKnown(params, ['local', 'path', 'library'], 'upload');
        const local = localPath(params, 'local');
        const { path } = gatewayPath(target, params, 'path');
        const st = await stat(local).catch((err: Error) => { throw new RpcFailure(RpcErrorCode.InvalidParams, `local file '${local}': ${err.message}`, { param: 'local' }); });
        if (!st.isFile()) throw new RpcFailure(RpcErrorCode.InvalidParams, `local file '${local}' is not a regular file`, { param: 'local' });
        await mkdirParents(vfs, path);
        const source = createReadStream(local);
        const counted = source.pipe(progressCounter(env, st.size, 'read'));
        source.on('error', (err) => counted.destroy(err));
        const attr = await vfs.writeFile(path, counted);
        // Then the bytes the service has, from the upload queue, until it is done.
        const report = throttledProgress(env, attr.size, 'bytes', 'uploaded');
        const timer = setInterval(() => {
          const u = vfs.status().uploads.find((x) => `/${x.library}/${x.fullpath}` === path);
          if (u?.sentBytes !== undefined) report(u.sentBytes);
        }, PROGRESS_MS);
        try {
          await vfs.flushAll();
        } catch {
          // Some upload is failing (maybe this one): said below when it is this one.
        } finally {
          clearInterval(timer);
        }
        const left = vfs.status().uploads.filter((u) => `/${u.library}/${u.fullpath}` === path);
        if (left.length) throw new RpcFailure(RpcErrorCode.GatewayError, `'${path}' is kept for upload but not on the service yet: ${left[0]!.lastError ?? 'retrying'}`);
        report(attr.size, true);
        return { path, size: attr.size };
      },
    },
    {
      name: 'download',
      summary: 'Copies a file at a gateway path to a local file (written whole, then renamed into place)',
      params: [PATH_PARAM, param('local', 'string', true, 'absolute local path'), LIBRARY_PARAM],
      handler: async (params, env) => {
        onlyKnown(params, ['path', 'local', 'library'], 'download');
        const { path } = gatewayPath(target, params, 'path');
        const local = localPath(params, 'local');
        const attr = await vfs.stat(path);
        if (attr.isDir) throw new RpcFailure(RpcErrorCode.InvalidParams, `'${path}' is a folder`, { param: 'path' });
        // The caller's file, as cp leaves it: replaced whole, not fsynced.
        await replaceFile(local, async (_fh, tmp) => {
          await pipeline(await vfs.createReadStream(path), progressCounter(env, attr.size, 'received'), createWriteStream(tmp, { flags: 'w' }), { signal: env.signal });
        }, { durability: 'rename' });
        return { local, size: attr.size };
      },
    },
    {
      name: 'copy',
      summary: 'Copies a file or folder, within a library (the service copies, queued for folders) or across libraries (through the gateway, with progress)',
      params: [param('from', 'string', true, 'gateway path /<library>/<path>, or a path inside `library`'), param('to', 'string', true, 'the copy\'s path, including its name (same forms)'), LIBRARY_PARAM,
        param('overwrite', 'int', false, '1 replaces what is at `to`; default 0 refuses')],
      handler: async (params, env) => {
        onlyKnown(params, ['from', 'to', 'library', 'overwrite'], 'copy');
        const from = gatewayPath(target, params, 'from');
        const to = gatewayPath(target, params, 'to');
        const overwrite = params.overwrite === undefined ? 0 : Number(params.overwrite);
        if (overwrite !== 0 && overwrite !== 1) throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter 'overwrite': expected 0 or 1, got ${JSON.stringify(params.overwrite)}`, { param: 'overwrite' });
        const total = await treeSize(vfs, from.path);
        const report = throttledProgress(env, total.bytes, 'bytes', 'copied');
        let done = 0;
        report(0, true);
        if (from.lib.name !== to.lib.name && total.files === 1 && !(await vfs.stat(from.path)).isDir) {
          await copyFileAcross(vfs, from.path, to.path, overwrite === 0, total.bytes, env);
        } else {
          // Within a library the service copies (no bytes to report); across libraries bytes count as the service takes them.
          await vfs.copy(from.path, to.path, { noReplace: overwrite === 0 }, { signal: env.signal, onCopied: (n) => report(done += n) });
        }
        report(total.bytes, true);
        return { from: from.path, to: to.path, files: total.files, size: total.bytes };
      },
    },
    {
      name: 'version.restore',
      summary: 'Makes a history version of a file its current content again (instant: the service holds it)',
      params: [PATH_PARAM, param('version', 'string', true, 'history version id (hid) or content hash (filehash)'), LIBRARY_PARAM],
      handler: async (params) => {
        onlyKnown(params, ['path', 'version', 'library'], 'version.restore');
        const version = text(params, 'version');
        const { lib, fullpath } = gatewayPath(target, params, 'path');
        const item = await findVersion(lib.client, fullpath, version);
        if (item.dir === 1 || !item.filehash) throw new RpcFailure(RpcErrorCode.InvalidParams, `version '${version}' of '${fullpath}' is a folder record, not content`);
        const res = await lib.client.file.createFile({ fullpath, filehash: item.filehash, filesize: item.filesize, overwrite: 1 });
        if (Number(res.state) !== 1) {
          throw new RpcFailure(RpcErrorCode.GatewayError, `the service no longer holds the content of version '${version}' (${item.filehash}); nothing was changed`);
        }
        await vfs.refresh();
        return { path: `/${lib.name}/${fullpath}`, filehash: item.filehash, filesize: item.filesize };
      },
    },
  ];
}
