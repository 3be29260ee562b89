/** The shared drive scenarios through the Vfs in-process (file handles, as a program would) over the embedded service. */
import { afterAll, beforeAll } from 'vitest';
import { startTestVfs, vfsCode, type TestVfs } from '../../support/vfs.js';
import { driveScenarios, serviceReader, type Drive } from '../../support/drive-scenarios.js';
import type { FaultyRemote } from '../../../src/vfs/index.js';

let t: TestVfs;
beforeAll(async () => { t = await startTestVfs({ faults: true }); });
afterAll(async () => { await t?.close(); });

const at = (path: string): string => `/Library/${path}`;

driveScenarios('the Vfs', (): Drive => ({
  name: '/Library',
  write: async (path, data) => {
    const h = await t.vfs.open(at(path), { write: true, create: true, truncate: true });
    try {
      if (data.length > 0) await h.write(0, data);
    } finally {
      await h.release();
    }
  },
  truncateThenWrite: async (path, data) => {
    const h = await t.vfs.open(at(path), { write: true, truncate: true });
    try {
      await h.flush();
      await h.write(0, data);
    } finally {
      await h.release();
    }
  },
  read: async (path) => {
    const h = await t.vfs.open(at(path), { read: true });
    try {
      return await h.read(0, (await h.stat()).size + 1);
    } finally {
      await h.release();
    }
  },
  list: async () => (await t.vfs.readdir('/Library')).map((a) => a.name),
  mtimeMs: async (path) => (await t.vfs.stat(at(path))).mtimeMs,
  flush: () => t.vfs.flushAll(),
  settle: () => t.vfs.refresh(),
  refusedWrite: (path, data) => vfsCode(t.vfs.writeFile(at(path), data)),
  lockedError: 'ELOCKED',
  service: {
    ...serviceReader(() => t.client),
    lockElsewhere: (path, locked) => t.vfs.setLocked(at(path), locked, { lockHolder: 'webdav' }),
    offline: async (on) => {
      const faulty = t.vfs.remoteOf('Library') as FaultyRemote;
      if (on) faulty.down(3_600_000);
      else faulty.heal();
      await t.vfs.refresh();
    },
  },
}));
