/** org/log: the enterprise's file operations and share-link events, filtered, ordered and paged. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { ServiceClient } from '../../../src/api/client.js';
import { clientFor, startTestService, type TestService } from '../../support/service.js';
import { codeOf, put } from './helpers.js';

let t: TestService;
let ent: ServiceClient;
beforeAll(async () => {
  t = await startTestService();
  ent = clientFor(t, 'enterprise');
  await put(t.client, 'log/a.txt', 'a', { op_name: 'Alice' });
  await t.client.file.move({ fullpath: 'log/a.txt', dest_fullpath: 'log/b.txt' });
  await t.client.file.del({ fullpath: 'log/b.txt' });
  await put(t.client, 'log/shared.txt', 'shared');
  const { link } = await t.client.file.link({ fullpath: 'log/shared.txt', auth: 'download' });
  await (await request(link)).body.dump();
});
afterAll(async () => { await t?.close(); });

describe('org/log', { timeout: 30_000 }, () => {
  it('lists operations newest first with act codes and names, including link events', async () => {
    const log = await ent.org.log({});
    expect(log.total).toBeGreaterThanOrEqual(5);
    const acts = log.list.map((i) => i.act);
    expect(acts).toEqual(expect.arrayContaining([1, 0, 1014, 1015]));
    const datelines = log.list.map((i) => i.dateline);
    expect([...datelines].sort((a, b) => b - a)).toEqual(datelines);
    const created = log.list.find((i) => i.act === 1014)!;
    expect(created).toMatchObject({ fullpath: 'log/shared.txt', act_name: 'link created' });
  });

  it('filters by act and library, orders ascending, pages', async () => {
    const lib = t.service.credentials.library;
    const links = await ent.org.log({ act: '1014,1015', org_id: String(lib.org_id) });
    expect(links.list.every((i) => i.act === 1014 || i.act === 1015)).toBe(true);
    expect(links.total).toBe(links.list.length);
    const asc = await ent.org.log({ orderby: 'asc', size: 2 });
    expect(asc.list).toHaveLength(2);
    expect(asc.list[0]!.dateline).toBeLessThanOrEqual(asc.list[1]!.dateline);
    const page2 = await ent.org.log({ orderby: 'asc', start: 2, size: 2 });
    expect(page2.list[0]).not.toEqual(asc.list[0]);
    const future = await ent.org.log({ start_dateline: Math.floor(Date.now() / 1000) + 3600 });
    expect(future).toEqual({ total: 0, list: [] });
  });

  it('refuses bad input', async () => {
    expect(await codeOf(ent.org.log({ act: 'x' }))).toBe(40003);
    expect(await codeOf(ent.org.log({ orderby: 'sideways' }))).toBe(40003);
    expect(await codeOf(ent.org.log({ size: 1001 }))).toBe(40003);
    expect(await codeOf(ent.org.log({ org_id: '999999' }))).toBe(40401);
  });
});
