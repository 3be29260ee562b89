/**
 * Property: whatever sequence of changes the library sees, a client that pages the updates feed with its
 * cursor (mode compare), polling at arbitrary moments, reconstructs exactly the service's tree.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { ServiceClient } from '../../../src/api/client.js';
import { ServiceError } from '../../../src/api/errors.js';
import { startTestService, type TestService } from '../../support/service.js';
import { put, treeOf } from './helpers.js';

const NAMES = ['a', 'b', 'c'];
const path = fc.array(fc.constantFrom(...NAMES), { minLength: 1, maxLength: 3 }).map((s) => s.join('/'));
const op = fc.oneof(
  fc.record({ kind: fc.constant('mkdir' as const), path }),
  fc.record({ kind: fc.constant('put' as const), path, content: fc.constantFrom('x', 'y', 'z') }),
  fc.record({ kind: fc.constant('move' as const), path, to: path }),
  fc.record({ kind: fc.constant('del' as const), path, destroy: fc.boolean() }),
  fc.record({ kind: fc.constant('recover' as const), path }),
  fc.record({ kind: fc.constant('copy' as const), path, to: path }),
  fc.record({ kind: fc.constant('lock' as const), path, lock: fc.boolean() }),
  fc.record({ kind: fc.constant('tag' as const), path, add: fc.boolean() }),
  fc.record({ kind: fc.constant('poll' as const) }),
);
type Op = typeof op extends fc.Arbitrary<infer T> ? T : never;

/** A client's view built from the feed alone: hash → (fullpath, kind/content). */
class FeedMirror {
  cursor = 0;
  readonly byHash = new Map<string, { fullpath: string; value: string }>();

  async poll(client: ServiceClient): Promise<void> {
    for (;;) {
      const page = await client.file.updates({ mode: 'compare', fetch_dateline: this.cursor });
      if (page.list.length === 0) return;
      for (const item of page.list) {
        if (item.cmd === 0) this.byHash.delete(item.hash);
        else this.byHash.set(item.hash, { fullpath: item.fullpath, value: item.dir ? 'd' : item.filehash });
      }
      expect(page.fetch_dateline).toBeGreaterThan(this.cursor);
      this.cursor = page.fetch_dateline;
    }
  }

  tree(): Map<string, string> {
    return new Map([...this.byHash.values()].map((v) => [v.fullpath, v.value]));
  }
}

async function apply(client: ServiceClient, o: Op, mirror: FeedMirror, copies: TestService): Promise<void> {
  try {
    switch (o.kind) {
      case 'mkdir': await client.file.createFolder({ fullpath: o.path }); break;
      case 'put': await put(client, o.path, o.content); break;
      case 'move': await client.file.move({ fullpath: o.path, dest_fullpath: o.to }); break;
      case 'del': await client.file.del({ fullpath: o.path, destroy: o.destroy ? 1 : 0 }); break;
      case 'recover': await client.file.recover({ fullpaths: o.path }); break;
      case 'copy': await client.file.copy({ from_fullpath: o.path, fullpath: o.to }); await copies.service.parts.copies.drained(); break;
      case 'lock': await client.file.lock({ fullpath: o.path, lock: o.lock ? 'lock' : 'unlock' }); break;
      case 'tag': await (o.add ? client.file.addTag({ fullpath: o.path, tag: 't' }) : client.file.delTag({ fullpath: o.path, tag: 't' })); break;
      case 'poll': await mirror.poll(client); break;
    }
  } catch (err) {
    if (!(err instanceof ServiceError) || err.status >= 500) throw err;
  }
}

let t: TestService;
beforeAll(async () => { t = await startTestService(); });
afterAll(async () => { await t?.close(); });

describe('updates feed', () => {
  it('a client paging with the cursor reconstructs exactly the tree', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 25 }), async (ops) => {
        // Start each run from an empty library, seen by a fresh client from cursor 0.
        for (const r of (await t.client.file.ls({ fullpath: '' })).list) await t.client.file.del({ fullpath: r.fullpath, destroy: 1 });
        const mirror = new FeedMirror();
        for (const o of ops) await apply(t.client, o, mirror, t);
        await mirror.poll(t.client);
        expect(mirror.tree()).toEqual(await treeOf(t.client));
      }),
      { numRuns: 40 },
    );
  }, 120_000);

  it('operation times are strictly increasing: a burst of changes in one millisecond pages without loss', async () => {
    await t.client.file.createFolder({ fullpath: 'burst' });
    for (let i = 0; i < 150; i++) await t.client.file.createFolder({ fullpath: `burst/f${i}` });
    await t.client.file.move({ fullpath: 'burst', dest_fullpath: 'burst2' });
    const mirror = new FeedMirror();
    await mirror.poll(t.client);
    expect(mirror.tree()).toEqual(await treeOf(t.client));
    const seen = [...mirror.tree().keys()].filter((k) => k.startsWith('burst2/'));
    expect(seen).toHaveLength(150);
  });
});
