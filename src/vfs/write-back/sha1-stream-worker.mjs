// Worker thread of Sha1Streams: keeps the SHA-1 of spool files that are being appended to, reading each
// new range from the file (the page cache) as the main thread reports it written. Plain JavaScript so
// that it loads in a worker without the TypeScript loader. Synchronous file reads are fine here: this
// thread serves nothing else.
import { parentPort } from 'node:worker_threads';
import { createHash } from 'node:crypto';
import { closeSync, openSync, readSync } from 'node:fs';

const CHUNK = 1024 * 1024;
const buffer = Buffer.allocUnsafe(CHUNK);
/** sid -> { fd, hash, at, error } */
const streams = new Map();

function extend(s, to) {
  while (!s.error && s.at < to) {
    const n = readSync(s.fd, buffer, 0, Math.min(CHUNK, to - s.at), s.at);
    if (n === 0) throw Object.assign(new Error(`spool ends at ${s.at}, expected ${to} bytes`), { code: 'EIO' });
    s.hash.update(buffer.subarray(0, n));
    s.at += n;
  }
}

parentPort.on('message', (m) => {
  if (m.op === 'open') {
    const s = { fd: -1, hash: createHash('sha1'), at: 0, error: undefined };
    try {
      s.fd = openSync(m.path, 'r');
    } catch (err) {
      s.error = `${err.code ?? 'EIO'}: ${err.message}`;
    }
    streams.set(m.sid, s);
    return;
  }
  const s = streams.get(m.sid);
  if (m.op === 'extend') {
    if (!s || s.error) return;
    try {
      extend(s, m.to);
    } catch (err) {
      s.error = `${err.code ?? 'EIO'}: ${err.message}`;
    }
    return;
  }
  if (m.op === 'digest') {
    if (!s) return parentPort.postMessage({ id: m.id, error: 'unknown stream' });
    if (s.error) return parentPort.postMessage({ id: m.id, error: s.error });
    return parentPort.postMessage({ id: m.id, sha1: s.hash.copy().digest('hex'), size: s.at });
  }
  if (m.op === 'close') {
    if (s && s.fd >= 0) closeSync(s.fd);
    streams.delete(m.sid);
  }
});
