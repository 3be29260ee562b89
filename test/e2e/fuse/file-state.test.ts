/**
 * The state of a file as the extended attribute `user.cloudlib.state` of the FUSE mount, over the
 * gateway's Vfs and a real embedded service (in the mount's child process): it follows a file from
 * pending to synced, and to locked-by when it is locked; and into conflict, with its copy (also as
 * WebDAV's `state` property over the same Vfs), when it is changed through the service's API while
 * edited on the mount, until the copy is removed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, readdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sh, startMount, type MountHarness } from './harness.js';
import { CLOUDLIB_NS } from '../../../src/webdav/properties.js';

const T = 90_000;

describe('file state through the FUSE mount', () => {
  let h: MountHarness;
  let lib: string;
  /** Runs a Python snippet on `path` (sys.argv[1]); its output. */
  const py = async (code: string, path: string): Promise<string> => (await sh('python3', ['-c', code, path])).stdout.trim();
  const state = (path: string): Promise<string> => py(`import os,sys\ntry:\n  print(os.getxattr(sys.argv[1], 'user.cloudlib.state').decode())\nexcept OSError as e: print('errno', e.errno)`, path);

  beforeAll(async () => {
    // Uploads wait for a flush: a file written is pending until then.
    h = await startMount({ mount: { attrTimeoutS: 1 }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_UPLOAD_DELAY_MS: '600000' } });
    lib = join(h.mnt, 'Lib');
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('user.cloudlib.state follows a file from pending to synced to locked-by; read-only; folders have none', async () => {
    await mkdir(join(lib, 'st'));
    const f = join(lib, 'st/f.txt');
    await writeFile(f, 'content');
    expect(await state(f)).toBe('pending');
    const names = `import os,sys; print(sorted(os.listxattr(sys.argv[1])))`;
    // Not on the service yet: no tags or lock of its own to list.
    expect(await py(names, f)).toBe("['user.cloudlib.state']");
    await h.call('flushAll');
    expect(await state(f)).toBe('synced');
    expect(await py(names, f)).toBe("['user.cloudlib.lock', 'user.cloudlib.pin', 'user.cloudlib.state', 'user.cloudlib.tags']");
    await py(`import os,sys; os.setxattr(sys.argv[1], 'user.cloudlib.lock', b'1')`, f);
    expect(await state(f)).toBe('locked-by gateway');
    await py(`import os,sys; os.setxattr(sys.argv[1], 'user.cloudlib.lock', b'0')`, f);
    expect(await state(f)).toBe('synced');
    expect(await py(`import os,sys\ntry:\n  os.setxattr(sys.argv[1], 'user.cloudlib.state', b'synced')\nexcept OSError as e: print(e.errno)`, f)).toBe('1');
    expect(await state(join(lib, 'st'))).toBe('errno 61');
  }, T);

  it('user.cloudlib.state shows conflict on a file changed at the service while edited here, and on its copy, until the copy goes', async () => {
    await mkdir(join(lib, 'cf'));
    const f = join(lib, 'cf/report.txt');
    await writeFile(f, 'first version');
    await h.call('flushAll');
    expect(await state(f)).toBe('synced');
    // Edited on the mount (its upload waits), and changed through the service's API meanwhile.
    await writeFile(f, 'edited here');
    expect(await state(f)).toBe('pending');
    await h.call('remoteWrite', { path: '/Lib/cf/report.txt', data: Buffer.from('edited at the service').toString('base64') });
    await h.call('flushAll');
    const names = await readdir(join(lib, 'cf'));
    const copyName = names.find((n) => n.startsWith('report (conflict '));
    expect(names.sort()).toEqual([copyName, 'report.txt']);
    const copy = join(lib, 'cf', copyName!);
    expect(await readFile(f, 'utf8')).toBe('edited here');
    expect(await readFile(copy, 'utf8')).toBe('edited at the service');
    expect(await state(f)).toBe('conflict');
    expect(await state(copy)).toBe('conflict');
    // The same as WebDAV's state property.
    const url = await h.call<string>('serveWebdav');
    const davState = async (path: string): Promise<string | undefined> => {
      const r = await fetch(new URL(path, url), {
        method: 'PROPFIND', body: `<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:C="${CLOUDLIB_NS}"><D:prop><C:state/></D:prop></D:propfind>`,
        headers: { authorization: `Basic ${Buffer.from('alice:secret').toString('base64')}`, depth: '0', 'content-type': 'application/xml' },
      });
      return /<C:state>([^<]*)<\/C:state>/.exec(await r.text())?.[1];
    };
    expect(await davState('Lib/cf/report.txt')).toBe('conflict');
    expect(await davState(`Lib/cf/${encodeURIComponent(copyName!)}`)).toBe('conflict');
    // Dealt with as docs/semantics.md says: once the copy is gone (looked at, removed), the conflict is closed.
    await unlink(copy);
    await h.call('flushAll');
    expect(await state(f)).toBe('synced');
    expect(await davState('Lib/cf/report.txt')).toBe('synced');
  }, T);
});
