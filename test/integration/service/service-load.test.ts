/**
 * The load of `npm run bench -- service-load` (scripts/bench/support/service-load.ts), short and untimed:
 * 3 clients of 40 operations of the mix at once on one service (either engine), the updates feed polled
 * meanwhile. Every operation succeeds and the mirror the feed built matches the tree at the end. The
 * mix's reads alone and its changes alone draw only their kinds. Clients spread over libraries of their
 * own work there, and a poller of each library's feed mirrors it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { READS, createLoadLibraries, prepareLoad, runLoad } from '../../../scripts/bench/support/service-load.js';
import { clientFor, startTestService, type TestService } from '../../support/service.js';

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

  it('spreads the clients over libraries of their own, each feed mirroring its library', async () => {
    const libraries = await createLoadLibraries(clientFor(t, 'enterprise'), 2, 'smoke-spread');
    const opts = { clients: 3, opsPerClient: 20, root: 'smoke-spread', seed: 5, mix: 'writes' as const, libraries };
    await prepareLoad(t.client, opts);
    const result = await runLoad([t.client], opts);
    expect([...result.latencies.values()].reduce((n, v) => n + v.length, 0)).toBe(60);
    // Clients 0 and 2 in the first library, client 1 in the second; none in the library of t.client.
    for (const [library, homes] of [[libraries[0]!, ['c0', 'c2']], [libraries[1]!, ['c1']]] as const) {
      const listed = (await t.client.withCredentials({ library }).file.ls({ fullpath: 'smoke-spread' })).list.filter((e) => e.dir).map((e) => e.filename);
      expect(listed.sort()).toEqual(homes);
    }
    expect((await t.client.file.ls({ fullpath: '' })).list.map((e) => e.filename)).not.toContain('smoke-spread');
  });
});
