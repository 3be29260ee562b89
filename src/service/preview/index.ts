/**
 * Previews in the browser: the pages behind `preview_url` (library file API and `/m-api/2/file/preview_url`),
 * their viewer events, thumbnails, and the refusals of the preview features this service does not have.
 *
 * Wiring (for the service):
 * ```ts
 * const previews = new PreviewServer({ host, logger });            // host implements PreviewHost
 * // file.preview_url, after the signature and parameter checks and resolving fullpath/hash to a file:
 * //   await previewUrlResult(previews, { libraryId, ...file }, params, baseUrl)   -> {url, thumbnail?}
 * // file.cedit_url / file.preview_download_url:  throw notEnabled('co-editing') / notEnabled('export')
 * // listener: requests below /preview go to the pages
 * if (path.startsWith('/preview/')) return previews.handle(req, res, path.slice('/preview'.length));
 * ```
 * Refusals are `PreviewError`s with `status` and `code` (400/40003, 403/40306).
 */
import type { PreviewUrl } from '../../shared/records.js';
import { notEnabled, PreviewError, PreviewErrorCode } from './errors.js';
import { thumbnailable } from './preview-kind.js';
import type { PreviewServer } from './preview-server.js';

export { PreviewServer, type PreviewServerOptions } from './preview-server.js';
export { PreviewError, PreviewErrorCode, notEnabled } from './errors.js';
export type { ByteRange, IssuedPreview, PreviewHost, PreviewTarget, TrafficKind } from './types.js';

/** The file `preview_url` resolved (by `fullpath` or `hash`). */
export interface PreviewFile {
  libraryId: number;
  fullpath: string;
  filename: string;
  /** Content SHA-1; empty for a folder. */
  filehash: string;
  filesize: number;
  dir: boolean;
}

/** The parameters of `preview_url` this module reads (both APIs; the user API has only `watermark`). */
export interface PreviewUrlParams {
  watermark?: number | string;
  wm_content?: string;
  member_name?: string;
  thumbnail?: number | string;
  annotation?: string;
  annotation_mode?: string;
}

/** Watermark text when `watermark=1` comes without `wm_content`. */
export const DEFAULT_WATERMARK = 'Preview only';

/**
 * The answer of `preview_url` for a resolved file: `{url}` plus `thumbnail` for images when
 * `thumbnail=1`. Annotation mode needs a feature this service does not have: 403/40306.
 */
export async function previewUrlResult(server: PreviewServer, file: PreviewFile, params: PreviewUrlParams, baseUrl: string): Promise<PreviewUrl> {
  if (params.annotation !== undefined || params.annotation_mode !== undefined) throw notEnabled('annotation');
  const watermark = flag('watermark', params.watermark);
  const thumbnail = flag('thumbnail', params.thumbnail);
  if (file.dir) throw new PreviewError(400, PreviewErrorCode.BadParam, `fullpath: expected a file, got a folder (${file.fullpath})`);
  if (thumbnail && thumbnailable(file.filename) && !(await server.thumbnails.available())) {
    throw notEnabled('thumbnails (no image library is available)');
  }
  const text = params.wm_content || DEFAULT_WATERMARK;
  return server.issue({
    libraryId: file.libraryId, fullpath: file.fullpath, filehash: file.filehash, filename: file.filename, filesize: file.filesize,
    watermark: watermark ? { text } : undefined, memberName: params.member_name || undefined, thumbnail, baseUrl,
  });
}

function flag(name: string, v: number | string | undefined): boolean {
  if (v === undefined || v === '' || v === 0 || v === '0') return false;
  if (v === 1 || v === '1') return true;
  throw new PreviewError(400, PreviewErrorCode.BadParam, `${name}: expected 0 or 1, got ${String(v)}`);
}
