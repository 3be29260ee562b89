/**
 * Writes and deletes a scratch file of `bytes` in `dir`, so the next timed window allocates page cache
 * the kernel has just recycled. On a VM whose freed memory is handed back to the host (virtio-balloon
 * free page reporting), a page used for the first time since costs a host fault: writing 1 GiB into new
 * page cache then takes seconds instead of a fraction of one, which measures the VM, not the code. The
 * host takes back part of what was freed about every 2 s, so `bytes` must cover what the window allocates
 * in every process (spool, the service's copy) with a margin; never more than half the free memory.
 * A file system's page cache is recycled, not /dev/shm: measured, a 1 GiB write right after recycling
 * tmpfs pages ran 2-4 times slower than after recycling page cache. The benchmarks run it before each
 * side's timed window alike; BENCH_RECYCLE=0 leaves it out.
 */
import { open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { freemem } from 'node:os';

export async function recyclePages(dir: string, bytes: number): Promise<void> {
  if (process.env.BENCH_RECYCLE === '0') return;
  const path = join(dir, 'recycle.bin');
  const size = Math.min(bytes, Math.floor(freemem() / 2));
  const chunk = Buffer.alloc(1024 * 1024);
  const fh = await open(path, 'w');
  try {
    for (let at = 0; at < size; at += chunk.length) await fh.write(chunk, 0, Math.min(chunk.length, size - at), at);
  } finally {
    await fh.close();
    await rm(path, { force: true });
  }
}
