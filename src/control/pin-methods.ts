/**
 * The control methods of what is kept on this machine: `pin` and `unpin` a file or folder, `evict`
 * (free up space). Their state shows in `status` (`pins`).
 */
import { RpcErrorCode, RpcFailure } from './protocol.js';
import type { CallEnv, ControlMethod, ControlTarget, MethodParamHelp } from './methods.js';
import { resolveLibrary } from './methods.js';
import type { PinStatus } from '../vfs/index.js';

/** What the pin methods need of the gateway's file system. */
export interface PinAdmin {
  setPinned(path: string, pinned: boolean): Promise<{ files: number; bytes: number } | undefined>;
  evict(path: string): Promise<{ files: number; bytes: number }>;
  /** Resolves once every pinned file queued is fetched (or failed). */
  pinsFetched(): Promise<void>;
  status(): { pins?: PinStatus };
}

const PROGRESS_MS = 200;

function param(name: string, type: string, required: boolean, note: string): MethodParamHelp {
  return { name, required, type, note };
}

const PATH = param('path', 'string', true, 'gateway path /<library>/<path>, or a path inside `library`');
const LIBRARY = param('library', 'string', false, 'library name, when `path` is not a gateway path');

/** `/<library>/<path>` of a path parameter (a whole library is `/<library>`). */
function gatewayPathParam(target: ControlTarget, params: Record<string, unknown>, method: string, known: string[]): string {
  for (const k of Object.keys(params)) {
    if (!known.includes(k)) throw new RpcFailure(RpcErrorCode.InvalidParams, `${method}: unknown parameter '${k}' (expected ${known.join(', ')})`, { param: k });
  }
  const v = params.path;
  if (typeof v !== 'string' || v === '') throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter 'path' is required: a gateway path /<library>/<path>`, { param: 'path' });
  const p: Record<string, unknown> = { fullpath: v, ...(params.library !== undefined ? { library: params.library } : {}) };
  const lib = resolveLibrary(target, p);
  const fullpath = String(p.fullpath).replace(/^\/+|\/+$/g, '');
  return fullpath === '' ? `/${lib.name}` : `/${lib.name}/${fullpath}`;
}

function flag(params: Record<string, unknown>, name: string): boolean {
  const v = params[name];
  if (v === undefined || v === 0 || v === false || v === '0') return false;
  if (v === 1 || v === true || v === '1') return true;
  throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter '${name}': expected 0 or 1, got ${JSON.stringify(v)}`, { param: name });
}

function asRpc(err: unknown): RpcFailure {
  if (err instanceof RpcFailure) return err;
  const e = err as { name?: string; code?: string; message?: string };
  if (e?.name === 'VfsError') return new RpcFailure(RpcErrorCode.GatewayError, e.message ?? String(err), { code: e.code });
  return new RpcFailure(RpcErrorCode.Internal, e?.message ?? String(err));
}

/** Waits for the pinned files under `path` to be fetched, reporting bytes of those still pending. */
async function waitFetched(vfs: PinAdmin, path: string, env: CallEnv): Promise<void> {
  const under = (p: string): boolean => p === path || p.startsWith(`${path}/`);
  const report = (): void => {
    const s = vfs.status().pins;
    if (!s) return;
    const fetching = s.fetching.filter((f) => under(f.path));
    env.progress({ done: s.bytes - s.pendingBytes, total: s.bytes, unit: 'bytes', what: `kept on this machine (${fetching.length} being fetched)`, files: { done: s.files - s.pendingFiles, total: s.files } });
  };
  const timer = setInterval(report, PROGRESS_MS);
  try {
    await vfs.pinsFetched();
  } finally {
    clearInterval(timer);
  }
  report();
  const errors = vfs.status().pins?.errors.filter((e) => under(e.path)) ?? [];
  if (errors.length > 0) {
    throw new RpcFailure(RpcErrorCode.GatewayError, `${errors.length} pinned file(s) not fetched: ${errors[0]!.path}: ${errors[0]!.error} (retried when the service is back or the file changes; see status)`, { errors });
  }
}

export function pinMethods(target: ControlTarget & { vfs: Partial<PinAdmin> }): ControlMethod[] {
  const vfs = (): PinAdmin => {
    const v = target.vfs;
    if (!v.setPinned || !v.evict || !v.pinsFetched || !v.status) throw new RpcFailure(RpcErrorCode.GatewayError, 'this gateway keeps nothing on this machine (no content cache)', { code: 'ENOTSUP' });
    return v as PinAdmin;
  };
  return [
    {
      name: 'pin',
      summary: 'Keeps a file or folder on this machine: its files fetched now and kept current, readable without the service (refused when it does not fit in the cache)',
      params: [PATH, LIBRARY, param('wait', 'int', false, '1: return once every pinned file is fetched, with progress')],
      handler: async (params, env) => {
        const path = gatewayPathParam(target, params, 'pin', ['path', 'library', 'wait']);
        const wait = flag(params, 'wait');
        try {
          const held = await vfs().setPinned(path, true);
          if (wait) await waitFetched(vfs(), path, env);
          return { path, ...held };
        } catch (err) {
          throw asRpc(err);
        }
      },
    },
    {
      name: 'unpin',
      summary: 'Stops keeping a file or folder on this machine (inside a pinned folder: an exception to it); its content may then be evicted',
      params: [PATH, LIBRARY],
      handler: async (params) => {
        const path = gatewayPathParam(target, params, 'unpin', ['path', 'library']);
        try {
          await vfs().setPinned(path, false);
        } catch (err) {
          throw asRpc(err);
        }
        return { path, pinned: false };
      },
    },
    {
      name: 'evict',
      summary: 'Frees up space: drops cached content under a path that is neither pinned, nor open, nor waiting to upload',
      params: [PATH, LIBRARY],
      handler: async (params) => {
        const path = gatewayPathParam(target, params, 'evict', ['path', 'library']);
        try {
          return { path, ...(await vfs().evict(path)) };
        } catch (err) {
          throw asRpc(err);
        }
      },
    },
  ];
}
