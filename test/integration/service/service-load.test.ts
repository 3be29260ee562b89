/**
 * The load of `npm run bench -- service-load` (scripts/bench/support/service-load.ts), short and untimed:
 * 3 clients of 40 operations of the mix at once on one service (either engine), the updates feed polled
 * meanwhile. Every operation succeeds and the mirror the feed built matches the tree at the end. The
 * mix's reads alone and its changes alone draw only their kinds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { READS, prepareLoad, runLoad } from '../../../scripts/bench/support/service-load.js';
import { startTestService, type TestService } from '../../support/service.js';

let t: TestService;

beforeAll(async () => {
  t = await startTestService();
});

afterAll(async () => {
  await t?.close();
});

describe('the service-load bench, short', () => {
  it('runs the mix from several clients with the feed exactly mirroring the tree', async () => {
    const opts = { clients: 3, opsPerClient: 40, root: 'smoke', seed: 7 };
    await prepareLoad(t.client, opts);
    const result = await runLoad([t.client], opts);
    const done = [...result.latencies.values()].reduce((n, v) => n + v.length, 0);
    expect(done).toBe(120);
    expect(result.feedChanges).toBeGreaterThan(0);
    if (t.service.parts.tree.db.engine === 'postgresql') expect(t.service.parts.tree.db.stats.retries).toBe(0);
  });

  it('draws only the reads, or only the changes, of the mix when asked', async () => {
    for (const mix of ['reads', 'writes'] as const) {
      const opts = { clients: 2, opsPerClient: 30, root: `smoke-${mix}`, seed: 3, mix };
      await prepareLoad(t.client, opts);
      const result = await runLoad([t.client], opts);
      const kinds = [...result.latencies].filter(([, v]) => v.length > 0).map(([k]) => k);
      expect({ mix, done: [...result.latencies.values()].reduce((n, v) => n + v.length, 0) }).toEqual({ mix, done: 60 });
      expect({ mix, reads: kinds.every((k) => READS.includes(k)), changes: kinds.every((k) => !READS.includes(k)) })
        .toEqual({ mix, reads: mix === 'reads', changes: mix === 'writes' });
    }
  });
});
