/**
 * Every endpoint of the service spec has a definition in the EndpointTable (and so a typed client method),
 * with the spec's method where the spec gives one. The spec's endpoints are kept in the repository
 * (test/fixtures/spec/endpoints.json, extracted from the spec's "Endpoints" section by
 * scripts/spec-endpoints.ts, which also refreshes it from a spec file given on its command line).
 */
import { describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { allEndpoints } from '../../../src/shared/endpoints.js';
import { SPEC_ENDPOINTS_FIXTURE, specEndpoints, type SpecEndpoint } from '../../../scripts/spec-endpoints.js';

/** Paths of the table that the spec does not list itself (the spec's decisions: the token endpoint). */
const DOCUMENTED_EXTRAS = new Set(['POST /m-api/oauth2/token2']);

describe('EndpointTable against the spec', () => {
  it('lists every endpoint path of the spec, with its method', async () => {
    const spec = JSON.parse(await readFile(SPEC_ENDPOINTS_FIXTURE, 'utf8')) as SpecEndpoint[];
    expect(spec.length).toBeGreaterThan(100); // the list holds every section
    const table = allEndpoints();
    const missing: string[] = [];
    for (const e of spec) {
      const defs = table.filter((t) => t.def.path === e.path);
      if (defs.length === 0) missing.push(e.path);
      else if (e.method) expect(defs.map((d) => d.def.method), e.path).toContain(e.method);
    }
    expect(missing).toEqual([]);
    const specPaths = new Set(spec.map((e) => e.path));
    const extras = table.filter((t) => !specPaths.has(t.def.path)).map((t) => `${t.def.method} ${t.def.path}`);
    expect(extras.filter((x) => !DOCUMENTED_EXTRAS.has(x))).toEqual([]);
  });

  it('the parser reads each kind of entry (guards the guard)', () => {
    const sample = [
      '## Endpoints', '### A. Library file API (prefix `/m-open/1/file/`)', '**ls** - list.', '**add_tag** / **del_tag** - tags',
      '**web_upload** (step 2)', '### C. User file API', '| GET `/m-api/1/file/ls` | a | b |', '| POST `{upload_server}/2/web_upload` (multipart) | x | y |',
      '### F. Partner API (prefix `/m-api/1/thirdparty/`; x)', '| `create_enterprise` path is `create_ent` | a | b |', '| `ent_info` | out_id | c |',
      '### G. Chunked upload protocol', '**POST `/upload_init?org_client_id=<id>`** - x', '**PUT `/upload_part`** - y', '## Authentication',
    ].join('\n');
    expect(specEndpoints(`x\n${sample}`)).toEqual([
      { path: '/m-open/1/file/ls' }, { path: '/m-open/1/file/add_tag' }, { path: '/m-open/1/file/del_tag' }, { method: 'POST', path: '/2/web_upload' },
      { method: 'GET', path: '/m-api/1/file/ls' }, { method: 'POST', path: '/2/web_upload' },
      { path: '/m-api/1/thirdparty/create_ent' }, { path: '/m-api/1/thirdparty/ent_info' },
      { method: 'POST', path: '/upload_init' }, { method: 'PUT', path: '/upload_part' },
    ]);
  });
});
