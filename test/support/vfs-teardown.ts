/**
 * closedAfterEach(): the Vfs's and folders the tests of a file or suite make, closed and removed after
 * each test (vitest only; test/support/vfs.ts is also used by the benchmarks).
 */
import { afterEach } from 'vitest';
import { rm } from 'node:fs/promises';
import type { GatewayVfs } from '../../src/vfs/gateway-vfs.js';
/**
 * The Vfs's and folders the tests of the file or suite it is called in make: each Vfs pushed to `open`
 * is closed and each folder pushed to `dirs` removed after every test.
 */
export function closedAfterEach(): { open: GatewayVfs[]; dirs: string[] } {
  const made = { open: [] as GatewayVfs[], dirs: [] as string[] };
  afterEach(async () => {
    for (const v of made.open.splice(0)) await v.close();
    for (const d of made.dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });
  return made;
}
