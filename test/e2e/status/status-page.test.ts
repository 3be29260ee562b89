/**
 * The admin status page in headless Chromium, against a gateway on the embedded service: libraries
 * with their state, the page following changes without a reload (a library added and a warning logged
 * while it is open, the queue empty again after a flush). STATUS_SCREENSHOT=<file> saves a
 * screenshot (the docs' image).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlClient } from '../../../src/control/client.js';
import { loadConfig } from '../../../src/gateway/config.js';
import { Gateway } from '../../../src/gateway/gateway.js';
import { createLogger, RecentProblems } from '../../../src/shared/log.js';
import { waitFor } from '../../support/wait-for.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`status page browser test skipped: ${CHROMIUM} is not installed (scripts/bootstrap installs it)`);

let dir: string;
let gateway: Gateway;
let browser: Browser;
const problems = new RecentProblems();

beforeAll(async () => {
  if (!haveChromium) return;
  dir = await mkdtemp(join(tmpdir(), 'cloudlib-status-'));
  const config = await loadConfig({ data: dir, webdav: 'off', noMount: true, serviceListen: '127.0.0.1:0', adminListen: '127.0.0.1:0' }, {}, { fuseUsable: false });
  config.feed.interval_ms = 300;
  const logger = createLogger({ level: 'warn', destination: new Writable({ write: (_c, _e, done) => done() }), problems });
  gateway = await Gateway.start({ config, logger, problems });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run', '--disable-component-update', '--disable-sync'] });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await gateway?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 30_000);

describe.skipIf(!haveChromium)('status page in Chromium', { timeout: 60_000 }, () => {
  it('shows the libraries online, follows changes without a reload, lists recent errors', async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
    const failures: string[] = [];
    page.on('console', (m) => { if (m.type() === 'error') failures.push(m.text()); });
    page.on('pageerror', (err) => failures.push(err.message));
    await page.goto(`${gateway.adminUrl}/`);
    const demo = gateway.vfs.libraryNames()[0]!;
    await waitFor(`${demo} shown online`, () => page.locator('tr', { hasText: demo }).locator('.state').textContent(), { until: (t) => t === 'online', intervalMs: 100 });
    expect(await page.locator('h2', { hasText: 'Upload queue' }).textContent()).toContain('0 pending');

    // While the page is open: a library is added, a warning is logged, a file goes through the queue.
    const ctl = await ControlClient.connect(gateway.control.socketPath);
    await ctl.call('org.create', { org_name: 'Archive' });
    await ctl.call('library.add', { org: 'Archive' });
    gateway['logger'].warn({ part: 'test', library: 'Archive' }, 'a warning the page shows');
    await gateway.vfs.writeFile('/Archive/report.bin', Buffer.alloc(2 * 1024 * 1024, 7));
    await waitFor('Archive shown online', () => page.locator('tr', { hasText: 'Archive' }).first().locator('.state').textContent(), { until: (t) => t === 'online', timeoutMs: 15_000, intervalMs: 100 });
    await waitFor('the warning shown once', () => page.locator('td', { hasText: 'a warning the page shows' }).count(), { until: (n) => n === 1, intervalMs: 100 });
    if (process.env.STATUS_SCREENSHOT) await page.screenshot({ path: process.env.STATUS_SCREENSHOT, fullPage: true });
    await ctl.call('flush');
    ctl.close();
    await waitFor('the upload queue shown empty', () => page.locator('h2', { hasText: 'Upload queue' }).textContent(), { until: (t) => !!t?.includes('0 pending'), intervalMs: 100 });
    expect(await page.locator('#live').textContent()).toMatch(/^updated \d\d:\d\d:\d\d UTC$/);
    expect(failures).toEqual([]);
    await page.close();
  });
});
