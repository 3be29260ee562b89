/**
 * The gateway's own control methods: `status`, `flush`, `cache.drop`, `library.ls|add|remove`,
 * `upload`, `download`, `version.restore`. They act on the running gateway (its Vfs and its clients);
 * the endpoint methods (methods.ts) reach the service directly.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { dirname, basename, join, isAbsolute } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import type { ServiceClient } from '../api/client.js';
import type { GatewayVfs } from '../vfs/gateway-vfs.js';
import type { HistoryItem } from '../shared/records.js';
import { RpcErrorCode, RpcFailure } from './protocol.js';
import { resolveLibrary, type CallEnv, type ControlMethod, type ControlTarget, type MethodParamHelp } from './methods.js';

/** What the gateway methods need from the running gateway. */
export interface GatewayControlTarget extends ControlTarget {
  vfs: GatewayVfs;
  /** Serves one more library, by its library authorization. Returns the folder name it got. */
  addLibrary(auth: { org_client_id: string; org_client_secret: string; name?: string }): Promise<{ name: string; id: string }>;
  /** Stops serving a library folder (refused while it has pending files). */
  removeLibrary(name: string): Promise<void>;
  /** Addresses and facts of the running gateway (service URL, WebDAV URL, mount point, start time). */
  describe(): Record<string, unknown>;
}

const FLUSH_POLL_MS = 200;

function param(name: string, type = 'string', required = true, note?: string): MethodParamHelp {
  return { name, required, type, ...(note ? { note } : {}) };
}

function text(params: Record<string, unknown>, name: string, opts: { optional?: boolean } = {}): string {
  const v = params[name];
  if (v === undefined || v === null || v === '') {
    if (opts.optional) return '';
    throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter '${name}' is required`, { param: name });
  }
  if (typeof v !== 'string' && typeof v !== 'number') throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter '${name}': expected a string, got ${JSON.stringify(v)}`, { param: name });
  return String(v);
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

function gatewayPath(params: Record<string, unknown>, name: string): string {
  const p = text(params, name);
  if (!p.startsWith('/') || p.split('/').filter(Boolean).length < 2) {
    throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter '${name}': expected a gateway path /<library>/<path>, got '${p}'`, { param: name });
  }
  return p;
}

/** Counts the bytes that pass and reports them as progress (at most every 100 ms, and at the end). */
function progressCounter(env: CallEnv, total: number, what: string): Transform {
  let done = 0;
  let last = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      done += chunk.length;
      const now = Date.now();
      if (now - last >= 100) {
        last = now;
        env.progress({ done, total, what });
      }
      cb(null, chunk);
    },
    flush(cb) {
      env.progress({ done, total, what });
      cb();
    },
  });
}

/** Creates the missing folders above a gateway path (like the service's create_file does). */
async function mkdirParents(vfs: GatewayVfs, path: string): Promise<void> {
  const parts = path.split('/').filter(Boolean).slice(0, -1);
  for (let i = 2; i <= parts.length; i++) {
    const dir = '/' + parts.slice(0, i).join('/');
    const st = await vfs.stat(dir).catch(() => undefined);
    if (st?.isDir) continue;
    if (st) throw new RpcFailure(RpcErrorCode.InvalidParams, `'${dir}' is a file, not a folder`, { param: 'path' });
    await vfs.mkdir(dir);
  }
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
          libraries: target.libraries().map((l) => ({ name: l.name })),
          feeds: s.feeds.map((f) => ({ ...f, lagMs: f.lastPollMs ? Date.now() - f.lastPollMs : null })),
          uploads: { pending: s.uploads.length, list: s.uploads },
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
      summary: 'Waits until every pending upload is on the service (progress: uploads done of those pending)',
      params: [param('timeout_s', 'number', false, 'give up waiting after this many seconds (the uploads go on); default: wait')],
      handler: async (params, env) => {
        onlyKnown(params, ['timeout_s'], 'flush');
        const t = params.timeout_s === undefined ? undefined : Number(params.timeout_s);
        if (t !== undefined && !(Number.isFinite(t) && t > 0)) throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter 'timeout_s': expected a number of seconds > 0, got ${JSON.stringify(params.timeout_s)}`, { param: 'timeout_s' });
        const total = vfs.status().uploads.length + vfs.status().localFiles;
        const timer = setInterval(() => env.progress({ done: Math.max(0, total - vfs.status().uploads.length), total, what: 'uploads' }), FLUSH_POLL_MS);
        try {
          await vfs.flushAll({ timeoutMs: t === undefined ? undefined : t * 1000 });
        } finally {
          clearInterval(timer);
        }
        const left = vfs.status().uploads;
        if (left.length > 0) {
          throw new RpcFailure(RpcErrorCode.GatewayError, `${left.length} upload(s) still pending after ${t} s (they go on; see status)`, { pending: left.map((u) => `/${u.library}/${u.fullpath}`) });
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
      summary: 'Serves one more library, by its library authorization',
      params: [param('org_client_id'), param('org_client_secret'), param('name', 'string', false, 'folder name; default the library name')],
      handler: async (params) => {
        onlyKnown(params, ['org_client_id', 'org_client_secret', 'name'], 'library.add');
        return target.addLibrary({
          org_client_id: text(params, 'org_client_id'),
          org_client_secret: text(params, 'org_client_secret'),
          name: text(params, 'name', { optional: true }) || undefined,
        });
      },
    },
    {
      name: 'library.remove',
      summary: 'Stops serving a library (refused while files are pending; the service keeps its data)',
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
      params: [param('local', 'string', true, 'absolute local path'), param('path', 'string', true, 'gateway path /<library>/<path>')],
      handler: async (params, env) => {
        onlyKnown(params, ['local', 'path'], 'upload');
        const local = localPath(params, 'local');
        const path = gatewayPath(params, 'path');
        const st = await stat(local).catch((err: Error) => { throw new RpcFailure(RpcErrorCode.InvalidParams, `local file '${local}': ${err.message}`, { param: 'local' }); });
        if (!st.isFile()) throw new RpcFailure(RpcErrorCode.InvalidParams, `local file '${local}' is not a regular file`, { param: 'local' });
        await mkdirParents(vfs, path);
        const source = createReadStream(local);
        const counted = source.pipe(progressCounter(env, st.size, 'read'));
        source.on('error', (err) => counted.destroy(err));
        const attr = await vfs.writeFile(path, counted);
        await vfs.flushAll();
        const left = vfs.status().uploads.filter((u) => `/${u.library}/${u.fullpath}` === path);
        if (left.length) throw new RpcFailure(RpcErrorCode.GatewayError, `'${path}' is kept for upload but not on the service yet: ${left[0]!.lastError ?? 'retrying'}`);
        return { path, size: attr.size };
      },
    },
    {
      name: 'download',
      summary: 'Copies a file at a gateway path to a local file (written whole, then renamed into place)',
      params: [param('path', 'string', true, 'gateway path /<library>/<path>'), param('local', 'string', true, 'absolute local path')],
      handler: async (params, env) => {
        onlyKnown(params, ['path', 'local'], 'download');
        const path = gatewayPath(params, 'path');
        const local = localPath(params, 'local');
        const attr = await vfs.stat(path);
        if (attr.isDir) throw new RpcFailure(RpcErrorCode.InvalidParams, `'${path}' is a folder`, { param: 'path' });
        const tmp = join(dirname(local), `.${basename(local)}.cloudlib-${process.pid}-${Date.now()}`);
        try {
          await pipeline(await vfs.createReadStream(path), progressCounter(env, attr.size, 'received'), createWriteStream(tmp, { flags: 'wx' }), { signal: env.signal });
          await rename(tmp, local);
        } catch (err) {
          await rm(tmp, { force: true });
          throw err;
        }
        return { local, size: attr.size };
      },
    },
    {
      name: 'version.restore',
      summary: 'Makes a history version of a file its current content again (instant: the service holds it)',
      params: [param('path', 'string', true, 'gateway path /<library>/<path>, or fullpath with library'), param('version', 'string', true, 'history version id (hid) or content hash (filehash)'), param('library', 'string', false)],
      handler: async (params) => {
        onlyKnown(params, ['path', 'version', 'library'], 'version.restore');
        const version = text(params, 'version');
        const p = { fullpath: text(params, 'path'), ...(params.library !== undefined ? { library: params.library } : {}) };
        const lib = resolveLibrary(target, p);
        const fullpath = String(p.fullpath).replace(/^\/+|\/+$/g, '');
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
