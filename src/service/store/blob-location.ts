/**
 * Where the service keeps file content, as a URL (`--blobs`):
 * - `file:///ABSOLUTE/FOLDER`: a FolderBlobStore (the default is `file://<data>/blobs`);
 * - `s3://BUCKET?endpoint=URL&region=REGION&prefix=PREFIX&part_size_mb=N`: an S3BlobStore (every query
 *   parameter optional; without `endpoint`, AWS itself). Credentials never go in the URL: they come
 *   from the environment or the AWS shared credentials file.
 */
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BlobStore } from './blob-store.js';
import { FolderBlobStore } from './folder-blob-store.js';
import { S3BlobStore } from './s3-blob-store.js';

const S3_PARAMS = new Set(['endpoint', 'region', 'prefix', 'part_size_mb']);

export function blobStoreAt(location: string | undefined, dataDir: string, tempDir: string): BlobStore {
  if (location === undefined || location === '') return new FolderBlobStore({ root: join(dataDir, 'blobs'), tempDir });
  let u: URL;
  try {
    u = new URL(location);
  } catch {
    throw new TypeError(`blobs: expected file:///FOLDER or s3://BUCKET?endpoint=URL, got ${JSON.stringify(location)}`);
  }
  if (u.username !== '' || u.password !== '') {
    throw new TypeError('blobs: credentials do not go in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_SHARED_CREDENTIALS_FILE)');
  }
  if (u.protocol === 'file:') {
    if (u.search !== '' || u.hash !== '') throw new TypeError(`blobs: a file:// location takes no query, got ${JSON.stringify(location)}`);
    const root = fileURLToPath(u);
    if (!isAbsolute(root)) throw new TypeError(`blobs: expected an absolute folder, got ${JSON.stringify(location)}`);
    return new FolderBlobStore({ root, tempDir });
  }
  if (u.protocol === 's3:') {
    const bucket = u.hostname;
    if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket) || (u.pathname !== '' && u.pathname !== '/')) {
      throw new TypeError(`blobs: expected s3://BUCKET (3-63 lowercase letters, digits, dots, hyphens) with no path, got ${JSON.stringify(location)}`);
    }
    for (const k of u.searchParams.keys()) {
      if (!S3_PARAMS.has(k)) throw new TypeError(`blobs: unknown parameter ${JSON.stringify(k)} (known: ${[...S3_PARAMS].join(', ')})`);
    }
    const endpoint = u.searchParams.get('endpoint') ?? undefined;
    if (endpoint !== undefined && !/^https?:\/\/[^/?#]+\/?$/.test(endpoint)) throw new TypeError(`blobs: endpoint must be http(s)://HOST[:PORT], got ${JSON.stringify(endpoint)}`);
    const partMb = u.searchParams.get('part_size_mb');
    const partSize = partMb === null ? undefined : Number(partMb) * 1024 * 1024;
    if (partSize !== undefined && !(Number.isSafeInteger(partSize) && partSize >= 5 * 1024 * 1024)) throw new TypeError(`blobs: part_size_mb must be a whole number of at least 5, got ${JSON.stringify(partMb)}`);
    return new S3BlobStore({
      bucket, tempDir, endpoint: endpoint?.replace(/\/$/, ''),
      region: u.searchParams.get('region') ?? undefined,
      prefix: u.searchParams.get('prefix') ?? undefined,
      partSize,
    });
  }
  throw new TypeError(`blobs: expected file:// or s3://, got ${JSON.stringify(location)}`);
}
