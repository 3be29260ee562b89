/**
 * Read-only opens answered with a content cache file (passthrough-files.ts, LeasedHandle.localFile),
 * driven without a kernel: a recording stand-in for the native binding (RecordingBinding), passthrough
 * granted, over the in-memory Vfs whose read handles are granted a file. The grant ends with the last
 * handle opened with it (or the session), a write open meanwhile is refused with EBUSY, and a refused
 * backing file leaves the open answered as before.
 */
import { describe, expect, it } from 'vitest';
import { Op } from '../../../../src/fuse/engine/binding.js';
import { LowLevelMount } from '../../../../src/fuse/engine/lowlevel-mount.js';
import { DEFAULT_DEADLINES, FuseOperations } from '../../../../src/fuse/operations.js';
import { silentLogger } from '../../../../src/shared/log.js';
import type { CacheFileGrant, LeasedHandle } from '../../../../src/vfs/engine-lease.js';
import type { OpenFlags } from '../../../../src/vfs/types.js';
import { MemoryVfs } from '../../../support/memory-vfs.js';
import { RecordingBinding } from '../../../support/recording-fuse-binding.js';

const CACHE_FD = 99;
const BACKING_ID = 7;

function setup(backingOpen: number = BACKING_ID) {
  const vfs = new MemoryVfs(['Lib']);
  // Read handles of the in-memory Vfs are granted a file; each grant's end is counted.
  const grants = { given: 0, ended: 0 };
  const open = vfs.open.bind(vfs);
  vfs.open = async (path: string, flags: OpenFlags) => {
    const handle = await open(path, flags) as LeasedHandle;
    if (!flags.write && !flags.create && !flags.truncate && !flags.append) {
      handle.localFile = async (): Promise<CacheFileGrant> => {
        grants.given++;
        let ended = false;
        return { fd: CACHE_FD, content: 'c1', end: () => { if (!ended) { ended = true; grants.ended++; } } };
      };
    }
    return handle;
  };
  const operations = new FuseOperations({ vfs, ownership: { uid: 1000, gid: 100, umask: 0o022, readOnly: false }, deadlines: DEFAULT_DEADLINES, logger: silentLogger });
  const registered: number[] = [];
  const closed: number[] = [];
  const kernel = new RecordingBinding({
    passthrough: true,
    overrides: {
      backingOpen: (_s, fd) => {
        registered.push(fd);
        return backingOpen;
      },
      backingClose: (_s, id) => {
        closed.push(id);
        return 0;
      },
      attrLive: () => { throw new Error('attrLive: not expected here'); },
    },
  });
  const send = kernel.send;
  const mount = new LowLevelMount({ binding: kernel.binding, operations, mountpoint: '/unused', mountOptions: [], settings: { maxWrite: 1, maxReadahead: 1, maxBackground: 1, congestionThreshold: 1, writeback: 0, asyncRead: 1, readers: 1, passthrough: 1 }, attrTimeoutS: 1, logger: silentLogger });
  mount.mount();
  kernel.init(0);
  const fileIno = async (): Promise<number> => {
    const lib = await send({ op: Op.LOOKUP, ino: 1, name: 'Lib' });
    const f = await send({ op: Op.LOOKUP, ino: (lib.args[0] as number[])[0]!, name: 'f.txt' });
    return (f.args[0] as number[])[0]!;
  };
  return { vfs, mount, send, grants, registered, closed, fileIno };
}

describe('read-only opens answered with a cache file', () => {
  it('the first read-only open is handed the granted file; another shares it; a write open meanwhile is EBUSY; the last release ends the grant', async () => {
    const { vfs, mount, send, grants, registered, closed, fileIno } = setup();
    await vfs.writeFile('/Lib/f.txt', Buffer.from('cached'));
    const ino = await fileIno();
    const a = await send({ op: Op.OPEN, ino, flags: 0 });
    expect(a.kind).toBe('openBacking');
    expect(a.args[1]).toBe(BACKING_ID);
    expect(registered).toEqual([CACHE_FD]);
    const b = await send({ op: Op.OPEN, ino, flags: 0 });
    expect([b.kind, b.args[1]]).toEqual(['openBacking', BACKING_ID]);
    expect(grants.given).toBe(1); // shared: one grant, one backing file
    const w = await send({ op: Op.OPEN, ino, flags: 0o2 });
    expect([w.kind, w.args[0]]).toEqual(['err', 16]);
    expect(mount.counters).toMatchObject({ passthroughReads: 1, passthroughOpens: 2 });
    await send({ op: Op.RELEASE, ino, fh: a.args[0] as number });
    expect([grants.ended, closed]).toEqual([0, []]);
    await send({ op: Op.RELEASE, ino, fh: b.args[0] as number });
    expect([grants.ended, closed]).toEqual([1, [BACKING_ID]]);
    // Nothing handed over now: a write open is answered as before.
    expect((await send({ op: Op.OPEN, ino, flags: 0o2 })).kind).toBe('open');
  });

  it('the session ending ends the grants still held', async () => {
    const { vfs, mount, send, grants, fileIno } = setup();
    await vfs.writeFile('/Lib/f.txt', Buffer.from('cached'));
    const ino = await fileIno();
    expect((await send({ op: Op.OPEN, ino, flags: 0 })).kind).toBe('openBacking');
    mount.destroy();
    expect(grants).toEqual({ given: 1, ended: 1 });
  });

  it('a backing file the kernel refuses: the open is answered as before and the grant ends', async () => {
    const { vfs, send, grants, fileIno } = setup(-22);
    await vfs.writeFile('/Lib/f.txt', Buffer.from('cached'));
    const ino = await fileIno();
    const a = await send({ op: Op.OPEN, ino, flags: 0 });
    expect(a.kind).toBe('open');
    expect(grants).toEqual({ given: 1, ended: 1 });
    expect((await send({ op: Op.OPEN, ino, flags: 0o2 })).kind).toBe('open');
  });
});
