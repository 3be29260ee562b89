/**
 * The state of a file as the extended attribute `user.cloudlib.state` of the FUSE mount, over the
 * gateway's Vfs and a real embedded service (in the mount's child process): it follows a file from
 * pending to synced, and to locked-by when it is locked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sh, startMount, type MountHarness } from './harness.js';

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
});
