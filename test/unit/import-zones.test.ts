/**
 * The house's rules as lint rules (eslint.config.js): a wrong arrow between folders of src/, a folder
 * without a zone, an import hidden behind a computed specifier, and a unit or integration test importing
 * from test/e2e/ each fail the lint; the allowed arrows pass. Linted as text at paths of this repository.
 */
import { describe, expect, it } from 'vitest';
import { ESLint } from 'eslint';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const eslint = new ESLint({ cwd: root });

async function messages(path: string, text: string): Promise<string[]> {
  const [result] = await eslint.lintText(text, { filePath: `${root}${path}` });
  return result!.messages.filter((m) => m.ruleId?.startsWith('house/')).map((m) => m.message);
}

describe('import zones and test layers', { timeout: 60_000 }, () => {
  it('a wrong arrow fails; the allowed ones pass', async () => {
    expect(await messages('src/vfs/zone-probe.ts', "import { ServiceClient } from '../api/client.js';\nexport const x = ServiceClient;\n"))
      .toEqual(['src/vfs/ may not import src/api/client.ts (import zones: docs/architecture.md)']);
    expect(await messages('src/api/zone-probe.ts', "export type X = typeof import('../vfs/types.js');\n"))
      .toEqual(['src/api/ may not import src/vfs/types.ts (import zones: docs/architecture.md)']);
    expect(await messages('src/webdav/zone-probe.ts', "import { GatewayVfs } from '../vfs/gateway-vfs.js';\nexport const x = GatewayVfs;\n"))
      .toEqual(['src/webdav/ may not import src/vfs/gateway-vfs.ts (import zones: docs/architecture.md)']);
    expect(await messages('src/gateway/zone-probe.ts', "import { upCommand } from '../cli/up.js';\nexport const x = upCommand;\n"))
      .toEqual(['src/gateway/ may not import src/cli/up.ts (import zones: docs/architecture.md)']);
    expect(await messages('src/remote/zone-probe.ts', "import { ServiceClient } from '../api/client.js';\nimport type { Remote } from '../vfs/remote.js';\nexport type X = [ServiceClient, Remote];\n")).toEqual([]);
    expect(await messages('src/gateway/zone-probe.ts', "export const load = () => import('../service/index.js');\n")).toEqual([]);
  });

  it('only the FUSE front end and the Vfs import the engine lease; the write-back only through its entry', async () => {
    const lease = "import type { EngineLease } from '../vfs/engine-lease.js';\nexport type X = EngineLease;\n";
    expect(await messages('src/webdav/zone-probe.ts', lease)).toEqual(['src/webdav/ may not import src/vfs/engine-lease.ts (import zones: docs/architecture.md)']);
    expect(await messages('src/control/zone-probe.ts', lease)).toEqual(['src/control/ may not import src/vfs/engine-lease.ts (import zones: docs/architecture.md)']);
    expect(await messages('src/gateway/zone-probe.ts', lease))
      .toEqual(["src/gateway/ may not import src/vfs/engine-lease.ts: only the engine's lessee (src/fuse/) uses the lease (docs/architecture.md)"]);
    expect(await messages('src/fuse/zone-probe.ts', lease)).toEqual([]);
    expect(await messages('src/vfs/zone-probe.ts', "import { WriteBack } from './write-back/write-back.js';\nexport const x = WriteBack;\n"))
      .toEqual(['src/vfs/write-back/write-back.ts is inside the write-back: import src/vfs/write-back/index.ts (docs/architecture.md)']);
    expect(await messages('src/vfs/zone-probe.ts', "import { WriteBack } from './write-back/index.js';\nexport const x = WriteBack;\n")).toEqual([]);
  });

  it('a folder of src/ without a zone, and an import with a computed specifier, fail', async () => {
    expect(await messages('src/newfolder/zone-probe.ts', 'export const x = 1;\n'))
      .toEqual(['src/newfolder/ has no import zone (eslint.config.js, docs/architecture.md)']);
    expect(await messages('src/gateway/zone-probe.ts', "const where = '../service/index.js';\nexport const load = () => import(where);\n"))
      .toEqual(['import() of a computed specifier: write the path literally (typed by typeof import(…)) so the type checker and the import zones see it']);
  });

  it('unit and integration tests do not import from test/e2e/', async () => {
    expect(await messages('test/unit/layer-probe.test.ts', "import { x } from '../e2e/fuse/mount-child.js';\nexport const y = x;\n"))
      .toEqual(['test/unit/ may not import test/e2e/ (move the helper to test/support/)']);
    expect(await messages('test/integration/layer-probe.test.ts', "import { x } from '../support/vfs.js';\nexport const y = x;\n")).toEqual([]);
  });
});
