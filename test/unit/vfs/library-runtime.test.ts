import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatewayVfs } from '../../../src/vfs/gateway-vfs.js';
import { MemoryRemote } from '../../../src/vfs/memory-remote.js';
import { FaultyRemote } from '../../../src/vfs/faulty-remote.js';
import { UploadJournal } from '../../../src/vfs/write-back/upload-journal.js';
import { silentLogger } from '../../../src/shared/log.js';
import { vfsCode } from '../../support/vfs.js';

const dirs: string[] = [];
const open: GatewayVfs[] = [];
afterEach(async () => {
  for (const v of open.splice(0)) await v.close();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function gateway(libraries: { name: string; id: string; remote: MemoryRemote | FaultyRemote }[], dataDir?: string): Promise<GatewayVfs> {
  const dir = dataDir ?? (await mkdtemp(join(tmpdir(), 'libs-')));
  if (!dataDir) dirs.push(dir);
  const vfs = await GatewayVfs.open({ libraries, dataDir: dir, feedIntervalMs: 0, logger: silentLogger, upload: { retryBaseMs: 10, retryMaxMs: 50 } });
  open.push(vfs);
  return vfs;
}

describe('libraries added and removed at run time', { timeout: 15_000 }, () => {
  it('an added library appears as a root folder and serves its files', async () => {
    const vfs = await gateway([{ name: 'A', id: '1', remote: new MemoryRemote({ name: 'A', id: '1' }) }]);
    const b = new MemoryRemote({ name: 'B', id: '2' });
    b.putFile('doc.txt', Buffer.from('from B'));
    await vfs.addLibrary({ name: 'B', id: '2', remote: b });
    expect((await vfs.readdir('/')).map((a) => a.name)).toEqual(['A', 'B']);
    expect((await vfs.stat('/B/doc.txt')).size).toBe(6);
  });

  it('a second library of the same folder name is refused (EEXIST) and nothing changes', async () => {
    const vfs = await gateway([{ name: 'A', id: '1', remote: new MemoryRemote() }]);
    expect(await vfsCode(vfs.addLibrary({ name: 'A', id: '9', remote: new MemoryRemote() }))).toBe('EEXIST');
    expect(vfs.libraryNames()).toEqual(['A']);
  });

  it('a removed library disappears; the service keeps its data', async () => {
    const b = new MemoryRemote({ name: 'B', id: '2' });
    const vfs = await gateway([{ name: 'A', id: '1', remote: new MemoryRemote() }, { name: 'B', id: '2', remote: b }]);
    await vfs.writeFile('/B/kept.txt', Buffer.from('x'));
    await vfs.flushAll();
    await vfs.removeLibrary('B');
    expect(vfs.libraryNames()).toEqual(['A']);
    expect(await vfsCode(vfs.stat('/B/kept.txt'))).toBe('ENOENT');
    expect(b.read('kept.txt').toString()).toBe('x');
    expect(await vfsCode(vfs.removeLibrary('B'))).toBe('ENOENT');
  });

  it('removal is refused (EBUSY) while the library has a pending upload', async () => {
    const inner = new MemoryRemote({ name: 'B', id: '2' });
    const down = new FaultyRemote(inner);
    const stopFailing = down.inject({ kind: 'fail', methods: ['commit'] });
    const vfs = await gateway([{ name: 'B', id: '2', remote: down }]);
    await vfs.writeFile('/B/pending.txt', Buffer.from('not yet'));
    expect(await vfsCode(vfs.removeLibrary('B'))).toBe('EBUSY');
    expect(vfs.libraryNames()).toEqual(['B']);
    stopFailing();
    await vfs.flushAll();
  });

  it('journal entries kept for a library not configured are uploaded once it is added', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'libs-'));
    dirs.push(dataDir);
    const journal = new UploadJournal(join(dataDir, 'journal'));
    await journal.init();
    const id = journal.newId();
    await writeFile(journal.spoolPath(id), 'kept bytes');
    await journal.put({ id, library: 'Late', fullpath: 'f.txt', size: 10, mtimeMs: 1, createdMs: 1 });
    const vfs = await gateway([{ name: 'A', id: '1', remote: new MemoryRemote() }], dataDir);
    expect(vfs.status().stranded).toHaveLength(1);
    const late = new MemoryRemote({ name: 'Late', id: '3' });
    await vfs.addLibrary({ name: 'Late', id: '3', remote: late });
    await vfs.flushAll();
    expect(late.read('f.txt').toString()).toBe('kept bytes');
    expect(vfs.status().stranded).toEqual([]);
  });

  it('dropCaches forgets metadata and blocks: the next read asks the service', async () => {
    const a = new MemoryRemote({ name: 'A', id: '1' });
    a.putFile('f.txt', Buffer.from('one'));
    const vfs = await gateway([{ name: 'A', id: '1', remote: a }]);
    await vfs.stat('/A/f.txt');
    const before = vfs.status().metadata.entries;
    expect(before).toBeGreaterThan(0);
    vfs.dropCaches();
    expect(vfs.status().metadata.entries).toBe(0);
    expect(vfs.status().blocks.blocks).toBe(0);
    a.putFile('f.txt', Buffer.from('three'));
    expect((await vfs.stat('/A/f.txt')).size).toBe(5);
  });
});
