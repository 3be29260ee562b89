/**
 * Garbage collector setting of the cloudlib processes (gateway, mount, service).
 *
 * Moving file data allocates memory outside the JavaScript heap at the rate of the data: every socket
 * read is a new buffer, and so is the data of each write the FUSE engine hands over. V8 starts a full
 * collection for every 64 MiB of such memory, so at hundreds of MB/s a collection is almost always under
 * way. Incremental marking spreads each one over many small steps and a finalization task between
 * callbacks, and those land between the answers to the kernel's and the clients' requests: through a
 * FUSE mount a cold sequential read measured 1.5× faster with marking done in one go (a few ms on a
 * gateway's heap of tens of MB). A process with a heap of hundreds of MB would see longer single
 * pauses: `CLOUDLIB_INCREMENTAL_GC=1` keeps V8's default.
 */
import v8 from 'node:v8';

/** Applies the setting (before the heap grows: call first thing). True when marking is now atomic. */
export function tuneGarbageCollector(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.CLOUDLIB_INCREMENTAL_GC === '1') return false;
  v8.setFlagsFromString('--no-incremental-marking');
  return true;
}
