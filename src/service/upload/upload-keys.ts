/**
 * WebUploadKeys: the temporary keys `upload_servers` hands out for web upload, each bound to a library
 * and valid for the `timeout` the caller asked for. Held in memory: a key does not survive a restart
 * (callers ask for a new one, as they do when it expires).
 */
import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { UploadError, UploadErrorCode } from './errors.js';

export interface WebUploadKey {
  libraryId: number;
  /** The `fullpath` given to upload_servers (informational; the form's `path` names the folder). */
  fullpath: string;
  /** Expiry, unix milliseconds. */
  expiresAt: number;
}

export interface WebUploadKeysOptions {
  /** Keys held at most; the oldest are dropped beyond it. Default 100 000. */
  maxKeys?: number;
  /** Longest validity accepted, in seconds. Default 604 800 (7 days). */
  maxTimeoutSec?: number;
  /** Clock in milliseconds. Default Date.now. */
  clock?: () => number;
}

export class WebUploadKeys {
  private readonly keys: LRUCache<string, WebUploadKey>;
  private readonly clock: () => number;
  private readonly maxTimeoutSec: number;

  constructor(opts: WebUploadKeysOptions = {}) {
    this.clock = opts.clock ?? Date.now;
    this.maxTimeoutSec = opts.maxTimeoutSec ?? 604_800;
    this.keys = new LRUCache({ max: opts.maxKeys ?? 100_000 });
  }

  /** A new key for `libraryId`, valid `timeoutSec` seconds. */
  issue(libraryId: number, fullpath: string, timeoutSec: number): string {
    if (!Number.isInteger(timeoutSec) || timeoutSec <= 0 || timeoutSec > this.maxTimeoutSec) {
      throw new UploadError(400, UploadErrorCode.BadParam, `parameter 'timeout' expected an integer from 1 to ${this.maxTimeoutSec} (seconds), got ${JSON.stringify(timeoutSec)}`);
    }
    const key = randomBytes(20).toString('hex');
    this.keys.set(key, { libraryId, fullpath, expiresAt: this.clock() + timeoutSec * 1000 });
    return key;
  }

  /** The key's grant; throws 401/40105 when it is unknown or expired. */
  resolve(key: string): WebUploadKey {
    const grant = this.keys.get(key);
    if (!grant || grant.expiresAt <= this.clock()) {
      if (grant) this.keys.delete(key);
      throw new UploadError(401, UploadErrorCode.KeyInvalid, 'web upload key unknown or expired');
    }
    return grant;
  }
}
