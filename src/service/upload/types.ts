/**
 * What the upload server needs from the rest of the embedded service. The service implements
 * `UploadHost`; the upload server owns sessions, temporary files, block checks and content verification,
 * and hands the host only verified content.
 */

/** Who is uploading: resolved from `org_client_id` (library file API) or an access token (user API). */
export type UploadCaller =
  | { kind: 'library'; libraryId: number; orgClientId: string }
  | { kind: 'user'; memberId: number; token: string };

/** A create_file step waiting for its content (state 0), addressed by the `hash` it returned. */
export interface PendingUpload {
  libraryId: number;
  fullpath: string;
  /** SHA-1 the content must have, 40 lowercase hex. */
  filehash: string;
  /** Size in bytes the content must have. */
  filesize: number;
  /** Whether content with `filehash` is stored (see `blobExists`), when the host read it with the step. */
  blobStored?: boolean;
  /** Bytes the library may still grow by (see `remainingCapacity`), when the host read it with the step. */
  remaining?: number;
}

/** Content verified by the upload server: its size and SHA-1 match what the caller declared. */
export interface VerifiedContent {
  /** A file in `UploadHost.tempDir` holding the content. The host may move it (rename) into its blob store. */
  tempFilePath: string;
  /** SHA-1, 40 lowercase hex. */
  sha1: string;
  /** Size in bytes. */
  size: number;
}

/**
 * Verified content of a chunked upload: a local file as VerifiedContent (staged in a folder), or bytes
 * staged in the blob store, which places them itself (`staged.place()`, under the blob's lock).
 */
export type FinishedContent = VerifiedContent | { staged: { place(): Promise<void> }; sha1: string; size: number };

/** The record the upload server answers after a successful upload. */
export interface UploadedFile {
  hash: string;
  fullpath: string;
  filesize: number;
  filehash: string;
}

/** A web upload (`/2/web_upload`): where to put the file and who puts it. */
export interface WebUploadTarget {
  libraryId: number;
  /** Target folder; empty for the root. */
  folder: string;
  name: string;
  /** 1 replaces an existing file; 0 appends a number to the name. */
  overwrite: boolean;
  opId?: string;
  opName?: string;
}

/**
 * Implemented by the embedded service. Methods throw the service's own JSON error (any Error with numeric
 * `status` and `code` fields: the HTTP status and `error_code`) for refusals; the upload server sends it
 * as is. Any other exception is answered 500/50001 and logged.
 */
export interface UploadHost {
  /** Directory for session journals and temporary files; on the same file system as the blob store. */
  readonly tempDir: string;
  /** Resolves an `org_client_id` (URL parameter or form field); throws 401/40103 when unknown. */
  authorizeLibrary(orgClientId: string): Promise<UploadCaller>;
  /** Resolves an access token; throws 401/40101 (invalid) or 40102 (expired). */
  authorizeToken(token: string): Promise<UploadCaller>;
  /**
   * The create_file step `pathhash` refers to, if it is pending and `caller` may write to its library;
   * undefined otherwise.
   */
  pendingUpload(caller: UploadCaller, pathhash: string): Promise<PendingUpload | undefined>;
  /**
   * `authorizeLibrary(orgClientId)` then `pendingUpload` for that caller, in one go (it throws as
   * authorizeLibrary does). Optional: without it the upload server asks the two.
   */
  pendingUploadOfLibrary?(orgClientId: string, pathhash: string): Promise<PendingUpload | undefined>;
  /** True when content with this SHA-1 is already in the blob store (instant upload). */
  blobExists(sha1: string): Promise<boolean>;
  /**
   * Commits a pending upload: ingests `content` into the blob store (null: the blob already exists, see
   * `blobExists`) and writes the file record, in one transaction. Called once per pathhash. `committing`,
   * when the host calls it, runs inside that transaction with the file (the upload server records the
   * result there, so it commits with the file).
   */
  completeUpload(pathhash: string, content: FinishedContent | null, committing?: (file: UploadedFile) => Promise<void>): Promise<UploadedFile>;
  /** Library the user token's `mount_id` designates, when the caller may upload there; throws otherwise. */
  libraryOfMount(caller: UploadCaller, mountId: number): Promise<number>;
  /** Bytes the library may still grow by (Infinity when unlimited). */
  remainingCapacity(libraryId: number): Promise<number>;
  /** Stores a web-uploaded file (verified content) as `folder/name`, as create_file would. */
  webUpload(caller: UploadCaller, target: WebUploadTarget, content: VerifiedContent): Promise<UploadedFile>;
}
