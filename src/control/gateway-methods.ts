/**
 * The gateway's own control methods: `status`, `flush`, `cache.drop`, `library.ls|add|remove`,
 * `upload`, `download`, `version.restore`, `ls`, and `pin`, `unpin`, `evict` (pin-methods.ts). They act on the running gateway (its Vfs and its clients);
 * the endpoint methods (methods.ts) reach the service directly.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir, readlink, rename, rm, stat, symlink } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';
import { replaceFile } from '../shared/atomic-file.js';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { bandwidthLimitOf, throttled, type TokenBucket } from '../shared/bandwidth-limit.js';
import { LINK_TARGET_MAX, decodeLinkTarget, encodeLinkTarget, isLinkFileEntry, linkFileNameOf, linkNameOf, linkTargetProblem } from '../shared/link-file-format.js';
import type { ServiceClient } from '../api/client.js';
import type { GatewayStatus, Vfs } from '../vfs/index.js';
import type { HistoryItem } from '../shared/records.js';
import { RpcErrorCode, RpcFailure } from './protocol.js';
import { PathFilter, PathFilterError, patternsOf } from './path-filter.js';
import { folderListingMethod } from './folder-listing.js';
import { pinMethods, type PinAdmin } from './pin-methods.js';
import { resolveLibrary, type CallEnv, type Progress, type ControlMethod, type ControlTarget, type MethodParamHelp, type ServedLibrary } from './methods.js';

/**
 * What the control methods use of the gateway's file system: the Vfs's file operations, the gateway's
 * status and its cache controls (an interface of control's own, not the Vfs class).
 */
export interface AdminVfs extends Pick<Vfs, 'stat' | 'readdir' | 'mkdir' | 'copy' | 'createReadStream' | 'writeFile' | 'flushAll' | 'changes'>, Partial<Pick<PinAdmin, 'setPinned' | 'evict' | 'pinsFetched'>> {
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

/** The include/exclude patterns and dry_run of a folder copy. */
function treeOptions(params: Record<string, unknown>): { filter: PathFilter; dryRun: boolean } {
  let filter: PathFilter;
  try {
    filter = new PathFilter({ include: patternsOf(params.include, 'include'), exclude: patternsOf(params.exclude, 'exclude') });
  } catch (err) {
    if (err instanceof PathFilterError) throw new RpcFailure(RpcErrorCode.InvalidParams, err.message, { param: /exclude/.test(err.message) ? 'exclude' : 'include' });
    throw err;
  }
  const d = params.dry_run;
  if (d !== undefined && d !== 0 && d !== 1 && d !== true && d !== false && d !== '0' && d !== '1') {
    throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter 'dry_run': expected 0 or 1, got ${JSON.stringify(d)}`, { param: 'dry_run' });
  }
  return { filter, dryRun: d === 1 || d === true || d === '1' };
}

const TREE_PARAMS = [
  param('include', 'string[]', false, 'only files matching one of these globs (rclone\'s rules: `*.txt`, `docs/**`)'),
  param('exclude', 'string[]', false, 'no file or folder matching one of these globs (`node_modules/**`, `*.tmp`)'),
  param('dry_run', 'int', false, '1: say what would be copied, copy nothing'),
  param('bwlimit', 'string', false, 'bandwidth limit of this copy, as rclone\'s --bwlimit: RATE (`10M`, `512k`) or UP:DOWN'),
];

/**
 * The bandwidth limit of one upload or download (`bwlimit`; the UP or DOWN part of UP:DOWN): a bucket the
 * copy's files share, undefined for none.
 */
function transferLimit(params: Record<string, unknown>, direction: 'upload' | 'download'): TokenBucket | undefined {
  if (params.bwlimit === undefined) return undefined;
  if (typeof params.bwlimit !== 'string') throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter 'bwlimit': expected a rate such as 10M, got ${JSON.stringify(params.bwlimit)}`, { param: 'bwlimit' });
  try {
    return bandwidthLimitOf(params.bwlimit)[direction];
  } catch (err) {
    throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter 'bwlimit': ${(err as Error).message.replace(/^bandwidth limit: /, '')}`, { param: 'bwlimit' });
  }
}

/** What a limited copy took through its limit (in its answer), nothing without one. */
function limitUsed(bucket: TokenBucket | undefined): { bwlimit?: { bytes_per_s: number; bytes: number; waits: number } } {
  return bucket ? { bwlimit: { bytes_per_s: bucket.bytesPerSecond, bytes: bucket.counters.bytes, waits: bucket.counters.waits } } : {};
}

/** A file of a folder copy; `link`: a symbolic link, kept on the service as its link file (`rel` names that file). */
interface TreeFile { rel: string; size: number; link?: true }

/**
 * The files of a local folder a folder upload takes, sorted by path. A symbolic link is taken as its link
 * file `NAME.rclonelink` holding the target (shared/link-file-format.ts, as the mount and rclone's
 * `--links` store one; filters see that name); special files and links too long to store are left out and named.
 */
async function localTree(root: string, filter: PathFilter): Promise<{ files: TreeFile[]; skipped: string[] }> {
  const files: TreeFile[] = [];
  const skipped: string[] = [];
  const walk = async (dir: string, rel: string): Promise<void> => {
    const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (filter.walksFolder(r)) await walk(join(dir, e.name), r);
      } else if (e.isSymbolicLink()) {
        const target = await readlink(join(dir, e.name));
        if (!filter.takesFile(linkFileNameOf(r))) continue;
        if (linkTargetProblem(target)) skipped.push(r);
        else files.push({ rel: linkFileNameOf(r), size: encodeLinkTarget(target).length, link: true });
      } else if (!filter.takesFile(r)) {
        continue;
      } else if (e.isFile()) {
        files.push({ rel: r, size: (await stat(join(dir, e.name))).size });
      } else skipped.push(r);
    }
  };
  await walk(root, '');
  return { files, skipped };
}

/**
 * The files under a gateway folder a folder download takes, sorted by path. A link file is marked `link`
 * (made a symbolic link locally) unless an object of its link's name is beside it, as the mount shows it.
 */
async function gatewayTree(vfs: AdminVfs, root: string, filter: PathFilter): Promise<TreeFile[]> {
  const files: TreeFile[] = [];
  const walk = async (dir: string, rel: string): Promise<void> => {
    const entries = (await vfs.readdir(dir)).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const names = new Set(entries.map((e) => e.name));
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDir) {
        if (filter.walksFolder(r)) await walk(`${dir}/${e.name}`, r);
      } else if (filter.takesFile(r)) {
        const link = isLinkFileEntry(e) && !names.has(linkNameOf(e.name)!);
        files.push(link ? { rel: r, size: e.size, link } : { rel: r, size: e.size });
      }
    }
  };
  await walk(root, '');
  return files;
}

/**
 * Progress of a folder copy: bytes and files done of totals known before the first byte moves (the tree
 * is walked first), at most every PROGRESS_MS.
 */
function treeProgress(env: CallEnv, files: TreeFile[], what: string): { add(bytes: number): void; fileDone(): void; final(): void; set(bytes: number, filesDone: number): void } {
  const total = files.reduce((n, f) => n + f.size, 0);
  let done = 0;
  let filesDone = 0;
  let last = 0;
  const send = (force: boolean): void => {
    const now = Date.now();
    if (!force && now - last < PROGRESS_MS) return;
    last = now;
    env.progress({ done, total, unit: 'bytes', what, files: { done: filesDone, total: files.length } });
  };
  return {
    add: (bytes) => { done += bytes; send(false); },
    fileDone: () => { filesDone++; send(false); },
    set: (bytes, n) => { done = bytes; filesDone = n; send(false); },
    final: () => send(true),
  };
}

/**
 * A local folder copied to a gateway folder: the files taken are written into the journal (progress
 * `read`), then the call waits until the service has them all (progress `uploaded`). Existing files
 * are replaced; missing folders are made.
 */
async function uploadTree(vfs: AdminVfs, local: string, path: string, params: Record<string, unknown>, env: CallEnv): Promise<unknown> {
  const { filter, dryRun } = treeOptions(params);
  const limit = transferLimit(params, 'upload');
  const { files, skipped } = await localTree(local, filter);
  const size = files.reduce((n, f) => n + f.size, 0);
  if (dryRun) return { path, dry_run: true, files: files.length, size, links: linksOf(files), list: files.map((f) => ({ path: `${path}/${f.rel}`, size: f.size, ...(f.link ? { link: true } : {}) })), skipped };
  const target = await vfs.stat(path).catch(() => undefined);
  if (target && !target.isDir) throw new RpcFailure(RpcErrorCode.InvalidParams, `'${path}' is a file, not a folder`, { param: 'path' });
  if (!target) {
    await mkdirParents(vfs, path);
    await vfs.mkdir(path);
  }
  const made = new Set<string>([path]);
  const read = treeProgress(env, files, 'read');
  read.final();
  const written: string[] = [];
  for (const f of files) {
    if (env.signal.aborted) throw new RpcFailure(RpcErrorCode.GatewayError, 'cancelled');
    const to = `${path}/${f.rel}`;
    const parent = to.slice(0, to.lastIndexOf('/'));
    if (!made.has(parent)) {
      await mkdirParents(vfs, to);
      made.add(parent);
    }
    if (f.link) {
      const content = encodeLinkTarget(await readlink(join(local, linkNameOf(f.rel)!)));
      await vfs.writeFile(to, content, undefined, { size: content.length });
      written.push(to);
      read.add(content.length);
      read.fileDone();
      continue;
    }
    const source = createReadStream(join(local, f.rel));
    const counter = new Transform({ transform(chunk: Buffer, _enc, cb) { read.add(chunk.length); cb(null, chunk); } });
    const counted = throttled(source, limit).pipe(counter);
    source.on('error', (err) => counted.destroy(err));
    await vfs.writeFile(to, counted);
    written.push(to);
    read.fileDone();
  }
  read.final();
  // Then the bytes the service has, from the upload queue.
  const mine = new Map(files.map((f, i) => [written[i]!, f.size]));
  const uploaded = treeProgress(env, files, 'uploaded');
  const report = (): void => {
    const pending = new Map(vfs.status().uploads.map((u) => [`/${u.library}/${u.fullpath}`, u]));
    let bytes = 0;
    let n = 0;
    for (const [p, s] of mine) {
      const u = pending.get(p);
      if (!u) { bytes += s; n++; } else bytes += Math.min(s, u.sentBytes ?? 0);
    }
    uploaded.set(bytes, n);
  };
  const timer = setInterval(report, PROGRESS_MS);
  try {
    await vfs.flushAll();
  } catch {
    // Some upload is failing: said below when it is one of these.
  } finally {
    clearInterval(timer);
  }
  report();
  uploaded.final();
  const left = vfs.status().uploads.filter((u) => mine.has(`/${u.library}/${u.fullpath}`));
  if (left.length) throw new RpcFailure(RpcErrorCode.GatewayError, `${left.length} of ${files.length} file(s) are kept for upload but not on the service yet: ${left[0]!.lastError ?? 'retrying'}`, { pending: left.map((u) => `/${u.library}/${u.fullpath}`) });
  return { path, files: files.length, size, links: linksOf(files), skipped, ...limitUsed(limit) };
}

/** How many of a copy's files are symbolic links. */
function linksOf(files: TreeFile[]): number {
  return files.reduce((n, f) => n + (f.link ? 1 : 0), 0);
}

/**
 * The link a gateway link file `from` holds made at local path `to` (as rclone's `--links` does),
 * replacing what is there unless a folder: the link is made beside it, then renamed into place.
 */
async function downloadLink(vfs: AdminVfs, from: string, to: string): Promise<void> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const chunk of await vfs.createReadStream(from, { start: 0, end: LINK_TARGET_MAX })) {
    chunks.push(chunk as Buffer);
    n += (chunk as Buffer).length;
  }
  const target = decodeLinkTarget(Buffer.concat(chunks, n));
  if (target === undefined) throw new RpcFailure(RpcErrorCode.GatewayError, `'${from}' holds no link target (empty, or longer than ${LINK_TARGET_MAX} bytes)`);
  await mkdir(dirname(to), { recursive: true });
  const there = await lstat(to).catch(() => undefined);
  if (there?.isDirectory()) throw new RpcFailure(RpcErrorCode.GatewayError, `local '${to}' is a folder: the symbolic link '${from}' holds is not made over it`);
  const tmp = `${to}.${process.pid}.${Date.now().toString(36)}.link-tmp`;
  await symlink(target, tmp);
  try {
    await rename(tmp, to);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/**
 * A gateway folder copied to a local folder: each file written whole, then renamed into place; each link
 * file (not hidden by an object of its link's name) made a symbolic link.
 */
async function downloadTree(vfs: AdminVfs, path: string, local: string, params: Record<string, unknown>, env: CallEnv): Promise<unknown> {
  const { filter, dryRun } = treeOptions(params);
  const limit = transferLimit(params, 'download');
  const files = await gatewayTree(vfs, path, filter);
  const size = files.reduce((n, f) => n + f.size, 0);
  if (dryRun) return { local, dry_run: true, files: files.length, size, links: linksOf(files), list: files.map((f) => (f.link ? { local: join(local, linkNameOf(f.rel)!), size: f.size, link: true } : { local: join(local, f.rel), size: f.size })) };
  const st = await stat(local).catch(() => undefined);
  if (st && !st.isDirectory()) throw new RpcFailure(RpcErrorCode.InvalidParams, `local '${local}' is a file, not a folder`, { param: 'local' });
  const received = treeProgress(env, files, 'received');
  received.final();
  for (const f of files) {
    if (f.link) {
      await downloadLink(vfs, `${path}/${f.rel}`, join(local, linkNameOf(f.rel)!));
      received.add(f.size);
      received.fileDone();
      continue;
    }
    const to = join(local, f.rel);
    await mkdir(dirname(to), { recursive: true });
    const counter = new Transform({ transform(chunk: Buffer, _enc, cb) { received.add(chunk.length); cb(null, chunk); } });
    await replaceFile(to, async (_fh, tmp) => {
      await pipeline(throttled(await vfs.createReadStream(`${path}/${f.rel}`), limit), counter, createWriteStream(tmp, { flags: 'w' }), { signal: env.signal });
    }, { durability: 'rename' });
    received.fileDone();
  }
  received.final();
  return { local, files: files.length, size, links: linksOf(files), ...limitUsed(limit) };
}

/** Finds a history version of a file by its id (`hid`) or content hash. */
async function findVersion(client: ServiceClient, fullpath: string, version: string): Promise<HistoryItem> {
  const pageSize = 100;
  for (let start = 0; ; start += pageSize) {
    const page = await client.file.history({ fullpath, start, size: pageSize });
    const v = version.toLowerCase();
    const hit = page.list.find((h) => h.hid === version || h.filehash === v);
    if (hit) return hit;
    // A prefix of 7 or more characters (as `ctl history` shows them), when it names one version.
    if (v.length >= 7) {
      const hits = page.list.filter((h) => String(h.hid).toLowerCase().startsWith(v) || String(h.filehash).startsWith(v));
      const distinct = new Set(hits.map((h) => h.hid));
      if (distinct.size === 1) return hits[0]!;
      if (distinct.size > 1) throw new RpcFailure(RpcErrorCode.InvalidParams, `version '${version}' names ${distinct.size} versions of '${fullpath}': give more characters`, { param: 'version' });
    }
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
          // Pending: every file with local changes not yet on the service, counted at once (those waiting
          // for the write-back delay are not in the upload queue yet), members' uploads too. An upload under
          // way says how long it has not moved: a stalled one (a full or stopped service) shows it.
          uploads: {
            pending: Math.max(s.uploads.length, s.localFiles) + (target.members?.uploads().length ?? 0),
            list: allUploads().map((u) => (u.state === 'uploading' && u.progressMs !== undefined ? { ...u, stalledMs: Math.max(0, Date.now() - u.progressMs) } : u)),
          },
          stranded: s.stranded,
          conflicts: s.conflicts,
          localFiles: s.localFiles,
          caches: {
            metadata: { ...s.metadata, hitRate: rate(s.metadata.hits, s.metadata.misses) },
            blocks: { ...s.blocks, hitRate: rate(s.blocks.hits, s.blocks.misses) },
            ...(s.disk ? { disk: { ...s.disk, hitRate: rate(s.disk.hits, s.disk.misses) } } : {}),
          },
          ...(s.pins ? { pins: s.pins } : {}),
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
      summary: 'Copies a local file, or a folder and everything in it, to a gateway path /<library>/<path> and waits until the service has it all',
      params: [param('local', 'string', true, 'absolute local path of a file or a folder'), PATH_PARAM, LIBRARY_PARAM, ...TREE_PARAMS],
      handler: async (params, env) => {
        onlyKnown(params, ['local', 'path', 'library', 'include', 'exclude', 'dry_run', 'bwlimit'], 'upload');
        const local = localPath(params, 'local');
        const { path } = gatewayPath(target, params, 'path');
        const st = await stat(local).catch((err: Error) => { throw new RpcFailure(RpcErrorCode.InvalidParams, `local file '${local}': ${err.message}`, { param: 'local' }); });
        if (st.isDirectory()) return uploadTree(vfs, local, path, params, env);
        if (!st.isFile()) throw new RpcFailure(RpcErrorCode.InvalidParams, `local file '${local}' is not a regular file`, { param: 'local' });
        const single = treeOptions(params);
        const limit = transferLimit(params, 'upload');
        if (!single.filter.empty) throw new RpcFailure(RpcErrorCode.InvalidParams, 'include and exclude filter the files of a folder: the local path is a file', { param: 'include' });
        if (single.dryRun) return { path, dry_run: true, files: 1, size: st.size, list: [{ path, size: st.size }], skipped: [] };
        await mkdirParents(vfs, path);
        const source = createReadStream(local);
        const counted = throttled(source, limit).pipe(progressCounter(env, st.size, 'read'));
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
        return { path, size: attr.size, ...limitUsed(limit) };
      },
    },
    {
      name: 'download',
      summary: 'Copies a file, or a folder and everything in it, at a gateway path to a local path (each file written whole, then renamed into place)',
      params: [PATH_PARAM, param('local', 'string', true, 'absolute local path (for a folder: the folder its files go into)'), LIBRARY_PARAM, ...TREE_PARAMS],
      handler: async (params, env) => {
        onlyKnown(params, ['path', 'local', 'library', 'include', 'exclude', 'dry_run', 'bwlimit'], 'download');
        const { path } = gatewayPath(target, params, 'path');
        const local = localPath(params, 'local');
        const attr = await vfs.stat(path);
        if (attr.isDir) return downloadTree(vfs, path, local, params, env);
        const single = treeOptions(params);
        const limit = transferLimit(params, 'download');
        if (!single.filter.empty) throw new RpcFailure(RpcErrorCode.InvalidParams, 'include and exclude filter the files of a folder: the path is a file', { param: 'include' });
        if (single.dryRun) return { local, dry_run: true, files: 1, size: attr.size, list: [{ local, size: attr.size }] };
        // The caller's file, as cp leaves it: replaced whole, not fsynced.
        await replaceFile(local, async (_fh, tmp) => {
          await pipeline(throttled(await vfs.createReadStream(path), limit), progressCounter(env, attr.size, 'received'), createWriteStream(tmp, { flags: 'w' }), { signal: env.signal });
        }, { durability: 'rename' });
        return { local, size: attr.size, ...limitUsed(limit) };
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
    folderListingMethod(target),
    ...pinMethods(target),
  ];
}
