/**
 * The Remote contract, written once and run on every implementation: MemoryRemote (unit) and
 * LibraryRemote over the embedded service (integration). Each test works in a fresh folder.
 *
 * Errors are checked by code: ENOENT, EEXIST, ENOTDIR, and EACCES where the target can be refused (a
 * `refused` remote). ENOTEMPTY is not the Remote's: `remove` takes a folder with what it holds (to the
 * recycle bin), and the Vfs answers ENOTEMPTY for an rmdir itself (test/unit/vfs/gateway-vfs.test.ts).
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Remote } from '../../../src/vfs/remote.js';
import { vfsCode } from '../../support/vfs.js';

export interface ContractTarget {
  remote: Remote;
  /** The same library through a credential the service refuses (absent where nothing can be refused). */
  refused?: Remote;
  close(): Promise<void>;
}

async function readRange(remote: Remote, path: string, start: number, end: number, contentHash?: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of await remote.openRange(path, start, end, contentHash ? { contentHash } : undefined)) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Registers the suite; `enabled` false skips it (its backend is not available in this tree). */
export function remoteContract(name: string, enabled: boolean, open: () => Promise<ContractTarget>): void {
  describe.skipIf(!enabled)(`Remote contract: ${name}`, { timeout: 30_000 }, () => {
    let target: ContractTarget;
    let remote: Remote;
    let tmp: string;
    let n = 0;
    const folder = (): string => `contract-${Date.now().toString(36)}-${n++}`;

    async function commitBytes(path: string, data: Buffer, opts?: { replace?: boolean }) {
      const file = join(tmp, `c${n++}`);
      await writeFile(file, data);
      return remote.commit(path, { path: file, size: data.length, sha1: createHash('sha1').update(data).digest('hex') }, opts);
    }

    beforeAll(async () => {
      target = await open();
      remote = target.remote;
      tmp = await mkdtemp(join(tmpdir(), 'contract-'));
    });
    afterAll(async () => {
      await target?.close();
      await rm(tmp, { recursive: true, force: true });
    });

    it('info names the library', async () => {
      const info = await remote.info();
      expect(info.id).not.toBe('');
      expect(typeof info.name).toBe('string');
    });

    it('mkdir, list, stat; EEXIST and ENOENT', async () => {
      const d = folder();
      const e = await remote.mkdir(d);
      expect(e).toMatchObject({ fullpath: d, name: d, isDir: true });
      expect(await vfsCode(remote.mkdir(d))).toBe('EEXIST');
      await remote.mkdir(`${d}/sub`);
      expect((await remote.list(d)).map((x) => [x.name, x.isDir])).toEqual([['sub', true]]);
      expect(await remote.stat(`${d}/nope`)).toBeNull();
      expect(await vfsCode(remote.list(`${d}/nope`))).toBe('ENOENT');
      expect((await remote.stat(d))!.id).toBe(e.id);
    });

    it('commit then read ranges; overwrite keeps the id and changes the content hash', async () => {
      const d = folder();
      await remote.mkdir(d);
      const data = randomBytes(100_000);
      const e = await commitBytes(`${d}/f.bin`, data);
      expect(e).toMatchObject({ fullpath: `${d}/f.bin`, isDir: false, size: 100_000, contentHash: createHash('sha1').update(data).digest('hex') });
      expect((await readRange(remote, `${d}/f.bin`, 0, 99_999)).equals(data)).toBe(true);
      expect((await readRange(remote, `${d}/f.bin`, 1000, 1999)).equals(data.subarray(1000, 2000))).toBe(true);
      const st = await remote.stat(`${d}/f.bin`);
      expect(st).toMatchObject({ size: 100_000, contentHash: e.contentHash });
      const next = await commitBytes(`${d}/f.bin`, Buffer.from('new'));
      expect(next.id).toBe(st!.id);
      expect((await readRange(remote, `${d}/f.bin`, 0, 2)).toString()).toBe('new');
      expect((await remote.list(d)).map((x) => [x.name, x.size])).toEqual([['f.bin', 3]]);
    });

    it('a commit that does not replace lands at a numbered name when the name is taken, the file there untouched', async () => {
      const d = folder();
      await remote.mkdir(d);
      const first = await commitBytes(`${d}/r.txt`, Buffer.from('theirs'), { replace: false });
      expect(first.fullpath).toBe(`${d}/r.txt`);
      const second = await commitBytes(`${d}/r.txt`, Buffer.from('mine'), { replace: false });
      expect(second.fullpath).toBe(`${d}/r (1).txt`);
      expect((await readRange(remote, `${d}/r.txt`, 0, 99)).toString()).toBe('theirs');
      expect((await readRange(remote, `${d}/r (1).txt`, 0, 99)).toString()).toBe('mine');
    });

    it('lists every page of a large folder', async () => {
      const d = folder();
      await remote.mkdir(d);
      for (let i = 0; i < 130; i++) await commitBytes(`${d}/f${String(i).padStart(3, '0')}`, Buffer.from([i]));
      const names = (await remote.list(d)).map((x) => x.name).sort();
      expect(names).toHaveLength(130);
      expect(names[129]).toBe('f129');
    });

    it('move keeps the id; moving onto an existing name is refused; remove', async () => {
      const d = folder();
      await remote.mkdir(d);
      const f = await commitBytes(`${d}/a`, Buffer.from('a'));
      await commitBytes(`${d}/b`, Buffer.from('b'));
      expect(await vfsCode(remote.move(`${d}/a`, `${d}/b`))).toBe('EEXIST');
      await remote.move(`${d}/a`, `${d}/c`);
      expect((await remote.stat(`${d}/c`))!.id).toBe(f.id);
      expect(await remote.stat(`${d}/a`)).toBeNull();
      await remote.mkdir(`${d}/sub`);
      await remote.move(`${d}/sub`, `${d}/sub2`);
      await remote.move(`${d}/c`, `${d}/sub2/c`);
      expect((await remote.list(`${d}/sub2`)).map((x) => x.name)).toEqual(['c']);
      await remote.remove(`${d}/sub2`);
      expect(await remote.stat(`${d}/sub2/c`)).toBeNull();
      expect((await remote.list(d)).map((x) => x.name)).toEqual(['b']);
    });

    it('copy a file and a folder', async () => {
      const d = folder();
      await remote.mkdir(d);
      await remote.mkdir(`${d}/src`);
      await commitBytes(`${d}/src/x`, Buffer.from('xyz'));
      await remote.copy(`${d}/src`, `${d}/dst`);
      expect((await readRange(remote, `${d}/dst/x`, 0, 2)).toString()).toBe('xyz');
      await remote.copy(`${d}/src/x`, `${d}/y`);
      expect((await remote.stat(`${d}/y`))!.size).toBe(3);
    });

    it('changes after a cursor: creates, updates, deletes; an empty page when up to date', async () => {
      const d = folder();
      let cursor = await remote.headCursor();
      // Catch up to now (the head may be slightly early).
      for (;;) {
        const page = await remote.changes(cursor);
        if (page.changes.length === 0) break;
        cursor = page.cursor;
      }
      await remote.mkdir(d);
      await commitBytes(`${d}/f`, Buffer.from('1'));
      await remote.remove(`${d}/f`);
      const seen: string[] = [];
      for (;;) {
        const page = await remote.changes(cursor);
        if (page.changes.length === 0) break;
        expect(page.cursor).toBeGreaterThan(cursor);
        cursor = page.cursor;
        for (const c of page.changes) if (c.entry.fullpath.startsWith(d)) seen.push(`${c.kind} ${c.entry.fullpath}`);
      }
      expect(seen).toContain(`upsert ${d}`);
      expect(seen).toContain(`delete ${d}/f`);
    });

    it('errors carry their meaning: ENOENT, EEXIST', async () => {
      const d = folder();
      await remote.mkdir(d);
      await commitBytes(`${d}/file`, Buffer.from('x'));
      expect(await vfsCode(remote.openRange(`${d}/missing`, 0, 10))).toBe('ENOENT');
      expect(await vfsCode(remote.list(`${d}/missing`))).toBe('ENOENT');
      expect(await vfsCode(remote.move(`${d}/missing`, `${d}/other`))).toBe('ENOENT');
      expect(await vfsCode(remote.mkdir(`${d}/file`))).toBe('EEXIST');
    });

    it('a range past the end gives what exists (no error for a range beyond the last byte)', async () => {
      const d = folder();
      await remote.mkdir(d);
      await commitBytes(`${d}/short`, Buffer.from('0123456789'));
      expect((await readRange(remote, `${d}/short`, 5, 1_000_000)).toString()).toBe('56789');
      expect((await readRange(remote, `${d}/short`, 0, 9)).toString()).toBe('0123456789');
    });

    it('a range that starts past the end (HTTP 416 from a download server) is empty, not an error; so is any range of an empty file', async () => {
      const d = folder();
      await remote.mkdir(d);
      await commitBytes(`${d}/short`, Buffer.from('0123456789'));
      await commitBytes(`${d}/empty`, Buffer.alloc(0));
      expect((await readRange(remote, `${d}/short`, 10, 20)).length).toBe(0);
      expect((await readRange(remote, `${d}/short`, 1_000, 2_000)).length).toBe(0);
      expect((await readRange(remote, `${d}/empty`, 0, 100)).length).toBe(0);
      // The file is still read as before.
      expect((await readRange(remote, `${d}/short`, 9, 9)).toString()).toBe('9');
    });

    it('more errors carry their meaning: ENOENT (remove, copy), EEXIST (copy, move), ENOTDIR (list of a file), EISDIR (read of a folder)', async () => {
      const d = folder();
      await remote.mkdir(d);
      await commitBytes(`${d}/file`, Buffer.from('x'));
      await commitBytes(`${d}/other`, Buffer.from('y'));
      expect(await vfsCode(remote.remove(`${d}/missing`))).toBe('ENOENT');
      expect(await vfsCode(remote.copy(`${d}/missing`, `${d}/copy`))).toBe('ENOENT');
      expect(await vfsCode(remote.copy(`${d}/file`, `${d}/other`))).toBe('EEXIST');
      expect(await vfsCode(remote.move(`${d}/file`, `${d}/other`))).toBe('EEXIST');
      expect(await vfsCode(remote.list(`${d}/file`))).toBe('ENOTDIR');
      expect(await vfsCode(remote.openRange(d, 0, 10))).toBe('EISDIR');
      // Nothing changed by the refused calls.
      expect((await remote.list(d)).map((x) => [x.name, x.size])).toEqual([['file', 1], ['other', 1]]);
      expect((await readRange(remote, `${d}/other`, 0, 0)).toString()).toBe('y');
    });

    it('a refused credential is EACCES, for reads and writes alike, and changes nothing', async (ctx) => {
      if (!target.refused) return ctx.skip();
      const d = folder();
      await remote.mkdir(d);
      await commitBytes(`${d}/file`, Buffer.from('x'));
      const refused = target.refused;
      expect(await vfsCode(refused.list(d))).toBe('EACCES');
      expect(await vfsCode(refused.openRange(`${d}/file`, 0, 0))).toBe('EACCES');
      expect(await vfsCode(refused.mkdir(`${d}/new`))).toBe('EACCES');
      expect(await vfsCode(refused.move(`${d}/file`, `${d}/moved`))).toBe('EACCES');
      expect(await vfsCode(refused.remove(`${d}/file`))).toBe('EACCES');
      expect((await remote.list(d)).map((x) => x.name)).toEqual(['file']);
    });

    it('a read names its version: after an overwrite, the old content hash still reads the old bytes', async () => {
      const d = folder();
      await remote.mkdir(d);
      const first = await commitBytes(`${d}/v`, Buffer.from('first version'));
      await commitBytes(`${d}/v`, Buffer.from('second'));
      expect((await readRange(remote, `${d}/v`, 0, 100, first.contentHash)).toString()).toBe('first version');
      expect((await readRange(remote, `${d}/v`, 0, 100)).toString()).toBe('second');
    });

    it('version pinning holds across several overwrites and a rename; the current hash reads the current bytes', async () => {
      const d = folder();
      await remote.mkdir(d);
      const v1 = await commitBytes(`${d}/v`, Buffer.from('one'));
      const v2 = await commitBytes(`${d}/v`, Buffer.from('two, longer'));
      const v3 = await commitBytes(`${d}/v`, Buffer.from('three'));
      expect((await readRange(remote, `${d}/v`, 0, 100, v1.contentHash)).toString()).toBe('one');
      expect((await readRange(remote, `${d}/v`, 5, 100, v2.contentHash)).toString()).toBe('longer');
      expect((await readRange(remote, `${d}/v`, 0, 100, v3.contentHash)).toString()).toBe('three');
      await remote.move(`${d}/v`, `${d}/w`);
      expect((await readRange(remote, `${d}/w`, 0, 100, v2.contentHash)).toString()).toBe('two, longer');
      expect((await readRange(remote, `${d}/w`, 0, 100)).toString()).toBe('three');
    });

    it('history: each content a file had, newest first, with who and when; a rename adds none; each version reads exactly', async () => {
      if (!remote.history) return;
      const d = folder();
      await remote.mkdir(d);
      const before = Date.now() - 2000;
      const v1 = await commitBytes(`${d}/h.txt`, Buffer.from('one'));
      const v2 = await commitBytes(`${d}/h.txt`, Buffer.from('two, longer'));
      await remote.move(`${d}/h.txt`, `${d}/g.txt`);
      const items = await remote.history(`${d}/g.txt`, 100);
      const distinct = items.map((h) => h.contentHash).filter((h, i, all) => all[i - 1] !== h);
      expect(distinct).toEqual([v2.contentHash, v1.contentHash]);
      expect(items.at(-1)!.size).toBe(3);
      for (const h of items) expect(h.timeMs).toBeGreaterThanOrEqual(before);
      const chunks: Buffer[] = [];
      for await (const c of await remote.openRange(`${d}/g.txt`, 0, 100, { contentHash: v1.contentHash, exactVersion: true })) chunks.push(c as Buffer);
      expect(Buffer.concat(chunks).toString()).toBe('one');
      expect(await remote.history(`${d}/g.txt`, 1)).toHaveLength(1);
      expect(await vfsCode(remote.history(`${d}/none`, 10))).toBe('ENOENT');
      // A content the file never had is not read in its place.
      expect(await vfsCode(remote.openRange(`${d}/g.txt`, 0, 10, { contentHash: 'f'.repeat(40), exactVersion: true }).then((s) => s.toArray()))).not.toBe('ok');
    });

    it('quota, lock and tags', async () => {
      const d = folder();
      await remote.mkdir(d);
      await commitBytes(`${d}/t`, Buffer.from('tagged'));
      const q = await remote.quota();
      expect(q.used).toBeGreaterThanOrEqual(6);
      await remote.addTags(`${d}/t`, ['red', 'blue']);
      expect(((await remote.stat(`${d}/t`))!.tags ?? []).sort()).toEqual(['blue', 'red']);
      await remote.removeTags(`${d}/t`, ['red']);
      expect((await remote.stat(`${d}/t`))!.tags).toEqual(['blue']);
      await remote.lock(`${d}/t`, true);
      expect((await remote.stat(`${d}/t`))!.locked).toBe(true);
      await remote.lock(`${d}/t`, false);
      expect((await remote.stat(`${d}/t`))!.locked).toBe(false);
    });
  });
}
