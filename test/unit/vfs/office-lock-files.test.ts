/**
 * Office and LibreOffice lock files through the Vfs: kept on the gateway, never uploaded, turned into the
 * service lock of their document for their maker; deleting one releases it, and a gateway abandoned with
 * lock files (a crash) releases their locks at its next start. Most tests release at once (no grace);
 * one follows the grace LibreOffice's delete-and-make-again around a save needs.
 */
import { encodeCloseRecord } from '../../../src/vfs/write-back/engine-close-record.js';
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { statSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createVfs, MemoryRemote, type GatewayVfs } from '../../../src/vfs/index.js';
import type { Remote } from '../../../src/vfs/remote.js';
import { VfsError } from '../../../src/vfs/types.js';
import { documentNameOf, isOfficeLockName } from '../../../src/vfs/office-lock-files.js';
import { silentLogger } from '../../../src/shared/log.js';
import { vfsCode } from '../../support/vfs.js';
import { waitFor } from '../../support/wait-for.js';
import { ManualClock } from '../../support/manual-clock.js';

const folders: string[] = [];
const gateways: GatewayVfs[] = [];
afterEach(async () => {
  for (const g of gateways.splice(0)) await g.close();
  for (const f of folders.splice(0)) await rm(f, { recursive: true, force: true });
});

/** A gateway over `remote` (library A), with its own data folder unless given one; deleted lock files release at once unless told. */
async function gateway(remote: Remote, dataDir?: string, opts: { clock?: ManualClock; graceMs?: number } = {}): Promise<{ vfs: GatewayVfs; dataDir: string }> {
  const dir = dataDir ?? (await mkdtemp(join(tmpdir(), 'cloudlib-office-locks-')));
  if (!dataDir) folders.push(dir);
  const vfs = await createVfs({ libraries: [{ name: 'A', remote }], dataDir: dir, feedIntervalMs: 0, logger: silentLogger, officeLockReleaseGraceMs: opts.graceMs ?? 0, ...(opts.clock ? { clock: opts.clock } : {}) });
  gateways.push(vfs);
  return { vfs, dataDir: dir };
}

/** Makes a file through an open handle, as a program through the mount does. */
async function make(vfs: GatewayVfs, path: string, data: string): Promise<void> {
  const h = await vfs.open(path, { write: true, create: true, exclusive: true });
  await h.write(0, Buffer.from(data));
  await h.release();
}

/** A library whose lock calls fail (the service away for them) while `refusing`. */
class LockRefusingRemote extends MemoryRemote {
  refusing = false;
  refused = 0;
  override async lock(fullpath: string, locked: boolean): Promise<void> {
    if (this.refusing) {
      this.refused++;
      throw new VfsError('EIO', 'the service did not answer');
    }
    return super.lock(fullpath, locked);
  }
}

async function readAll(vfs: GatewayVfs, path: string): Promise<string> {
  const h = await vfs.open(path, { read: true });
  try {
    return (await h.read(0, 1024)).toString();
  } finally {
    await h.release();
  }
}

function lockedOnService(remote: MemoryRemote, fullpath: string): Promise<boolean> {
  return remote.stat(fullpath).then((e) => !!e?.locked);
}

describe('office lock file names', () => {
  it('names the document: exact, LibreOffice, and the long names Office shortens', () => {
    expect(isOfficeLockName('~$report.docx')).toBe(true);
    expect(isOfficeLockName('.~lock.report.odt#')).toBe(true);
    expect(isOfficeLockName('~$')).toBe(false);
    expect(isOfficeLockName('.~lock.#')).toBe(false);
    expect(isOfficeLockName('report.docx')).toBe(false);
    const folder = ['report.docx', 'quarterly figures.xlsx', 'minutes.docx', 'x.odt'];
    expect(documentNameOf('~$report.docx', folder)).toBe('report.docx');
    expect(documentNameOf('.~lock.x.odt#', folder)).toBe('x.odt');
    // Word: a long name loses its first two characters to `~$`; one of seven characters loses one.
    expect(documentNameOf('~$arterly figures.xlsx', folder)).toBe('quarterly figures.xlsx');
    expect(documentNameOf('~$nutes.docx', folder)).toBe('minutes.docx');
    expect(documentNameOf('~$inutes.docx', folder)).toBe('minutes.docx');
    expect(documentNameOf('~$other.docx', folder)).toBeUndefined();
    expect(documentNameOf('.~lock.report.docx#', ['x.odt'])).toBeUndefined();
  });
});

describe('office lock files through the Vfs', { timeout: 20_000 }, () => {
  it('a LibreOffice lock file locks its document for its maker until it is deleted; it never reaches the service', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    await remote.mkdir('docs');
    remote.putFile('docs/x.odt', Buffer.from('the document'));
    const { vfs } = await gateway(remote);
    const other = (await gateway(remote)).vfs;
    await make(vfs, '/A/docs/.~lock.x.odt#', 'Ann,host,ann,29.11.2026 05:00,file:///home/ann/.config/libreoffice/4;');
    expect(await lockedOnService(remote, 'docs/x.odt')).toBe(true);
    // Listed and read back in its folder, shown with the document as locked.
    const listed = await vfs.readdir('/A/docs');
    expect(listed.map((a) => a.name).sort()).toEqual(['.~lock.x.odt#', 'x.odt']);
    expect(listed.find((a) => a.name === 'x.odt')?.locked).toBe(true);
    expect((await vfs.stat('/A/docs/.~lock.x.odt#')).size).toBeGreaterThan(0);
    const h = await vfs.open('/A/docs/.~lock.x.odt#', { read: true });
    expect((await h.read(0, 100)).toString()).toMatch(/^Ann,host/);
    await h.release();
    // The maker saves as before; another gateway's writer is refused.
    await vfs.writeFile('/A/docs/x.odt', Buffer.from('saved by its editor'));
    expect(await vfsCode(other.writeFile('/A/docs/x.odt', Buffer.from('another editor')))).toBe('ELOCKED');
    expect(await vfsCode(other.open('/A/docs/x.odt', { write: true }))).toBe('ELOCKED');
    // Deleting the lock file releases the lock.
    await vfs.unlink('/A/docs/.~lock.x.odt#');
    expect(await lockedOnService(remote, 'docs/x.odt')).toBe(false);
    expect(await vfsCode(vfs.stat('/A/docs/.~lock.x.odt#'))).toBe('ENOENT');
    other.dropCaches();
    await other.writeFile('/A/docs/x.odt', Buffer.from('another editor'));
    await vfs.flushAll();
    await other.flushAll();
    expect((await remote.list('docs')).map((e) => e.name)).toEqual(['x.odt']);
    expect(remote.commits.map((c) => c.fullpath).filter((p) => p.includes('~'))).toEqual([]);
  });

  it('an Office lock file of a long name, written by WebDAV: the document is locked for WebDAV\'s callers only', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('quarterly figures.xlsx', Buffer.from('figures'));
    const { vfs } = await gateway(remote);
    const webdav = { lockHolder: 'webdav' };
    await vfs.writeFile('/A/~$arterly figures.xlsx', Buffer.from('Ann'), webdav);
    expect(await lockedOnService(remote, 'quarterly figures.xlsx')).toBe(true);
    expect((await vfs.stat('/A/quarterly figures.xlsx')).lockHolder).toBe('webdav');
    await vfs.writeFile('/A/quarterly figures.xlsx', Buffer.from('saved'), webdav);
    expect(await vfsCode(vfs.writeFile('/A/quarterly figures.xlsx', Buffer.from('the mount')))).toBe('ELOCKED');
    await vfs.unlink('/A/~$arterly figures.xlsx', webdav);
    expect(await lockedOnService(remote, 'quarterly figures.xlsx')).toBe(false);
  });

  it('a save through a temporary file renamed over the document keeps the document locked', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('x.odt', Buffer.from('v1'));
    const { vfs } = await gateway(remote);
    await make(vfs, '/A/.~lock.x.odt#', 'Ann');
    await vfs.flushAll();
    await make(vfs, '/A/lu123.tmp', 'v2');
    await vfs.rename('/A/lu123.tmp', '/A/x.odt');
    await vfs.flushAll();
    expect(remote.read('x.odt').toString()).toBe('v2');
    expect(await lockedOnService(remote, 'x.odt')).toBe(true);
    await vfs.unlink('/A/.~lock.x.odt#');
    expect(await lockedOnService(remote, 'x.odt')).toBe(false);
  });

  it('a lock file deleted and made again within the grace (LibreOffice around a save) keeps the lock throughout; released after the grace, or at a clean close', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('x.odt', Buffer.from('v1'));
    const unlocks: string[] = [];
    const lock = remote.lock.bind(remote);
    remote.lock = async (fullpath: string, locked: boolean) => {
      if (!locked) unlocks.push(fullpath);
      return lock(fullpath, locked);
    };
    const clock = new ManualClock(Date.now());
    const { vfs } = await gateway(remote, undefined, { clock, graceMs: 2000 });
    await make(vfs, '/A/.~lock.x.odt#', 'Ann');
    // As LibreOffice saves: the lock file deleted, a temporary file made, the lock file made again, the
    // temporary file renamed over the document.
    await vfs.unlink('/A/.~lock.x.odt#');
    expect(await lockedOnService(remote, 'x.odt')).toBe(true);
    expect(await vfsCode(vfs.stat('/A/.~lock.x.odt#'))).toBe('ENOENT');
    clock.advance(1000);
    await make(vfs, '/A/lu1.tmp', 'v2');
    await make(vfs, '/A/.~lock.x.odt#', 'Ann');
    await vfs.rename('/A/lu1.tmp', '/A/x.odt');
    await vfs.flushAll();
    clock.advance(10_000);
    expect(remote.read('x.odt').toString()).toBe('v2');
    expect(await lockedOnService(remote, 'x.odt')).toBe(true);
    expect(unlocks).toEqual([]);
    // Closed: released once the grace is over.
    await vfs.unlink('/A/.~lock.x.odt#');
    clock.advance(1999);
    expect(await lockedOnService(remote, 'x.odt')).toBe(true);
    clock.advance(1);
    await waitFor('the lock released once the grace is over', async () => !(await lockedOnService(remote, 'x.odt')));
    expect(unlocks).toEqual(['x.odt']);
    // A folder renamed while a lock file in it waits out its grace: released then, not kept for good.
    await vfs.mkdir('/A/d');
    await vfs.rename('/A/x.odt', '/A/d/x.odt');
    await make(vfs, '/A/d/.~lock.x.odt#', 'Ann');
    expect(await lockedOnService(remote, 'd/x.odt')).toBe(true);
    await vfs.unlink('/A/d/.~lock.x.odt#');
    await vfs.rename('/A/d', '/A/e');
    await vfs.flushAll();
    expect(await lockedOnService(remote, 'e/x.odt')).toBe(false);
    await vfs.rename('/A/e/x.odt', '/A/x.odt');
    // A clean close does not wait for the grace.
    await make(vfs, '/A/.~lock.x.odt#', 'Ann');
    await vfs.unlink('/A/.~lock.x.odt#');
    await vfs.close();
    expect(await lockedOnService(remote, 'x.odt')).toBe(false);
  });

  it('lock files move among lock file names only, and a lock file without its document locks nothing', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('x.odt', Buffer.from('v1'));
    const { vfs } = await gateway(remote);
    await make(vfs, '/A/.~lock.gone.odt#', 'Ann');
    expect(await lockedOnService(remote, 'x.odt')).toBe(false);
    expect(await vfsCode(vfs.rename('/A/.~lock.gone.odt#', '/A/kept.txt'))).toBe('EXDEV');
    expect(await vfsCode(vfs.rename('/A/x.odt', '/A/~$x.odt'))).toBe('EXDEV');
    await vfs.rename('/A/.~lock.gone.odt#', '/A/.~lock.x.odt#');
    expect(await lockedOnService(remote, 'x.odt')).toBe(true);
    expect((await vfs.readdir('/A')).map((a) => a.name).sort()).toEqual(['.~lock.x.odt#', 'x.odt']);
    expect(await vfsCode(vfs.open('/A/nowhere/~$x.odt', { write: true, create: true }))).toBe('ENOENT');
  });

  it('a lock file whose document someone else holds locked is kept and locks nothing; deleting it leaves their lock', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('x.odt', Buffer.from('v1'));
    const { vfs } = await gateway(remote);
    const webdav = { lockHolder: 'webdav' };
    await vfs.setLocked('/A/x.odt', true, webdav);
    await make(vfs, '/A/.~lock.x.odt#', 'Ann');
    expect((await vfs.readdir('/A')).map((a) => a.name).sort()).toEqual(['.~lock.x.odt#', 'x.odt']);
    expect(await vfsCode(vfs.writeFile('/A/x.odt', Buffer.from('the mount')))).toBe('ELOCKED');
    await vfs.unlink('/A/.~lock.x.odt#');
    expect(await lockedOnService(remote, 'x.odt')).toBe(true);
    await vfs.writeFile('/A/x.odt', Buffer.from('webdav'), webdav);
  });

  it('lock files go with their folder when it is renamed, and keep it from being removed', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    await remote.mkdir('d');
    remote.putFile('d/x.odt', Buffer.from('v1'));
    await remote.mkdir('e');
    const { vfs } = await gateway(remote);
    await make(vfs, '/A/d/.~lock.x.odt#', 'Ann');
    await make(vfs, '/A/e/~$gone.docx', 'Ann');
    expect(await vfsCode(vfs.rmdir('/A/e'))).toBe('ENOTEMPTY');
    await vfs.rename('/A/d', '/A/moved');
    expect((await vfs.readdir('/A/moved')).map((a) => a.name).sort()).toEqual(['.~lock.x.odt#', 'x.odt']);
    expect(await vfsCode(vfs.stat('/A/d/.~lock.x.odt#'))).toBe('ENOENT');
    expect(await lockedOnService(remote, 'moved/x.odt')).toBe(true);
    await vfs.unlink('/A/moved/.~lock.x.odt#');
    expect(await lockedOnService(remote, 'moved/x.odt')).toBe(false);
    await vfs.unlink('/A/e/~$gone.docx');
    await vfs.rmdir('/A/e');
  });

  it('a lock the start could not release stays written down; the same lock file made again locks and unlocks as usual', async () => {
    const remote = new LockRefusingRemote({ name: 'A', id: '1' });
    remote.putFile('x.odt', Buffer.from('v1'));
    const first = await gateway(remote);
    await make(first.vfs, '/A/.~lock.x.odt#', 'Ann');
    gateways.splice(gateways.indexOf(first.vfs), 1);
    remote.refusing = true;
    const second = await gateway(remote, first.dataDir);
    await waitFor('the release at start to have been tried', () => remote.refused > 0);
    expect(await lockedOnService(remote, 'x.odt')).toBe(true);
    remote.refusing = false;
    await make(second.vfs, '/A/.~lock.x.odt#', 'Ann');
    await second.vfs.writeFile('/A/x.odt', Buffer.from('saved by its editor'));
    await second.vfs.unlink('/A/.~lock.x.odt#');
    expect(await lockedOnService(remote, 'x.odt')).toBe(false);
  });

  it('a gateway abandoned with a lock file (a crash) releases the lock at its next start, the lock file gone', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('x.odt', Buffer.from('v1'));
    const first = await gateway(remote);
    await make(first.vfs, '/A/.~lock.x.odt#', 'Ann');
    expect(await lockedOnService(remote, 'x.odt')).toBe(true);
    // Abandoned without close: a second gateway starts on the same data folder.
    gateways.splice(gateways.indexOf(first.vfs), 1);
    const second = await gateway(remote, first.dataDir);
    expect(await vfsCode(second.vfs.stat('/A/.~lock.x.odt#'))).toBe('ENOENT');
    await waitFor('the lock of the abandoned gateway\'s lock file released', async () => !(await lockedOnService(remote, 'x.odt')));
    // A clean close releases too.
    await make(second.vfs, '/A/~$x.odt', 'Ann');
    expect(await lockedOnService(remote, 'x.odt')).toBe(true);
    await second.vfs.close();
    expect(await lockedOnService(remote, 'x.odt')).toBe(false);
  });
});

/** A put line as a side writer (the FUSE engine) writes it: a check, the entry, the bytes in base64. */
/** The FUSE engine's close record of a file (engine-close-record.ts). */
function sideLine(e: { id: string; library: string; fullpath: string; mtimeMs: number }, data: Buffer): Buffer {
  return encodeCloseRecord({ id: e.id, library: e.library, fullpath: e.fullpath, mtimeNs: BigInt(e.mtimeMs) * 1_000_000n, createdMs: e.mtimeMs, seq: Date.now() * 1000, data });
}

describe('office lock files closed by the FUSE engine itself', { timeout: 20_000 }, () => {
  it('made closed from the engine\'s record: kept here and locking, its spool dropped; never uploaded after a crash either', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('x.odt', Buffer.from('v1'));
    const first = await gateway(remote);
    const journal = first.vfs.sideJournal()!;
    const data = Buffer.from('Ann,host,ann,29.11.2026 05:00;');
    const id = randomBytes(8).toString('hex');
    const spool = join(journal.spoolFolderPath(), id);
    await writeFile(spool, data);
    const st = statSync(spool, { bigint: true });
    const line = sideLine({ id, library: 'A', fullpath: '.~lock.x.odt#', mtimeMs: Date.now() }, data);
    expect(await first.vfs.createClosed([{ path: '/A/.~lock.x.odt#', journalId: id, closed: { record: line, spoolMtimeNs: st.mtimeNs } }])).toEqual([true]);
    expect(await lockedOnService(remote, 'x.odt')).toBe(true);
    expect((await first.vfs.stat('/A/.~lock.x.odt#')).size).toBe(data.length);
    await expect(stat(spool)).rejects.toThrow(/ENOENT/);
    // The engine's record kept in the journal (a close answered just before a crash): dropped at the next start.
    await journal.keepSideRecord(sideLine({ id: randomBytes(8).toString('hex'), library: 'A', fullpath: '~$x.odt', mtimeMs: Date.now() }, data));
    await first.vfs.flushAll();
    gateways.splice(gateways.indexOf(first.vfs), 1);
    const second = await gateway(remote, first.dataDir);
    await second.vfs.flushAll();
    expect((await remote.list('')).map((e) => e.name)).toEqual(['x.odt']);
    expect(remote.commits.map((c) => c.fullpath)).toEqual([]);
  });

  it('made by the engine with a spool handed to the kernel: the spool becomes the lock file', async () => {
    const remote = new MemoryRemote({ name: 'A', id: '1' });
    remote.putFile('x.odt', Buffer.from('v1'));
    const { vfs } = await gateway(remote);
    const id = randomBytes(8).toString('hex');
    const spool = join(vfs.sideJournal()!.spoolFolderPath(), id);
    await writeFile(spool, '');
    const h = await vfs.open('/A/.~lock.x.odt#', { write: true, create: true, exclusive: true, journalId: id, spoolMade: true });
    expect(await lockedOnService(remote, 'x.odt')).toBe(true);
    const handed = await h.adoptSpool!();
    expect(handed).toBeDefined();
    // The kernel writes the spool it was handed.
    writeSync(handed!.fd, Buffer.from('Ann,host;'), 0, 9, 0);
    handed!.end();
    await h.release();
    await expect(stat(spool)).rejects.toThrow(/ENOENT/);
    expect(await readAll(vfs, '/A/.~lock.x.odt#')).toBe('Ann,host;');
  });
});
