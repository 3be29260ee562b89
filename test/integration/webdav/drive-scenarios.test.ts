/** The shared drive scenarios through the WebDAV server over the embedded service. */
import { afterAll, beforeAll } from 'vitest';
import type { TestVfs } from '../../support/vfs.js';
import { startDavOverService, type DavOverService } from '../../support/dav-over-service.js';
import { dav } from '../../support/dav-http.js';
import { driveScenarios, serviceReader, type Drive } from '../../support/drive-scenarios.js';
import type { FaultyRemote } from '../../../src/vfs/index.js';

let t: TestVfs;
let url: string;
let d: DavOverService;
beforeAll(async () => {
  d = await startDavOverService({}, { faults: true });
  ({ t, url } = d);
});
afterAll(async () => {
  await d?.close();
});

const at = (path: string): string => `/Library/${path}`;

async function put(path: string, data: Buffer): Promise<number> {
  return (await dav(url, 'PUT', at(path), { body: data })).status;
}

driveScenarios('WebDAV', (): Drive => ({
  name: '/Library',
  write: async (path, data) => {
    const status = await put(path, data);
    if (status !== 201 && status !== 204) throw new Error(`PUT ${path}: ${status}`);
  },
  // A PUT replaces the file whole: there is no emptied state in between.
  truncateThenWrite: async (path, data) => { await put(path, data); },
  read: async (path) => Buffer.from((await dav(url, 'GET', at(path))).body),
  list: async () => {
    const r = await dav(url, 'PROPFIND', '/Library/', { headers: { depth: '1' } });
    const hrefs = [...r.body.matchAll(/href>([^<]+)</gi)].map((m) => decodeURIComponent(m[1]!.replace(/\/$/, '')));
    return hrefs.filter((h) => h !== '/Library').map((h) => h.slice(h.lastIndexOf('/') + 1));
  },
  mtimeMs: async (path) => {
    const r = await dav(url, 'PROPFIND', at(path), { headers: { depth: '0' }, body: '<D:propfind xmlns:D="DAV:"><D:prop><D:getlastmodified/></D:prop></D:propfind>' });
    const m = /getlastmodified>([^<]+)</.exec(r.body);
    if (!m) throw new Error(`no getlastmodified in ${r.body}`);
    return Date.parse(m[1]!);
  },
  flush: () => t.vfs.flushAll(),
  settle: () => t.vfs.refresh(),
  refusedWrite: async (path, data) => String(await put(path, data)),
  lockedError: '423',
  service: {
    ...serviceReader(() => t.client),
    // The mount takes the lock (it holds no WebDAV token).
    lockElsewhere: (path, locked) => t.vfs.setLocked(at(path), locked),
    offline: async (on) => {
      const faulty = t.vfs.remoteOf('Library') as FaultyRemote;
      if (on) faulty.down(3_600_000);
      else faulty.heal();
      await t.vfs.refresh();
    },
  },
}));
