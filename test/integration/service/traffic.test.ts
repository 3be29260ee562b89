/**
 * Traffic statistics: bytes served through download links, preview pages and share-link downloads are
 * counted per enterprise and day, survive a restart, and are answered by partner/ent_daily_stats (days
 * up to yesterday, as the spec says; bad input refused).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { ServiceClient } from '../../../src/api/client.js';
import { EmbeddedService } from '../../../src/service/index.js';
import { DailyTraffic, dayOf } from '../../../src/service/domain/daily-traffic.js';
import { LinkTrafficCap } from '../../../src/service/domain/traffic-cap.js';
import { metadataStoreAt } from '../../../src/service/store/metadata-location.js';
import { codeOf, put } from './helpers.js';
import { waitFor } from '../../support/wait-for.js';

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f().catch(() => undefined);
});

async function start(dir: string): Promise<{ service: EmbeddedService; client: ServiceClient; partner: ServiceClient; close: () => Promise<void> }> {
  const service = await EmbeddedService.start({ dataDir: dir });
  const client = new ServiceClient({ baseUrl: service.baseUrl, credentials: { library: service.credentials.library } });
  const partner = client.withCredentials({ partner: service.credentials.partner });
  const close = async () => { await client.close(); await service.close(); };
  cleanup.push(close);
  return { service, client, partner, close };
}

async function fetchBytes(url: string): Promise<number> {
  const res = await request(url);
  expect(res.statusCode).toBe(200);
  return (await res.body.arrayBuffer()).byteLength;
}

describe('traffic statistics', { timeout: 30_000 }, () => {
  it('downloads, previews and share-link downloads are counted for the day, and kept across a restart', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-traffic-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const s = await start(dir);
    const body = 'x'.repeat(5000);
    await put(s.client, 'stats/file.txt', body);

    const { urls } = await s.client.file.downloadUrl({ fullpath: 'stats/file.txt' });
    expect(await fetchBytes(urls[0]!)).toBe(5000);

    const { link } = await s.client.file.link({ fullpath: 'stats/file.txt', auth: 'download' });
    const page = await (await request(link)).body.text();
    const href = /href="([^"]*download[^"]*)"/.exec(page)?.[1];
    expect(href).toBeDefined();
    expect(await fetchBytes(new URL(href!.replace(/&amp;/g, '&'), link).toString())).toBe(5000);

    const ent = s.service.credentials.enterprise.ent_id;
    const today = dayOf(Date.now());
    const [row] = await waitFor('the day\'s traffic counted', () => s.service.parts.traffic.days(Number(ent), today, today), { until: (rows) => rows[0]?.download === 5000 && rows[0]?.link === 5000 });
    expect(row).toMatchObject({ date: today, download: 5000, link: 5000 });

    await s.close();
    const again = await start(dir);
    expect((await again.service.parts.traffic.days(Number(ent), today, today))[0]).toMatchObject({ download: 5000, link: 5000 });
  });

  it('counts of two processes on one store add up; a cap check misses only what the other has not written yet', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-traffic-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const s = await start(dir);
    // a second process's counter: its own connection to the same database
    const db = await metadataStoreAt(undefined, dir);
    cleanup.push(() => db.close());
    const other = new DailyTraffic(db, Date.now);
    const ent = Number(s.service.credentials.enterprise.ent_id);
    const lib = Number((await db.get<{ id: number }>('SELECT id FROM libraries LIMIT 1'))!.id);
    await s.partner.partner.setEntSetting({ out_id: 'default', max_link_flow: 4000 });
    const cap = new LinkTrafficCap(s.service.parts.tree.db, s.service.parts.traffic);
    s.service.parts.traffic.count(lib, 'link', 1000);
    other.count(lib, 'link', 3500);
    // not written yet by the other process (it writes at most once a second): this process does not see it
    expect(await s.service.parts.traffic.today(ent, 'link')).toBe(1000);
    await expect(cap.check(lib)).resolves.toBeUndefined();
    await other.flush();
    expect(await s.service.parts.traffic.today(ent, 'link')).toBe(4500);
    await expect(cap.check(lib)).rejects.toMatchObject({ code: 40333 });
    await s.service.parts.traffic.flush();
    expect(await other.today(ent, 'link')).toBe(4500);
  });

  it('ent_daily_stats answers one row per day up to yesterday; refuses bad input', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-traffic-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const s = await start(dir);
    const day = (n: number) => dayOf(Date.now() - n * 86_400_000);
    const res = await s.partner.partner.entDailyStats({ out_id: 'default', type: 'flow', start_date: day(3) });
    expect(res.list.map((r) => r.date)).toEqual([day(3), day(2), day(1)]);
    expect(res.list.every((r) => r.download === 0 && r.link === 0 && r.preview === 0)).toBe(true);
    const withToday = await s.partner.partner.entDailyStats({ out_id: 'default', type: 'flow', start_date: day(1), end_date: day(0) });
    expect(withToday.list.map((r) => r.date)).toEqual([day(1)]);
    expect(await codeOf(s.partner.partner.entDailyStats({ out_id: 'default', type: 'other', start_date: day(1) }))).toBe(40003);
    expect(await codeOf(s.partner.partner.entDailyStats({ out_id: 'nobody', type: 'flow', start_date: day(1) }))).toBe(40410);
    expect(await codeOf(s.partner.partner.entDailyStats({ out_id: 'default', type: 'flow', start_date: '2026-13-01' }))).toBe(40003);
    expect(await codeOf(s.partner.partner.entDailyStats({ out_id: 'default', type: 'flow', start_date: day(1), end_date: day(2) }))).toBe(40003);
    expect(await codeOf(s.partner.partner.entDailyStats({ out_id: 'default', type: 'flow', start_date: day(400), end_date: day(1) }))).toBe(40003);
  });
});
