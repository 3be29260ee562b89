import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FormData, request } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PasswordAttempts, StoredPasswordAttempts } from '../../../../src/service/links/password-attempts.js';
import { LinkPages } from '../../../../src/service/links/link-pages.js';
import { ShareLinks } from '../../../../src/service/links/share-links.js';
import { LinkStore } from '../../../../src/service/links/link-store.js';
import { metadataStoreAt } from '../../../../src/service/store/metadata-location.js';
import type { MetadataStore } from '../../../../src/service/store/metadata-store.js';
import type { LinkEntry, LinkHost } from '../../../../src/service/links/types.js';
import type { UploadedFile, VerifiedContent } from '../../../../src/service/upload/types.js';

/** One library as a map of entries; blobs on disk by SHA-1. */
class FakeLinkHost implements LinkHost {
  readonly entries = new Map<string, LinkEntry>();
  readonly logs: { act: number; fullpath: string }[] = [];
  capacity = Infinity;
  constructor(readonly root: string, readonly tempDir: string) {}

  async addFolder(fullpath: string) {
    this.entries.set(fullpath, { hash: randomBytes(4).toString('hex'), dir: true, fullpath, filename: fullpath.split('/').pop()!, filesize: 0, filehash: '', lastDateline: 1_700_000_000 });
  }
  async addFile(fullpath: string, content: Buffer) {
    const filehash = createHash('sha1').update(content).digest('hex');
    await writeFile(join(this.root, filehash), content);
    const prev = this.entries.get(fullpath);
    this.entries.set(fullpath, { hash: prev?.hash ?? randomBytes(4).toString('hex'), dir: false, fullpath, filename: fullpath.split('/').pop()!, filesize: content.length, filehash, lastDateline: 1_700_000_000 });
  }
  async entryByPath(_l: number, fullpath: string) {
    return fullpath === '' ? { hash: 'root', dir: true, fullpath: '', filename: '', filesize: 0, filehash: '', lastDateline: 0 } : this.entries.get(fullpath);
  }
  async entryByHash(_l: number, hash: string) {
    return hash === 'root' ? this.entryByPath(1, '') : [...this.entries.values()].find((e) => e.hash === hash);
  }
  async listFolder(_l: number, fullpath: string) {
    return [...this.entries.values()].filter((e) => e.fullpath.slice(0, e.fullpath.lastIndexOf('/') + 1 || 0) === (fullpath ? `${fullpath}/` : '') && e.fullpath !== fullpath);
  }
  async openContent(_l: number, filehash: string) {
    return createReadStream(join(this.root, filehash));
  }
  async remainingCapacity() {
    return this.capacity;
  }
  async storeUpload(_l: number, folder: string, name: string, content: VerifiedContent): Promise<UploadedFile> {
    const fullpath = folder ? `${folder}/${name}` : name;
    await rename(content.tempFilePath, join(this.root, content.sha1));
    this.entries.set(fullpath, { hash: randomBytes(4).toString('hex'), dir: false, fullpath, filename: name, filesize: content.size, filehash: content.sha1, lastDateline: 1_700_000_000 });
    return { hash: 'h', fullpath, filesize: content.size, filehash: content.sha1 };
  }
  async log(_l: number, act: number, fullpath: string) {
    this.logs.push({ act, fullpath });
  }
}

let dir: string;
let db: MetadataStore;
let host: FakeLinkHost;
let links: ShareLinks;
let http: Server;
let now: number;

beforeEach(async () => {
  now = Date.UTC(2026, 0, 1) ;
  dir = await mkdtemp(join(tmpdir(), 'cloudlib-links-'));
  await mkdir(join(dir, 'blobs'));
  await mkdir(join(dir, 'tmp'));
  host = new FakeLinkHost(join(dir, 'blobs'), join(dir, 'tmp'));
  http = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    void pages.handle(req, res, path.replace(/^\/link/, ''));
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  await mkdir(join(dir, 'links'));
  db = await metadataStoreAt(undefined, join(dir, 'links'));
  links = new ShareLinks(host, { db, dataDir: join(dir, 'links'), baseUrl: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, clock: () => now });
  pages = new LinkPages(links);
  await links.open();
  await host.addFolder('docs');
  await host.addFolder('docs/sub');
  await host.addFile('docs/a.txt', Buffer.from('hello a'));
  await host.addFile('docs/sub/b.txt', Buffer.from('hello b'));
});
let pages: LinkPages;

afterEach(async () => {
  http.closeAllConnections();
  await new Promise<void>((r) => http.close(() => r()));
  await db.close();
  await rm(dir, { recursive: true, force: true });
});

async function get(url: string, cookie?: string) {
  const res = await request(url, { headers: cookie ? { cookie } : {} });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

/** The `name=value` of the visit cookie an answer set. */
function visitCookie(res: { headers: Record<string, string | string[] | undefined> }): string {
  const c = [res.headers['set-cookie'] ?? []].flat().find((v) => /^cl_link_\w+_visit=/.test(v));
  if (!c) throw new Error('the answer set no visit cookie');
  return c.split(';')[0]!;
}

describe('share links', () => {
  it('link creates a link served as a file page with a download button; download streams the content; log 1014-1016', { timeout: 10_000 }, async () => {
    const r = await links.createLink(1, { fullpath: 'docs/a.txt', auth: 'download' }, { opName: 'Ana' });
    expect(r.link).toBe(`${links.baseUrl}/link/${r.code}`);
    const page = await get(r.link);
    expect(page.status).toBe(200);
    expect(page.text).toContain('a.txt');
    expect(page.text).toContain('Download');
    const dl = await get(`${r.link}/download`, visitCookie(page));
    expect(dl).toMatchObject({ status: 200, text: 'hello a' });
    expect(String(dl.headers['content-disposition'])).toContain("filename*=UTF-8''a.txt");
    expect(host.logs.map((l) => l.act)).toEqual([1014, 1015, 1016]);
  });

  it('auth=preview shows no download and refuses the download URL', { timeout: 10_000 }, async () => {
    const r = await links.createLink(1, { fullpath: 'docs/a.txt' });
    expect((await get(r.link)).text).not.toContain('/download');
    expect((await get(`${r.link}/download`)).status).toBe(403);
  });

  it('folder link: listing, sub-folder navigation, download inside, no escape with ..', { timeout: 10_000 }, async () => {
    const r = await links.createLink(1, { fullpath: 'docs', dir: 1, auth: 'download' });
    const page = await get(r.link);
    expect(page.text).toContain('a.txt');
    expect(page.text).toContain('sub/');
    expect((await get(`${r.link}?path=sub`)).text).toContain('b.txt');
    expect((await get(`${r.link}/download?path=sub/b.txt`)).text).toBe('hello b');
    expect((await get(`${r.link}/download?path=../docs/a.txt`)).status).toBe(404);
    expect(page.text).not.toContain('type="file"');
  });

  it('auth=upload: the page has an upload form and an upload stores the file (log 1018)', { timeout: 10_000 }, async () => {
    const r = await links.createLink(1, { fullpath: 'docs', dir: 1, auth: 'upload' });
    expect((await get(r.link)).text).toContain('type="file"');
    const form = new FormData();
    form.append('path', 'sub');
    form.append('file', new Blob([new Uint8Array(Buffer.from('new content'))]), 'new.txt');
    const res = await request(`${r.link}/upload`, { method: 'POST', body: form });
    await res.body.dump();
    expect(res.statusCode).toBe(303);
    expect(host.entries.get('docs/sub/new.txt')).toMatchObject({ filesize: 11 });
    expect(host.logs.at(-1)).toEqual({ act: 1018, fullpath: 'docs/sub/new.txt' });
    expect(await readdir(host.tempDir)).toEqual([]);
    const dl = await links.createLink(1, { fullpath: 'docs', dir: 1, auth: 'download' });
    const refused = await request(`${dl.link}/upload`, { method: 'POST', body: form });
    await refused.body.dump();
    expect(refused.statusCode).toBe(403);
  });

  it('password: prompt (401), wrong password refused, right one sets a cookie that opens the page', { timeout: 10_000 }, async () => {
    const r = await links.createLink(1, { fullpath: 'docs/a.txt', password: 's3cret', auth: 'download' });
    const prompt = await get(r.link);
    expect(prompt.status).toBe(401);
    expect(prompt.text).toContain('type="password"');
    expect((await get(`${r.link}/download`)).status).toBe(401);
    const wrong = await request(r.link, { method: 'POST', body: 'password=nope', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    await wrong.body.dump();
    expect(wrong.statusCode).toBe(401);
    const right = await request(r.link, { method: 'POST', body: 'password=s3cret', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    await right.body.dump();
    expect(right.statusCode).toBe(303);
    const cookie = String(right.headers['set-cookie']).split(';')[0]!;
    expect((await get(r.link, cookie)).status).toBe(200);
    expect((await get(`${r.link}/download`, cookie)).text).toBe('hello a');
    expect((await links.listLinks(1))[0]).toMatchObject({ password: 1 });
  });

  it('password guesses are limited per link and client: 429 with Retry-After, the right password refused too until the window passes', { timeout: 10_000 }, async () => {
    const r = await links.createLink(1, { fullpath: 'docs/a.txt', password: 's3cret', auth: 'download' });
    const other = await links.createLink(1, { fullpath: 'docs/a.txt', password: 'other', auth: 'download' });
    const post = async (url: string, password: string) => {
      const res = await request(url, { method: 'POST', body: `password=${password}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      await res.body.dump();
      return { status: res.statusCode, retry: res.headers['retry-after'] };
    };
    for (let k = 0; k < 5; k++) expect((await post(r.link, `guess${k}`)).status).toBe(401);
    const limited = await post(r.link, 'guess5');
    expect(limited.status).toBe(429);
    expect(Number(limited.retry)).toBeGreaterThan(0);
    // Not even the right password is looked at now.
    expect((await post(r.link, 's3cret')).status).toBe(429);
    // Another link is not affected.
    expect((await post(other.link, 'other')).status).toBe(303);
    now += 61_000;
    expect((await post(r.link, 's3cret')).status).toBe(303);
  });

  it('refusals: not yet started (403), expired (410), visit limit reached (410), closed (410), unknown (404)', { timeout: 10_000 }, async () => {
    const nowSec = Math.floor(now / 1000);
    const later = await links.createLink(1, { fullpath: 'docs/a.txt', startline: nowSec + 3600 });
    const soon = await links.createLink(1, { fullpath: 'docs/a.txt', deadline: nowSec + 60 });
    const limited = await links.createLink(1, { fullpath: 'docs/a.txt', access_limit: 2 });
    const closed = await links.createLink(1, { fullpath: 'docs/a.txt' });
    const notYet = await get(later.link);
    expect(notYet.status).toBe(403);
    expect(notYet.text).toContain('not valid yet');
    expect((await get(soon.link)).status).toBe(200);
    expect((await get(limited.link)).status).toBe(200);
    expect((await get(limited.link)).status).toBe(200);
    const limit = await get(limited.link);
    expect(limit.status).toBe(410);
    expect(limit.text).toContain('visit limit');
    await links.closeLinks(1, { code: closed.code });
    const c = await get(closed.link);
    expect(c.status).toBe(410);
    expect(c.text).toContain('closed');
    now += 61_000;
    const expired = await get(soon.link);
    expect(expired.status).toBe(410);
    expect(expired.text).toContain('expired');
    expect((await get(`${links.baseUrl}/link/nothere`)).status).toBe(404);
  });

  it('the visit limit holds on every route: a download, sub-folder page or upload outside a counted visit counts one', { timeout: 10_000 }, async () => {
    const once = await links.createLink(1, { fullpath: 'docs/a.txt', auth: 'download', access_limit: 1 });
    const page = await get(once.link);
    expect(page.status).toBe(200);
    const cookie = visitCookie(page);
    // the visit's own downloads
    for (let i = 0; i < 3; i++) expect(await get(`${once.link}/download`, cookie)).toMatchObject({ status: 200, text: 'hello a' });
    // anyone else: the limit is reached
    for (let i = 0; i < 3; i++) expect((await get(`${once.link}/download`)).status).toBe(410);
    expect((await get(`${once.link}/download`, 'cl_link_x_visit=forged.mac')).status).toBe(410);
    expect((await get(once.link)).status).toBe(410);
    expect((await get(once.link, cookie)).status).toBe(410); // a view of the page is a new visit

    // direct downloads are visits of their own
    const twice = await links.createLink(1, { fullpath: 'docs/a.txt', auth: 'download', access_limit: 2 });
    expect((await get(`${twice.link}/download`)).text).toBe('hello a');
    expect((await get(`${twice.link}/download`)).text).toBe('hello a');
    expect((await get(`${twice.link}/download`)).status).toBe(410);
    expect((await get(twice.link)).status).toBe(410);
    expect((await links.store.get(twice.code))!.visits).toBe(2);

    // a folder link: sub-folder pages and uploads too
    const folder = await links.createLink(1, { fullpath: 'docs', dir: 1, auth: 'upload', access_limit: 1 });
    const root = await get(folder.link);
    expect(root.status).toBe(200);
    expect((await get(`${folder.link}?path=sub`)).status).toBe(410);
    expect((await get(`${folder.link}?path=sub`, visitCookie(root))).text).toContain('b.txt');
    const upload = async (cookie?: string) => {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(Buffer.from('x'))]), 'up.txt');
      const res = await request(`${folder.link}/upload`, { method: 'POST', body: form, headers: cookie ? { cookie } : {} });
      await res.body.dump();
      return res.statusCode;
    };
    expect(await upload()).toBe(410);
    expect(host.entries.has('docs/up.txt')).toBe(false);
    expect(await upload(visitCookie(root))).toBe(303);
    expect(host.entries.has('docs/up.txt')).toBe(true);
  });

  it('start time, deadline, closing and password hold on the download route', { timeout: 10_000 }, async () => {
    const nowSec = Math.floor(now / 1000);
    const later = await links.createLink(1, { fullpath: 'docs/a.txt', auth: 'download', startline: nowSec + 3600 });
    const soon = await links.createLink(1, { fullpath: 'docs/a.txt', auth: 'download', deadline: nowSec + 60 });
    const closed = await links.createLink(1, { fullpath: 'docs/a.txt', auth: 'download' });
    const locked = await links.createLink(1, { fullpath: 'docs/a.txt', auth: 'download', password: 'pw' });
    expect((await get(`${later.link}/download`)).status).toBe(403);
    expect((await get(`${soon.link}/download`)).status).toBe(200);
    await links.closeLinks(1, { code: closed.code });
    expect((await get(`${closed.link}/download`)).status).toBe(410);
    expect((await get(`${locked.link}/download`)).status).toBe(401);
    now += 61_000;
    expect((await get(`${soon.link}/download`)).status).toBe(410);
    now += 3600_000;
    expect((await get(`${later.link}/download`)).status).toBe(200);
  });

  it('links lists open links (file=1 files only); link_close by fullpath closes all of the file', { timeout: 10_000 }, async () => {
    await links.createLink(1, { fullpath: 'docs/a.txt' });
    await links.createLink(1, { fullpath: 'docs/a.txt', deadline: -1 });
    await links.createLink(1, { fullpath: 'docs', dir: 1 });
    expect(await links.listLinks(1)).toHaveLength(3);
    const files = await links.listLinks(1, { file: 1 });
    expect(files).toHaveLength(2);
    expect(files[0]).toMatchObject({ filename: 'a.txt', filesize: 7, password: 0 });
    expect(files.map((f) => f.deadline)).toContain(-1);
    await links.closeLinks(1, { fullpath: 'docs/a.txt' });
    expect(await links.listLinks(1)).toHaveLength(1);
    await expect(links.closeLinks(1, { code: 'nope' })).rejects.toMatchObject({ status: 404, code: 40404 });
  });

  it('keep=1 serves the content of creation time; without keep the link follows the file', { timeout: 10_000 }, async () => {
    const kept = await links.createLink(1, { fullpath: 'docs/a.txt', keep: 1, auth: 'download' });
    const live = await links.createLink(1, { fullpath: 'docs/a.txt', auth: 'download' });
    await host.addFile('docs/a.txt', Buffer.from('changed!'));
    expect((await get(`${kept.link}/download`)).text).toBe('hello a');
    expect((await get(`${live.link}/download`)).text).toBe('changed!');
  });

  it('bad parameters are refused with 400 and change nothing', { timeout: 10_000 }, async () => {
    const nowSec = Math.floor(now / 1000);
    const cases = [
      { fullpath: 'docs/a.txt', auth: 'edit' },
      { fullpath: 'docs/a.txt', auth: 'upload' },
      { fullpath: 'docs/a.txt', dir: 1 },
      { fullpath: 'docs', dir: 1, keep: 1 },
      { fullpath: 'docs/a.txt', deadline: nowSec - 1 },
      { fullpath: 'docs/a.txt', access_limit: -1 },
      { fullpath: 'docs/a.txt', deadline: 'soon' },
      { fullpath: 'docs/a.txt', startline: nowSec + 7200, deadline: nowSec + 3600 },
      { fullpath: 'docs/a.txt', startline: nowSec + 3600, deadline: nowSec + 3600 },
    ];
    for (const p of cases) await expect(links.createLink(1, p)).rejects.toMatchObject({ status: 400, code: 40003 });
    await expect(links.createLink(1, { fullpath: 'nope' })).rejects.toMatchObject({ status: 404, code: 40402 });
    expect(await links.listLinks(1)).toEqual([]);
  });

  it('links survive a restart of the store', { timeout: 10_000 }, async () => {
    const r = await links.createLink(1, { fullpath: 'docs/a.txt', access_limit: 5 });
    await get(r.link);
    const again = new ShareLinks(host, { db, dataDir: join(dir, 'links'), baseUrl: links.baseUrl, clock: () => now });
    await again.open();
    expect(await again.store.get(r.code)).toMatchObject({ visits: 1, accessLimit: 5 });
  });
});

describe('link codes', () => {
  it('are 16 letters and digits, never a character a command line reads as an option', () => {
    const codes = Array.from({ length: 2000 }, () => LinkStore.newCode());
    for (const c of codes) expect(c).toMatch(/^[A-Za-z0-9]{16}$/);
    expect(new Set(codes).size).toBe(codes.length);
    // Every letter and digit is drawn: the alphabet is the whole of it (2000 × 16 draws of 62).
    expect(new Set(codes.join('')).size).toBe(62);
  });
});

describe('links.json of an earlier version', () => {
  it('is imported once into the metadata store, with its cookie secret, and renamed', { timeout: 10_000 }, async () => {
    const folder = join(dir, 'old');
    await mkdir(folder);
    const record = {
      code: 'oldcode', libraryId: 1, hash: 'h1', dir: false, fullpath: 'docs/a.txt', keepFilehash: '', auth: 'download', deadline: -1, startline: 0,
      password: '', accessLimit: 3, visits: 2, wmContent: '', closed: false, createdAt: 1_700_000_000, opName: 'x',
    };
    await writeFile(join(folder, 'links.json'), JSON.stringify({ secret: 'f'.repeat(64), links: [record] }));
    const store = await metadataStoreAt(undefined, folder);
    try {
      const imported = new ShareLinks(host, { db: store, dataDir: folder, baseUrl: links.baseUrl, clock: () => now });
      await imported.open();
      expect(await imported.store.get('oldcode')).toEqual(record);
      expect(imported.store.secret).toBe('f'.repeat(64));
      expect((await readdir(folder)).filter((n) => n.startsWith('links.json'))).toEqual(['links.json.imported']);
    } finally {
      await store.close();
    }
  });
});

describe('PasswordAttempts', () => {
  it('counts per link and client, and per link over all clients; the right password clears the client', () => {
    let t = 0;
    const a = new PasswordAttempts(() => t, { perClient: 2, perLink: 3, windowMs: 1000 });
    a.failed('L', 'c1');
    expect(a.retryAfterMs('L', 'c1')).toBe(0);
    a.failed('L', 'c1');
    expect(a.retryAfterMs('L', 'c1')).toBe(1000);
    expect(a.retryAfterMs('L', 'c2')).toBe(0);
    expect(a.retryAfterMs('M', 'c1')).toBe(0);
    a.failed('L', 'c2');
    // Three failures on L from two clients: the link's bound holds every client back.
    expect(a.retryAfterMs('L', 'c3')).toBe(1000);
    t = 1000;
    expect(a.retryAfterMs('L', 'c1')).toBe(0);
    expect(a.retryAfterMs('L', 'c3')).toBe(0);
    a.failed('M', 'c1');
    a.succeeded('M', 'c1');
    a.failed('M', 'c1');
    expect(a.retryAfterMs('M', 'c1')).toBe(0);
  });
  it('in the metadata store: the same counts, added up over every process (two guards on one store)', async () => {
    let t = 0;
    const folder = join(dir, 'attempts');
    await mkdir(folder);
    const store = await metadataStoreAt(undefined, folder);
    try {
      const one = new StoredPasswordAttempts(store, () => t, { perClient: 2, perLink: 3, windowMs: 1000 });
      const other = new StoredPasswordAttempts(store, () => t, { perClient: 2, perLink: 3, windowMs: 1000 });
      await one.failed('L', 'c1');
      expect(await other.retryAfterMs('L', 'c1')).toBe(0);
      await other.failed('L', 'c1');
      expect(await one.retryAfterMs('L', 'c1')).toBe(1000);
      expect(await one.retryAfterMs('L', 'c2')).toBe(0);
      expect(await one.retryAfterMs('M', 'c1')).toBe(0);
      await one.failed('L', 'c2');
      expect(await other.retryAfterMs('L', 'c3')).toBe(1000);
      t = 1000;
      expect(await one.retryAfterMs('L', 'c1')).toBe(0);
      expect(await other.retryAfterMs('L', 'c3')).toBe(0);
      await one.failed('M', 'c1');
      await other.succeeded('M', 'c1');
      await one.failed('M', 'c1');
      expect(await one.retryAfterMs('M', 'c1')).toBe(0);
      // a failure after the window starts the count over, and the expired rows go
      await one.failed('L', 'c1');
      expect(await store.all('SELECT key, count FROM link_password_failures ORDER BY key')).toEqual([
        { key: 'c/L/c1', count: 1 }, { key: 'c/M/c1', count: 1 }, { key: 'l/L', count: 1 }, { key: 'l/M', count: 2 },
      ]);
    } finally {
      await store.close();
    }
  });
  it('keeps a bounded number of records', () => {
    const a = new PasswordAttempts(() => 0, { maxRecords: 100 });
    for (let k = 0; k < 1000; k++) a.failed(`L${k}`, 'c');
    expect((a as unknown as { records: Map<string, unknown> }).records.size).toBeLessThanOrEqual(100);
  });
});

