/**
 * `cloudlib up` with a FUSE mount acting as one member (Ann) and WebDAV member logins (Bob): a
 * LibreOffice lock file made through the mount, as LibreOffice makes it when it opens a document for
 * editing, locks the document on the service for Ann. Bob's LOCK and PUT through WebDAV get 423 while it
 * is there; once it is deleted (LibreOffice closing the document) Bob writes. The lock file is listed and
 * read through the mount and never reaches the service. The other way round, a document Bob's Office
 * lock file (through WebDAV) locks shows read-only through the mount and refuses Ann's writes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { open, readdir, readFile, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fuseUsable } from '../../../src/gateway/gateway.js';
import { basicAuth, dav, LOCK_BODY } from '../../support/dav-http.js';
import { waitFor } from '../../support/wait-for.js';
import { put } from '../../integration/service/helpers.js';
import { errnoOf, startMemberUp, type MemberUp } from './member-up.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const canMount = existsSync(join(root, 'src/fuse/index.ts')) && (await fuseUsable());
const ANN = 'ann@example.com';
const BOB = 'bob@example.com';
const PASSWORD = 'office-locks-pw';

let up: MemberUp | undefined;

beforeAll(async () => {
  if (!canMount) return;
  up = await startMemberUp({
    prefix: 'cloudlib-office-locks-', password: PASSWORD, mountMember: ANN, memberLogins: true,
    members: [{ account: ANN, name: 'Ann', roleId: 2 }, { account: BOB, name: 'Bob', roleId: 2 }],
    prepare: async (t) => { await put(t.client, 'x.odt', 'the document'); },
  });
}, 120_000);

afterAll(async () => {
  await up?.close();
}, 60_000);

describe.skipIf(!canMount)('a LibreOffice lock file made through the mount', { timeout: 120_000 }, () => {
  it('locks the document on the service for another member until it is deleted, and stays on the gateway', async () => {
    const bob = basicAuth(BOB, PASSWORD);
    const doc = join(up!.mnt, 'Library', 'x.odt');
    const lockFile = join(up!.mnt, 'Library', '.~lock.x.odt#');
    expect(await readFile(doc, 'utf8')).toBe('the document');
    // As LibreOffice opens a document for editing: an exclusive create of the lock file, one line, closed.
    const fh = await open(lockFile, 'wx');
    await fh.write('Ann,gateway,ann,29.11.2026 05:00,file:///home/ann/.config/libreoffice/4;\n');
    await fh.close();
    expect((await readdir(join(up!.mnt, 'Library'))).sort()).toEqual(['.~lock.x.odt#', 'x.odt']);
    expect(await readFile(lockFile, 'utf8')).toMatch(/^Ann,gateway,/);
    // Ann saves as before; Bob (logged in after the lock was taken) is refused.
    await writeFile(doc, 'saved by Ann');
    expect((await dav(up!.webdavUrl, 'LOCK', '/Library/x.odt', { body: LOCK_BODY(), auth: bob })).status).toBe(423);
    expect((await dav(up!.webdavUrl, 'PUT', '/Library/x.odt', { body: 'Bob', auth: bob })).status).toBe(423);
    // LibreOffice closes the document: its lock file goes, and Bob writes (once his view has the unlock).
    await unlink(lockFile);
    expect(await readdir(join(up!.mnt, 'Library'))).toEqual(['x.odt']);
    await waitFor('Bob\'s PUT to be taken once the document is unlocked', async () => (await dav(up!.webdavUrl, 'PUT', '/Library/x.odt', { body: 'saved by Bob', auth: bob })).status, { until: (s) => s === 204, timeoutMs: 30_000, intervalMs: 200 });

    // The other way round: Bob's Office lock file through WebDAV; the mount shows the document read-only
    // (an editor opens it so) and refuses Ann's writes.
    expect((await dav(up!.webdavUrl, 'PUT', '/Library/y.docx', { body: 'Bob\'s', auth: bob })).status).toBe(201);
    await waitFor('y.docx on the service (Bob\'s upload)', async () => (await readdir(join(up!.mnt, 'Library'))).includes('y.docx'), { timeoutMs: 30_000, intervalMs: 200 });
    expect((await dav(up!.webdavUrl, 'PUT', '/Library/~$y.docx', { body: 'Bob', auth: bob })).status).toBe(201);
    const y = join(up!.mnt, 'Library', 'y.docx');
    await waitFor('the mount to show y.docx read-only (Ann\'s updates feed)', async () => ((await stat(y)).mode & 0o222) === 0, { timeoutMs: 30_000, intervalMs: 200 });
    expect(await errnoOf(writeFile(y, 'Ann'))).toBe('EACCES');
    expect((await dav(up!.webdavUrl, 'DELETE', '/Library/~$y.docx', { auth: bob })).status).toBe(204);

    expect(await up!.stop()).toBe(0);
    await up!.onService(async (t) => {
      const list = (await t.client.file.ls({ fullpath: '' })).list;
      expect(list.map((e) => e.filename).sort()).toEqual(['x.odt', 'y.docx']);
      expect(Number((await t.client.file.info({ fullpath: 'x.odt' })).lock)).toBe(0);
    });
  });
});
