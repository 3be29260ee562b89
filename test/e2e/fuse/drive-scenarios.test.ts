/** The shared drive scenarios through a real FUSE mount (child process) over the embedded service. */
import { afterAll, beforeAll } from 'vitest';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sh, startMount, type MountHarness } from './harness.js';
import { driveScenarios, type Drive } from '../../support/drive-scenarios.js';
import { pause } from '../../support/wait-for.js';

let h: MountHarness;
beforeAll(async () => {
  h = await startMount({ mount: { attrTimeoutS: 1 }, env: { FUSE_TEST_BACKEND: 'service' } });
}, 90_000);
afterAll(async () => {
  await h?.stop();
}, 90_000);

const at = (path: string): string => join(h.mnt, 'Lib', path);
const remote = (path: string): string => `/Lib/${path}`;

driveScenarios('the FUSE mount', (): Drive => ({
  name: '/Lib',
  write: (path, data) => writeFile(at(path), data),
  // The shell's `echo x > file`: open with O_TRUNC, a duplicate descriptor closed (FLUSH) before the write.
  truncateThenWrite: async (path, data) => { await sh('sh', ['-c', `printf '%s' "$1" > "$2"`, 'sh', data.toString(), at(path)]); },
  read: (path) => readFile(at(path)),
  list: () => readdir(join(h.mnt, 'Lib')),
  mtimeMs: async (path) => (await stat(at(path))).mtimeMs,
  flush: async () => { await h.call('flushAll'); },
  // Past the kernel's attribute cache (1 s here).
  // eslint-disable-next-line no-restricted-syntax -- the kernel's cache expires with time; no event marks it
  settle: () => pause(1500),
  refusedWrite: async (path, data) => {
    try {
      await writeFile(at(path), data);
      return 'ok';
    } catch (err) {
      return String((err as NodeJS.ErrnoException).code);
    }
  },
  lockedError: 'EACCES',
  service: {
    read: async (path) => Buffer.from(await h.call<string>('remoteRead', { path: remote(path) }), 'base64'),
    history: (path) => h.call<number[]>('remoteHistory', { path: remote(path) }),
    lockElsewhere: async (path, locked) => { await h.call('lockAs', { path: remote(path), locked, holder: 'webdav' }); },
    writeElsewhere: async (path, data) => { await h.call('remoteWrite', { path: remote(path), data: data.toString('base64') }); },
    list: () => h.call<string[]>('remoteList', { path: '/Lib' }),
    offline: async (on) => { await h.call('faults', { down: on }); },
  },
}), 90_000);
