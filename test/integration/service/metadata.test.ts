/**
 * Metadata templates: defined per enterprise, linked to a library; set_metadata checks every value
 * against its attribute type and changes nothing on a refusal; del_metadata; `cloudlib service metadata`.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MetadataTemplates } from '../../../src/service/domain/metadata.js';
import { startTestService, type TestService } from '../../support/service.js';
import { codeOf, put } from './helpers.js';

const run = promisify(execFile);
let t: TestService;
let templates: MetadataTemplates;
beforeAll(async () => {
  t = await startTestService();
  templates = new MetadataTemplates(t.service.parts.tree.db);
  await put(t.client, 'contract.pdf', 'pdf');
});
afterAll(async () => { await t?.close(); });

const TEMPLATE = {
  key: 'contract', name: 'Contract',
  attributes: [
    { key: 'party', name: 'Party', type: 'string' }, { key: 'amount', type: 'number' }, { key: 'signed', type: 'date' },
    { key: 'due', type: 'time' }, { key: 'status', type: 'single', options: ['draft', 'final'] }, { key: 'labels', type: 'multiple', options: ['a', 'b', 'c'] },
  ],
};

describe('metadata', () => {
  it('a template not linked to the library answers 40306; once linked, valid values are stored', async () => {
    const set = (metadata: unknown, display?: string) => t.client.file.setMetadata({ fullpath: 'contract.pdf', key: 'contract', metadata: JSON.stringify(metadata), display });
    expect(await codeOf(set({ party: 'ACME' }))).toBe(40306);
    const ent = t.service.credentials.enterprise.ent_id;
    await templates.define(ent, TEMPLATE);
    await templates.link(t.service.credentials.library.org_id, 'contract');
    await set({ party: 'ACME', amount: 12.5, signed: '2024-02-29', due: '2024-03-01 17:30:00', status: 'final', labels: ['a', 'c'] }, 'party,status');
    const entry = (await t.service.parts.tree.byPath(t.service.credentials.library.org_id, 'contract.pdf'))!;
    expect(await templates.valuesOf(entry.id)).toEqual({
      contract: { metadata: { party: 'ACME', amount: 12.5, signed: '2024-02-29', due: '2024-03-01 17:30:00', status: 'final', labels: ['a', 'c'] }, display: ['party', 'status'] },
    });
    for (const bad of [{ amount: 'lots' }, { signed: '2023-02-29' }, { due: '2024-03-01 25:00:00' }, { status: 'lost' }, { labels: ['z'] }, { party: 3 }, { colour: 'red' }]) {
      expect(await codeOf(set(bad)), JSON.stringify(bad)).toBe(40003);
    }
    expect(await codeOf(set({ party: 'x' }, 'nothing'))).toBe(40003);
    // read back: info carries every value; ls and search show the attributes named in display
    const all = { party: 'ACME', amount: 12.5, signed: '2024-02-29', due: '2024-03-01 17:30:00', status: 'final', labels: ['a', 'c'] };
    expect((await t.client.file.info({ fullpath: 'contract.pdf' })).metadata).toEqual({ contract: all });
    const listed = (await t.client.file.ls({ fullpath: '' })).list.find((e) => e.fullpath === 'contract.pdf')!;
    expect(listed.metadata).toEqual({ contract: { party: 'ACME', status: 'final' } });
    const found = (await t.client.file.search({ keywords: 'contract' })).list.find((e) => e.fullpath === 'contract.pdf')!;
    expect(found.metadata).toEqual({ contract: { party: 'ACME', status: 'final' } });
    await put(t.client, 'plain.txt', 'no metadata');
    const plain = (await t.client.file.ls({ fullpath: '' })).list.find((e) => e.fullpath === 'plain.txt')!;
    expect(plain.metadata).toBeUndefined();
    // without display nothing is shown in lists; info still reads it back
    await set(all);
    expect((await t.client.file.ls({ fullpath: '' })).list.find((e) => e.fullpath === 'contract.pdf')!.metadata).toBeUndefined();
    expect((await t.client.file.info({ fullpath: 'contract.pdf' })).metadata).toEqual({ contract: all });
    expect((await templates.valuesOf(entry.id)).contract!.metadata.party).toBe('ACME');
    await t.client.file.delMetadata({ fullpath: 'contract.pdf', key: 'contract' });
    expect(await templates.valuesOf(entry.id)).toEqual({});
    expect((await t.client.file.info({ fullpath: 'contract.pdf' })).metadata).toBeUndefined();
  });

  it('template definitions are checked', async () => {
    const ent = t.service.credentials.enterprise.ent_id;
    await expect(templates.define(ent, { key: 'k', name: 'K', attributes: [{ key: 'a', type: 'colour' }] })).rejects.toThrow(/type/);
    await expect(templates.define(ent, { key: 'k', name: 'K', attributes: [{ key: 'a', type: 'single' }] })).rejects.toThrow(/options/);
    await expect(templates.define(ent, { key: 'k', name: 'K', attributes: [] })).rejects.toThrow(/attributes/);
  });

  it('cloudlib service metadata defines and links a template', async () => {
    const tpl = JSON.stringify({ key: 'project', name: 'Project', attributes: [{ key: 'code', type: 'string' }] });
    const { stdout } = await run(process.execPath, ['bin/cloudlib.js', 'service', 'metadata', '--data', t.dir, ...t.metadataArgs, '--template', tpl], { timeout: 30_000 });
    expect(JSON.parse(stdout)).toMatchObject({ org_id: t.service.credentials.library.org_id, template: { key: 'project' } });
    await t.client.file.setMetadata({ fullpath: 'contract.pdf', key: 'project', metadata: JSON.stringify({ code: 'P-1' }) });
  }, 60_000);
});
