/**
 * A file kept open after an fsync is sealed by the write-back itself once unchanged for the write-back
 * delay (uploadWhenQuiet). That seal is no acknowledgement of a writer: when a replace comes after it, the
 * writers' next flush or close still acknowledges what they wrote, after the replace, so the last
 * acknowledged content wins whether or not the quiet seal came first. The same holds for a file the kernel
 * writes itself (FUSE passthrough), whose bytes pass through no write of the Vfs. A replace that comes
 * before the delay ends leaves nothing to seal: the replace stays the file's until the writers flush.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { writeSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, FaultyRemote, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';
import { readAll } from '../../../support/vfs.js';
import { waitFor } from '../../../support/wait-for.js';
import { ManualClock } from '../../../support/manual-clock.js';
import type { UploadJournal } from '../../../../src/vfs/write-back/upload-journal.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** A gateway whose commits fail until healed, with a write-back delay of 1 s on a manual clock. */
async function gateway(): Promise<{ vfs: GatewayVfs; remote: MemoryRemote; faulty: FaultyRemote; clock: ManualClock; dataDir: string }> {
  const clock = new ManualClock();
  const remote = new MemoryRemote({ name: 'A', id: '1' });
  const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-wbq-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const faulty = new FaultyRemote(remote);
  const vfs = await createVfs({ libraries: [{ name: 'A', remote: faulty }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 5, retryMaxMs: 20, delayMs: 1000 }, clock });
  cleanups.push(() => vfs.close());
  return { vfs, remote, faulty, clock, dataDir };
}

/** Lets the write-back delay pass with commits failing: it seals what the handle holds and queues it. */
async function quietSeal(vfs: GatewayVfs, faulty: FaultyRemote, clock: ManualClock): Promise<void> {
  faulty.inject({ kind: 'fail', code: 'EIO', methods: ['commit'] });
  clock.advance(1000);
  clock.advance(1000);
  await waitFor('the quiet seal queued for upload', () => vfs.status().uploads.some((u) => u.fullpath === 'f'));
}

/**
 * kill -9 of `g`'s gateway: its writers' unflushed bytes go with it, the journal stays. Another gateway on
 * the same data folder shows `want` at f and uploads it.
 */
async function afterCrash(g: { vfs: GatewayVfs; remote: MemoryRemote; clock: ManualClock; dataDir: string }, want: string): Promise<void> {
  await g.vfs.writeBack.uploads.close();
  const again = await createVfs({ libraries: [{ name: 'A', remote: g.remote }], dataDir: g.dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 5, retryMaxMs: 20 }, clock: g.clock });
  cleanups.push(() => again.close());
  expect(await readAll(again, '/A/f')).toBe(want);
  await again.flushAll();
  expect(g.remote.read('f').toString()).toBe(want);
}

describe('a quiet seal, then a replace, then the writers\' close', () => {
  it('regression: the close acknowledges the written bytes after the replace; the service ends with them', async () => {
    // The model found it (seed 1160408617): the close found the version sealed by the write-back delay,
    // acknowledged nothing, and the replace made meanwhile was uploaded as the file's last content.
    const { vfs, remote, faulty, clock } = await gateway();
    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    await h.fsync();
    await h.write(1, Buffer.from([0]));
    await quietSeal(vfs, faulty, clock);
    await vfs.writeFile('/A/f', Buffer.alloc(0));
    expect(await readAll(vfs, '/A/f')).toBe('');
    // The close acknowledges the handle's bytes, after the replace.
    await h.release();
    expect(await readAll(vfs, '/A/f')).toBe('\0\0');
    faulty.heal();
    await vfs.flushAll();
    expect(remote.read('f')).toEqual(Buffer.from([0, 0]));
  });

  for (const crash of [false, true]) {
    it(`regression: a replace, then the delay: the replace stays the file's${crash ? ' across a crash' : ' until the writers\' close'}`, async () => {
      // The delay sealed the writers' unflushed bytes over the replace acknowledged after their fsync; a
      // crash then lost the replace, superseded before its upload.
      const { vfs, remote, clock, dataDir } = await gateway();
      const h = await vfs.open('/A/f', { read: true, write: true, create: true });
      await h.write(0, Buffer.from('a'));
      await h.fsync();
      await h.write(1, Buffer.from('b'));
      await vfs.writeFile('/A/f', Buffer.from('P'));
      clock.advance(1000);
      clock.advance(1000);
      expect(await readAll(vfs, '/A/f')).toBe('P');
      if (crash) {
        await afterCrash({ vfs, remote, clock, dataDir }, 'P');
        return;
      }
      await h.release();
      expect(await readAll(vfs, '/A/f')).toBe('ab');
      await vfs.flushAll();
      expect(remote.read('f').toString()).toBe('ab');
    });
  }

  it('regression: a replace stops the delay an fsync started, also when the writers change the file after it', async () => {
    // The model found it (seed 2112472112): the delay's look, started by the fsync, went on after the
    // replace once the writers wrote again, and sealed those unflushed bytes over the replace.
    const { vfs, remote, clock, dataDir } = await gateway();
    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    await h.write(0, Buffer.from('a'));
    await h.fsync();
    await vfs.writeFile('/A/f', Buffer.from('P'));
    await h.write(1, Buffer.from('b'));
    clock.advance(1000);
    clock.advance(1000);
    await afterCrash({ vfs, remote, clock, dataDir }, 'P');
  });

  // The kernel's bytes marked nothing unflushed: the close acknowledged nothing and the replace stayed the
  // file's content, the kernel's bytes lost from the name.
  // The mount ends the kernel's hand-over just before the Vfs's release (`endFirst`): the close then found
  // the version no longer handed over and took the kernel's bytes for none.
  for (const [when, restart, endFirst] of [['before', false, false], ['after', false, false], ['after', true, false], ['before', false, true], ['after', false, true], ['after', true, true]] as const) {
    it(`regression, passthrough: the kernel's bytes written ${when} the replace are the file's after the close${restart ? ', and after a restart' : ''}${endFirst ? ' (the hand-over ended first, as the mount does)' : ''}`, async () => {
      const { vfs, remote, faulty, clock, dataDir } = await gateway();
      const h = await vfs.open('/A/f', { read: true, write: true, create: true });
      const spool = await h.passthrough!();
      expect(spool, 'the kernel writes the spool').toBeDefined();
      await h.fsync();
      writeSync(spool!.fd, Buffer.from([1]), 0, 1, 1);
      await quietSeal(vfs, faulty, clock);
      await vfs.writeFile('/A/f', Buffer.alloc(0));
      expect(await readAll(vfs, '/A/f')).toBe('');
      if (when === 'after') {
        writeSync(spool!.fd, Buffer.from([2]), 0, 1, 2);
        // The Vfs sees no request for the kernel's writes: the path shows them from the writers' next flush.
        expect(await readAll(vfs, '/A/f')).toBe('');
      }
      if (endFirst) spool!.end();
      await h.release();
      spool!.end();
      const want = when === 'after' ? Buffer.from([0, 1, 2]) : Buffer.from([0, 1]);
      expect(await readAll(vfs, '/A/f')).toBe(want.toString());
      if (restart) {
        // The journal alone: the close's record comes after the replace's.
        await vfs.close();
        const again = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 5, retryMaxMs: 20 }, clock });
        cleanups.push(() => again.close());
        expect(await readAll(again, '/A/f')).toBe(want.toString());
        await again.flushAll();
      } else {
        faulty.heal();
        await vfs.flushAll();
      }
      expect(remote.read('f')).toEqual(want);
    });
  }
});

describe('a seal of the delay journaled after a replace it comes before', () => {
  it('regression: a kill -9 at any line of the journal leaves the replace the file\'s, also once the service has it', async () => {
    // The seal took its place in the order when the delay ended, before the replace, and wrote its line
    // after: dropped at its end, but the replace, uploaded meanwhile, had left the journal first. A crash
    // between the two brought the sealed bytes back over the replace at the next start.
    const { vfs, remote, clock, dataDir } = await gateway();
    const journal = (vfs.writeBack as unknown as { journal: UploadJournal }).journal;
    const h = await vfs.open('/A/f', { read: true, write: true, create: true });
    await h.write(0, Buffer.from('a'));
    await h.fsync();
    await h.write(1, Buffer.from('b'));
    // The delay's seal is held just before its line.
    const put = journal.put.bind(journal);
    const held = { reached: false, release: () => undefined as void };
    const gate = new Promise<void>((resolve) => { held.release = resolve; });
    cleanups.push(async () => held.release());
    const puts: string[] = [];
    journal.put = async (...args: Parameters<UploadJournal['put']>) => {
      puts.push(args[0].id);
      if (puts.length === 1) {
        held.reached = true;
        await gate;
      }
      return put(...args);
    };
    clock.advance(1000);
    clock.advance(1000);
    await waitFor('the delay\'s seal at its journal line', () => held.reached);
    await vfs.writeFile('/A/f', Buffer.from('P'));
    clock.advance(1000);
    await waitFor('the replace on the service', () => remote.paths().includes('f') && remote.read('f').toString() === 'P');
    held.release();
    // The writers' close acknowledges their bytes after the replace (it waits for the seal's end).
    await h.release();
    expect(await readAll(vfs, '/A/f')).toBe('ab');
    await vfs.flushAll();
    expect(puts.length, 'the seal, the replace, the close').toBe(3);
    // A crash at each line from the replace's (acknowledged) to the close's: the journal's log cut there,
    // replayed by another gateway.
    const lines = (await readFile(join(dataDir, 'journal', 'journal.log'), 'utf8')).split('\n').filter(Boolean);
    const lineOf = (id: string): number => lines.findIndex((l) => l.includes(`"id":"${id}"`));
    const [replace, close] = [lineOf(puts[1]!), lineOf(puts[2]!)];
    expect(close, 'the close\'s line after the replace\'s').toBeGreaterThan(replace);
    expect(replace, 'the replace\'s line').toBeGreaterThanOrEqual(0);
    for (let k = replace + 1; k <= close; k++) {
      const copy = await mkdtemp(join(tmpdir(), 'cloudlib-wbq-cut-'));
      cleanups.push(() => rm(copy, { recursive: true, force: true }));
      await cp(join(dataDir, 'journal'), join(copy, 'journal'), { recursive: true });
      await writeFile(join(copy, 'journal', 'journal.log'), lines.slice(0, k).map((l) => `${l}\n`).join(''));
      const service = new MemoryRemote({ name: 'A', id: '1' });
      service.putFile('f', Buffer.from('P'));
      const again = await createVfs({ libraries: [{ name: 'A', remote: service }], dataDir: copy, feedIntervalMs: 0, upload: { retryBaseMs: 5, retryMaxMs: 20 } });
      cleanups.push(() => again.close());
      await again.flushAll();
      expect(service.read('f').toString(), `the journal cut after line ${k} of ${lines.length}`).toBe('P');
      await again.close();
    }
  });
});
