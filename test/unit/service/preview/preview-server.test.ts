import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { previewUrlResult, PreviewError, PreviewServer, DEFAULT_WATERMARK } from '../../../../src/service/preview/index.js';
import { silentLogger } from '../../../../src/shared/log.js';
import { BlobFolderHost, PreviewTestService } from './blob-folder-host.js';
import { tinyPdf } from './tiny-pdf.js';
import { waitFor } from '../../../support/wait-for.js';

let svc: PreviewTestService;
beforeAll(async () => { svc = await PreviewTestService.start({ textLimitBytes: 64 }); });
afterAll(async () => { await svc.stop(); });

/** The address of the viewer's bytes (or the download) named in a page. */
function linkIn(html: string, route: 'c' | 'd', base: string): string {
  const m = new RegExp(`"\\.\\./${route}/([^"]+)"`).exec(html);
  if (!m) throw new Error(`no /${route}/ link in the page`);
  return `${base}/preview/${route}/${m[1]}`;
}

describe('preview pages', { timeout: 20_000 }, () => {
  it('serves a text page, escaped, cut at the text limit, with a strict CSP, and counts the bytes read', async () => {
    const before = svc.host.traffic.preview;
    const text = '<b>bold?</b> & "quotes"\n' + 'x'.repeat(100);
    const { url } = await svc.file('<notes>.txt', text);
    expect(url).toMatch(new RegExp(`^${svc.baseUrl}/preview/v/[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$`));
    const res = await fetch(url);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    const html = await res.text();
    expect(html).toContain('<title>&lt;notes&gt;.txt</title>');
    expect(html).toContain('&lt;b&gt;bold?&lt;/b&gt; &amp; &quot;quotes&quot;');
    expect(html).not.toContain('<b>');
    expect(html).toContain('Only the beginning of this file is shown.');
    expect(html).not.toMatch(/<script>|style="/);
    expect(html).toContain('<script type="module" src="../assets/document-viewer.js">');
    expect(svc.host.traffic.preview - before).toBe(64);
  });

  it('renders Markdown without raw HTML', async () => {
    const { url } = await svc.file('readme.md', '# Hi\n<iframe src=x>\n');
    const html = await (await fetch(url)).text();
    expect(html).toContain('<h1>Hi</h1>');
    expect(html).toContain('&lt;iframe src=x&gt;');
    expect(html).not.toContain('<iframe');
  });

  it('gives a PDF page the pdf.js viewer, page buttons and a content address', async () => {
    const pdf = tinyPdf(['one', 'two', 'three']);
    const { url } = await svc.file('report.pdf', pdf);
    const html = await (await fetch(url)).text();
    expect(html).toContain('id="prev"');
    expect(html).toContain('id="next"');
    expect(html).toContain('<script type="module" src="../assets/pdf-viewer.js">');
    const content = await fetch(linkIn(html, 'c', svc.baseUrl));
    expect(content.status).toBe(200);
    expect(content.headers.get('content-type')).toBe('application/pdf');
    expect(Buffer.from(await content.arrayBuffer()).equals(pdf)).toBe(true);
  });

  it('streams media with Range: 200, 206, 416, HEAD; preview and download traffic counted apart', async () => {
    const body = Buffer.alloc(1000, 7);
    body.write('tail', 996);
    const { url } = await svc.file('clip.webm', body);
    const html = await (await fetch(url)).text();
    expect(html).toContain('<video id="media" controls preload="metadata" src="../c/');
    expect(html).toContain('<script type="module" src="../assets/media-viewer.js">');
    const content = linkIn(html, 'c', svc.baseUrl);
    const { preview, download } = svc.host.traffic;

    const part = await fetch(content, { headers: { range: 'bytes=996-' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 996-999/1000');
    expect(part.headers.get('content-type')).toBe('video/webm');
    expect(part.headers.get('accept-ranges')).toBe('bytes');
    expect(await part.text()).toBe('tail');

    const none = await fetch(content, { headers: { range: 'bytes=1000-' } });
    expect(none.status).toBe(416);
    expect(none.headers.get('content-range')).toBe('bytes */1000');

    const head = await fetch(content, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('1000');

    const whole = await fetch(content);
    expect((await whole.arrayBuffer()).byteLength).toBe(1000);
    // Counted when the server's stream ends, which may follow the client's last byte by a moment (longer on a
    // busy machine: the wait is bounded near the test's own deadline, not by a guess of how long).
    expect(await waitFor('the preview bytes counted', () => svc.host.traffic.preview - preview, { until: (n) => n >= 1004, timeoutMs: 15_000 })).toBe(1004);

    const dl = await fetch(linkIn(html, 'd', svc.baseUrl));
    expect(dl.status).toBe(200);
    expect(dl.headers.get('content-disposition')).toBe("attachment; filename*=UTF-8''clip.webm");
    expect((await dl.arrayBuffer()).byteLength).toBe(1000);
    expect(await waitFor('the download bytes counted', () => svc.host.traffic.download - download, { until: (n) => n >= 1000, timeoutMs: 15_000 })).toBe(1000);
  });

  it('draws the watermark over the page and offers no download', async () => {
    const { url } = await svc.file('plan.txt', 'secret plan', { watermark: 'ACME <internal>', memberName: 'Ann' });
    const html = await (await fetch(url)).text();
    expect(html).toContain('<div class="watermark" aria-hidden="true"><span>ACME &lt;internal&gt;<br>Ann</span>');
    expect(html).not.toContain('../d/');
    const c = /"\.\.\/c\/([^"]+)"/.exec(html);
    expect(c).toBeNull(); // text pages embed the text; no content link is needed in the page
  });

  it('refuses the download of a watermarked file even when the address is guessed from the content token', async () => {
    const { url } = await svc.file('clip2.webm', Buffer.alloc(10), { watermark: 'W' });
    const html = await (await fetch(url)).text();
    const content = linkIn(html, 'c', svc.baseUrl);
    expect((await fetch(content.replace('/preview/c/', '/preview/d/'))).status).toBe(403);
  });

  it('answers a tampered link with 403, a wrong route with 404 and a non-GET with 405', async () => {
    const { url } = await svc.file('a.txt', 'a');
    const [body, mac] = url.split('/v/')[1]!.split('.') as [string, string];
    const other = (await svc.file('b.txt', 'b')).url.split('/v/')[1]!.split('.')[0]!;
    const tampered = await fetch(`${svc.baseUrl}/preview/v/${other}.${mac}`);
    expect(tampered.status).toBe(403);
    expect(await tampered.text()).toContain('This preview link is not valid.');
    // a page token does not open content, and a content token does not open a page
    expect((await fetch(`${svc.baseUrl}/preview/c/${body}.${mac}`)).status).toBe(403);
    expect((await fetch(`${svc.baseUrl}/preview/nothing`)).status).toBe(404);
    expect((await fetch(url, { method: 'POST' })).status).toBe(405);
  });

  it('answers 404 when the blob is gone', async () => {
    const { url, filehash } = await svc.file('gone.md', 'soon gone');
    const { rm } = await import('node:fs/promises');
    await rm(join(svc.host.dir, filehash));
    const res = await fetch(url);
    expect(res.status).toBe(404);
    expect(await res.text()).toContain('no longer available');
  });

  it('serves the viewers and pdf.js, and nothing else', async () => {
    for (const name of ['preview.css', 'pdf-viewer.js', 'media-viewer.js', 'pdfjs/pdf.mjs', 'pdfjs/pdf.worker.mjs', 'pdfjs/standard_fonts/FoxitSerif.pfb']) {
      const res = await fetch(`${svc.baseUrl}/preview/assets/${name}`);
      expect(res.status, name).toBe(200);
      await res.arrayBuffer();
    }
    expect((await fetch(`${svc.baseUrl}/preview/assets/pdf-viewer.js`)).headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    for (const name of ['../index.ts', 'pdfjs/../package.json', 'pdfjs/build/pdf.mjs', 'pdfjs/standard_fonts/..', 'types.ts']) {
      expect((await fetch(`${svc.baseUrl}/preview/assets/${name}`)).status, name).toBe(404);
    }
  });
});

describe('expiry', { timeout: 20_000 }, () => {
  it('a link expires after 10 minutes (410); an opened page keeps its content access', async () => {
    let now = 1_700_000_000_000;
    const s = await PreviewTestService.start({ clock: () => now });
    try {
      const { url } = await s.file('v.webm', Buffer.alloc(100, 1));
      now += 599_000;
      const html = await (await fetch(url)).text();
      const content = linkIn(html, 'c', s.baseUrl);
      now += 2_000;
      const expired = await fetch(url);
      expect(expired.status).toBe(410);
      expect(await expired.text()).toContain('This preview link has expired.');
      expect((await fetch(content)).status).toBe(200);
      now += 4 * 3_600_000;
      expect((await fetch(content)).status).toBe(410);
    } finally {
      await s.stop();
    }
  });
});

describe('thumbnails', { timeout: 20_000 }, () => {
  it('makes a WebP thumbnail of an image, cached by content hash and size', async () => {
    const png = await sharp({ create: { width: 800, height: 400, channels: 3, background: '#3366cc' } }).png().toBuffer();
    const { thumbnail, filehash } = await svc.file('wide.png', png, { thumbnail: true });
    expect(thumbnail).toMatch(/\/preview\/t\//);
    const res = await fetch(thumbnail!);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/webp');
    const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['webp', 256, 128]);
    const cached = join(svc.host.cacheDir, 'thumbnails', `${filehash}-256.webp`);
    expect((await stat(cached)).size).toBeGreaterThan(0);
    const small = await fetch(`${thumbnail}?size=64`);
    expect((await sharp(Buffer.from(await small.arrayBuffer())).metadata()).width).toBe(64);
    const opens = svc.host.blobOpens.length;
    expect((await fetch(thumbnail!)).status).toBe(200);
    expect(svc.host.blobOpens.length).toBe(opens); // from the cache
    expect((await fetch(`${thumbnail}?size=300`)).status).toBe(400);
  });

  it('answers 415 for an image that does not decode', async () => {
    const { thumbnail } = await svc.file('broken.jpg', 'not a jpeg', { thumbnail: true });
    expect((await fetch(thumbnail!)).status).toBe(415);
  });
});

describe('previewUrlResult', { timeout: 20_000 }, () => {
  const file = { libraryId: 3, fullpath: 'x/pic.png', filename: 'pic.png', filehash: 'b'.repeat(40), filesize: 10, dir: false };
  let host: BlobFolderHost;
  let server: PreviewServer;
  beforeAll(async () => {
    host = await BlobFolderHost.create();
    server = new PreviewServer({ host, logger: silentLogger });
  });
  afterAll(async () => { await host.remove(); });

  it('returns the page link, and a thumbnail link for an image when asked', async () => {
    const plain = await previewUrlResult(server, file, {}, 'http://h:1/');
    expect(Object.keys(plain)).toEqual(['url']);
    expect(plain.url).toMatch(/^http:\/\/h:1\/preview\/v\//);
    const withThumb = await previewUrlResult(server, file, { thumbnail: '1' }, 'http://h:1');
    expect(withThumb.thumbnail).toMatch(/^http:\/\/h:1\/preview\/t\//);
    const doc = await previewUrlResult(server, { ...file, filename: 'a.pdf' }, { thumbnail: 1 }, 'http://h:1');
    expect(doc.thumbnail).toBeUndefined();
  });

  it('puts the watermark (wm_content or the default, and member_name) in the link only when watermark=1', async () => {
    const claimsOf = (url: string) => JSON.parse(Buffer.from(url.split('/v/')[1]!.split('.')[0]!, 'base64url').toString()) as { w?: string; m?: string };
    expect(claimsOf((await previewUrlResult(server, file, { wm_content: 'X', member_name: 'Bo' }, 'http://h')).url)).not.toHaveProperty('w');
    expect(claimsOf((await previewUrlResult(server, file, { watermark: 1, member_name: 'Bo' }, 'http://h')).url)).toMatchObject({ w: DEFAULT_WATERMARK, m: 'Bo' });
    expect(claimsOf((await previewUrlResult(server, file, { watermark: '1', wm_content: 'X' }, 'http://h')).url)).toMatchObject({ w: 'X' });
  });

  it('refuses annotation (40306), a folder and bad flags (40003)', async () => {
    const refusal = (p: Promise<unknown>) => p.then(() => undefined, (e: PreviewError) => [e.status, e.code, e.message]);
    expect(await refusal(previewUrlResult(server, file, { annotation: 'on' }, 'http://h'))).toEqual([403, 40306, 'annotation is not enabled on this service']);
    expect(await refusal(previewUrlResult(server, file, { annotation_mode: 'view' }, 'http://h'))).toEqual([403, 40306, 'annotation is not enabled on this service']);
    expect(await refusal(previewUrlResult(server, { ...file, dir: true, filehash: '' }, {}, 'http://h'))).toEqual([400, 40003, 'fullpath: expected a file, got a folder (x/pic.png)']);
    expect(await refusal(previewUrlResult(server, file, { watermark: 2 }, 'http://h'))).toEqual([400, 40003, 'watermark: expected 0 or 1, got 2']);
    expect(await refusal(previewUrlResult(server, file, { thumbnail: 'yes' }, 'http://h'))).toEqual([400, 40003, 'thumbnail: expected 0 or 1, got yes']);
  });
});

describe('a viewer closing the connection mid-stream', { timeout: 20_000 }, () => {
  it('is not logged as an error, and the bytes sent are still counted', async () => {
    const { pino } = await import('pino');
    const { Writable } = await import('node:stream');
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const s = await PreviewTestService.start({ logger: pino({ level: 'debug' }, sink) });
    try {
      const { url } = await s.file('long.webm', Buffer.alloc(32 * 1024 * 1024, 3));
      const content = linkIn(await (await fetch(url)).text(), 'c', s.baseUrl);
      const ac = new AbortController();
      const res = await fetch(content, { signal: ac.signal });
      const reader = res.body!.getReader();
      await reader.read();
      ac.abort();
      await waitFor('preview bytes counted', () => s.host.traffic.preview, { until: (n) => n > 0, timeoutMs: 15_000 });
      await waitFor('the log of the closed connection', () => lines.some((l) => l.includes('closed the connection')), { timeoutMs: 15_000 });
      expect(lines.filter((l) => /"level":50/.test(l))).toEqual([]);
      expect(s.host.traffic.preview).toBeLessThan(32 * 1024 * 1024);
    } finally {
      await s.stop();
    }
  });
});
