/**
 * A new file's commit whose answer was lost (the connection cut once the service had it): the upload is
 * retried, and the retry finds the file landed instead of committing it a second time (which the service
 * would place at a numbered name, for the gateway to remove again: a change of names nobody made).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryVfs, type FaultyRemote, type GatewayVfs, type MemoryRemote } from '../../../../src/vfs/index.js';
import { waitFor } from '../../../support/wait-for.js';

describe('a new file\'s commit whose answer was lost', { timeout: 20_000 }, () => {
  let open: GatewayVfs[] = [];
  afterEach(async () => {
    for (const v of open) await v.close();
    open = [];
  });

  async function setup(): Promise<{ vfs: GatewayVfs; faulty: FaultyRemote; inner: MemoryRemote }> {
    const { vfs } = await createMemoryVfs({ names: ['A'], faults: true, upload: { delayMs: 0, retryBaseMs: 20, retryMaxMs: 100 }, feedIntervalMs: 0 });
    open.push(vfs);
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    return { vfs, faulty, inner: faulty.inner as MemoryRemote };
  }

  it('is retried, finds the file landed, and commits nothing more', async () => {
    const { vfs, faulty, inner } = await setup();
    faulty.inject({ kind: 'cut', methods: ['commit'], times: 1 });
    await vfs.writeFile('/A/f', Buffer.from('landed once'));
    await waitFor('the upload retried and done', () => faulty.injected.cut === 1 && vfs.status().uploads.length === 0);
    expect(inner.commits.map((c) => c.fullpath)).toEqual(['f']);
    expect(inner.paths()).toEqual(['f']);
    expect(inner.read('f').toString()).toBe('landed once');
    expect(vfs.status().conflicts).toEqual([]);
  });

  it('other bytes at the name by then are another file: both kept, as for any new file whose name was taken', async () => {
    const { vfs, faulty, inner } = await setup();
    // The answer is lost and the commit never reached the service; meanwhile another client made the name.
    faulty.inject({ kind: 'fail', methods: ['commit'], code: 'EIO', times: 1 });
    await vfs.writeFile('/A/g', Buffer.from('mine'));
    await waitFor('the first attempt failed', () => faulty.injected.fail === 1);
    inner.putFile('g', Buffer.from('theirs'), { operator: { opName: 'Bob' } });
    await waitFor('the upload retried and done', () => vfs.status().uploads.length === 0);
    expect(inner.read('g').toString()).toBe('mine');
    const copies = inner.paths().filter((p) => p.startsWith('g (conflict Bob '));
    expect(copies).toHaveLength(1);
    expect(inner.read(copies[0]!).toString()).toBe('theirs');
  });
});
