// Worker thread of FileHasher: computes the SHA-1 of a file, streaming, off the main thread.
// Plain JavaScript so that it loads in a worker without the TypeScript loader.
import { parentPort } from 'node:worker_threads';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

parentPort.on('message', (job) => {
  const hash = createHash('sha1');
  let size = 0;
  const stream = createReadStream(job.path, { highWaterMark: 1024 * 1024 });
  stream.on('data', (chunk) => { size += chunk.length; hash.update(chunk); });
  stream.on('error', (err) => parentPort.postMessage({ id: job.id, error: `${err.code ?? 'EIO'}: ${err.message}` }));
  stream.on('end', () => parentPort.postMessage({ id: job.id, sha1: hash.digest('hex'), size }));
});
