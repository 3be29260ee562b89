/**
 * ServiceFault: a refusal of the service, carrying its `error_code` (spec/decisions.md; the first three
 * digits are the HTTP status). The domain throws these; the HTTP layer, the upload server and the link
 * pages answer them as `{error_code, error_msg}`. Messages never carry a secret.
 */
export const FaultCode = {
  BadParam: 40003,
  MoveIntoItself: 40013,
  SignatureFailed: 401041,
  /** (ours) `dateline` more than 15 minutes away from the service's clock. */
  DatelineOutOfWindow: 401042,
  /** (ours) This exact signature was already used for another endpoint within the dateline window (replay). */
  SignatureReplayed: 401043,
  TokenInvalid: 40101,
  TokenExpired: 40102,
  ClientNotFound: 40103,
  FeatureNotEnabled: 40306,
  NoPermission: 40310,
  NoLibraryAccess: 40311,
  CapacityExceeded: 40321,
  LibraryMissing: 40401,
  FileMissing: 40402,
  /** Member missing (user API and permissions: a member named by id, account or out_id). */
  MemberMissing: 40406,
  /** Department missing. */
  DepartmentMissing: 40407,
  /** decisions.md: enterprise missing. */
  EnterpriseMissing: 40410,
  /** (ours) Token endpoint: the grant (account and password, or refresh token) is wrong or expired. */
  GrantInvalid: 40004,
  /** (ours) No copy queue item with this id. */
  QueueItemMissing: 40405,
  /** (ours) No route for this path (and method). */
  NoSuchEndpoint: 40408,
  /** (ours) A download link is malformed, altered or expired. */
  DownloadLinkInvalid: 40409,
  /** (ours) A name already exists where no numbered name applies. */
  NameExists: 40901,
  /** (ours) The target is a file where a folder is needed, or the other way round. */
  NotAFolder: 40902,
  /** (ours) The request body is larger than the limit of form requests. */
  BodyTooLarge: 41301,
  /** (ours) The enterprise's daily share-link traffic cap (`set_ent_setting` max_link_flow) is reached. */
  LinkTrafficCapReached: 40333,
  /** (ours) A one-time admin console login link already used, expired or unknown. */
  LoginLinkInvalid: 40411,
  /** (ours) File locked by another member. */
  Locked: 42301,
  Internal: 50001,
  /** (ours) The endpoint is in the service's interface but the embedded service does not implement it. */
  NotSupported: 50101,
} as const;

export class ServiceFault extends Error {
  /** HTTP status: the first three digits of the code. */
  readonly status: number;

  constructor(readonly code: number, message: string) {
    super(message);
    this.name = 'ServiceFault';
    this.status = Number(String(code).slice(0, 3));
  }
}

export const badParam = (name: string, expected: string, got: unknown): ServiceFault =>
  new ServiceFault(FaultCode.BadParam, `parameter '${name}': expected ${expected}, got ${JSON.stringify(got)}`);

export const fileMissing = (what: string): ServiceFault =>
  new ServiceFault(FaultCode.FileMissing, `file or folder not found: ${JSON.stringify(what)}`);
