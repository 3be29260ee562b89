/**
 * ownCloud's `X-OC-Mtime` request header: the time a PUT's file was last changed at its source, in seconds
 * since the epoch (rclone's `--webdav-vendor owncloud` sends whole seconds, older clients a fraction too).
 * The server answers `X-OC-Mtime: accepted` once the time is applied, or the client sees the upload time.
 */
import { DavError } from './errors.js';

export const OC_MTIME_HEADER = 'x-oc-mtime';
export const OC_MTIME_ACCEPTED = 'accepted';

/** The latest time a Date holds, in ms (year 275760): beyond it a time is not a time. */
const MAX_TIME_MS = 8.64e15;

/**
 * The header's time in ms, undefined when absent; a value that is not one non-negative decimal number of
 * seconds (a repeated header arrives joined by a comma) is refused with 400 before anything changes.
 */
export function ocMtimeOf(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  const value = Array.isArray(header) ? header.join(', ') : header;
  const text = value.trim();
  const ms = /^\d{1,20}(\.\d{1,9})?$/.test(text) ? Number(text) * 1000 : NaN;
  if (!Number.isFinite(ms) || ms > MAX_TIME_MS) {
    throw new DavError(400, `expected X-OC-Mtime as seconds since 1970-01-01 (e.g. 1700000000 or 1700000000.5), got '${value.slice(0, 64)}': nothing was changed`);
  }
  return Math.round(ms);
}
