/**
 * `ls`: a folder of the gateway as its front ends show it (the Vfs's listing, local files laid over the
 * service's), each entry with its state (src/vfs/file-state.ts), for `cloudlib ctl ls`.
 */
import type { Attr, Vfs } from '../vfs/index.js';
import { RpcErrorCode, RpcFailure } from './protocol.js';
import type { ControlMethod, ServedLibrary } from './methods.js';

/** One entry of a listing. */
export interface ListedEntry {
  name: string;
  type: 'file' | 'folder';
  size: number;
  /** Last modification, ms since the epoch. */
  mtimeMs: number;
  /** A file's state (`synced`, `pending`, …); absent for folders. */
  state?: string;
}

/** The `ls` control method over the gateway's listings. */
export function folderListingMethod(target: { vfs: Pick<Vfs, 'stat' | 'readdir'>; libraries(): ServedLibrary[] }): ControlMethod {
  return {
    name: 'ls',
    summary: 'Lists a folder (or shows a file) as the gateway serves it, with each file\'s state (synced, pending, uploading, offline-only, conflict, locked-by NAME)',
    params: [
      { name: 'path', type: 'string', required: true, note: 'gateway path /<library>[/<path>]' },
    ],
    handler: async (params) => {
      for (const k of Object.keys(params)) {
        if (k !== 'path') throw new RpcFailure(RpcErrorCode.InvalidParams, `ls: unknown parameter '${k}' (expected path)`, { param: k });
      }
      const path = params.path;
      if (typeof path !== 'string' || !path.startsWith('/')) {
        throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter 'path': expected a gateway path /<library>[/<path>], got ${JSON.stringify(path)}`, { param: 'path' });
      }
      const library = path.split('/').filter(Boolean)[0];
      const served = target.libraries().map((l) => l.name);
      if (library !== undefined && !served.includes(library)) {
        throw new RpcFailure(RpcErrorCode.InvalidParams, `parameter 'path': no library '${library}' is served (served: ${served.join(', ') || 'none'})`, { param: 'path' });
      }
      const self = await target.vfs.stat(path);
      const entries = self.isDir ? await target.vfs.readdir(path) : [self];
      return { path: self.path, entries: entries.map(listed) };
    },
  };
}

function listed(a: Attr): ListedEntry {
  return { name: a.name, type: a.isDir ? 'folder' : 'file', size: a.size, mtimeMs: a.mtimeMs, ...(a.state !== undefined ? { state: a.state } : {}) };
}
