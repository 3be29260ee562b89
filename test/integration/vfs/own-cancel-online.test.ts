/**
 * A call the gateway calls off itself (an upload cancelled because the file changed) is not an outage:
 * the library stays online. A service that does not answer still takes it offline.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../../src/api/client.js';
import { LibraryRemote } from '../../../src/remote/library-remote.js';
import { Connectivity, ReportingRemote } from '../../../src/vfs/connectivity.js';
import { startTestService, type TestService } from '../../support/service.js';

let t: TestService;
let dir: string;

beforeAll(async () => {
  t = await startTestService();
  dir = await mkdtemp(join(tmpdir(), 'cloudlib-own-cancel-'));
});

afterAll(async () => {
  await t?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('connectivity and the gateway\'s own cancels', () => {
  it('an upload aborted by the gateway mid-way leaves the library online', async () => {
    const link = new Connectivity();
    const remote = new ReportingRemote(new LibraryRemote({ client: t.client }), 'A', link);
    const bytes = Buffer.alloc(24 << 20, 7);
    const path = join(dir, 'big.bin');
    await writeFile(path, bytes);
    const sha1 = createHash('sha1').update(bytes).digest('hex');
    const cancel = new AbortController();
    const upload = remote.commit('big.bin', { path, size: bytes.length, sha1 }, {
      signal: cancel.signal,
      // The file changed: the write-back calls the upload off once bytes are on their way.
      onProgress: (sent, total) => { if (sent > 0 && sent < total) cancel.abort(new Error('upload cancelled: the file changed')); },
    });
    await expect(upload).rejects.toThrow();
    expect(cancel.signal.aborted).toBe(true);
    expect(link.of('A').online).toBe(true);
    // And one already called off before it starts.
    await expect(remote.list('', { signal: AbortSignal.abort(new Error('no one waits')) })).rejects.toThrow();
    expect(link.online('A')).toBe(true);
  });

  it('a service that cannot be reached still takes the library offline', async () => {
    const link = new Connectivity();
    const c = t.service.credentials.library;
    // A port nothing listens on: the closed service of a moment ago.
    const gone = await startTestService();
    const goneUrl = gone.service.baseUrl;
    await gone.close();
    const client = new ServiceClient({ baseUrl: goneUrl, credentials: { library: { org_client_id: c.org_client_id, org_client_secret: c.org_client_secret } }, retries: 0 });
    const remote = new ReportingRemote(new LibraryRemote({ client }), 'A', link);
    await expect(remote.list('')).rejects.toThrow();
    expect(link.online('A')).toBe(false);
    await client.close();
  });
});
