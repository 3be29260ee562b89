/**
 * What goes on the wire, per family and per endpoint: method, path, parameters (the endpoint's own plus
 * the credential's), and a signature made with the family's secret over the right parameters.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ServiceClient, camelCase } from '../../../src/api/client.js';
import { ENDPOINTS, COMMON_PARAMS, allEndpoints, type EndpointDef } from '../../../src/shared/endpoints.js';
import { sign, isCreateFilePath, CREATE_FILE_UNSIGNED } from '../../../src/shared/sign.js';
import { FakeUploadServer, type RecordedRequest } from '../../support/fake-upload-server.js';

const NOW_MS = 1795312800_000;
const CREDS = {
  library: { org_client_id: 'oc_5f2a9d1e', org_client_secret: 'k3Jd9QpXv2LmTz8RwYb4Nc' },
  enterprise: { client_id: 'ent_7c1b', client_secret: 'k3Jd9QpXv2LmTz8RwYb4Nc' },
  partner: { client_id: 'pt_9', client_secret: 'partner-secret-77' },
  user: { token: 'tok-abc', client_secret: 'app-secret-55', client_id: 'app_1' },
};
const SECRET_OF: Record<string, string> = {
  library: CREDS.library.org_client_secret, enterprise: CREDS.enterprise.client_secret, partner: CREDS.partner.client_secret,
  token: CREDS.user.client_secret, application: CREDS.user.client_secret,
};

/** The parameters a request carried (query string and form body together). */
function paramsOf(r: RecordedRequest): Record<string, string> {
  return { ...r.query, ...r.form };
}

/** A minimal valid parameter set: every required parameter and the first of each one-of group. */
function sampleParams(def: EndpointDef): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const [name, p] of Object.entries(def.params)) {
    if (!p.required) continue;
    out[name] = p.type === 'int' ? 3 : p.type === 'json' ? '{"a":1}' : `v-${name}`;
  }
  for (const group of def.oneOf ?? []) {
    const name = group[0]!;
    out[name] = def.params[name]!.type === 'int' ? 3 : `v-${name}`;
  }
  return out;
}

describe('wire contract', { timeout: 15_000 }, () => {
  let fake: FakeUploadServer;
  let client: ServiceClient;

  beforeAll(async () => {
    fake = await new FakeUploadServer().start();
    client = new ServiceClient({ baseUrl: fake.url, credentials: CREDS, clock: () => NOW_MS, retries: 0 });
  });
  afterAll(async () => {
    await client.close();
    await fake.close();
  });
  beforeEach(() => fake.reset());

  it('library file API: the signature vector of spec/signature.md, POST form', async () => {
    await client.file.createFolder({ fullpath: '报告/2026 Q3 summary.docx', op_name: 'Ana' });
    const [r] = fake.requests;
    expect(r!.method).toBe('POST');
    expect(r!.path).toBe('/m-open/1/file/create_folder');
    expect(r!.headers['content-type']).toMatch(/^application\/x-www-form-urlencoded/);
    expect(r!.query).toEqual({});
    expect(r!.form).toEqual({
      org_client_id: 'oc_5f2a9d1e', dateline: '1795312800', fullpath: '报告/2026 Q3 summary.docx', op_name: 'Ana', sign: 'BAyOov/71NuX3WIdXAyXoUVZbTU=',
    });
  });

  it('create_file: filehash and filesize sent, left out of the signature (vector)', async () => {
    await client.file.createFile({ fullpath: 'a.txt', filehash: 'da39a3ee5e6b4b0d3255bfef95601890afd80709', filesize: 0, overwrite: 1 });
    expect(fake.requests[0]!.form.sign).toBe('G9YRWqFBpYoaoZHa1GT1jzGRoaU=');
    expect(fake.requests[0]!.form).toMatchObject({ filehash: 'da39a3ee5e6b4b0d3255bfef95601890afd80709', filesize: '0' });
  });

  it('library management API: client_id and the enterprise secret (vector)', async () => {
    await client.org.create({ org_name: 'Design', org_capacity: -1 });
    expect(fake.requests[0]!.path).toBe('/m-open/1/org/create');
    expect(fake.requests[0]!.form).toEqual({ client_id: 'ent_7c1b', dateline: '1795312800', org_name: 'Design', org_capacity: '-1', sign: 'gptQ3PBDwEqZ+ig9SwKi9V74w00=' });
  });

  it('user file API: GET endpoints carry token, dateline and sign in the query, signed with the application secret', async () => {
    await client.user.ls({ mount_id: 12, fullpath: 'docs', size: 50 });
    const r = fake.requests[0]!;
    expect(r.method).toBe('GET');
    expect(r.path).toBe('/m-api/1/file/ls');
    expect(r.form).toEqual({});
    const { sign: sent, ...rest } = r.query;
    expect(rest).toEqual({ mount_id: '12', fullpath: 'docs', size: '50', token: 'tok-abc', dateline: '1795312800' });
    expect(sent).toBe(sign('app-secret-55', rest));
    expect(r.query).not.toHaveProperty('client_id');
  });

  it('partner API and enterprise API sign with their own pair; partner __setting_ extras pass through', async () => {
    await client.partner.createEnt({ out_id: 'e1', ent_name: 'Acme', __setting_color: 'red' } as never);
    await client.ent.getMember({ account: 'ana@example.com', show_groups: 1 });
    const [p, e] = fake.requests;
    expect(p!.form).toMatchObject({ client_id: 'pt_9', __setting_color: 'red' });
    const { sign: ps, ...prest } = p!.form;
    expect(ps).toBe(sign('partner-secret-77', prest));
    expect(e!.path).toBe('/m-open/1/ent/get_member');
    const { sign: es, ...erest } = e!.form;
    expect(erest).toEqual({ client_id: 'ent_7c1b', dateline: '1795312800', account: 'ana@example.com', show_groups: '1' });
    expect(es).toBe(sign(CREDS.enterprise.client_secret, erest));
  });

  it('empty values are never sent, except where an empty value means something (fullpath = root)', async () => {
    await client.file.ls({ fullpath: '', tag: '' });
    expect(fake.requests[0]!.form).toHaveProperty('fullpath', '');
    expect(fake.requests[0]!.form).not.toHaveProperty('tag');
  });

  it('bad parameters are refused before anything is sent', async () => {
    await expect(client.file.ls({ fullpath: 'a', start: 'x' as never })).rejects.toThrow(/parameter 'start' expected an integer, got "x"/);
    await expect(client.file.info({} as never)).rejects.toThrow(/exactly one of 'fullpath', 'hash' is required, got 0/);
    await expect(client.call('file', 'ls', { nope: 1 })).rejects.toThrow(/unknown parameter 'nope'/);
    expect(fake.requests).toHaveLength(0);
  });

  const jsonEndpoints = allEndpoints().filter((e) => e.family !== 'upload');
  it.each(jsonEndpoints.map((e) => [`${e.family}.${e.name}`, e] as const))('%s: method, path, parameters and signature', async (_label, ref) => {
    const params = sampleParams(ref.def);
    const family = (client as unknown as Record<string, Record<string, (p: unknown) => Promise<unknown>>>)[ref.family]!;
    const method = family[camelCase(ref.name)];
    expect(method, `typed method ${ref.family}.${camelCase(ref.name)}`).toBeTypeOf('function');
    await method!(params);
    expect(fake.requests).toHaveLength(1);
    const r = fake.requests[0]!;
    expect(r.method).toBe(ref.def.method);
    expect(r.path).toBe(ref.def.path);
    const wire = paramsOf(r);
    const expected: Record<string, string> = Object.fromEntries(Object.entries(params).map(([k, v]) => [k, String(v)]));
    for (const common of COMMON_PARAMS[ref.def.credential]) expect(wire, common).toHaveProperty(common);
    const { sign: sent, ...rest } = wire;
    expect(rest).toMatchObject(expected);
    expect(Object.keys(rest).sort()).toEqual([...Object.keys(expected), ...COMMON_PARAMS[ref.def.credential].filter((k) => k !== 'sign')].sort());
    const exclude = isCreateFilePath(ref.def.path) ? CREATE_FILE_UNSIGNED : [];
    expect(sent).toBe(sign(SECRET_OF[ref.def.credential]!, rest, { exclude }));
  });

  it('every family of the table has typed methods on the client', () => {
    for (const family of Object.keys(ENDPOINTS).filter((f) => f !== 'upload')) {
      const names = Object.keys((ENDPOINTS as Record<string, object>)[family]!).map(camelCase).sort();
      expect(Object.keys((client as unknown as Record<string, object>)[family]!).sort()).toEqual(names);
    }
  });
});
