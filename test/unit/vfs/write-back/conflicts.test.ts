import { describe, it, expect } from 'vitest';
import { Writable } from 'node:stream';
import { createHash } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryVfs, createVfs, FaultyRemote, MemoryRemote, type GatewayVfs } from '../../../../src/vfs/index.js';
import { baseAfter, baseUploaded, ConflictKeeper, conflictCopyPath, conflictOf, deleteKeepsOf, isConflictCopy, NEW_FILE, whoPart } from '../../../../src/vfs/write-back/conflicts.js';
import { createLogger } from '../../../../src/shared/log.js';
import type { CommitSource, RemoteEntry } from '../../../../src/vfs/remote.js';
import { VfsError } from '../../../../src/vfs/types.js';
import { waitFor } from '../../../support/wait-for.js';
import { closedAfterEach } from '../../../support/vfs-teardown.js';

const sha1 = (s: string): string => createHash('sha1').update(s).digest('hex');
const entry = (content: string): RemoteEntry => ({ id: 'x', fullpath: 'f', name: 'f', isDir: false, size: content.length, contentHash: sha1(content), mtimeMs: 0, ctimeMs: 0 });
/** 2026-11-29 04:31:07 UTC */
const WHEN = Date.UTC(2026, 10, 29, 4, 31, 7, 500);

describe('conflict copy names', () => {
  it('name (conflict who date time).ext, in UTC, in the same folder', () => {
    expect(conflictCopyPath('docs/report.docx', 'Bob', WHEN)).toBe('docs/report (conflict Bob 2026-11-29 04-31-07).docx');
    expect(conflictCopyPath('archive.tar.gz', 'Bob', WHEN)).toBe('archive.tar (conflict Bob 2026-11-29 04-31-07).gz');
    expect(conflictCopyPath('Makefile', 'Bob', WHEN)).toBe('Makefile (conflict Bob 2026-11-29 04-31-07)');
    expect(conflictCopyPath('.bashrc', 'Bob', WHEN)).toBe('.bashrc (conflict Bob 2026-11-29 04-31-07)');
    expect(conflictCopyPath('a.txt', 'Bob', WHEN, 2)).toBe('a (conflict Bob 2026-11-29 04-31-07 2).txt');
  });

  it('who is made safe for a name: no slash or bracket, bounded, "unknown" when the service says nobody', () => {
    expect(whoPart('a/b\\c (x)\n')).toBe('a b c x');
    expect(whoPart(undefined)).toBe('unknown');
    expect(whoPart('  ')).toBe('unknown');
    expect(whoPart('x'.repeat(100))).toHaveLength(40);
  });

  it('copies are recognised by their name', () => {
    expect(isConflictCopy(conflictCopyPath('d/r.docx', 'Bob Smith', WHEN))).toBe(true);
    expect(isConflictCopy(conflictCopyPath('r', undefined, WHEN, 3))).toBe(true);
    expect(isConflictCopy('d/r (copy).docx')).toBe(false);
  });
});

describe('the conflict decision', () => {
  it('no conflict when the service holds the base or a local predecessor; a conflict for other bytes; a delete; unknown bases unchecked', () => {
    expect(conflictOf([sha1('v1')], entry('v1'))).toBeUndefined();
    expect(conflictOf(baseAfter([sha1('v1')], sha1('mine')), entry('mine'))).toBeUndefined();
    expect(conflictOf([sha1('v1')], entry('theirs'))).toBe('changed');
    expect(conflictOf([], entry('theirs'))).toBe('changed');
    expect(conflictOf([], null)).toBeUndefined();
    expect(conflictOf([sha1('v1')], null)).toBe('deleted');
    expect(conflictOf(undefined, entry('theirs'))).toBeUndefined();
    // A new file's lineage the service never had: nothing there is no deletion; once uploaded, it is.
    expect(conflictOf([NEW_FILE, sha1('mine')], null)).toBeUndefined();
    expect(conflictOf([NEW_FILE, sha1('mine')], entry('theirs'))).toBe('changed');
    expect(conflictOf(baseUploaded([NEW_FILE], sha1('mine')), null)).toBe('deleted');
  });

  it('a delete leaves the service\'s version be only when it is none the delete saw', () => {
    expect(deleteKeepsOf([sha1('v1')], entry('v1'))).toBe(false);
    expect(deleteKeepsOf(baseAfter([sha1('v1')], sha1('mine')), entry('mine'))).toBe(false);
    expect(deleteKeepsOf([sha1('v1')], entry('theirs'))).toBe(true);
    expect(deleteKeepsOf([], entry('theirs'))).toBe(true);
    expect(deleteKeepsOf(undefined, entry('theirs'))).toBe(false);
  });

  it('a lineage keeps its newest hashes, each once', () => {
    let b: readonly string[] | undefined = [];
    for (let i = 0; i < 40; i++) b = baseAfter(b, sha1(String(i)));
    expect(b).toHaveLength(16);
    expect(b![15]).toBe(sha1('39'));
    expect(baseAfter([sha1('a')], sha1('a'))).toEqual([sha1('a')]);
    let n: readonly string[] | undefined = [NEW_FILE];
    for (let i = 0; i < 40; i++) n = baseAfter(n, sha1(String(i)));
    expect(n).toHaveLength(16);
    expect(n![0]).toBe(NEW_FILE);
    expect(baseAfter(undefined, sha1('a'))).toBeUndefined();
  });
});

describe('conflicts keep both (through the Vfs)', { timeout: 20_000 }, () => {
  const { open, dirs } = closedAfterEach();

  async function setup(opts: Parameters<typeof createMemoryVfs>[0] = {}): Promise<{ vfs: GatewayVfs; remote: MemoryRemote; lines: string[] }> {
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', destination: new Writable({ write: (c: Buffer, _e, done) => { lines.push(c.toString()); done(); } }) });
    const r = await createMemoryVfs({ names: ['A'], upload: { retryBaseMs: 20, retryMaxMs: 100 }, feedIntervalMs: 0, logger, ...opts });
    open.push(r.vfs);
    return { vfs: r.vfs, remote: r.remotes.get('A')!, lines };
  }

  const copiesOf = (remote: MemoryRemote, name: string): string[] => remote.paths().filter((p) => p.startsWith(`${name} (conflict `));

  it('an edit here and an edit at the service on the same file: the edit here keeps the name, the service\'s version becomes a copy naming who and when', async () => {
    const { vfs, remote, lines } = await setup();
    remote.putFile('doc.txt', Buffer.from('v1'));
    const h = await vfs.open('/A/doc.txt', { read: true, write: true });
    await h.write(0, Buffer.from('local'));
    const theirs = remote.putFile('doc.txt', Buffer.from('other client'), { operator: { opName: 'Bob' } });
    await h.release();
    await vfs.flushAll();
    expect(remote.read('doc.txt').toString()).toBe('local');
    const copy = conflictCopyPath('doc.txt', 'Bob', theirs.mtimeMs);
    expect(copiesOf(remote, 'doc')).toEqual([copy]);
    expect(remote.read(copy).toString()).toBe('other client');
    // Visible: in the folder through the gateway, in its status, in the log.
    expect((await vfs.readdir('/A')).map((a) => a.name).sort()).toEqual([copy, 'doc.txt'].sort());
    const c = await vfs.open(`/A/${copy}`, { read: true });
    expect((await c.read(0, 100)).toString()).toBe('other client');
    await c.release();
    expect(vfs.status().conflicts).toMatchObject([{ library: 'A', fullpath: 'doc.txt', kind: 'changed', copy, otherBy: 'Bob', otherMtimeMs: theirs.mtimeMs }]);
    expect(lines.filter((l) => l.includes('conflict: changed on the service')).map((l) => JSON.parse(l) as Record<string, unknown>)).toMatchObject([{ library: 'A', path: 'doc.txt', copy, by: 'Bob' }]);
    // Dealt with (the copy removed): no longer open.
    await vfs.unlink(`/A/${copy}`);
    expect(vfs.status().conflicts).toEqual([]);
  });

  it('regression: a copy removed through the gateway closes its conflict for good, whatever the cache forgets since', async () => {
    // The file's state showed `conflict` again once the cache no longer knew the copy was gone (a feed's
    // poll between the unlink and the look, on a busy machine).
    const { vfs, remote } = await setup();
    remote.putFile('r.txt', Buffer.from('v1'));
    const h = await vfs.open('/A/r.txt', { read: true, write: true });
    await h.write(0, Buffer.from('local'));
    remote.putFile('r.txt', Buffer.from('other client'), { operator: { opName: 'Bob' } });
    await h.release();
    await vfs.flushAll();
    const [copy] = copiesOf(remote, 'r');
    expect((await vfs.stat('/A/r.txt')).state).toBe('conflict');
    await vfs.unlink(`/A/${copy}`);
    vfs.dropCaches();
    expect((await vfs.stat('/A/r.txt')).state).toBe('synced');
    expect(vfs.status().conflicts).toEqual([]);
  });

  it('the gateway\'s own successive versions are no conflict, uploaded or still waiting', async () => {
    const { vfs, remote } = await setup();
    // A new file saved twice before its first upload: no conflict, no "deleted elsewhere".
    await vfs.writeFile('/A/n', Buffer.from('a'), undefined, { holdUploadMs: 60_000 });
    const n = await vfs.open('/A/n', { write: true });
    await n.write(1, Buffer.from('b'));
    await n.release();
    await vfs.writeFile('/A/n', Buffer.from('abc'), undefined, { holdUploadMs: 60_000 });
    await vfs.flushAll();
    expect(remote.read('n').toString()).toBe('abc');
    await vfs.writeFile('/A/f', Buffer.from('1'));
    const h = await vfs.open('/A/f', { write: true });
    await h.write(0, Buffer.from('2'));
    await h.flush();
    await h.write(0, Buffer.from('3'));
    await h.release();
    await vfs.flushAll();
    await vfs.writeFile('/A/f', Buffer.from('4'));
    const g = await vfs.open('/A/f', { write: true });
    await g.write(1, Buffer.from('5'));
    await g.release();
    await vfs.flushAll();
    expect(remote.read('f').toString()).toBe('45');
    expect(copiesOf(remote, 'f')).toEqual([]);
    expect(vfs.status().conflicts).toEqual([]);
  });

  it('no conflict when the service already holds the very bytes committed (the version reached it under another name and was moved there)', async () => {
    const sha = (t: string): string => createHash('sha1').update(t).digest('hex');
    const remote = new MemoryRemote({ name: 'L', id: '1' });
    // As a save through a temporary file uploaded before its rename over the document: the service has the
    // new bytes at the name already, and the version committed there started from the old ones.
    remote.putFile('doc.odt', Buffer.from('saved'));
    const keeper = new ConflictKeeper({ logger: createLogger({ level: 'silent' }) });
    const v = { library: 'L', fullpath: 'doc.odt', conflictBase: () => [sha('old')] };
    await keeper.commit(v, remote, 'doc.odt', { path: '', data: Buffer.from('saved'), size: 5, sha1: sha('saved') });
    expect(remote.paths().filter((p) => isConflictCopy(p))).toEqual([]);
    expect(keeper.list()).toEqual([]);
    expect(remote.read('doc.odt').toString()).toBe('saved');
  });

  it('regression: a version this gateway committed at the path is no conflict for another of its lineages, nor kept by its unlink', async () => {
    const sha = (t: string): string => createHash('sha1').update(t).digest('hex');
    const remote = new MemoryRemote({ name: 'L', id: '1' });
    const keeper = new ConflictKeeper({ logger: createLogger({ level: 'silent' }) });
    const put = (v: { conflictBase: () => string[] }, t: string): Promise<RemoteEntry> =>
      keeper.commit({ library: 'L', fullpath: 'f.txt', ...v }, remote, 'f.txt', { path: '', data: Buffer.from(t), size: t.length, sha1: sha(t) });
    // Writers at once through both front ends: two new files of the path, neither knowing of the other.
    await put({ conflictBase: () => [NEW_FILE] }, 'by the mount');
    await put({ conflictBase: () => [NEW_FILE] }, 'by WebDAV');
    // A third lineage, made from the service's version before both.
    await put({ conflictBase: () => [sha('before')] }, 'rewritten');
    expect(remote.paths().filter((p) => isConflictCopy(p))).toEqual([]);
    expect(remote.paths().filter((p) => p.startsWith('f '))).toEqual([]);
    expect(remote.read('f.txt').toString()).toBe('rewritten');
    expect(keeper.list()).toEqual([]);
    // An unlink made here from a lineage that did not know that version removes it all the same.
    const current = (await remote.stat('f.txt'))!;
    expect(keeper.deleteKeeps('L', 'f.txt', [sha('by the mount')], current)).toBe(false);
    // Another client's version is still kept by such an unlink, and kept as a copy by such a commit.
    remote.putFile('f.txt', Buffer.from('theirs'));
    expect(keeper.deleteKeeps('L', 'f.txt', [sha('rewritten')], (await remote.stat('f.txt'))!)).toBe(true);
    await put({ conflictBase: () => [sha('rewritten')] }, 'mine');
    expect(remote.paths().filter((p) => isConflictCopy(p))).toHaveLength(1);
  });

  it('regression: a version this gateway committed, moved by a rename made here, is no conflict at its new path', async () => {
    const sha = (t: string): string => createHash('sha1').update(t).digest('hex');
    const remote = new MemoryRemote({ name: 'L', id: '1' });
    const keeper = new ConflictKeeper({ logger: createLogger({ level: 'silent' }) });
    const content = (t: string): CommitSource => ({ path: '', data: Buffer.from(t), size: t.length, sha1: sha(t) });
    // Committed at the old name (an upload that landed there after the rename was decided), then moved
    // over the new name with a rename, a file and a folder's.
    await remote.mkdir('d');
    for (const at of ['a', 'd/f']) await keeper.commit({ library: 'L', fullpath: at, conflictBase: () => [NEW_FILE] }, remote, at, content(`left at ${at}`));
    await remote.move('a', 'b');
    keeper.moved('L', 'a', 'b');
    await remote.move('d', 'e');
    keeper.moved('L', 'd', 'e');
    // A new file, and another lineage, committed there: the gateway's own version is replaced, no copy.
    await keeper.commit({ library: 'L', fullpath: 'b', conflictBase: () => [NEW_FILE] }, remote, 'b', content('new at b'));
    await keeper.commit({ library: 'L', fullpath: 'e/f', conflictBase: () => [sha('before')] }, remote, 'e/f', content('new at e/f'));
    expect(remote.paths().filter((p) => isConflictCopy(p))).toEqual([]);
    expect(remote.read('b').toString()).toBe('new at b');
    expect(remote.read('e/f').toString()).toBe('new at e/f');
    expect(keeper.list()).toEqual([]);
    // Another client's file moved the same way is still kept as a copy.
    remote.putFile('c', Buffer.from('theirs'), { operator: { opName: 'Bob' } });
    await remote.move('c', 'g');
    keeper.moved('L', 'c', 'g');
    await keeper.commit({ library: 'L', fullpath: 'g', conflictBase: () => [NEW_FILE] }, remote, 'g', content('mine'));
    expect(remote.paths().filter((p) => isConflictCopy(p))).toHaveLength(1);
  });

  it('a new file placed at a numbered name is moved to its name even when its upload is cancelled meanwhile: no numbered name stays', async () => {
    const sha = (t: string): string => createHash('sha1').update(t).digest('hex');
    // The client checks the signal before each exchange; the upload is cancelled once its commit landed.
    class CancelledAfterCommit extends MemoryRemote {
      readonly cancel = new AbortController();
      armed = false;
      override async commit(...args: Parameters<MemoryRemote['commit']>): Promise<RemoteEntry> {
        const entry = await super.commit(...args);
        if (this.armed) this.cancel.abort(new VfsError('EBUSY', 'upload cancelled'));
        return entry;
      }
      override async stat(p: string, o?: { signal?: AbortSignal }): Promise<RemoteEntry | null> { o?.signal?.throwIfAborted(); return super.stat(p); }
      override async move(a: string, b: string, o?: { signal?: AbortSignal }): Promise<void> { o?.signal?.throwIfAborted(); return super.move(a, b); }
      override async remove(p: string, o?: { signal?: AbortSignal }): Promise<void> { o?.signal?.throwIfAborted(); return super.remove(p); }
    }
    const keeper = new ConflictKeeper({ logger: createLogger({ level: 'silent' }) });
    const newFile = { library: 'L', fullpath: 'n.txt', conflictBase: () => [NEW_FILE] };
    const content = (t: string): CommitSource => ({ path: '', data: Buffer.from(t), size: t.length, sha1: sha(t) });
    // At the name: the same bytes (an earlier attempt's), this gateway's own other version, another client's file.
    for (const there of ['mine', 'own', 'theirs']) {
      const remote = new CancelledAfterCommit({ name: 'L', id: '1' });
      if (there === 'own') await keeper.commit(newFile, remote, 'n.txt', content(there));
      else remote.putFile('n.txt', Buffer.from(there), { operator: { opName: 'Bob' } });
      remote.armed = true;
      await keeper.commit(newFile, remote, 'n.txt', content('mine'), { signal: remote.cancel.signal });
      expect(remote.cancel.signal.aborted).toBe(true);
      expect(remote.paths().filter((p) => p.startsWith('n (') && !isConflictCopy(p)), there).toEqual([]);
      expect(remote.paths().filter((p) => isConflictCopy(p)), there).toHaveLength(there === 'theirs' ? 1 : 0);
      expect(remote.read('n.txt').toString(), there).toBe('mine');
    }
  });

  it('a library that copies under the same name only (a member\'s) keeps both by moving the service\'s version to the copy\'s name', async () => {
    const sha = (t: string): string => createHash('sha1').update(t).digest('hex');
    class SameNameCopies extends MemoryRemote {
      override async copy(from: string, to: string): Promise<void> {
        if (from.split('/').pop() !== to.split('/').pop()) throw new VfsError('ENOTSUP', 'copies under the same name only');
        return super.copy(from, to);
      }
    }
    const remote = new SameNameCopies({ name: 'L', id: '1' });
    remote.putFile('doc.odt', Buffer.from('theirs'));
    const keeper = new ConflictKeeper({ logger: createLogger({ level: 'silent' }) });
    const v = { library: 'L', fullpath: 'doc.odt', conflictBase: () => [sha('old')] };
    await keeper.commit(v, remote, 'doc.odt', { path: '', data: Buffer.from('mine'), size: 4, sha1: sha('mine') });
    const copies = remote.paths().filter((p) => isConflictCopy(p));
    expect(copies).toHaveLength(1);
    expect(remote.read(copies[0]!).toString()).toBe('theirs');
    expect(remote.read('doc.odt').toString()).toBe('mine');
    expect(keeper.list()).toMatchObject([{ fullpath: 'doc.odt', kind: 'changed', copy: copies[0] }]);
  });

  it('a new file made here where another client made one meanwhile: both kept', async () => {
    const { vfs, remote: inner } = await setup();
    // Held: the other client's file comes first, whatever the machine's pace.
    await vfs.writeFile('/A/new.txt', Buffer.from('mine'), undefined, { holdUploadMs: 60_000 });
    inner.putFile('new.txt', Buffer.from('theirs'), { operator: { opName: 'Carol' } });
    await vfs.flushAll();
    expect(inner.read('new.txt').toString()).toBe('mine');
    const copies = copiesOf(inner, 'new');
    expect(copies).toHaveLength(1);
    expect(copies[0]).toMatch(/^new \(conflict Carol \d{4}-\d{2}-\d{2} \d{2}-\d{2}-\d{2}\)\.txt$/);
    expect(inner.read(copies[0]!).toString()).toBe('theirs');
  });

  it('a commit that failed after the copy was made is retried without a second copy', async () => {
    const { vfs } = await setup({ faults: true });
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    const inner = faulty.inner as MemoryRemote;
    inner.putFile('f', Buffer.from('v1'));
    const h = await vfs.open('/A/f', { write: true });
    await h.write(0, Buffer.from('local'));
    inner.putFile('f', Buffer.from('theirs'));
    faulty.inject({ kind: 'fail', code: 'EIO', methods: ['commit'], times: 2 });
    await h.release();
    // A flush answers the failure it saw; asked again until the upload went through.
    await waitFor('the upload to go through', async () => { await vfs.flushAll().catch(() => undefined); return vfs.status().uploads.length; }, { until: (n) => n === 0 });
    expect(faulty.injected.fail).toBe(2);
    expect(inner.read('f').toString()).toBe('local');
    expect(copiesOf(inner, 'f')).toHaveLength(1);
    expect(vfs.status().conflicts).toHaveLength(1);
  });

  it('a program holding the file open keeps reading and writing what it opened across the conflict', async () => {
    const { vfs, remote } = await setup();
    remote.putFile('db', Buffer.from('base'));
    const h = await vfs.open('/A/db', { read: true, write: true });
    await h.write(0, Buffer.from('mine'));
    remote.putFile('db', Buffer.from('theirs'));
    await h.fsync();
    await vfs.flushAll();
    // Committed with the conflict found and kept: the handle goes on with its own bytes.
    expect(remote.read('db').toString()).toBe('mine');
    expect((await h.read(0, 100)).toString()).toBe('mine');
    await h.write(4, Buffer.from('+more'));
    expect((await h.read(0, 100)).toString()).toBe('mine+more');
    await h.release();
    await vfs.flushAll();
    expect(remote.read('db').toString()).toBe('mine+more');
    // Its later version replaces its own earlier one: no second conflict.
    expect(copiesOf(remote, 'db').map((c) => remote.read(c).toString())).toEqual(['theirs']);
  });

  it('a file deleted elsewhere while edited here comes back as the edited version, and says so', async () => {
    const { vfs, remote, lines } = await setup();
    remote.putFile('gone.txt', Buffer.from('v1'));
    const h = await vfs.open('/A/gone.txt', { write: true });
    await h.write(0, Buffer.from('edited'));
    await remote.remove('gone.txt');
    await h.release();
    await vfs.flushAll();
    expect(remote.read('gone.txt').toString()).toBe('edited');
    expect(copiesOf(remote, 'gone')).toEqual([]);
    expect(vfs.status().conflicts).toMatchObject([{ fullpath: 'gone.txt', kind: 'deleted' }]);
    expect(lines.some((l) => l.includes('deleted on the service while edited here'))).toBe(true);
    // Closed once the file is gone again (deleted here).
    await vfs.unlink('/A/gone.txt');
    expect(vfs.status().conflicts).toEqual([]);
  });

  it('a file deleted elsewhere and a commit retried: listed once', async () => {
    const { vfs } = await setup({ faults: true });
    const faulty = vfs.remoteOf('A') as FaultyRemote;
    const inner = faulty.inner as MemoryRemote;
    inner.putFile('gone.txt', Buffer.from('v1'));
    const h = await vfs.open('/A/gone.txt', { write: true });
    await h.write(0, Buffer.from('edited'));
    await inner.remove('gone.txt');
    faulty.inject({ kind: 'fail', code: 'EIO', methods: ['commit'], times: 2 });
    await h.release();
    await waitFor('the upload to go through', async () => { await vfs.flushAll().catch(() => undefined); return vfs.status().uploads.length; }, { until: (n) => n === 0 });
    expect(faulty.injected.fail).toBe(2);
    expect(inner.read('gone.txt').toString()).toBe('edited');
    expect(vfs.status().conflicts).toMatchObject([{ fullpath: 'gone.txt', kind: 'deleted' }]);
  });

  it('a file edited elsewhere and deleted here stays deleted only if the delete was based on the current version', async () => {
    const { vfs, remote, lines } = await setup();
    // Based on the current version: deleted.
    remote.putFile('current.txt', Buffer.from('v1'));
    await vfs.writeFile('/A/current.txt', Buffer.from('mine'), undefined, { holdUploadMs: 60_000 });
    await vfs.unlink('/A/current.txt');
    expect(remote.paths()).not.toContain('current.txt');
    // Based on v1 (a local edit of it waiting), while the service got another version meanwhile: that one stays.
    remote.putFile('stale.txt', Buffer.from('v1'));
    await vfs.writeFile('/A/stale.txt', Buffer.from('mine'), undefined, { holdUploadMs: 60_000 });
    remote.putFile('stale.txt', Buffer.from('edited elsewhere'), { operator: { opName: 'Eve' } });
    await vfs.unlink('/A/stale.txt');
    expect(remote.read('stale.txt').toString()).toBe('edited elsewhere');
    const h = await vfs.open('/A/stale.txt', { read: true });
    expect((await h.read(0, 100)).toString()).toBe('edited elsewhere');
    await h.release();
    expect(vfs.status().conflicts).toMatchObject([{ fullpath: 'stale.txt', kind: 'restored', otherBy: 'Eve' }]);
    expect(lines.some((l) => l.includes('deleted here but changed on the service'))).toBe(true);
    await vfs.flushAll();
    expect(remote.commits.map((c) => c.fullpath)).toEqual([]);
  });

  it('a delete put off while the file is read is not applied when the file changed elsewhere meanwhile', async () => {
    const { vfs, remote } = await setup();
    remote.putFile('read.txt', Buffer.from('v1'));
    const r = await vfs.open('/A/read.txt', { read: true });
    await vfs.unlink('/A/read.txt');
    remote.putFile('read.txt', Buffer.from('edited elsewhere'));
    await r.release();
    await waitFor('the put-off delete to be settled', () => vfs.status().conflicts, { until: (c) => c.length === 1 });
    expect(vfs.status().conflicts).toMatchObject([{ fullpath: 'read.txt', kind: 'restored' }]);
    expect(remote.read('read.txt').toString()).toBe('edited elsewhere');
  });

  it('regression: replayed after a crash, a version that replaced another writer\'s acknowledged one takes it for the gateway\'s own', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-conflicts-'));
    dirs.push(dataDir);
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('f.txt', Buffer.from('v1'));
    const offline = new FaultyRemote(remote);
    offline.inject({ kind: 'fail', code: 'EIO', methods: ['commit'] });
    const first = await createVfs({ libraries: [{ name: 'A', remote: offline }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 20, retryMaxMs: 100 } });
    open.push(first);
    // Writers at once: a handle edits the file while a replace (a WebDAV PUT) is acknowledged; the handle's
    // close comes last and replaces it.
    const h = await first.open('/A/f.txt', { write: true });
    await h.write(0, Buffer.from('by the mount'));
    await first.writeFile('/A/f.txt', Buffer.from('by WebDAV'));
    await h.release();
    await first.close();
    // The replace's upload landed just before its cancel; the gateway stopped (a crash keeps the same journal).
    remote.putFile('f.txt', Buffer.from('by WebDAV'));
    const second = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 20, retryMaxMs: 100 } });
    open.push(second);
    await second.flushAll();
    expect(remote.read('f.txt').toString()).toBe('by the mount');
    expect(copiesOf(remote, 'f')).toEqual([]);
    expect(second.status().conflicts).toEqual([]);
  });

  it('offline, across a restart: the journal keeps each version\'s base, and the conflict is found when the service is back', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-conflicts-'));
    dirs.push(dataDir);
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('notes.md', Buffer.from('v1'));
    const offline = new FaultyRemote(remote);
    offline.inject({ kind: 'fail', code: 'EIO', methods: ['commit'] });
    const first = await createVfs({ libraries: [{ name: 'A', remote: offline }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 20, retryMaxMs: 100 } });
    open.push(first);
    const h = await first.open('/A/notes.md', { write: true });
    await h.write(0, Buffer.from('offline edit'));
    await h.release();
    await first.close();
    remote.putFile('notes.md', Buffer.from('edited online meanwhile'), { operator: { opName: 'Dan' } });
    const second = await createVfs({ libraries: [{ name: 'A', remote }], dataDir, feedIntervalMs: 0, upload: { retryBaseMs: 20, retryMaxMs: 100 } });
    open.push(second);
    await second.flushAll();
    expect(remote.read('notes.md').toString()).toBe('offline edit');
    const copies = copiesOf(remote, 'notes');
    expect(copies.map((c) => remote.read(c).toString())).toEqual(['edited online meanwhile']);
    expect(second.status().conflicts).toMatchObject([{ fullpath: 'notes.md', kind: 'changed', copy: copies[0], otherBy: 'Dan' }]);
  });
});
