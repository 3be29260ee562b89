/**
 * A sealed version is what its journal record names, or it is never uploaded as that version: a version
 * the kernel wrote itself (FUSE passthrough, changed in place) is hashed at its seal, and replay checks
 * every spool against its record's size and SHA-1 before the upload, setting aside one that differs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { closeSync, openSync, writeSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, FaultyRemote, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

interface Setup { vfs: GatewayVfs; remote: MemoryRemote; faulty: FaultyRemote; dataDir: string }

async function gateway(opts: { dataDir?: string; remote?: MemoryRemote } = {}): Promise<Setup> {
  const remote = opts.remote ?? new MemoryRemote({ name: 'A', id: '1' });
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'cloudlib-sealed-')));
  if (!opts.dataDir) cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const faulty = new FaultyRemote(remote);
  const vfs = await createVfs({ libraries: [{ name: 'A', remote: faulty }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 20, retryMaxMs: 100 } });
  cleanups.push(() => vfs.close());
  return { vfs, remote, faulty, dataDir };
}

/** Uploads held back (the service is slow or away): what is journaled stays in the journal. */
function holdUploads(faulty: FaultyRemote): void {
  faulty.inject({ kind: 'delay', methods: ['commit'], delayMs: 600_000 });
}

/** A crash of the gateway (kill -9): abandoned without close(), its uploads stopped. */
async function crash(s: Setup): Promise<void> {
  await s.vfs.writeBack.uploads.close();
}

/** The put records of the journal's log for `fullpath`, newest last. */
async function puts(dataDir: string, fullpath: string): Promise<{ id: string; size: number; sha1?: string }[]> {
  const text = await readFile(join(dataDir, 'journal', 'journal.log'), 'utf8');
  return text.split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l.slice(l.indexOf(' ') + 1)) as { put?: { id: string; fullpath: string; size: number; sha1?: string } })
    .flatMap((r) => (r.put && r.put.fullpath === fullpath ? [r.put] : []));
}

const sha1 = (b: Buffer): string => createHash('sha1').update(b).digest('hex');

/** Content larger than a journal record carries (its spool is the only copy of its bytes). */
function largeContent(seed: number): Buffer {
  const b = Buffer.alloc(300 * 1024);
  for (let i = 0; i < b.length; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

/** A new file written by "the kernel" (FileHandle.passthrough: straight into its spool), closed and done with. */
async function writtenByKernel(vfs: GatewayVfs, path: string, data: Buffer): Promise<void> {
  const h = await vfs.open(path, { write: true, create: true, exclusive: true });
  const spool = await h.passthrough!();
  expect(spool).toBeDefined();
  writeSync(spool!.fd, data, 0, data.length, 0);
  await h.flush();
  await h.release();
  spool!.end();
}

describe('a sealed version is what its record names, or replay sets it aside', { timeout: 20_000 }, () => {
  it('a large file the kernel wrote (passthrough) is sealed with its SHA-1: its record carries it, and after a crash it is uploaded whole', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    const data = largeContent(1);
    await writtenByKernel(a.vfs, '/A/big', data);
    const recorded = await puts(a.dataDir, 'big');
    // Every record of it, its seal's first: none without the hash replay checks.
    expect(recorded.length).toBeGreaterThan(0);
    for (const r of recorded) expect(r).toMatchObject({ size: data.length, sha1: sha1(data) });
    await crash(a);
    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll({ timeoutMs: 10_000 });
    expect(a.remote.read('big').equals(data)).toBe(true);
  });

  it('regression: a spool changed after its seal (the kernel writing it in place, a crash before its new record) is never uploaded as that version; its bytes are set aside', async () => {
    const a = await gateway();
    holdUploads(a.faulty);
    const kernel = largeContent(2);
    const written = largeContent(3);
    await writtenByKernel(a.vfs, '/A/in-place', kernel);
    const h = await a.vfs.open('/A/grown', { write: true, create: true });
    await h.write(0, written);
    await h.release();
    const [inPlace, grown] = [(await puts(a.dataDir, 'in-place')).at(-1)!, (await puts(a.dataDir, 'grown')).at(-1)!];
    // After their seals: one changed in place (same size), one written past its end; then the crash.
    const changed = Buffer.from(kernel);
    changed.write('changed after its seal', 1000);
    for (const [id, at, bytes] of [[inPlace.id, 1000, Buffer.from('changed after its seal')], [grown.id, written.length, Buffer.from('more')]] as const) {
      const fd = openSync(join(a.dataDir, 'journal', 'spool', id), 'r+');
      writeSync(fd, bytes, 0, bytes.length, at);
      closeSync(fd);
    }
    await crash(a);

    const b = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await b.vfs.flushAll({ timeoutMs: 10_000 });
    expect(await a.remote.stat('in-place')).toBeNull();
    expect(await a.remote.stat('grown')).toBeNull();
    expect(b.vfs.status().uploads).toEqual([]);
    // Kept aside, each with its record, for a person to look at; gone from the journal.
    const aside = join(a.dataDir, 'journal', 'unverified');
    expect((await readdir(aside)).sort()).toEqual([inPlace.id, `${inPlace.id}.json`, grown.id, `${grown.id}.json`].sort());
    expect((await readFile(join(aside, inPlace.id))).equals(changed)).toBe(true);
    expect(JSON.parse(await readFile(join(aside, `${inPlace.id}.json`), 'utf8'))).toMatchObject({ fullpath: 'in-place', size: kernel.length, sha1: sha1(kernel) });
    expect(JSON.parse(await readFile(join(aside, `${grown.id}.json`), 'utf8'))).toMatchObject({ fullpath: 'grown', size: written.length, sha1: sha1(written) });
    await crash(b);
    const c = await gateway({ dataDir: a.dataDir, remote: a.remote });
    await c.vfs.flushAll({ timeoutMs: 10_000 });
    expect(a.remote.paths()).toEqual([]);
  });
});
