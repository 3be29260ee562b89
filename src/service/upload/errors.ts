/**
 * The upload server's refusals: HTTP status, `error_code` (first three digits = status) and message,
 * plus extra body fields the spec asks for (`expect`, `received`/`expected`, `fullpath`).
 * Codes marked "ours" are not in the spec's table; docs/upload-server.md lists them all.
 */
export const UploadErrorCode = {
  /** A required header, URL parameter or form field is missing or malformed. */
  BadParam: 40003,
  /** The block's CRC-32 differs from the `upload-crc` header. */
  CrcMismatch: 40001,
  /** The block's length differs from the length of its `upload-range`. */
  RangeLengthMismatch: 40002,
  /** (ours) The finished temporary file's size or SHA-1 differs from the declared `filesize`/`filehash`. */
  ContentMismatch: 40004,
  /** (ours) The upload session is unknown, expired, finished or aborted. */
  SessionUnknown: 40104,
  /** (ours) The web upload key is unknown or expired. */
  KeyInvalid: 40105,
  /** The library's capacity would be exceeded. */
  CapacityExceeded: 40321,
  /** (ours) No pending create_file step has this `upload-pathhash` for this caller. */
  PathhashUnknown: 40403,
  /** The block does not start where the temporary file ends; the body carries `expect`. */
  UnexpectedOffset: 40900,
  /** (ours) The temporary file is being written by another request or being finished. */
  TempFileBusy: 41000,
  /** (ours) The block is larger than the maximum block size. */
  BlockTooLarge: 41300,
  /** (ours) The `upload-range` header is malformed or outside the file. */
  BadRange: 41600,
  /** Server fault. */
  Internal: 50001,
  /** (ours) The session's temporary file is gone: call upload_init again. */
  NotInitialised: 50002,
} as const;

export class UploadError extends Error {
  /** Extra fields of the JSON error body. */
  readonly extra: Record<string, unknown>;

  constructor(readonly status: number, readonly code: number, message: string, extra: Record<string, unknown> = {}) {
    super(message);
    this.name = 'UploadError';
    this.extra = extra;
  }
}

/** An error that carries its own HTTP status and error_code (ours or the host's). */
export function isStatusError(e: unknown): e is Error & { status: number; code: number; extra?: Record<string, unknown> } {
  if (!(e instanceof Error)) return false;
  const r = e as unknown as Record<string, unknown>;
  return typeof r.status === 'number' && r.status >= 400 && r.status < 600 && typeof r.code === 'number';
}

export const missingParam = (name: string): UploadError =>
  new UploadError(400, UploadErrorCode.BadParam, `missing required parameter '${name}'`);
