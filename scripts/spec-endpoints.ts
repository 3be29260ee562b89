/**
 * The endpoints the service spec names, read from its "Endpoints" section (service-api.md): the list that
 * `test/unit/api/spec-coverage.test.ts` checks the endpoint table against. The test reads the list kept in
 * the repository (test/fixtures/spec/endpoints.json); refresh it from a spec file when the spec changes:
 *
 *   node --import tsx scripts/spec-endpoints.ts PATH/TO/service-api.md
 */
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';

export interface SpecEndpoint { method?: string; path: string }

/** Where the list is kept, relative to the repository. */
export const SPEC_ENDPOINTS_FIXTURE = fileURLToPath(new URL('../test/fixtures/spec/endpoints.json', import.meta.url));

/** The endpoints of the spec's "Endpoints" section, by subsection (A to G). */
export function specEndpoints(text: string): SpecEndpoint[] {
  const out: SpecEndpoint[] = [];
  const start = text.indexOf('\n## Endpoints');
  if (start === -1) throw new Error('no "## Endpoints" section: is this the service spec (service-api.md)?');
  const end = text.indexOf('\n## ', start + 5);
  let section = '';
  let prefix = '';
  for (const line of text.slice(start, end === -1 ? undefined : end).split('\n')) {
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

async function refresh(specFile: string | undefined): Promise<number> {
  if (!specFile) {
    process.stderr.write('usage: node --import tsx scripts/spec-endpoints.ts PATH/TO/service-api.md\n');
    return 2;
  }
  const list = specEndpoints(await readFile(specFile, 'utf8'));
  if (list.length === 0) throw new Error(`${specFile}: the Endpoints section lists no endpoint`);
  await writeFile(SPEC_ENDPOINTS_FIXTURE, `[\n${list.map((e) => `  ${JSON.stringify(e)}`).join(',\n')}\n]\n`);
  process.stdout.write(`${list.length} endpoints written to test/fixtures/spec/endpoints.json\n`);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await refresh(process.argv[2]);
}
