/**
 * A new file's commit whose answer was lost (the connection cut once the service had it): the upload is
 * retried, and the retry finds the file landed instead of committing it a second time (which the service
 * would place at a numbered name, for the gateway to remove again: a change of names nobody made).
 */
import { describe, expect, it } from 'vitest';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryVfs, createVfs, FaultyRemote, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';
import { waitFor } from '../../../support/wait-for.js';
import { closedAfterEach } from '../../../support/vfs-teardown.js';

describe('a new file\'s commit whose answer was lost', { timeout: 20_000 }, () => {
  const { open, dirs } = closedAfterEach();

  async function setup(opts: { retryBaseMs?: number; delayMs?: number } = {}): Promise<{ vfs: GatewayVfs; faulty: FaultyRemote; inner: MemoryRemote }> {
    const retryBaseMs = opts.retryBaseMs ?? 20;
    const { vfs } = await createMemoryVfs({ names: ['A'], faults: true, upload: { delayMs: opts.delayMs ?? 0, retryBaseMs, retryMaxMs: retryBaseMs * 5 }, feedIntervalMs: 0 });
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

  it('landed at a numbered name (the name taken already), its answer lost: put in place, the other file kept, nothing committed again', async () => {
    const { vfs, faulty, inner } = await setup({ delayMs: 600_000 });
    await vfs.writeFile('/A/n.txt', Buffer.from('mine'));
    // Another client made the name before the commit: the service places it at `n (1).txt`; the answer is lost.
    inner.putFile('n.txt', Buffer.from('theirs'), { operator: { opName: 'Bob' } });
    faulty.inject({ kind: 'cut', methods: ['commit'], times: 1 });
    // Uploaded now (the flush may answer the first attempt's failure; the retry follows either way).
    await vfs.flushAll().catch(() => undefined);
    await waitFor('the upload retried and done', () => faulty.injected.cut === 1 && vfs.status().uploads.length === 0);
    expect(inner.commits.map((c) => c.fullpath)).toEqual(['n (1).txt']);
    expect(inner.read('n.txt').toString()).toBe('mine');
    const copies = inner.paths().filter((p) => p.startsWith('n (conflict Bob '));
    expect(copies).toHaveLength(1);
    expect(inner.read(copies[0]!).toString()).toBe('theirs');
    expect(inner.paths().sort()).toEqual(['n.txt', copies[0]!].sort());
    expect(vfs.status().conflicts.map((c) => c.copy)).toEqual(copies);
  });

  it('landed at a numbered name, the other file moved aside, then stopped (a crash between the moves): put in place at the retry', async () => {
    const { vfs, faulty, inner } = await setup({ delayMs: 600_000 });
    await vfs.writeFile('/A/m.txt', Buffer.from('mine'));
    inner.putFile('m.txt', Buffer.from('theirs'), { operator: { opName: 'Bob' } });
    // The first attempt lands at `m (1).txt` and moves the other file to its conflict name; the move of
    // this one to the name fails (as a crash there would leave it), and the upload is retried.
    faulty.inject({ kind: 'fail', methods: ['move'], pathPrefix: 'm (1)', code: 'EIO', times: 1 });
    await vfs.flushAll().catch(() => undefined);
    await waitFor('the upload retried and done', () => faulty.injected.fail === 1 && vfs.status().uploads.length === 0);
    expect(inner.commits.map((c) => c.fullpath)).toEqual(['m (1).txt']);
    expect(inner.read('m.txt').toString()).toBe('mine');
    const copies = inner.paths().filter((p) => p.startsWith('m (conflict Bob '));
    expect(copies.map((c) => inner.read(c).toString())).toEqual(['theirs']);
    expect(inner.paths().sort()).toEqual(['m.txt', copies[0]!].sort());
  });

  it('regression: a file of its own at a numbered name with the same bytes (a download saved twice) is not taken for the landed commit', async () => {
    const { vfs, faulty, inner } = await setup();
    // `d (1).pdf` is a file made here (as a browser names a download saved a second time), uploaded.
    await vfs.writeFile('/A/d (1).pdf', Buffer.from('same bytes'));
    await vfs.flushAll();
    // `d.pdf`, the same bytes: its first commit fails before the service has it; the retry looks for it.
    faulty.inject({ kind: 'fail', methods: ['commit'], code: 'EIO', times: 1 });
    await vfs.writeFile('/A/d.pdf', Buffer.from('same bytes'));
    await waitFor('the upload retried and done', () => faulty.injected.fail === 1 && vfs.status().uploads.length === 0);
    expect(inner.paths().sort()).toEqual(['d (1).pdf', 'd.pdf']);
    expect(inner.commits.map((c) => c.fullpath)).toEqual(['d (1).pdf', 'd.pdf']);
    expect(vfs.status().conflicts).toEqual([]);
  });

  it('renamed while its retry waits (a temporary file renamed into place): the landed file moves, nothing is committed again', async () => {
    // The retry waits longer than the test: the rename moves the upload first.
    const { vfs, faulty, inner } = await setup({ retryBaseMs: 60_000 });
    faulty.inject({ kind: 'cut', methods: ['commit'], times: 1 });
    await vfs.writeFile('/A/.t.tmp', Buffer.from('landed, answer lost'));
    await waitFor('the answer lost', () => faulty.injected.cut === 1 && vfs.status().uploads[0]?.state === 'retrying');
    await vfs.rename('/A/.t.tmp', '/A/t');
    await vfs.flushAll();
    expect(inner.commits.map((c) => c.fullpath)).toEqual(['.t.tmp']);
    expect(inner.paths()).toEqual(['t']);
    expect(inner.read('t').toString()).toBe('landed, answer lost');
  });

  it('the gateway stopped after the commit landed, its answer lost: replayed, the file is found landed, nothing is committed again', async () => {
    const inner = new MemoryRemote({ name: 'A', id: '1' });
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-lost-answer-'));
    dirs.push(dataDir);
    const start = async (): Promise<{ vfs: GatewayVfs; faulty: FaultyRemote }> => {
      const faulty = new FaultyRemote(inner);
      const vfs = await createVfs({ libraries: [{ name: 'A', remote: faulty }], dataDir, feedIntervalMs: 0, upload: { delayMs: 0, retryBaseMs: 60_000, retryMaxMs: 60_000 } });
      open.push(vfs);
      return { vfs, faulty };
    };
    const a = await start();
    a.faulty.inject({ kind: 'cut', methods: ['commit'], times: 1 });
    await a.vfs.writeFile('/A/h', Buffer.from('landed before the stop'));
    await waitFor('the answer lost', () => a.faulty.injected.cut === 1 && a.vfs.status().uploads[0]?.state === 'retrying');
    // Stopped at once (a crash): its journal still holds the file.
    await a.vfs.writeBack.uploads.close();
    const b = await start();
    await b.vfs.flushAll({ timeoutMs: 10_000 });
    expect(inner.commits.map((c) => c.fullpath)).toEqual(['h']);
    expect(inner.paths()).toEqual(['h']);
    expect(b.vfs.status().localFiles).toBe(0);
  });
});
