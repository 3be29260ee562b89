/**
 * WebUploadKeys: the temporary keys `upload_servers` hands out for web upload, each bound to a library
 * and valid for the `timeout` the caller asked for. Held in the metadata store (table `web_upload_keys`),
 * so a key issued by one process of a service is taken by every other, and survives a restart. Expired
 * keys are deleted when a key is issued (at most 1 000 at a time).
 */
import { randomBytes } from 'node:crypto';
import type { MetadataStore } from '../store/metadata-store.js';
import { UploadError, UploadErrorCode } from './errors.js';

export interface WebUploadKey {
  libraryId: number;
  /** The `fullpath` given to upload_servers (informational; the form's `path` names the folder). */
  fullpath: string;
  /** Expiry, unix milliseconds. */
  expiresAt: number;
}

export interface WebUploadKeysOptions {
  /** Longest validity accepted, in seconds. Default 604 800 (7 days). */
  maxTimeoutSec?: number;
  /** Clock in milliseconds. Default Date.now. */
  clock?: () => number;
}

export class WebUploadKeys {
  private readonly clock: () => number;
  private readonly maxTimeoutSec: number;

  constructor(private readonly db: MetadataStore, opts: WebUploadKeysOptions = {}) {
    this.clock = opts.clock ?? Date.now;
    this.maxTimeoutSec = opts.maxTimeoutSec ?? 604_800;
  }

  /** A new key for `libraryId`, valid `timeoutSec` seconds. */
  async issue(libraryId: number, fullpath: string, timeoutSec: number): Promise<string> {
    if (!Number.isInteger(timeoutSec) || timeoutSec <= 0 || timeoutSec > this.maxTimeoutSec) {
      throw new UploadError(400, UploadErrorCode.BadParam, `parameter 'timeout' expected an integer from 1 to ${this.maxTimeoutSec} (seconds), got ${JSON.stringify(timeoutSec)}`);
    }
    const now = this.clock();
    await this.db.run('DELETE FROM web_upload_keys WHERE key IN (SELECT key FROM web_upload_keys WHERE expires_ms <= ? LIMIT 1000)', [now]);
    const key = randomBytes(20).toString('hex');
    await this.db.run('INSERT INTO web_upload_keys (key, library_id, fullpath, expires_ms) VALUES (?, ?, ?, ?)', [key, libraryId, fullpath, now + timeoutSec * 1000]);
    return key;
  }

  /** The key's grant; throws 401/40105 when it is unknown or expired. */
  async resolve(key: string): Promise<WebUploadKey> {
    const row = await this.db.get<{ library_id: number; fullpath: string; expires_ms: number }>('SELECT library_id, fullpath, expires_ms FROM web_upload_keys WHERE key = ?', [key]);
    if (!row || Number(row.expires_ms) <= this.clock()) {
      throw new UploadError(401, UploadErrorCode.KeyInvalid, 'web upload key unknown or expired');
    }
    return { libraryId: Number(row.library_id), fullpath: row.fullpath, expiresAt: Number(row.expires_ms) };
  }
}
