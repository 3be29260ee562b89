/**
 * An fsync loop on one handle of a new file the kernel writes itself (FUSE passthrough): each fsync after
 * the version's seal finds the spool changed in place and journals it again, stopping its upload under
 * way. The service may take that stopped commit all the same (its answer on its way, or lost): the file
 * is then on the service, of this lineage, and the next commit replaces it there. It is never committed
 * as a new file again, which the service would place at a numbered name (`a (1).txt`) beside it, nor are
 * its own earlier bytes kept as another's conflict copy.
 */
import { describe, expect, it } from 'vitest';
import { writeSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';
import type { CommitOptions, CommitSource, RemoteEntry } from '../../../../src/vfs/remote.js';
import { VfsError } from '../../../../src/vfs/types.js';
import { waitFor } from '../../../support/wait-for.js';
import { closedAfterEach } from '../../../support/vfs-teardown.js';

/**
 * A memory service that takes the first commit of `held` only once its caller has given up on it (its
 * signal aborted: the answer was on its way), and answers it all the same, with the bytes it was sent;
 * `commits` lists every commit that reached it, at the path it landed at.
 */
class LateAnswerRemote extends MemoryRemote {
  waiting = false;
  /** `answered` false: the answer never reaches the caller (the connection cut), the commit landed all the same. */
  constructor(readonly held: string, readonly answered = true) {
    super({ name: 'A', id: '1' });
  }

  override async commit(fullpath: string, source: CommitSource, opts?: CommitOptions): Promise<RemoteEntry> {
    const signal = opts?.signal;
    if (!this.waiting && fullpath === this.held && signal) {
      // The bytes are sent first (the spool may change in place after): the commit that lands is of them.
      const sent = { ...source, data: source.data ?? await readFile(source.path) };
      this.waiting = true;
      if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      const landed = await super.commit(fullpath, sent, opts);
      if (!this.answered) throw new VfsError('EIO', 'connection cut before the answer');
      return landed;
    }
    return super.commit(fullpath, source, opts);
  }
}

/** Content of `n` bytes, different for each `seed`. */
function content(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < b.length; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

describe('an fsync loop on a file the kernel writes, its uploads landing meanwhile', { timeout: 20_000 }, () => {
  const { open, dirs } = closedAfterEach();

  async function setup(answered = true): Promise<{ vfs: GatewayVfs; remote: LateAnswerRemote }> {
    const remote = new LateAnswerRemote('a.txt', answered);
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-fsync-loop-'));
    dirs.push(dataDir);
    // No write-back delay: a version an fsync recorded is sealed and sent while its writer keeps it open.
    const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, upload: { delayMs: 0, retryBaseMs: 20, retryMaxMs: 100 }, feedIntervalMs: 0 });
    open.push(vfs);
    return { vfs, remote };
  }

  // Small (sealed by its SHA-1, its bytes in its record) and large (sealed by its spool's mark, no SHA-1).
  for (const [kind, size, answered] of [['small', 100, true], ['large', 300 * 1024, true], ['small', 100, false]] as const) {
    const how = answered ? 'its answer late' : 'its answer lost';
    it(`regression: a ${kind} new file written part by part with an fsync after each, a stopped commit landing (${how}): committed at its name only, no numbered copy, no conflict`, async () => {
      const { vfs, remote } = await setup(answered);
      const parts = [content(size, 1), content(size, 2), content(size, 3)];
      const h = await vfs.open('/A/a.txt', { write: true, create: true, truncate: true });
      const spool = await h.passthrough!();
      expect(spool, 'the kernel writes the spool').toBeDefined();
      let at = 0;
      for (const [i, p] of parts.entries()) {
        writeSync(spool!.fd, p, 0, p.length, at);
        at += p.length;
        await h.fsync();
        // The first version is sealed and its commit under way (held until the next fsync stops it).
        if (i === 0) await waitFor('the first commit under way', () => remote.waiting, { timeoutMs: 10_000 });
      }
      await h.release();
      spool!.end();
      await vfs.flushAll();
      const whole = Buffer.concat(parts);
      expect(remote.commits.map((c) => c.fullpath).filter((p) => p !== 'a.txt'), 'commits at another name').toEqual([]);
      expect(remote.paths()).toEqual(['a.txt']);
      expect(remote.read('a.txt').equals(whole)).toBe(true);
      expect(vfs.status().conflicts).toEqual([]);
      expect(vfs.status().uploads).toEqual([]);
    });
  }
});
