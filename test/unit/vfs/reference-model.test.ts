/**
 * Reference-model property test: random sequences of create/write/rename/delete/mkdir (and changes made
 * by another client behind the gateway's back) applied to the Vfs and to a plain in-memory model give
 * the same errors, the same tree and the same bytes — through the Vfs, and on the service once flushed.
 */
import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { createMemoryVfs, VfsError, type GatewayVfs, type MemoryRemote } from '../../../src/vfs/index.js';

type Node = { dir: true } | { dir: false; data: Buffer };
type Model = Map<string, Node>; // gateway path → node (libraries /A and /B always exist)

const LIBS = ['A', 'B'];
const NAMES = ['a', 'b'];

type Op =
  | { op: 'mkdir'; path: string }
  | { op: 'write'; path: string; data: Uint8Array }
  | { op: 'patch'; path: string; offset: number; data: Uint8Array }
  | { op: 'truncate'; path: string; size: number }
  | { op: 'unlink'; path: string }
  | { op: 'rmdir'; path: string }
  | { op: 'rename'; from: string; to: string }
  | { op: 'behind'; path: string; data: Uint8Array };

const pathArb = fc.tuple(fc.constantFrom(...LIBS), fc.array(fc.constantFrom(...NAMES), { minLength: 1, maxLength: 2 }))
  .map(([lib, parts]) => `/${lib}/${parts.join('/')}`);
const dataArb = fc.uint8Array({ maxLength: 2000 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant('mkdir' as const), path: pathArb }),
  fc.record({ op: fc.constant('write' as const), path: pathArb, data: dataArb }),
  fc.record({ op: fc.constant('patch' as const), path: pathArb, offset: fc.nat(3000), data: fc.uint8Array({ minLength: 1, maxLength: 500 }) }),
  fc.record({ op: fc.constant('truncate' as const), path: pathArb, size: fc.nat(2500) }),
  fc.record({ op: fc.constant('unlink' as const), path: pathArb }),
  fc.record({ op: fc.constant('rmdir' as const), path: pathArb }),
  fc.record({ op: fc.constant('rename' as const), from: pathArb, to: pathArb }),
  fc.record({ op: fc.constant('behind' as const), path: pathArb, data: dataArb }),
);

function parent(p: string): string {
  return p.slice(0, p.lastIndexOf('/'));
}
function isLib(p: string): boolean {
  return p.split('/').length === 2;
}
function within(p: string, a: string): boolean {
  return p === a || p.startsWith(`${a}/`);
}
function get(m: Model, p: string): Node | undefined {
  return isLib(p) ? { dir: true } : m.get(p);
}
function needFolder(m: Model, p: string): void {
  const n = get(m, p);
  if (!n) throw new VfsError('ENOENT', p);
  if (!n.dir) throw new VfsError('ENOTDIR', p);
}
function children(m: Model, p: string): string[] {
  return [...m.keys()].filter((k) => parent(k) === p);
}
/** The model's answer: mutates `m`, throws VfsError like POSIX would. */
function applyModel(m: Model, o: Op): void {
  switch (o.op) {
    case 'mkdir':
      if (get(m, o.path)) throw new VfsError('EEXIST', o.path);
      needFolder(m, parent(o.path));
      m.set(o.path, { dir: true });
      return;
    case 'write': {
      const n = get(m, o.path);
      if (n?.dir) throw new VfsError('EISDIR', o.path);
      if (!n) needFolder(m, parent(o.path));
      m.set(o.path, { dir: false, data: Buffer.from(o.data) });
      return;
    }
    case 'patch':
    case 'truncate': {
      const n = get(m, o.path);
      if (!n) throw new VfsError('ENOENT', o.path);
      if (n.dir) throw new VfsError('EISDIR', o.path);
      if (o.op === 'truncate') {
        const out = Buffer.alloc(o.size);
        n.data.copy(out, 0, 0, Math.min(o.size, n.data.length));
        n.data = out;
        return;
      }
      const out = Buffer.alloc(Math.max(n.data.length, o.offset + o.data.length));
      n.data.copy(out);
      Buffer.from(o.data).copy(out, o.offset);
      n.data = out;
      return;
    }
    case 'unlink': {
      const n = get(m, o.path);
      if (!n) throw new VfsError('ENOENT', o.path);
      if (n.dir) throw new VfsError('EISDIR', o.path);
      m.delete(o.path);
      return;
    }
    case 'rmdir': {
      const n = get(m, o.path);
      if (!n) throw new VfsError('ENOENT', o.path);
      if (!n.dir) throw new VfsError('ENOTDIR', o.path);
      if (children(m, o.path).length > 0) throw new VfsError('ENOTEMPTY', o.path);
      m.delete(o.path);
      return;
    }
    case 'rename': {
      if (o.from === o.to) return;
      const src = get(m, o.from);
      if (!src) throw new VfsError('ENOENT', o.from);
      if (src.dir && within(o.to, o.from)) throw new VfsError('EINVAL', o.to);
      needFolder(m, parent(o.to));
      const dst = get(m, o.to);
      if (dst) {
        if (src.dir && !dst.dir) throw new VfsError('ENOTDIR', o.to);
        if (!src.dir && dst.dir) throw new VfsError('EISDIR', o.to);
        if (dst.dir && children(m, o.to).length > 0) throw new VfsError('ENOTEMPTY', o.to);
        m.delete(o.to);
      }
      for (const k of [...m.keys()].filter((k) => within(k, o.from)).sort()) {
        const n = m.get(k)!;
        m.delete(k);
        m.set(o.to + k.slice(o.from.length), n);
      }
      return;
    }
    case 'behind': {
      // Another client writes a file where that is possible; otherwise nothing happens.
      const n = get(m, o.path);
      const p = get(m, parent(o.path));
      if (n?.dir || !p?.dir) return;
      m.set(o.path, { dir: false, data: Buffer.from(o.data) });
      return;
    }
  }
}

/** What the last patch/truncate read back through its handle. */
let readBack: Buffer | undefined;

async function applyVfs(vfs: GatewayVfs, remotes: Map<string, MemoryRemote>, o: Op): Promise<void> {
  switch (o.op) {
    case 'mkdir': await vfs.mkdir(o.path); return;
    case 'write': await vfs.writeFile(o.path, Buffer.from(o.data)); return;
    case 'patch':
    case 'truncate': {
      const h = await vfs.open(o.path, { read: true, write: true });
      try {
        if (o.op === 'patch') await h.write(o.offset, Buffer.from(o.data));
        else await h.truncate(o.size);
        // Read back through the same handle, before the commit (sparse local copies fetch what is missing).
        const size = (await h.stat()).size;
        readBack = Buffer.concat([await h.read(0, Math.floor(size / 2)), await h.read(Math.floor(size / 2), size)]);
      } finally {
        await h.release();
      }
      return;
    }
    case 'unlink': await vfs.unlink(o.path); return;
    case 'rmdir': await vfs.rmdir(o.path); return;
    case 'rename': await vfs.rename(o.from, o.to); return;
    case 'behind': {
      // Pending local uploads win over another client's write; flush first so the model stays simple.
      await vfs.flushAll();
      const [, lib, ...rest] = o.path.split('/');
      try {
        remotes.get(lib)!.putFile(rest.join('/'), Buffer.from(o.data));
      } catch {
        return;
      }
      await vfs.refresh();
      return;
    }
  }
}

async function outcome(f: () => Promise<void> | void): Promise<string> {
  try {
    await f();
    return 'ok';
  } catch (err) {
    if (err instanceof VfsError) return err.code;
    throw err;
  }
}

async function vfsTree(vfs: GatewayVfs): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (p: string): Promise<void> => {
    for (const a of await vfs.readdir(p)) {
      if (a.isDir) {
        out[a.path] = 'dir';
        await walk(a.path);
      } else {
        const h = await vfs.open(a.path, { read: true });
        out[a.path] = (await h.read(0, a.size + 1)).toString('hex');
        expect((await h.stat()).size).toBe(a.size);
        await h.release();
      }
    }
  };
  for (const lib of LIBS) await walk(`/${lib}`);
  return out;
}

function modelTree(m: Model): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, n] of m) out[k] = n.dir ? 'dir' : n.data.toString('hex');
  return out;
}

describe('Vfs against a reference model', () => {
  it('random operation sequences give the same errors, tree and bytes', { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 25 }), fc.boolean(), async (ops, onDemand) => {
        // Half of the runs fetch existing content on demand in small chunks (sparse local copies).
        const partialFetch = onDemand ? { wholeMaxBytes: 0, chunkBytes: 256 } : undefined;
        const { vfs, remotes } = await createMemoryVfs({ names: LIBS, feedIntervalMs: 60_000, partialFetch });
        try {
          const model: Model = new Map();
          for (const o of ops) {
            const expected = await outcome(() => applyModel(model, o));
            const got = await outcome(() => applyVfs(vfs, remotes, o));
            expect(got, JSON.stringify({ op: o.op, path: 'path' in o ? o.path : `${o.from} -> ${o.to}` })).toBe(expected);
            if (got === 'ok' && (o.op === 'patch' || o.op === 'truncate')) {
              const n = model.get(o.path);
              expect(n && !n.dir ? readBack?.equals(n.data) : false).toBe(true);
            }
          }
          expect(await vfsTree(vfs)).toEqual(modelTree(model));
          await vfs.flushAll();
          // On the service: the same paths and bytes.
          const onService: Record<string, string> = {};
          for (const [lib, r] of remotes) {
            for (const p of r.paths()) {
              const e = await r.stat(p);
              onService[`/${lib}/${p}`] = e!.isDir ? 'dir' : r.read(p).toString('hex');
            }
          }
          expect(onService).toEqual(modelTree(model));
        } finally {
          await vfs.close();
        }
      }),
      { numRuns: 150 },
    );
  });
});
