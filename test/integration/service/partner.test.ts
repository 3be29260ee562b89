/**
 * Partner API: create_ent (limits, unique administrator account, password returned once), ent_info,
 * ent_list (dates, paging, order), order types, get_client_id (the pair works on the enterprise API),
 * ent_sso_url (a one-time login link the listener honours), set_ent_setting (link traffic cap).
 */
import { FormData, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceClient } from '../../../src/api/client.js';
import { GB, addMonths } from '../../../src/service/domain/partner.js';
import { clientFor, startTestService, type TestService } from '../../support/service.js';
import { codeOf, put, uncheckedCode } from './helpers.js';

let now = Date.parse('2026-05-01T10:00:00Z');
const nowS = () => Math.floor(now / 1000);
let t: TestService;
let partner: ServiceClient;
beforeAll(async () => {
  t = await startTestService({ clock: () => now });
  partner = clientFor(t, 'partner');
});
afterAll(async () => { await t?.close(); });

const entRow = async (id: number) => await t.service.parts.tree.db.get('SELECT * FROM enterprises WHERE id = ?', [id]) as { trial: number; end_dateline: number; member_limit: number; space: number; sync_enabled: number };

describe('partner enterprises', { timeout: 30_000 }, () => {
  it('creates an enterprise within the limits; the administrator password is returned once and works', async () => {
    const made = await partner.partner.createEnt({ out_id: 'acme', ent_name: 'Acme', account: 'boss@acme.example', days: 30, space: 100 });
    expect(made.account).toBe('boss@acme.example');
    expect(made.password).toMatch(/^[\w-]{12}$/);
    expect(made.end_dateline).toBe(nowS() + 30 * 86_400);
    expect(await partner.partner.entInfo({ out_id: 'acme' })).toEqual({
      id: made.id, name: 'Acme', trial: 1, end_dateline: made.end_dateline, member_limit: 1000, member_count: 1, space: 100 * GB, size: 0,
    });
    // The generated password is the administrator's: the token endpoint accepts it.
    const row = await t.service.parts.tree.db.get('SELECT password_md5 FROM members WHERE account = ?', ['boss@acme.example']) as { password_md5: string };
    const { createHash } = await import('node:crypto');
    expect(row.password_md5).toBe(createHash('md5').update(made.password!).digest('hex'));

    const plain = await partner.partner.createEnt({ out_id: 'plain', ent_name: 'Plain' });
    expect(plain.account).toBeUndefined();
    expect(plain.password).toBeUndefined();
    expect(plain.end_dateline).toBe(nowS() + 90 * 86_400);
    expect(await entRow(plain.id)).toMatchObject({ member_limit: 1000, space: 500 * GB, trial: 1 });

    const count = async () => (await t.service.parts.tree.db.get('SELECT COUNT(*) AS n FROM enterprises') as { n: number }).n;
    const before = await count();
    expect(await codeOf(partner.partner.createEnt({ out_id: 'x1', ent_name: 'X', days: 91 }))).toBe(40003);
    expect(await codeOf(partner.partner.createEnt({ out_id: 'x2', ent_name: 'X', space: 51_201 }))).toBe(40003);
    expect(await codeOf(partner.partner.createEnt({ out_id: 'x3', ent_name: 'X', account: 'boss@acme.example' }))).toBe(40901);
    expect(await codeOf(partner.partner.createEnt({ out_id: 'acme', ent_name: 'X' }))).toBe(40901);
    expect(await codeOf(partner.partner.createEnt({ out_id: 'x4', ent_name: 'X', account: 'not-mail' }))).toBe(40003);
    expect(await count()).toBe(before);
    expect(await codeOf(partner.partner.createEnt({ out_id: 'x5', ent_name: 'X', days: 90, space: 51_200 }))).toBe(0);
    expect(await codeOf(partner.partner.entInfo({ out_id: 'nope' }))).toBe(40410);
  });

  it('lists enterprises by opening date, paged, in either order', async () => {
    now = Date.parse('2026-05-03T09:00:00Z');
    await partner.partner.createEnt({ out_id: 'later', ent_name: 'Later' });
    const all = (await partner.partner.entList({})).list;
    expect(all.map((e) => e.out_id)).toEqual(['default', 'acme', 'plain', 'x5', 'later']);
    expect(all[1]).toMatchObject({ name: 'Acme', account: 'boss@acme.example', trial: 1 });
    expect((await partner.partner.entList({ begin_date: '2026-05-02' })).list.map((e) => e.out_id)).toEqual(['later']);
    expect((await partner.partner.entList({ begin_date: '2026-05-01', end_date: '2026-05-02' })).list.map((e) => e.out_id)).toEqual(['default', 'acme', 'plain', 'x5']);
    expect((await partner.partner.entList({ order: 'desc', start: 1, size: 2 })).list.map((e) => e.out_id)).toEqual(['x5', 'plain']);
    expect(await codeOf(partner.partner.entList({ size: 1001 }))).toBe(40003);
    expect(await codeOf(partner.partner.entList({ begin_date: '05/01/2026' }))).toBe(40003);
    expect(await codeOf(partner.partner.entList({ order: 'random' }))).toBe(40003);
  });

  it('orders: trial.extend, subscribe, renew, upgrade, unsubscribe change the enterprise', async () => {
    const { id } = await partner.partner.entInfo({ out_id: 'plain' });
    const start = (await entRow(id)).end_dateline;
    await partner.partner.order({ out_id: 'plain', type: 'trial.extend', days: 10 });
    expect((await entRow(id)).end_dateline).toBe(start + 10 * 86_400);
    expect(await codeOf(partner.partner.order({ out_id: 'plain', type: 'renew', month: 1 }))).toBe(40003);
    expect(await codeOf(partner.partner.order({ out_id: 'plain', type: 'subscribe', member_count: 50 }))).toBe(40003);
    expect((await entRow(id)).trial).toBe(1);
    await partner.partner.order({ out_id: 'plain', type: 'subscribe', member_count: 50, space: 200, month: 12 });
    expect(await entRow(id)).toMatchObject({ trial: 0, member_limit: 50, space: 200 * GB, end_dateline: addMonths(nowS(), 12) });
    expect(await codeOf(partner.partner.order({ out_id: 'plain', type: 'trial.extend', days: 5 }))).toBe(40003);
    await partner.partner.order({ out_id: 'plain', type: 'renew', month: 3 });
    expect((await entRow(id)).end_dateline).toBe(addMonths(addMonths(nowS(), 12), 3));
    await partner.partner.order({ out_id: 'plain', type: 'upgrade', member_count: 10, space: 1 });
    expect(await entRow(id)).toMatchObject({ member_limit: 60, space: 201 * GB });
    await partner.partner.order({ out_id: 'plain', type: 'unsubscribe' });
    expect((await entRow(id)).end_dateline).toBe(nowS());
    expect(await codeOf(partner.partner.order({ out_id: 'plain', type: 'refund' }))).toBe(40003);
    expect(addMonths(Date.parse('2026-01-31T00:00:00Z') / 1000, 1)).toBe(Date.parse('2026-02-28T00:00:00Z') / 1000);
  });

  it('get_client_id hands out the enterprise pair, which works on the enterprise API; settings turn sync on', async () => {
    await partner.call('partner', 'create_ent', { out_id: 'synced', ent_name: 'Synced', __setting_sync: '1' });
    const pair = await partner.partner.getClientId({ out_id: 'synced', title: 'crm' });
    expect(await partner.partner.getClientId({ out_id: 'synced', title: 'crm' })).toEqual(pair);
    const ent = t.client.withCredentials({ enterprise: pair });
    await ent.ent.addSyncGroup({ out_id: 'g', name: 'G' });
    expect(Object.keys(await ent.ent.getGroupByOutId({ out_ids: 'g' }))).toEqual(['g']);
    const acme = t.client.withCredentials({ enterprise: await partner.partner.getClientId({ out_id: 'acme', title: 'crm' }) });
    expect(await codeOf(acme.ent.addSyncGroup({ out_id: 'g', name: 'G' }))).toBe(40306);
    expect((await acme.ent.log({ type: 9 })).total).toBe(1);
    expect(await codeOf(partner.call('partner', 'create_ent', { out_id: 'bad-setting', ent_name: 'B', __setting_sync: 'yes' }))).toBe(40003);
  });

  it('ent_sso_url gives a one-time login link to the admin console', async () => {
    const { url } = await partner.partner.entSsoUrl({ out_id: 'acme' });
    expect(url.startsWith(`${t.service.baseUrl}/sso/`)).toBe(true);
    expect((await (await request(`${t.service.baseUrl}/console/`)).body.json() as { error_code: number }).error_code).toBe(40101);
    const first = await request(url);
    await first.body.dump();
    expect(first.statusCode).toBe(303);
    expect(first.headers.location).toBe('/console/');
    const cookie = String(first.headers['set-cookie']).split(';')[0]!;
    const page = await request(`${t.service.baseUrl}/console/`, { headers: { cookie } });
    expect(page.statusCode).toBe(200);
    expect(await page.body.text()).toContain('<h1>Acme</h1>');
    const again = await request(url);
    expect(again.statusCode).toBe(404);
    expect((await again.body.json() as { error_code: number }).error_code).toBe(40411);
    const forged = await request(`${t.service.baseUrl}/console/`, { headers: { cookie: cookie.replace(/\.[\w-]+$/, '.AAAA') } });
    await forged.body.dump();
    expect(forged.statusCode).toBe(401);
    const { url: late } = await partner.partner.entSsoUrl({ out_id: 'acme' });
    now += 6 * 60_000;
    const expired = await request(late);
    await expired.body.dump();
    expect(expired.statusCode).toBe(404);
  });

  it('set_ent_setting caps the daily share-link traffic of a paid enterprise (not of a trial)', async () => {
    const data = 'x'.repeat(3000);
    await put(t.client, 'capped/file.txt', data);
    const { link } = await t.client.file.link({ fullpath: 'capped/file.txt', auth: 'download' });
    const page = await (await request(link)).body.text();
    const href = new URL(/href="([^"]*download[^"]*)"/.exec(page)![1]!.replace(/&amp;/g, '&'), link).toString();
    const download = async () => {
      const res = await request(href);
      const body = await res.body.text();
      return { status: res.statusCode, body };
    };
    expect(await codeOf(partner.partner.setEntSetting({ out_id: 'default', max_link_flow: -2 }))).toBe(40003);
    expect(await uncheckedCode(partner, 'partner', 'set_ent_setting', { out_id: 'default' })).toBe(40003);
    expect(await codeOf(partner.call('partner', 'set_ent_setting', { out_id: 'nope', max_link_flow: '10' }))).toBe(40410);
    await partner.partner.setEntSetting({ out_id: 'default', max_link_flow: 4000 });
    expect(await download()).toMatchObject({ status: 200, body: data });
    expect(await download()).toMatchObject({ status: 200, body: data });
    const refused = await download();
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('share-link traffic');
    // No effect for a trial enterprise; -1 lifts the cap.
    const db = t.service.parts.tree.db;
    const entId = t.service.credentials.enterprise.ent_id;
    await db.run('UPDATE enterprises SET trial = 1 WHERE id = ?', [entId]);
    expect((await download()).status).toBe(200);
    await db.run('UPDATE enterprises SET trial = 0 WHERE id = ?', [entId]);
    expect((await download()).status).toBe(403);
    await partner.partner.setEntSetting({ out_id: 'default', max_link_flow: -1 });
    expect((await download()).status).toBe(200);
  });
  it('an ended subscription or trial: the enterprise reads but changes nothing (40334) until an order renews it', async () => {
    await partner.partner.createEnt({ out_id: 'ending', ent_name: 'Ending', days: 1 });
    const ent = t.client.withCredentials({ enterprise: await partner.partner.getClientId({ out_id: 'ending', title: 'crm' }) });
    const { org_id } = await ent.org.create({ org_name: 'Files' });
    const lib = t.client.withCredentials({ library: await ent.org.bind({ org_id: String(org_id), title: 'app' }) });
    await lib.file.createFolder({ fullpath: 'drop' });
    const { link } = await lib.file.link({ fullpath: 'drop', auth: 'upload' });
    const uploadThroughLink = async () => {
      const form = new FormData();
      form.append('file', new Blob(['through the link']), 'up.txt');
      const res = await request(`${link}/upload`, { method: 'POST', body: form });
      await res.body.dump();
      return res.statusCode;
    };
    const changes = () => Promise.all([
      codeOf(lib.file.createFolder({ fullpath: 'more' })), codeOf(ent.ent.addGroup({ group_name: 'G2' })), codeOf(ent.org.create({ org_name: 'More' })),
    ]);
    expect(await changes()).toEqual([0, 0, 0]);
    await partner.partner.order({ out_id: 'ending', type: 'subscribe', member_count: 10, space: 1, month: 1 });
    await partner.partner.order({ out_id: 'ending', type: 'unsubscribe' });
    expect(await changes()).toEqual([40334, 40334, 40334]);
    expect(await uploadThroughLink()).toBe(403);
    expect((await lib.file.ls({ fullpath: 'drop' })).list).toEqual([]); // reads answer; nothing was stored
    expect((await ent.org.ls({})).list.map((l) => l.org_name).sort()).toEqual(['Files', 'More']);
    // the partner renews it: it changes again at once
    await partner.partner.order({ out_id: 'ending', type: 'renew', month: 1 });
    expect(await codeOf(lib.file.createFolder({ fullpath: 'renewed' }))).toBe(0);
    expect(await uploadThroughLink()).toBe(303);
    // a trial ends the same way when its days have passed
    await partner.partner.createEnt({ out_id: 'short-trial', ent_name: 'Short', days: 1 });
    const trial = t.client.withCredentials({ enterprise: await partner.partner.getClientId({ out_id: 'short-trial', title: 'crm' }) });
    const before = now;
    now += 86_400_000 + 1000;
    try {
      expect(await codeOf(trial.ent.addGroup({ group_name: 'Late' }))).toBe(40334);
      expect((await trial.ent.getGroups({})).length).toBe(0);
      await partner.partner.order({ out_id: 'short-trial', type: 'trial.extend', days: 5 });
      expect(await codeOf(trial.ent.addGroup({ group_name: 'Late' }))).toBe(0);
    } finally {
      now = before;
    }
  });
});
