/**
 * The library file API of the embedded service, through the project's own ServiceClient: every endpoint,
 * its error paths, and what it does to the tree.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startTestService, type TestService } from '../../support/service.js';
import { sign } from '../../../src/shared/sign.js';
import { webUpload } from '../../../src/api/upload.js';
import { bufferSource, codeOf, fetchFile, put, sha1, treeOf } from './helpers.js';
import { waitFor } from '../../support/wait-for.js';

let t: TestService;
beforeAll(async () => { t = await startTestService(); });
afterAll(async () => { await t?.close(); });

async function raw(path: string, params: Record<string, string>, secret?: string) {
  const c = t.service.credentials.library;
  const wire: Record<string, string> = { org_client_id: c.org_client_id, dateline: String(Math.floor(Date.now() / 1000)), ...params };
  wire.sign = sign(secret ?? c.org_client_secret, wire);
  const res = await request(`${t.service.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(wire).toString() });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

describe('requests', () => {
  it('refuses a wrong signature (401041), an unknown client (40103), an old dateline, a missing parameter (400 naming it)', async () => {
    const bad = await raw('/m-open/1/file/ls', { fullpath: '' }, 'not-the-secret');
    expect(bad).toMatchObject({ status: 401, body: { error_code: 401041 } });
    const unknown = await raw('/m-open/1/file/ls', { fullpath: '', org_client_id: 'oc_nobody' });
    expect(unknown).toMatchObject({ status: 401, body: { error_code: 40103 } });
    const old = await raw('/m-open/1/file/ls', { fullpath: '', dateline: String(Math.floor(Date.now() / 1000) - 16 * 60) });
    expect(old.status).toBe(401);
    expect(old.body.error_code).toBe(401042);
    const missing = await raw('/m-open/1/file/move', { fullpath: 'x' });
    expect(missing).toMatchObject({ status: 400, body: { error_code: 40003 } });
    expect(String(missing.body.error_msg)).toContain('dest_fullpath');
    const oneOf = await raw('/m-open/1/file/info', {});
    expect(oneOf.status).toBe(400);
    const unknownParam = await raw('/m-open/1/file/ls', { fullpath: '', whatever: 'x' });
    expect(unknownParam.status).toBe(200);
  });

  it('accepts the signature variants (empty values skipped; filehash/filesize left out)', async () => {
    const c = t.service.credentials.library;
    const wire: Record<string, string> = { org_client_id: c.org_client_id, dateline: String(Math.floor(Date.now() / 1000)), fullpath: '', tag: '' };
    wire.sign = sign(c.org_client_secret, wire, { skipEmpty: true });
    const res = await request(`${t.service.baseUrl}/m-open/1/file/ls?${new URLSearchParams(wire)}`, { method: 'POST' });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
  });

  it('answers unknown paths 404; status is up', async () => {
    const res = await request(`${t.service.baseUrl}/m-open/1/nothing`, { method: 'POST' });
    expect(res.statusCode).toBe(404);
    expect(((await res.body.json()) as { error_code: number }).error_code).toBe(40408);
    const status = await request(`${t.service.baseUrl}/m-open/status`);
    expect(status.statusCode).toBe(200);
    await status.body.dump();
  });

  it('refuses bad names and normalises paths', async () => {
    for (const p of ['a/../b', '.', 'x/./y', 'n'.repeat(256)]) expect(await codeOf(t.client.file.createFolder({ fullpath: p }))).toBe(40003);
    expect(await codeOf(t.client.file.createFolder({ fullpath: 'a\0b' }))).toBe(40003);
    const r = await t.client.file.createFolder({ fullpath: '/norm//one/' });
    expect(r.fullpath).toBe('norm/one');
    expect(await codeOf(t.client.file.createFolder({ fullpath: 'norm/one' }))).toBe(40901);
    expect((await t.client.file.createFolder({ fullpath: 'é'.repeat(127) })).fullpath).toBe('é'.repeat(127));
  });
});

describe('files', () => {
  it('create_folder creates parents; ls pages, sorts folders first, filters by tag at any depth and by hashs', async () => {
    await t.client.file.createFolder({ fullpath: 'ls/deep/er' });
    for (const n of ['b.txt', 'a.txt', 'c.txt']) await put(t.client, `ls/${n}`, n);
    await t.client.file.addTag({ fullpath: 'ls/deep/er', tag: 'red;blue' });
    await t.client.file.addTag({ fullpath: 'ls/a.txt', tag: 'red' });
    const all = await t.client.file.ls({ fullpath: 'ls' });
    expect(all.count).toBe(4);
    expect(all.list.map((x) => x.filename)).toEqual(['deep', 'a.txt', 'b.txt', 'c.txt']);
    const page = await t.client.file.ls({ fullpath: 'ls', start: 1, size: 2 });
    expect(page.list.map((x) => x.filename)).toEqual(['a.txt', 'b.txt']);
    expect(page.count).toBe(4);
    const red = await t.client.file.ls({ fullpath: 'ls', tag: 'red' });
    expect(red.list.map((x) => x.fullpath).sort()).toEqual(['ls/a.txt', 'ls/deep/er']);
    expect(red.list.find((x) => x.fullpath === 'ls/deep/er')!.property.tag).toBe('red;blue');
    const byHash = await t.client.file.ls({ fullpath: 'ls', hashs: `${all.list[1]!.hash},${all.list[2]!.hash}` });
    expect(byHash.list.map((x) => x.filename)).toEqual(['a.txt', 'b.txt']);
    expect(await codeOf(t.client.file.ls({ fullpath: 'ls/a.txt' }))).toBe(40902);
    expect(await codeOf(t.client.file.ls({ fullpath: 'nope' }))).toBe(40402);
  });

  it('create_file: instant upload (state 1), pending (state 0, server), numbered name, overwrite, bad filehash', async () => {
    const data = 'instant content';
    const up = await put(t.client, 'cf/one.txt', data);
    expect(up.instant).toBe(false);
    const again = await t.client.file.createFile({ fullpath: 'cf/two.txt', filehash: sha1(data), filesize: data.length });
    expect(again.state).toBe(1);
    expect((await t.client.file.info({ fullpath: 'cf/two.txt' })).filehash).toBe(sha1(data));
    const numbered = await t.client.file.createFile({ fullpath: 'cf/two.txt', filehash: sha1(data), filesize: data.length });
    expect(numbered).toMatchObject({ state: 1, fullpath: 'cf/two (1).txt' });
    const pending = await t.client.file.createFile({ fullpath: 'cf/three.txt', filehash: sha1('other'), filesize: 5 });
    expect(pending).toMatchObject({ state: 0, fullpath: 'cf/three.txt', server: t.service.uploadServer });
    expect(await codeOf(t.client.file.info({ fullpath: 'cf/three.txt' }))).toBe(40402);
    expect(await codeOf(t.client.file.createFile({ fullpath: 'cf/x', filehash: 'ABC', filesize: 1 }))).toBe(40003);
    expect(await codeOf(t.client.file.createFile({ fullpath: 'cf/x', filehash: sha1('x').toUpperCase(), filesize: 1 }))).toBe(40003);
    const over = await put(t.client, 'cf/one.txt', 'replaced');
    expect(over.hash).toBe(up.hash);
    expect((await fetchFile(t.client, 'cf/one.txt')).body.toString()).toBe('replaced');
    const hist = await t.client.file.history({ fullpath: 'cf/one.txt' });
    expect(hist.list.map((h) => h.act)).toEqual([3, 1]);
    expect(hist.list.map((h) => h.filehash)).toEqual([sha1('replaced'), sha1(data)]);
  });

  it('create_folder and instant create_file answer the entry as written; its events name it', async () => {
    const folder = await t.client.file.createFolder({ fullpath: 'aw/new' });
    expect(folder).toMatchObject({ fullpath: 'aw/new', hash: (await t.client.file.info({ fullpath: 'aw/new' })).hash });
    expect((await t.client.file.history({ fullpath: 'aw/new' })).list.map((h) => h.act)).toEqual([1]);
    await put(t.client, 'aw/a.txt', 'first content');
    await put(t.client, 'aw/b.txt', 'second content');
    const copy = await t.client.file.createFile({ fullpath: 'aw/new/c.txt', filehash: sha1('first content'), filesize: 13 });
    expect(copy).toMatchObject({ state: 1, fullpath: 'aw/new/c.txt', hash: (await t.client.file.info({ fullpath: 'aw/new/c.txt' })).hash });
    expect((await t.client.file.history({ fullpath: 'aw/new/c.txt' })).list.map((h) => [h.act, h.filehash])).toEqual([[1, sha1('first content')]]);
    // A new version of stored content: the same entry, its new content, an edit in its history.
    const a = await t.client.file.info({ fullpath: 'aw/a.txt' });
    const over = await t.client.file.createFile({ fullpath: 'aw/a.txt', filehash: sha1('second content'), filesize: 14, overwrite: 1 });
    expect(over).toMatchObject({ state: 1, fullpath: 'aw/a.txt', hash: a.hash });
    expect(await t.client.file.info({ fullpath: 'aw/a.txt' })).toMatchObject({ hash: a.hash, filehash: sha1('second content'), filesize: 14 });
    expect((await t.client.file.history({ fullpath: 'aw/a.txt' })).list.map((h) => [h.act, h.filehash])).toEqual([[3, sha1('second content')], [1, sha1('first content')]]);
    expect((await fetchFile(t.client, 'aw/a.txt')).body.toString()).toBe('second content');
  });

  it('create_file refuses a size beyond the storage\'s free space (40321), before any byte is sent', async () => {
    const huge = await codeOf(t.client.file.createFile({ fullpath: 'cf/huge.bin', filehash: sha1('huge'), filesize: 1e15 }));
    expect(huge).toBe(40321);
    expect((await t.client.file.ls({ fullpath: 'cf' })).list.map((r) => r.filename)).not.toContain('huge.bin');
  });

  it('web upload lands in the library', async () => {
    const res = await webUpload(t.client, { path: 'web', name: 'form.txt', source: bufferSource('through the form') });
    expect(res.fullpath).toBe('web/form.txt');
    expect((await fetchFile(t.client, 'web/form.txt')).body.toString()).toBe('through the form');
  });

  it('ls: a size above 1000 (the spec sets no maximum) is served as a page of 1000; count tells the rest', async () => {
    const folder = await t.client.file.createFolder({ fullpath: 'many' });
    const parent = (await t.service.parts.tree.resolve(t.service.credentials.library.org_id, { hash: folder.hash }));
    // 1001 sub-folders f10000…f11000 in one statement (fast on both engines)
    await t.service.parts.tree.db.run(
      `WITH RECURSIVE n(i) AS (SELECT 10000 UNION ALL SELECT i + 1 FROM n WHERE i < 11000)
       INSERT INTO entries (library_id, hash, parent_id, fullpath, name, dir, create_ms, last_ms, op_ms)
       SELECT ?, ? || i, ?, ? || i, 'f' || i, 1, 0, 0, 0 FROM n`,
      [parent.library_id, `${folder.hash}-`, parent.id, 'many/f']);
    try {
      const big = await t.client.file.ls({ fullpath: 'many', size: 5000 });
      expect([big.count, big.list.length, big.list.at(-1)!.filename]).toEqual([1001, 1000, 'f10999']);
      const rest = await t.client.file.ls({ fullpath: 'many', start: 1000, size: 5000 });
      expect(rest.list.map((e) => e.filename)).toEqual(['f11000']);
      expect(await codeOf(t.client.file.ls({ fullpath: 'many', size: 0 }))).toBe(40003);
    } finally { // the rows bypassed the feed: gone again before the other tests look at it
      await t.service.parts.tree.db.run('DELETE FROM entries WHERE parent_id = ?', [parent.id]);
    }
  });

  it('info: attribute 0/1/10, ignores, hid', async () => {
    await put(t.client, 'info/f.txt', 'v1');
    await put(t.client, 'info/f.txt', 'v22');
    await put(t.client, 'info/sub/g.txt', 'g');
    const full = await t.client.file.info({ fullpath: 'info/f.txt' });
    expect(full).toMatchObject({ dir: 0, filename: 'f.txt', filesize: 3, lock: 0 });
    expect(full.uri).toMatch(/^http/);
    const basic = await t.client.file.info({ fullpath: 'info/f.txt', attribute: 10 });
    expect(Object.keys(basic).sort()).toEqual(['dir', 'filehash', 'filename', 'filesize', 'fullpath', 'hash']);
    const folder = await t.client.file.info({ fullpath: 'info', attribute: 1 });
    expect(folder).toMatchObject({ file_count: 2, folder_count: 1, files_size: 4 });
    const ign = await t.client.file.info({ fullpath: 'info/f.txt', ignores: 'url,lock,tag' });
    expect(ign.uri).toBeUndefined();
    expect(ign.lock).toBeUndefined();
    const first = (await t.client.file.history({ fullpath: 'info/f.txt' })).list.at(-1)!;
    const old = await t.client.file.info({ fullpath: 'info/f.txt', hid: first.hid });
    expect(old).toMatchObject({ filehash: sha1('v1'), filesize: 2 });
    const byHash = await t.client.file.info({ hash: full.hash });
    expect(byHash.fullpath).toBe('info/f.txt');
    // nop=1 leaves the library-level permission out: the library API then holds none set on folders
    expect(full.permission).toEqual(expect.arrayContaining(['file_read', 'file_write']));
    const nop = await t.client.file.info({ fullpath: 'info/f.txt', nop: 1 });
    expect([nop.permission, nop.property?.permisson]).toEqual([[], []]);
    expect((await t.client.file.info({ fullpath: 'info/f.txt', nop: 0 })).permission).toEqual(full.permission);
    expect(await codeOf(t.client.file.info({ fullpath: 'info/f.txt', nop: 2 }))).toBe(40003);
    expect(await codeOf(t.client.file.info({ fullpath: 'info/f.txt', attribute: 5 }))).toBe(40003);
    expect(await codeOf(t.client.file.info({ fullpath: 'info/f.txt', hid: '999999' }))).toBe(40402);
  });

  it('download_url: Range, If-Range, 206, 416, Content-Disposition, history version by filehash, expiry', async () => {
    await put(t.client, 'dl/data.bin', '0123456789');
    const whole = await fetchFile(t.client, 'dl/data.bin');
    expect(whole.status).toBe(200);
    expect(whole.body.toString()).toBe('0123456789');
    expect(whole.headers['accept-ranges']).toBe('bytes');
    const part = await fetchFile(t.client, 'dl/data.bin', { range: 'bytes=2-4' });
    expect(part.status).toBe(206);
    expect(part.body.toString()).toBe('234');
    expect(part.headers['content-range']).toBe('bytes 2-4/10');
    const tail = await fetchFile(t.client, 'dl/data.bin', { range: 'bytes=-3' });
    expect(tail.body.toString()).toBe('789');
    const beyond = await fetchFile(t.client, 'dl/data.bin', { range: 'bytes=10-' });
    expect(beyond.status).toBe(416);
    expect(beyond.headers['content-range']).toBe('bytes */10');
    const ifRange = await fetchFile(t.client, 'dl/data.bin', { range: 'bytes=0-1', 'if-range': String(whole.headers.etag) });
    expect(ifRange.status).toBe(206);
    const stale = await fetchFile(t.client, 'dl/data.bin', { range: 'bytes=0-1', 'if-range': '"0000"' });
    expect(stale.status).toBe(200);
    const named = await fetchFile(t.client, 'dl/data.bin', {}, { filename: 'résumé.bin' });
    expect(String(named.headers['content-disposition'])).toContain("filename*=UTF-8''r%C3%A9sum%C3%A9.bin");
    await put(t.client, 'dl/data.bin', 'new content');
    const old = await fetchFile(t.client, 'dl/data.bin', {}, { filehash: sha1('0123456789') });
    expect(old.body.toString()).toBe('0123456789');
    expect(await codeOf(t.client.file.downloadUrl({ fullpath: 'dl/data.bin', filehash: sha1('never') }))).toBe(40402);
    const tampered = await request(whole.url.replace('/download/', '/download/x'));
    expect(tampered.statusCode).toBe(404);
    await tampered.body.dump();
  });

  it('create_folder, create_file and move make every missing folder above, each listed in its parent; a file on the way makes nothing', async () => {
    await put(t.client, 'mk/seed.txt', 'seed');
    const before = (await t.client.file.updates({ mode: 'compare', fetch_dateline: 0 })).fetch_dateline;
    await t.client.file.createFolder({ fullpath: 'mk/a/b/c' });
    await t.client.file.createFile({ fullpath: 'mk/f/g/one.txt', filehash: sha1('seed'), filesize: 4 });
    await t.client.file.move({ fullpath: 'mk/f/g/one.txt', dest_fullpath: 'mk/m/n/one.txt' });
    const names = async (p: string) => (await t.client.file.ls({ fullpath: p })).list.map((x) => x.filename);
    expect(await names('mk')).toEqual(['a', 'f', 'm', 'seed.txt']);
    expect(await names('mk/a')).toEqual(['b']);
    expect(await names('mk/a/b')).toEqual(['c']);
    expect(await names('mk/f/g')).toEqual([]);
    expect(await names('mk/m')).toEqual(['n']);
    expect(await names('mk/m/n')).toEqual(['one.txt']);
    const feed = await t.client.file.updates({ mode: 'compare', fetch_dateline: before });
    expect(feed.list.map((x) => x.fullpath)).toEqual(expect.arrayContaining(['mk/a', 'mk/a/b', 'mk/a/b/c', 'mk/f', 'mk/f/g', 'mk/m', 'mk/m/n', 'mk/m/n/one.txt']));
    // A file where a folder is needed: refused, and none of the folders before it is made.
    expect(await codeOf(t.client.file.createFolder({ fullpath: 'mk/m/n/one.txt/x/y' }))).toBe(40902);
    expect(await names('mk/m/n')).toEqual(['one.txt']);
  });

  it('move: rename, move with subtree, hash unchanged, into itself refused, existing target refused', async () => {
    await put(t.client, 'mv/a/x.txt', 'x');
    const a = await t.client.file.info({ fullpath: 'mv/a' });
    await t.client.file.move({ fullpath: 'mv/a', dest_fullpath: 'mv/b' });
    expect((await t.client.file.info({ fullpath: 'mv/b' })).hash).toBe(a.hash);
    expect((await fetchFile(t.client, 'mv/b/x.txt')).body.toString()).toBe('x');
    await t.client.file.move({ fullpath: 'mv/b', dest_fullpath: 'mv2/inner/b' });
    expect((await t.client.file.info({ fullpath: 'mv2/inner/b/x.txt' })).filesize).toBe(1);
    expect(await codeOf(t.client.file.move({ fullpath: 'mv2', dest_fullpath: 'mv2/inner/c' }))).toBe(40013);
    await t.client.file.createFolder({ fullpath: 'mv3' });
    expect(await codeOf(t.client.file.move({ fullpath: 'mv2', dest_fullpath: 'mv3' }))).toBe(40901);
    expect(await codeOf(t.client.file.move({ fullpath: 'nothing', dest_fullpath: 'x' }))).toBe(40402);
    const hist = await t.client.file.history({ fullpath: 'mv2/inner/b' });
    expect(hist.list.map((h) => h.act).slice(0, 2)).toEqual([4, 2]);
  });

  it('copy: a file at once, a folder through the queue (0→1→2), mcopy', async () => {
    await put(t.client, 'cp/src/one.txt', 'one');
    await put(t.client, 'cp/src/sub/two.txt', 'two');
    const file = await t.client.file.copy({ from_fullpath: 'cp/src/one.txt', fullpath: 'cp/one-copy.txt' });
    expect(file.queue_id).toBeUndefined();
    expect((await fetchFile(t.client, 'cp/one-copy.txt')).body.toString()).toBe('one');
    const folder = await t.client.file.copy({ from_fullpath: 'cp/src', fullpath: 'cp/dst' });
    expect(folder.queue_id).toBeTruthy();
    let status = await t.client.file.queueStatus({ queue_id: String(folder.queue_id) });
    const seen = [status.status];
    status = await waitFor('the folder copy to finish', async () => {
      const now = await t.client.file.queueStatus({ queue_id: String(folder.queue_id) });
      seen.push(now.status);
      return now;
    }, { until: (now) => now.status >= 2 });
    expect(status.status).toBe(2);
    expect(status.fullpath).toBe('cp/dst');
    expect((await fetchFile(t.client, 'cp/dst/sub/two.txt')).body.toString()).toBe('two');
    const numbered = await t.client.file.copy({ from_fullpath: 'cp/src/one.txt', fullpath: 'cp/one-copy.txt' });
    expect(numbered.fullpath).toBe('cp/one-copy (1).txt');
    expect(await codeOf(t.client.file.copy({ from_fullpath: 'cp/src', fullpath: 'cp/src/in' }))).toBe(40013);
    expect(await codeOf(t.client.file.queueStatus({ queue_id: '424242' }))).toBe(40405);
    await t.client.file.createFolder({ fullpath: 'cp/m' });
    const many = await t.client.file.mcopy({ from_fullpaths: 'cp/src/one.txt|cp/src/sub/two.txt', paths: 'cp/m' });
    expect(many.map((m) => m.fullpath)).toEqual(['cp/m/one.txt', 'cp/m/two.txt']);
  });

  it('del to the recycle bin, recycle (paging, order, keyword), recover (numbered when taken), del_completely, destroy', async () => {
    await put(t.client, 'rb/keep.txt', 'keep');
    await put(t.client, 'rb/gone/inner.txt', 'inner');
    await t.client.file.del({ fullpath: 'rb/keep.txt' });
    await t.client.file.del({ fullpath: 'rb/gone' });
    expect(await codeOf(t.client.file.info({ fullpath: 'rb/keep.txt' }))).toBe(40402);
    const bin = await t.client.file.recycle({ keyword: 'keep' });
    expect(bin.list.map((x) => x.fullpath)).toEqual(['rb/keep.txt']);
    const all = await t.client.file.recycle({ size: 1 });
    expect(all.list).toHaveLength(1);
    expect(all.count).toBeGreaterThanOrEqual(2);
    const byName = await t.client.file.recycle({ order: 'filename' });
    const names = byName.list.map((x) => x.filename);
    expect(names).toEqual([...names].sort());
    expect(await codeOf(t.client.file.recycle({ order: 'nonsense' }))).toBe(40003);
    await put(t.client, 'rb/keep.txt', 'a new file in the way');
    await t.client.file.recover({ fullpaths: 'rb/keep.txt|rb/gone' });
    expect((await fetchFile(t.client, 'rb/keep (1).txt')).body.toString()).toBe('keep');
    expect((await fetchFile(t.client, 'rb/gone/inner.txt')).body.toString()).toBe('inner');
    await t.client.file.del({ fullpath: 'rb/keep (1).txt' });
    await t.client.file.delCompletely({ fullpaths: 'rb/keep (1).txt' });
    expect((await t.client.file.recycle({ keyword: 'keep (1)' })).count).toBe(0);
    await t.client.file.del({ fullpath: 'rb/gone', destroy: 1 });
    expect((await t.client.file.recycle({ keyword: 'gone' })).count).toBe(0);
    expect(await codeOf(t.client.file.recover({ fullpaths: 'rb/never' }))).toBe(40402);
  });

  it('del and del_completely by tag within a path', async () => {
    await put(t.client, 'tg/a.txt', 'a');
    await put(t.client, 'tg/b.txt', 'b');
    await put(t.client, 'other/c.txt', 'c');
    for (const p of ['tg/a.txt', 'tg/b.txt', 'other/c.txt']) await t.client.file.addTag({ fullpath: p, tag: 'old' });
    await t.client.file.delTag({ fullpath: 'tg/b.txt', tag: 'old' });
    expect((await t.client.file.info({ fullpath: 'tg/b.txt' })).tag).toBe('');
    await t.client.file.del({ tag: 'old', path: 'tg' });
    expect(await codeOf(t.client.file.info({ fullpath: 'tg/a.txt' }))).toBe(40402);
    expect((await t.client.file.info({ fullpath: 'tg/b.txt' })).filesize).toBe(1);
    expect((await t.client.file.info({ fullpath: 'other/c.txt' })).filesize).toBe(1);
    await t.client.file.delCompletely({ tag: 'old' });
    expect((await t.client.file.recycle({ keyword: 'a.txt' })).list.filter((x) => x.fullpath === 'tg/a.txt')).toHaveLength(0);
  });

  it('lock by operator: others cannot change or unlock; info shows it; lock changes the feed', async () => {
    await put(t.client, 'lk/doc.txt', 'doc');
    const before = (await t.client.file.updates({ mode: 'compare', fetch_dateline: 0 })).fetch_dateline;
    await t.client.file.lock({ fullpath: 'lk/doc.txt', lock: 'lock', op_name: 'Ana' });
    const info = await t.client.file.info({ fullpath: 'lk/doc.txt' });
    expect(info.lock).toBe(1);
    expect(await codeOf(t.client.file.move({ fullpath: 'lk/doc.txt', dest_fullpath: 'lk/x.txt', op_name: 'Bob' }))).toBe(42301);
    expect(await codeOf(t.client.file.del({ fullpath: 'lk', op_name: 'Bob' }))).toBe(42301);
    expect(await codeOf(t.client.file.move({ fullpath: 'lk', dest_fullpath: 'lk-moved', op_name: 'Bob' }))).toBe(42301);
    expect(await codeOf(t.client.file.lock({ fullpath: 'lk/doc.txt', lock: 'unlock', op_name: 'Bob' }))).toBe(42301);
    expect(await codeOf(t.client.file.createFile({ fullpath: 'lk/doc.txt', filehash: sha1('z'), filesize: 1, overwrite: 1, op_name: 'Bob' }))).toBe(42301);
    const feed = await t.client.file.updates({ mode: 'compare', fetch_dateline: before });
    expect(feed.list.map((x) => x.fullpath)).toContain('lk/doc.txt');
    await t.client.file.lock({ fullpath: 'lk/doc.txt', lock: 'unlock', op_name: 'Ana' });
    expect((await t.client.file.info({ fullpath: 'lk/doc.txt' })).lock).toBe(0);
    expect(await codeOf(t.client.file.lock({ fullpath: 'lk/doc.txt', lock: 'maybe' }))).toBe(40003);
  });

  it('search: filename and tag, path scope; content scope not enabled', async () => {
    await put(t.client, 'sr/Report 2026.docx', 'r');
    await put(t.client, 'sr/deep/notes.txt', 'n');
    await t.client.file.addTag({ fullpath: 'sr/deep/notes.txt', tag: 'report' });
    const res = await t.client.file.search({ keywords: 'report', path: 'sr' });
    expect(res.list.map((x) => x.fullpath).sort()).toEqual(['sr/Report 2026.docx', 'sr/deep/notes.txt']);
    const names = await t.client.file.search({ keywords: 'report', path: 'sr', scope: '["filename"]' });
    expect(names.list.map((x) => x.fullpath)).toEqual(['sr/Report 2026.docx']);
    expect(await codeOf(t.client.file.search({ keywords: 'x', scope: '["content"]' }))).toBe(40306);
    expect(await codeOf(t.client.file.search({ keywords: 'x', scope: 'nope' }))).toBe(40003);
  });

  it('preview_download_url and cedit_url answer 40306 (preview_url: preview.test.ts)', async () => {
    await put(t.client, 'pv.txt', 'p');
    expect(await codeOf(t.client.file.previewDownloadUrl({ fullpath: 'pv.txt' }))).toBe(40306);
    expect(await codeOf(t.client.file.ceditUrl({ fullpath: 'pv.txt', op_id: '1' }))).toBe(40306);
  });

  it('updates: descending pages before the cursor, compare pages after it with deletions; updates_count', async () => {
    const start = (await t.client.file.updates({ mode: 'compare', fetch_dateline: 0 })).fetch_dateline;
    let cursor = 0;
    for (;;) {
      const page = await t.client.file.updates({ mode: 'compare', fetch_dateline: cursor });
      if (page.list.length === 0) break;
      expect(page.list.length).toBeLessThanOrEqual(100);
      cursor = page.fetch_dateline;
    }
    await put(t.client, 'up/a.txt', 'a');
    await t.client.file.del({ fullpath: 'up/a.txt' });
    const after = await t.client.file.updates({ mode: 'compare', fetch_dateline: cursor });
    const a = after.list.filter((x) => x.fullpath === 'up/a.txt');
    expect(a.map((x) => x.cmd)).toEqual([0]);
    const desc = await t.client.file.updates({ fetch_dateline: 0 });
    expect(desc.list.every((x) => x.cmd === undefined)).toBe(true);
    expect(desc.list.map((x) => x.fullpath)).not.toContain('up/a.txt');
    const older = await t.client.file.updates({ fetch_dateline: desc.fetch_dateline });
    expect(older.list.map((x) => x.hash)).not.toContain(desc.list.at(-1)!.hash);
    const dirsOnly = await t.client.file.updates({ mode: 'compare', fetch_dateline: 0, dir: 1 });
    expect(dirsOnly.list.every((x) => x.dir === 1)).toBe(true);
    const count = await t.client.file.updatesCount({ begin_dateline: start, end_dateline: Date.now() + 3_600_000, showdel: 1 });
    const present = await t.client.file.updatesCount({ begin_dateline: start, end_dateline: Date.now() + 3_600_000 });
    expect(count.count).toBeGreaterThan(present.count);
  });

  it('stat reports the real sizes (recycle bin included) and file count', async () => {
    const before = await t.client.file.stat({});
    await put(t.client, 'st/f.bin', Buffer.alloc(1000, 1));
    const mid = await t.client.file.stat({});
    expect(mid.size - before.size).toBe(1000);
    expect(mid.count_file - before.count_file).toBe(1);
    await t.client.file.del({ fullpath: 'st/f.bin' });
    const after = await t.client.file.stat({});
    expect(after.size_recycle - before.size_recycle).toBe(1000);
    expect(after.count_file).toBe(before.count_file);
  });
});

describe('tree', () => {
  it('treeOf sees every file written above', async () => {
    const tree = await treeOf(t.client);
    expect(tree.get('ls/a.txt')).toBe(sha1('a.txt'));
  });
});
