/**
 * The bandwidth limit (`bwlimit`) over the embedded service: a file written through a limited Vfs is
 * uploaded whole and one read through another limited Vfs downloads it whole, each transfer having taken
 * its bytes from its bucket. What is checked is that the limit was consulted (its counters), never how
 * long the transfers took.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bandwidthLimitOf } from '../../../src/shared/bandwidth-limit.js';
import { serviceAvailable, startTestVfs, type TestVfs } from '../../support/vfs.js';

const T = 60_000;

describe.runIf(await serviceAvailable())('bandwidth limit of the gateway transfers', () => {
  // Whether a transfer waited depends on how fast the machine is: the unit test of the bucket checks that.
  const limit = bandwidthLimitOf('1M:2M');
  let t: TestVfs;

  beforeAll(async () => {
    t = await startTestVfs({ bandwidth: limit });
  }, T);
  afterAll(async () => {
    await t?.close();
  }, T);

  it('a limited upload and download complete byte-exact, their bytes taken from the buckets', async () => {
    const data = Buffer.alloc(2 * 1024 * 1024 + 5);
    for (let i = 0; i < data.length; i++) data[i] = (i * 31 + (i >> 11)) & 0xff;
    await t.vfs.writeFile('/Library/limited.bin', data);
    await t.vfs.flushAll({ timeoutMs: 30_000 });
    expect(limit.upload!.counters.bytes).toBeGreaterThanOrEqual(data.length);
    expect(limit.download!.counters.bytes).toBe(0);

    // Another gateway on the same library reads it: from the service, through the download bucket.
    const other = await t.openVfs({ bandwidth: limit });
    const h = await other.open('/Library/limited.bin', { read: true });
    const parts: Buffer[] = [];
    try {
      for (let pos = 0; pos < data.length; pos += 256 * 1024) parts.push(await h.read(pos, 256 * 1024));
    } finally {
      await h.release();
    }
    expect(Buffer.concat(parts).equals(data)).toBe(true);
    expect(limit.download!.counters.bytes).toBeGreaterThanOrEqual(data.length);
  }, T);
});
