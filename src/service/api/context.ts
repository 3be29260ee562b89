/**
 * What endpoint families share: the service's parts, and helpers resolving the caller's library and
 * operator from a request.
 */
import type { Directory, LibraryRow } from '../domain/directory.js';
import type { FileTree } from '../domain/file-tree.js';
import type { FileQueries } from '../domain/file-queries.js';
import type { LibraryContent } from '../domain/content.js';
import type { PendingUploads } from '../domain/pending-uploads.js';
import type { FileCopies } from '../domain/copy-queue.js';
import type { Operator } from '../domain/entries.js';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import type { DownloadLinks } from '../http/download-links.js';
import type { RequestContext } from '../http/router.js';
import type { ShareLinks } from '../links/share-links.js';
import type { UploadServer } from '../upload/upload-server.js';
import type { PreviewServer, TrafficKind } from '../preview/index.js';
import type { DailyTraffic } from '../domain/daily-traffic.js';

export interface ServiceParts {
  directory: Directory;
  tree: FileTree;
  queries: FileQueries;
  content: LibraryContent;
  uploads: PendingUploads;
  copies: FileCopies;
  downloads: DownloadLinks;
  links: ShareLinks;
  uploadServer: UploadServer;
  /** `${baseUrl}/upload`. */
  uploadServerUrl: string;
  /** The service's own address (links it issues start with it). */
  baseUrl: string;
  /** Preview pages below `/preview`. */
  previews: PreviewServer;
  /**
   * Adds bytes served for a library to the day's traffic statistics (`ent_daily_stats`): downloads,
   * previews, share-link downloads. Set by the part that keeps the statistics.
   */
  countTraffic?: (libraryId: number, kind: TrafficKind, bytes: number) => void;
  /** Bytes served per enterprise and day (ent_daily_stats). */
  traffic: DailyTraffic;
  clock: () => number;
}

/** The library of a library-API call. */
export function libraryOf(ctx: RequestContext): Pick<LibraryRow, 'id' | 'ent_id'> {
  const lib = ctx.caller.library;
  if (!lib) throw new ServiceFault(FaultCode.NoLibraryAccess, 'this call needs a library authorization (org_client_id)');
  return lib;
}

/** The operator named by `op_id` / `op_name`; without either, the authorization's title. */
export async function operatorOf(ctx: RequestContext, directory: Directory): Promise<Operator> {
  const opId = ctx.params.str('op_id');
  const opName = ctx.params.str('op_name');
  if (opId !== undefined && opId !== '') {
    if (!/^\d+$/.test(opId)) throw badParam('op_id', 'a member id (integer)', opId);
    const member = await directory.member(Number(opId));
    return { id: Number(opId), name: member?.name ?? (opName || `member ${opId}`) };
  }
  if (opName) return { id: 0, name: opName };
  return { id: 0, name: ctx.caller.libraryAuth?.title ?? ctx.caller.member?.name ?? '' };
}
