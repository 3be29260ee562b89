/**
 * Read-only opens answered with a content cache file (passthrough-files.ts, LeasedHandle.localFile),
 * driven without a kernel: a recording stand-in for the native binding, passthrough granted, over the
 * in-memory Vfs whose read handles are granted a file. The grant ends with the last handle opened with it
 * (or the session), a write open meanwhile is refused with EBUSY, and a refused backing file leaves the
 * open answered as before.
 */
import { describe, expect, it } from 'vitest';
import { Op, type Fuse3Binding, type KernelRequest, type NativeSession } from '../../../../src/fuse/engine/binding.js';
import { LowLevelMount } from '../../../../src/fuse/engine/lowlevel-mount.js';
import { DEFAULT_DEADLINES, FuseOperations } from '../../../../src/fuse/operations.js';
import { silentLogger } from '../../../../src/shared/log.js';
import type { CacheFileGrant, LeasedHandle } from '../../../../src/vfs/engine-lease.js';
import type { OpenFlags } from '../../../../src/vfs/types.js';
import { MemoryVfs } from '../../../support/memory-vfs.js';

interface Reply {
  kind: string;
  args: unknown[];
}

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
  const waiting = new Map<number, (r: Reply) => void>();
  let onBatch: (batch: KernelRequest[]) => void = () => undefined;
  const registered: number[] = [];
  const closed: number[] = [];
  const answer = (kind: string) => (_s: NativeSession, id: number, ...args: unknown[]) => {
    const w = waiting.get(id);
    waiting.delete(id);
    w?.({ kind, args: args.map((a) => (a instanceof Float64Array ? Array.from(a) : a)) });
    return w !== undefined;
  };
  const unexpected = (what: string) => () => { throw new Error(`${what}: not expected here`); };
  const binding = {
    mount: (_m, _o, _s, cb) => {
      onBatch = cb;
      return {} as NativeSession;
    },
    unmount: async () => undefined,
    destroy: () => true,
    replyErr: answer('err'),
    replyEntry: answer('entry'),
    replyNegative: answer('negative'),
    replyAttr: answer('attr'),
    replyOpen: answer('open'),
    replyCreate: answer('create'),
    backingOpen: (_s, fd) => {
      registered.push(fd);
      return backingOpen;
    },
    backingClose: (_s, id) => {
      closed.push(id);
      return 0;
    },
    attrLive: unexpected('attrLive'),
    spoolFolder: () => undefined,
    replyOpenBacking: answer('openBacking'),
    replyCreateBacking: answer('createBacking'),
    replyWrite: answer('write'),
    replyData: (s, id, parts, limit) => answer('data')(s, id, Buffer.concat(parts as Buffer[]).subarray(0, limit)),
    replyFd: unexpected('replyFd'),
    replyDir: (s, id, _size, names) => {
      answer('dir')(s, id, [...names]);
      return names.length;
    },
    replyStatfs: answer('statfs'),
    invalidateEntry: async () => 0,
    invalidateInode: async () => 0,
    notifyDelete: async () => 0,
    attrForget: () => undefined,
    folderNames: () => false,
    namesForget: () => undefined,
    pathsKept: () => true,
    answeredCounts: () => ({ getattr: 0, writes: 0, times: 0, modes: 0, lookups: 0, creates: 0, closes: 0, spoolsMadeAhead: 0 }),
    spoolWritebacks: () => 0,
    spoolSyncs: () => 0,
    transport: () => ({ transport: 'dev', why: 'a recording binding', ringRequests: 0, devRequests: 0, queues: 0, depth: 16, passthrough: true }),
    takeQueued: () => [],
  } as Partial<Fuse3Binding> as Fuse3Binding;
  const mount = new LowLevelMount({ binding, operations, mountpoint: '/unused', mountOptions: [], settings: { maxWrite: 1, maxReadahead: 1, maxBackground: 1, congestionThreshold: 1, writeback: 0, asyncRead: 1, readers: 1, passthrough: 1 }, attrTimeoutS: 1, logger: silentLogger });
  mount.mount();
  onBatch([{ op: Op.INIT, id: 0, ino: 0, writeback: 0, maxWrite: 1 << 20, maxReadahead: 1 << 20, maxBackground: 64 }]);
  let nextId = 1;
  const send = (req: Omit<KernelRequest, 'id'>): Promise<Reply> =>
    new Promise((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve);
      onBatch([{ ...req, id }]);
    });
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
