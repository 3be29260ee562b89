import { describe, it, expect, afterEach } from 'vitest';
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryVfs, createVfs, MemoryRemote, type GatewayVfs } from '../../../src/vfs/index.js';
import { shownVersions, versionName } from '../../../src/vfs/versions-view.js';
import { vfsCode } from '../../support/vfs.js';

let open: GatewayVfs[] = [];
afterEach(async () => {
  for (const v of open) await v.close();
  open = [];
});

async function setup(): Promise<{ vfs: GatewayVfs; remote: MemoryRemote }> {
  const r = await createMemoryVfs({ names: ['A'], upload: { retryBaseMs: 20, retryMaxMs: 100 } });
  open.push(r.vfs);
  return { vfs: r.vfs, remote: r.remotes.get('A')! };
}

async function text(s: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of s as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks).toString();
}

const sha1 = (s: string): string => createHash('sha1').update(s).digest('hex');

describe('versions view: names', () => {
  it('names a version by UTC time, operator, short hash and the file extension, sorting by time', () => {
    const h = { timeMs: Date.UTC(2026, 10, 29, 4, 31, 5), operator: 'alice', contentHash: 'abcdef0123456789' };
    expect(versionName(h, 'report.docx')).toBe('2026-11-29 04.31.05 alice abcdef0.docx');
    expect(versionName({ ...h, operator: 'a/b:c' }, 'Makefile')).toBe('2026-11-29 04.31.05 a_b_c abcdef0');
    expect(versionName({ ...h, operator: undefined }, '.bashrc')).toBe('2026-11-29 04.31.05 unknown abcdef0');
  });

  it('shows each content change once, oldest first, and tells apart names alike', () => {
    const t = Date.UTC(2026, 0, 1);
    const items = [
      { id: '4', contentHash: 'aaaa111', size: 1, timeMs: t, operator: 'x' },
      { id: '3', contentHash: 'bbbb222', size: 2, timeMs: t, operator: 'x' }, // a rename: same content as before
      { id: '2', contentHash: 'bbbb222', size: 2, timeMs: t, operator: 'x' },
      { id: '1', contentHash: 'aaaa111', size: 1, timeMs: t, operator: 'x' },
    ];
    expect(shownVersions(items, 'f.txt').map((v) => v.name)).toEqual([
      '2026-01-01 00.00.00 x aaaa111.txt', '2026-01-01 00.00.00 x bbbb222.txt', '2026-01-01 00.00.00 x aaaa111 (2).txt',
    ]);
  });
});

describe('versions view through the Vfs', { timeout: 20_000 }, () => {
  it('lists every version of a file under .versions, reads each byte-exact and in ranges', async () => {
    const { vfs, remote } = await setup();
    await remote.mkdir('docs');
    remote.putFile('docs/a.txt', Buffer.from('first version'), { operator: { opName: 'alice' } });
    remote.putFile('docs/a.txt', Buffer.from('second version, longer'), { operator: { opName: 'bob' } });
    await vfs.writeFile('/A/docs/a.txt', Buffer.from('third, written here'));
    await vfs.flushAll();

    expect((await vfs.readdir('/A/.versions')).map((a) => [a.name, a.isDir, a.readOnly])).toEqual([['docs', true, true]]);
    expect((await vfs.readdir('/A/.versions/docs')).map((a) => [a.name, a.isDir])).toEqual([['a.txt', true]]);
    const versions = await vfs.readdir('/A/.versions/docs/a.txt');
    expect(versions.map((v) => v.name.split(' ').slice(2).join(' '))).toEqual([
      `alice ${sha1('first version').slice(0, 7)}.txt`, `bob ${sha1('second version, longer').slice(0, 7)}.txt`, `unknown ${sha1('third, written here').slice(0, 7)}.txt`,
    ]);
    expect([...versions.map((v) => v.name)].sort()).toEqual(versions.map((v) => v.name));
    expect(versions.map((v) => v.size)).toEqual([13, 22, 19]);

    const first = versions[0]!.path;
    expect(await text(await vfs.createReadStream(first))).toBe('first version');
    expect(await text(await vfs.createReadStream(versions[1]!.path, { start: 7, end: 13 }))).toBe('version');
    const h = await vfs.open(versions[1]!.path, { read: true });
    expect((await h.read(0, 100)).toString()).toBe('second version, longer');
    expect((await h.read(7, 7)).toString()).toBe('version');
    expect(await vfsCode(h.write(0, Buffer.from('x')))).toBe('EROFS');
    await h.release();
    const st = await vfs.stat(first);
    expect([st.isDir, st.size, st.readOnly, st.lastModifiedBy, st.contentHash]).toEqual([false, 13, true, 'alice', sha1('first version')]);
    // The file itself is untouched: its current content is the last version.
    expect(await text(await vfs.createReadStream('/A/docs/a.txt'))).toBe('third, written here');
  });

  it('is not in the library root listing, is reachable by name, and asks for no history until a file of it is looked into', async () => {
    const { vfs, remote } = await setup();
    remote.putFile('a.txt', Buffer.from('x'));
    expect((await vfs.readdir('/A')).map((a) => a.name)).toEqual(['a.txt']);
    expect((await vfs.stat('/A/.versions')).isDir).toBe(true);
    expect((await vfs.readdir('/A/.versions')).map((a) => a.name)).toEqual(['a.txt']);
    expect(remote.historyCalls).toBe(0);
    expect(await vfs.readdir('/A/.versions/a.txt')).toHaveLength(1);
    expect(remote.historyCalls).toBe(1);
    // A lookup of the library root's names (for a front end answering lookups) finds it.
    await vfs.readdir('/A');
    expect(vfs.cachedNames('/A', 100)).toEqual(['a.txt', '.versions']);
    expect(vfs.cachedNames('/A/.versions', 100)).toBeUndefined();
    expect(vfs.answeredClosesIn('/A/.versions/a.txt')).toBeUndefined();
  });

  it('refuses every change inside it with EROFS, and nothing changes', async () => {
    const { vfs, remote } = await setup();
    await remote.mkdir('d');
    remote.putFile('d/a.txt', Buffer.from('one'));
    remote.putFile('d/a.txt', Buffer.from('two'));
    const [v] = await vfs.readdir('/A/.versions/d/a.txt');
    const version = v!.path;
    const refused = vfsCode;
    expect(await refused(vfs.open(version, { write: true }))).toBe('EROFS');
    expect(await refused(vfs.open('/A/.versions/d/a.txt/new.txt', { write: true, create: true }))).toBe('EROFS');
    expect(await refused(vfs.writeFile(version, Buffer.from('x')))).toBe('EROFS');
    expect(await refused(vfs.writeFile('/A/.versions/d/new.txt', Buffer.from('x')))).toBe('EROFS');
    expect(await refused(vfs.mkdir('/A/.versions/d/new'))).toBe('EROFS');
    expect(await refused(vfs.mkdir('/A/.versions'))).toBe('EROFS');
    expect(await refused(vfs.unlink(version))).toBe('EROFS');
    expect(await refused(vfs.rmdir('/A/.versions/d'))).toBe('EROFS');
    expect(await refused(vfs.rename(version, '/A/d/b.txt'))).toBe('EROFS');
    expect(await refused(vfs.rename('/A/d/a.txt', '/A/.versions/d/a.txt/b.txt'))).toBe('EROFS');
    expect(await refused(vfs.copy('/A/d/a.txt', '/A/.versions/d/c.txt'))).toBe('EROFS');
    expect(await refused(vfs.setTimes(version, 0))).toBe('EROFS');
    expect(await refused(vfs.setTags(version, ['t']))).toBe('EROFS');
    expect(await refused(vfs.setLocked(version, true))).toBe('EROFS');
    expect((await remote.list('d')).map((e) => e.name)).toEqual(['a.txt']);
    expect(await text(await vfs.createReadStream('/A/d/a.txt'))).toBe('two');
  });

  it('restores a version by copying it back', async () => {
    const { vfs, remote } = await setup();
    remote.putFile('a.txt', Buffer.from('old'));
    remote.putFile('a.txt', Buffer.from('new'));
    const [old] = await vfs.readdir('/A/.versions/a.txt');
    await vfs.copy(old!.path, '/A/a.txt');
    await vfs.flushAll();
    expect((await remote.stat('a.txt'))!.contentHash).toBe(sha1('old'));
    expect(await vfs.readdir('/A/.versions/a.txt')).toHaveLength(3);
    expect(await vfsCode(vfs.copy(old!.path, '/A/a.txt', { noReplace: true }))).toBe('EEXIST');
  });

  it('steps aside for a .versions the library holds itself: that one is shown and written as any folder', async () => {
    const { vfs, remote } = await setup();
    await remote.mkdir('.versions');
    remote.putFile('.versions/mine.txt', Buffer.from('user data'));
    expect((await vfs.readdir('/A')).map((a) => a.name)).toEqual(['.versions']);
    expect((await vfs.readdir('/A/.versions')).map((a) => a.name)).toEqual(['mine.txt']);
    expect(await text(await vfs.createReadStream('/A/.versions/mine.txt'))).toBe('user data');
    await vfs.writeFile('/A/.versions/more.txt', Buffer.from('more'));
    expect((await vfs.stat('/A/.versions/more.txt')).readOnly).toBeUndefined();
    expect(remote.historyCalls).toBe(0);
  });

  it('is not there for a library whose remote keeps no history (a member\'s own token): .versions is an ordinary name', async () => {
    const remote = new MemoryRemote({ name: 'M' });
    Object.defineProperty(remote, 'history', { value: undefined });
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-versions-'));
    const vfs = await createVfs({ libraries: [{ name: 'M', remote }], dataDir, feedIntervalMs: 0 });
    try {
      remote.putFile('a.txt', Buffer.from('x'));
      expect(await vfsCode(vfs.stat('/M/.versions'))).toBe('ENOENT');
      await vfs.mkdir('/M/.versions');
      expect((await vfs.readdir('/M')).map((a) => a.name)).toEqual(['.versions', 'a.txt']);
    } finally {
      await vfs.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('answers ENOENT for what is not there', async () => {
    const { vfs, remote } = await setup();
    remote.putFile('a.txt', Buffer.from('x'));
    expect(await vfsCode(vfs.stat('/A/.versions/nope'))).toBe('ENOENT');
    expect(await vfsCode(vfs.stat('/A/.versions/a.txt/2020-01-01 00.00.00 x 0000000.txt'))).toBe('ENOENT');
    expect(await vfsCode(vfs.open('/A/.versions/a.txt', { read: true }))).toBe('EISDIR');
  });
});
