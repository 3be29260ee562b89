/**
 * preview_url of the library file API, served by the embedded service: the signed page, its content
 * with ranges, the watermark, thumbnails of images, and the refusals (folder, annotation, bad flags).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startTestService, type TestService } from '../../support/service.js';
import { codeOf, put } from './helpers.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
  await put(t.client, 'docs/readme.md', '# Title\n\nSome *text* <script>alert(1)</script>\n');
  await t.client.file.createFolder({ fullpath: 'docs/sub' });
});
afterAll(async () => { await t?.close(); });

async function get(url: string, headers: Record<string, string> = {}) {
  const res = await request(url, { headers });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

describe('preview_url', { timeout: 30_000 }, () => {
  it('answers a link on the service to a page that shows the file, escaped, under a strict CSP', async () => {
    const { url } = await t.client.file.previewUrl({ fullpath: 'docs/readme.md' });
    expect(url.startsWith(`${t.service.baseUrl}/preview/`)).toBe(true);
    const page = await get(url);
    expect(page.status).toBe(200);
    expect(String(page.headers['content-security-policy'])).toContain("default-src 'none'");
    expect(page.body).toContain('Title');
    expect(page.body).not.toContain('<script>alert(1)</script>');
  });

  it('a watermark shows its text and the viewer name', async () => {
    const { url } = await t.client.file.previewUrl({ fullpath: 'docs/readme.md', watermark: 1, wm_content: 'Internal', member_name: 'Alice' });
    const page = await get(url);
    expect(page.body).toContain('Internal');
    expect(page.body).toContain('Alice');
  });

  it('a tampered link is refused', async () => {
    const { url } = await t.client.file.previewUrl({ fullpath: 'docs/readme.md' });
    const bad = url.slice(0, -3) + (url.endsWith('aaa') ? 'bbb' : 'aaa');
    expect((await get(bad)).status).toBe(403);
  });

  it('refuses a folder (400), annotation (40306) and flags other than 0/1, and a missing file', async () => {
    expect(await codeOf(t.client.file.previewUrl({ fullpath: 'docs/sub' }))).toBe(40003);
    expect(await codeOf(t.client.file.previewUrl({ fullpath: 'docs/readme.md', annotation: 'on' }))).toBe(40306);
    expect(await codeOf(t.client.file.previewUrl({ fullpath: 'docs/readme.md', watermark: 2 }))).toBe(40003);
    expect(await codeOf(t.client.file.previewUrl({ fullpath: 'docs/none.md' }))).toBeGreaterThan(40000);
  });
});

describe('info carries the preview and thumbnail links', { timeout: 30_000 }, () => {
  it('a file has a working preview link; an image also a thumbnail link; a folder neither; ignores drops them', async () => {
    const info = await t.client.file.info({ fullpath: 'docs/readme.md' });
    expect(info.preview).toMatch(/\/preview\/v\//);
    expect(info.thumbnail).toBe('');
    expect((await get(String(info.preview))).status).toBe(200);
    const folder = await t.client.file.info({ fullpath: 'docs/sub' });
    expect(folder.preview).toBe('');
    const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
    await put(t.client, 'docs/dot.png', png);
    const image = await t.client.file.info({ fullpath: 'docs/dot.png' });
    expect(image.thumbnail).toMatch(/\/preview\/t\//);
    const thumb = await request(String(image.thumbnail));
    expect(thumb.statusCode).toBe(200);
    expect(String(thumb.headers['content-type'])).toMatch(/^image\//);
    await thumb.body.dump();
    const trimmed = await t.client.file.info({ fullpath: 'docs/dot.png', ignores: 'preview,thumbnail' });
    expect(trimmed).not.toHaveProperty('preview');
    expect(trimmed).not.toHaveProperty('thumbnail');
  });
});
