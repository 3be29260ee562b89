/**
 * Every endpoint of the service spec has a definition in the EndpointTable (and so a typed client method),
 * with the spec's method where the spec gives one. The spec is read from the shared spec folder beside the
 * repository (`../shared/spec/service-api.md`).
 */
import { describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { allEndpoints } from '../../../src/shared/endpoints.js';

const SPEC = fileURLToPath(new URL('../../../../shared/spec/service-api.md', import.meta.url));

/** Paths of the table that the spec does not list itself (spec/decisions.md: the token endpoint). */
const DOCUMENTED_EXTRAS = new Set(['POST /m-api/oauth2/token2']);

interface SpecEndpoint { method?: string; path: string }

/** The endpoints of the spec's "Endpoints" section, by subsection (A to G). */
function specEndpoints(text: string): SpecEndpoint[] {
  const out: SpecEndpoint[] = [];
  const start = text.indexOf('\n## Endpoints');
  const end = text.indexOf('\n## ', start + 5);
  let section = '';
  let prefix = '';
  for (const line of text.slice(start, end).split('\n')) {
    const heading = /^### ([A-G])\. .*?\(prefix `([^`]+)`/.exec(line) ?? /^### ([A-G])\./.exec(line);
    if (heading) {
      section = heading[1]!;
      prefix = heading[2] ?? '';
      continue;
    }
    if (section === 'A') {
      const m = /^\*\*(\w+)\*\*(?: \/ \*\*(\w+)\*\*)?/.exec(line);
      if (!m) continue;
      for (const name of [m[1], m[2]].filter((n): n is string => !!n)) {
        out.push(name === 'web_upload' ? { method: 'POST', path: '/2/web_upload' } : { path: prefix + name });
      }
    } else if (section === 'B' || section === 'D' || section === 'E' || section === 'F') {
      const m = /^\| `(\w+)`/.exec(line);
      if (!m) continue;
      const path = section === 'B' ? '/m-open/2/file/' : prefix;
      const explicit = /path is `([^`]+)`/.exec(line);
      out.push({ path: explicit ? path + explicit[1] : path + m[1] });
    } else if (section === 'C') {
      const m = /^\| (GET|POST) `([^`]+)`/.exec(line);
      if (m) out.push({ method: m[1], path: m[2]!.replace('{upload_server}', '') });
    } else if (section === 'G') {
      const m = /^\*\*(GET|POST|PUT) `([^`?]+)/.exec(line);
      if (m) out.push({ method: m[1], path: m[2]! });
    }
  }
  return out;
}

describe('EndpointTable against the spec', () => {
  it('lists every endpoint path of the spec, with its method', async () => {
    const spec = specEndpoints(await readFile(SPEC, 'utf8'));
    expect(spec.length).toBeGreaterThan(100); // the parser found the sections
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
