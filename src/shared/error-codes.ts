/**
 * The service's `error_code`s, one table for the client (api/errors.ts), the embedded service
 * (service/domain/fault.ts) and its share links. The first three digits of a code are its HTTP status.
 * Codes of spec/decisions.md are the real service's; those marked `ours` are the embedded service's own,
 * each documented in docs/service-decisions.md (a test holds the two together).
 */
export interface ErrorCodeEntry {
  readonly code: number;
  /** What the code means, as docs/service-decisions.md says it. */
  readonly meaning: string;
  /** A code of our own (docs/service-decisions.md), not of spec/decisions.md. */
  readonly ours: boolean;
}

const spec = (code: number, meaning: string): ErrorCodeEntry => ({ code, meaning, ours: false });
const ours = (code: number, meaning: string): ErrorCodeEntry => ({ code, meaning, ours: true });

export const ERROR_CODES = {
  BadParam: spec(40003, 'bad or missing parameter'),
  MoveIntoItself: spec(40013, 'a folder cannot be moved or copied into itself'),
  SignatureFailed: spec(401041, 'signature verification failed'),
  DatelineOutOfWindow: ours(401042, '`dateline` more than 15 minutes away from the service\'s clock'),
  SignatureReplayed: ours(401043, 'a signature already used for another endpoint within the dateline window'),
  TokenInvalid: spec(40101, 'access token invalid'),
  TokenExpired: spec(40102, 'access token expired'),
  ClientNotFound: spec(40103, 'client id not found'),
  GrantInvalid: ours(40004, 'token endpoint: the grant (account and password, or refresh token) is wrong or expired'),
  FeatureNotEnabled: spec(40306, 'feature not enabled'),
  NoPermission: spec(40310, 'no permission for this operation'),
  NoLibraryAccess: spec(40311, 'no access to this library'),
  CapacityExceeded: spec(40321, 'library capacity exceeded'),
  MemberLimit: spec(40332, 'enterprise member limit reached'),
  LinkTrafficCapReached: ours(40333, 'the enterprise\'s daily share-link traffic cap is reached'),
  EnterpriseEnded: ours(40334, 'the enterprise\'s trial or subscription has ended: it reads, but changes nothing'),
  LibraryMissing: spec(40401, 'library missing or deleted'),
  FileMissing: spec(40402, 'file or folder missing or deleted'),
  LinkMissing: ours(40404, 'no share link with this code in this library'),
  QueueItemMissing: ours(40405, 'no copy queue item with this `queue_id`'),
  MemberMissing: spec(40406, 'member missing'),
  DepartmentMissing: spec(40407, 'department missing'),
  NoSuchEndpoint: ours(40408, 'no endpoint at this path'),
  DownloadLinkInvalid: ours(40409, 'download link malformed, altered or expired'),
  EnterpriseMissing: spec(40410, 'enterprise missing'),
  LoginLinkInvalid: ours(40411, 'admin console login link unknown, used or expired'),
  NameExists: ours(40901, 'name already exists where no numbered name applies'),
  NotAFolder: ours(40902, 'a file where a folder is needed, or a folder where a file is'),
  BodyTooLarge: ours(41301, 'form body over the limit of form requests'),
  Locked: ours(42301, 'file locked by another member'),
  Internal: spec(50001, 'internal error'),
  NotSupported: ours(50101, 'endpoint of the interface not implemented by the embedded service'),
  NoUploadServer: spec(50301, 'no upload server available'),
} as const satisfies Record<string, ErrorCodeEntry>;

export type ErrorCodeName = keyof typeof ERROR_CODES;

/** The codes by name (`ErrorCode.FileMissing` = 40402). */
export const ErrorCode = Object.freeze(Object.fromEntries(Object.entries(ERROR_CODES).map(([k, v]) => [k, v.code]))) as Readonly<Record<ErrorCodeName, number>>;

/** The HTTP status of a code: its first three digits. */
export function statusOfCode(code: number): number {
  return Number(String(code).slice(0, 3));
}
