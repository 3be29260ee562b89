/**
 * The preview pages in a real browser (headless Chromium): a parent page on another origin embeds a
 * preview in an iframe and records the `SVC_VIEWER_EVENT` messages it receives. With
 * PREVIEW_SCREENSHOTS=<dir> the tests also save screenshots of the pages there (the docs' images).
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Frame, type Page } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PreviewTestService } from '../../unit/service/preview/blob-folder-host.js';
import { tinyPdf } from '../../unit/service/preview/tiny-pdf.js';
import { waitFor } from '../../support/wait-for.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`preview browser tests skipped: ${CHROMIUM} is not installed (scripts/bootstrap installs it)`);
const FIXTURES = new URL('../../fixtures/preview/', import.meta.url);
const SHOTS = process.env.PREVIEW_SCREENSHOTS;

interface ViewerEvent { type: string; page?: { current: number; total: number }; progress?: { current: number; total: number }; time: number }

/** The embedding page: one iframe, every message's data kept as received (raw) in `window.received`. */
const PARENT = `<!doctype html><html><head><meta charset="utf-8"><title>host</title></head><body>
<iframe id="preview" width="900" height="640"></iframe>
<script>
window.received = [];
window.addEventListener('message', (e) => { window.received.push(e.data); });
document.getElementById('preview').src = new URLSearchParams(location.search).get('src');
</script></body></html>`;

let svc: PreviewTestService;
let parentServer: Server;
let parentUrl: string;
let profile: string;
let context: BrowserContext;

beforeAll(async () => {
  if (!haveChromium) return;
  svc = await PreviewTestService.start();
  parentServer = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(PARENT));
  await new Promise<void>((resolve) => parentServer.listen(0, 'localhost', resolve));
  parentUrl = `http://localhost:${(parentServer.address() as AddressInfo).port}/`;
  profile = await mkdtemp(join(tmpdir(), 'cloudlib-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic', '--no-first-run',
      '--disable-component-update', '--disable-sync'],
    viewport: { width: 960, height: 700 },
  });
}, 30_000);

afterAll(async () => {
  if (!haveChromium) return;
  await context?.close();
  await svc?.stop();
  parentServer?.closeAllConnections();
  await new Promise<void>((resolve) => (parentServer ? parentServer.close(() => resolve()) : resolve()));
  if (profile) await rm(profile, { recursive: true, force: true });
}, 30_000);

/** Opens the parent page embedding `url`; returns the page, the preview's frame and a reader of the events. */
async function embed(url: string) {
  const page = await context.newPage();
  const violations: string[] = [];
  page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) violations.push(m.text()); });
  await page.goto(`${parentUrl}?src=${encodeURIComponent(url)}`);
  const frame = await waitForFrame(page, url);
  const raw = () => page.evaluate(() => (window as unknown as { received: unknown[] }).received);
  const events = async (): Promise<ViewerEvent[]> => {
    const all = await raw();
    for (const d of all) expect(typeof d).toBe('string'); // data is a JSON string
    return all.map((d) => JSON.parse(d as string) as ViewerEvent).filter((e) => e.type === 'SVC_VIEWER_EVENT');
  };
  const until = (ok: (e: ViewerEvent[]) => boolean, ms = 15_000): Promise<ViewerEvent[]> => waitFor('the viewer events', events, { until: ok, timeoutMs: ms, intervalMs: 100 });
  return { page, frame, events, until, violations };
}

async function waitForFrame(page: Page, url: string): Promise<Frame> {
  const f = await waitFor(`the preview frame ${url}`, () => page.frames().find((fr) => fr.url() === url), { timeoutMs: 5_000, intervalMs: 50 });
  await f!.waitForLoadState('load');
  return f!;
}

async function shot(page: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  await mkdir(SHOTS, { recursive: true });
  await page.locator('#preview').screenshot({ path: join(SHOTS, `preview-${name}.png`) });
}

describe.skipIf(!haveChromium)('preview pages in Chromium', { timeout: 30_000 }, () => {
  it('a 3-page PDF posts page events on load and on each page change (buttons and keyboard)', async () => {
    const { url } = await svc.file('report.pdf', tinyPdf(['Page one', 'Page two', 'Page three']));
    const started = Date.now();
    const { page, frame, until, violations } = await embed(url);
    let got = await until((e) => e.length >= 1);
    expect(got[0]).toEqual({ type: 'SVC_VIEWER_EVENT', page: { current: 1, total: 3 }, time: expect.any(Number) });
    expect(got[0]!.time).toBeGreaterThanOrEqual(started);
    expect(got[0]!.time).toBeLessThanOrEqual(Date.now());
    await frame.waitForSelector('#pdf-canvas[data-page="1"]');
    await waitFor('the page label 1 / 3', () => frame.locator('#page-label').textContent(), { until: (t) => t === '1 / 3', intervalMs: 100 });
    await shot(page, 'pdf');

    await frame.click('#next');
    got = await until((e) => e.length >= 2);
    await frame.locator('body').press('ArrowRight');
    got = await until((e) => e.length >= 3);
    await frame.waitForSelector('#pdf-canvas[data-page="3"]');
    expect(await frame.locator('#next').isDisabled()).toBe(true);
    await frame.locator('body').press('ArrowRight'); // past the end: no event
    await frame.locator('body').press('Home');
    // Home's event comes after whatever the press past the end sent: the four are all there will be.
    got = await until((e) => e.length >= 4);
    expect(got.map((e) => e.page)).toEqual([
      { current: 1, total: 3 }, { current: 2, total: 3 }, { current: 3, total: 3 }, { current: 1, total: 3 },
    ]);
    // the canvas shows a rendered page (not blank), once page 1 is drawn again after Home (its event comes first)
    await frame.waitForSelector('#pdf-canvas[data-page="1"]');
    const inked = await waitFor('page 1 drawn on the canvas', () => frame.evaluate(() => {
      const c = document.getElementById('pdf-canvas') as HTMLCanvasElement;
      const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
      let dark = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i]! < 128) dark++;
      return dark;
    }), { until: (dark) => dark > 100, intervalMs: 100 });
    expect(inked).toBeGreaterThan(100);
    expect(violations).toEqual([]);
    await page.close();
  });

  it('a 12-second video played at 2x posts start, every-5-seconds and end events in media seconds', async () => {
    const clip = await readFile(new URL('clip-12s.webm', FIXTURES));
    const before = svc.host.traffic.preview;
    const { url } = await svc.file('clip.webm', clip);
    const { page, frame, until, violations } = await embed(url);
    await frame.waitForFunction(() => (document.getElementById('media') as HTMLVideoElement).readyState >= 1);
    await shot(page, 'video');
    await frame.evaluate(async () => {
      const v = document.getElementById('media') as HTMLVideoElement;
      v.muted = true;
      v.playbackRate = 2;
      await v.play();
    });
    const got = await until((e) => e.some((x) => x.progress && x.progress.current >= x.progress.total && x.progress.total > 0), 20_000);
    const progress = got.map((e) => e.progress!);
    expect(got.every((e) => e.type === 'SVC_VIEWER_EVENT' && typeof e.time === 'number' && e.page === undefined)).toBe(true);
    for (const p of progress) expect(p.total).toBeCloseTo(12, 0);
    expect(progress[0]!.current).toBeLessThan(1); // start
    const periodic = progress.slice(1, -1).map((p) => p.current);
    // at the first moment the page saw past 5 s and 10 s of media (a busy browser may see it late: at
    // the latest, the 10-second mark is posted just before the end event)
    expect(periodic).toHaveLength(2);
    expect(periodic[0]).toBeGreaterThanOrEqual(5);
    expect(periodic[0]).toBeLessThan(10);
    expect(periodic[1]).toBeGreaterThanOrEqual(10);
    expect(periodic[1]).toBeLessThanOrEqual(progress.at(-1)!.total);
    expect(progress.at(-1)!.current).toBeCloseTo(progress.at(-1)!.total, 1); // end
    expect(svc.host.traffic.preview - before).toBeGreaterThan(0);
    expect(violations).toEqual([]);
    await page.close();
  });

  it('audio posts start, periodic and end events (the 5-second mark even when the clip ends before a timeupdate)', async () => {
    const tone = await readFile(new URL('tone-6s.ogg', FIXTURES));
    const { url } = await svc.file('tone.ogg', tone);
    const { page, frame, until } = await embed(url);
    await frame.evaluate(async () => {
      const a = document.getElementById('media') as HTMLAudioElement;
      a.muted = true;
      a.playbackRate = 4;
      await a.play();
    });
    const got = await until((e) => e.some((x) => x.progress && x.progress.total > 0 && x.progress.current >= x.progress.total));
    const currents = got.map((e) => e.progress!.current);
    expect(currents[0]).toBeLessThan(1);
    expect(currents.slice(1, -1)).toHaveLength(1);
    expect(currents[1]).toBeGreaterThanOrEqual(5);
    expect(currents.at(-1)).toBeCloseTo(got.at(-1)!.progress!.total, 1);
    await shot(page, 'audio');
    await page.close();
  });

  it('images, text and Markdown post one page event; a watermark covers the page', async () => {
    const png = await sharp({ create: { width: 640, height: 360, channels: 3, background: '#4a7bb7' } })
      .composite([{ input: Buffer.from('<svg width="640" height="360"><circle cx="320" cy="180" r="120" fill="#f4c542"/></svg>') }]).png().toBuffer();
    const cases: [string, string | Buffer, { watermark?: string; memberName?: string }][] = [
      ['photo.png', png, {}],
      ['notes.md', '# Release notes\n\n- **Faster** previews\n- Safe *Markdown*: <script>alert(1)</script>\n\n| Part | Change |\n|---|--:|\n| Previews | 2× |\n\n```\nnpm run bench\n```\n', {}],
      ['main.ts', 'export function add(a: number, b: number): number {\n  return a + b;\n}\n', { watermark: 'ACME internal', memberName: 'Ann Lee' }],
    ];
    for (const [name, content, wm] of cases) {
      const { url } = await svc.file(name, content, wm);
      const { page, frame, until, violations } = await embed(url);
      const got = await until((e) => e.length >= 1);
      expect(got[0]).toMatchObject({ type: 'SVC_VIEWER_EVENT', page: { current: 1, total: 1 } });
      if (wm.watermark) {
        const mark = frame.locator('.watermark');
        expect(await mark.isVisible()).toBe(true);
        expect(await mark.locator('span').first().innerText()).toBe('ACME internal\nAnn Lee');
        // the watermark lies over the text and lets clicks through
        expect(await frame.evaluate(() => getComputedStyle(document.querySelector('.watermark')!).pointerEvents)).toBe('none');
      }
      if (name.endsWith('.md')) {
        expect(await frame.locator('#markdown script').count()).toBe(0);
        expect(await frame.locator('#markdown table td.align-right').innerText()).toBe('2×');
      }
      expect(violations).toEqual([]);
      await shot(page, name.split('.')[1]!.replace('ts', 'watermark'));
      await page.close();
    }
  });
});
