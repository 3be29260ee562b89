// Worker thread of CacheWriter: writes bytes the main thread copied into a shared ring to a content
// cache file, at the lowest CPU priority this thread can take (nice 19): when the machine's cores are
// busy, the readers whose bytes these are go first and the cache falls behind (the main thread then lets
// copies go rather than hold them). Plain JavaScript so that it loads in a worker without the TypeScript
// loader. Synchronous writes are fine here: this thread serves nothing else.
import { parentPort, workerData } from 'node:worker_threads';
import { readlinkSync, writeSync } from 'node:fs';
import { setPriority } from 'node:os';

const ring = Buffer.from(workerData.ring);

/** This thread's own id (Linux: /proc/thread-self is PID/task/TID), or undefined elsewhere. */
function threadId() {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isInteger(tid) && tid > 0 ? tid : undefined;
  } catch {
    return undefined;
  }
}

const tid = threadId();
let lowered = false;
if (tid !== undefined) {
  try {
    // A thread id: only this thread's priority changes, not the process's.
    setPriority(tid, workerData.nice);
    lowered = true;
  } catch { /* left at the process's priority */ }
}
parentPort.postMessage({ ready: true, lowered });

parentPort.on('message', (m) => {
  try {
    let done = 0;
    while (done < m.length) {
      const n = writeSync(m.fd, ring, m.offset + done, m.length - done, m.position + done);
      if (n === 0) throw Object.assign(new Error(`nothing written at ${m.position + done}`), { code: 'EIO' });
      done += n;
    }
    parentPort.postMessage({ id: m.id });
  } catch (err) {
    parentPort.postMessage({ id: m.id, error: `${err.code ?? 'EIO'}: ${err.message}` });
  }
});
