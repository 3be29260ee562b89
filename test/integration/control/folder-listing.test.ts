/**
 * `ls` over the control socket, on a gateway core over memory libraries: a folder as the gateway serves
 * it, each file with its state, following a file from pending to synced to locked.
 */
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryVfs, type GatewayVfs } from '../../../src/vfs/index.js';
import { ControlServer } from '../../../src/control/server.js';
import { ControlClient, ControlCallError } from '../../../src/control/client.js';
import { folderListingMethod } from '../../../src/control/folder-listing.js';
import { renderListing } from '../../../src/cli/ctl-output.js';

let dir: string;
let vfs: GatewayVfs;
let server: ControlServer;
let client: ControlClient;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ctl-ls-'));
  // Uploads wait for a flush: a file written is pending until then.
  ({ vfs } = await createMemoryVfs({ names: ['A'], upload: { delayMs: 600_000, retryBaseMs: 20, retryMaxMs: 100 } }));
  const target = { vfs, libraries: () => vfs.libraryNames().map((name) => ({ name, client: undefined as never })) };
  server = new ControlServer({ socketPath: join(dir, 'control.sock'), methods: [folderListingMethod(target)] });
  await server.start();
  client = await ControlClient.connect(server.socketPath);
});

afterEach(async () => {
  client.close();
  await server.close();
  await vfs.close();
  await rm(dir, { recursive: true, force: true });
});

type Listing = { path: string; entries: { name: string; type: string; state?: string }[] };

describe('ctl ls', { timeout: 20_000 }, () => {
  it('shows each file\'s state: pending, then synced, then locked-by who locked it; folders have none', async () => {
    await vfs.mkdir('/A/docs');
    await vfs.writeFile('/A/docs/f.txt', Buffer.from('content'));
    const states = async (): Promise<[string, string | undefined][]> => ((await client.call('ls', { path: '/A/docs' })) as Listing).entries.map((e) => [e.name, e.state]);
    expect(await states()).toEqual([['f.txt', 'pending']]);
    await vfs.flushAll();
    expect(await states()).toEqual([['f.txt', 'synced']]);
    await vfs.setLocked('/A/docs/f.txt', true, { operator: { opName: 'alice' } });
    expect(await states()).toEqual([['f.txt', 'locked-by alice']]);
    const root = (await client.call('ls', { path: '/A' })) as Listing;
    expect(root.entries.map((e) => [e.name, e.type, e.state])).toEqual([['docs', 'folder', undefined]]);
    expect((await client.call('ls', { path: '/A/docs/f.txt' }) as Listing).entries.map((e) => e.name)).toEqual(['f.txt']);
    const shown = renderListing(await client.call('ls', { path: '/A/docs' }));
    expect(shown.split('\n')[0]).toMatch(/^NAME\s+SIZE\s+MODIFIED\s+STATE$/);
    expect(shown).toMatch(/f\.txt\s+7 B\s+\S+ \S+\s+locked-by alice/);
  });

  it('refuses a path that is not a served library\'s, and a missing one, with nothing changed', async () => {
    const err = await client.call('ls', { path: 'A/docs' }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ControlCallError);
    expect((await client.call('ls', { path: '/Nope' }).then(() => undefined, (e: unknown) => e) as ControlCallError).message).toContain("no library 'Nope'");
    expect((await client.call('ls', { path: '/A/missing' }).then(() => undefined, (e: unknown) => e) as ControlCallError).message).toContain('ENOENT');
  });
});
