/** Refusals of the preview endpoints, answered by the service as its JSON error (`error_code`, `error_msg`). */

export const PreviewErrorCode = {
  /** A parameter is malformed, or the target is a folder. */
  BadParam: 40003,
  /** The feature is not enabled on this service (annotation, co-editing, export, thumbnails without an image library). */
  NotEnabled: 40306,
} as const;

export class PreviewError extends Error {
  constructor(readonly status: number, readonly code: number, message: string) {
    super(message);
    this.name = 'PreviewError';
  }
}

/** The refusal of a feature this service does not have. */
export function notEnabled(what: string): PreviewError {
  return new PreviewError(403, PreviewErrorCode.NotEnabled, `${what} is not enabled on this service`);
}
