/**
 * `cloudlib up` with a FUSE mount acting as one member (Ann) and WebDAV member logins (Bob): a
 * LibreOffice lock file made through the mount, as LibreOffice makes it when it opens a document for
 * editing, locks the document on the service for Ann. Bob's LOCK and PUT through WebDAV get 423 while it
 * is there; once it is deleted (LibreOffice closing the document) Bob writes. The lock file is listed and
 * read through the mount and never reaches the service. The other way round, a document Bob's Office
 * lock file (through WebDAV) locks shows read-only through the mount and refuses Ann's writes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { access, mkdtemp, open, readdir, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fuseUsable } from '../../../src/gateway/gateway.js';
import { AccessTokens } from '../../../src/service/domain/tokens.js';
import { startTestService } from '../../support/service.js';
import { basicAuth, dav, LOCK_BODY } from '../../support/dav-http.js';
import { waitFor } from '../../support/wait-for.js';
import { put } from '../../integration/service/helpers.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const bin = join(root, 'bin', 'cloudlib.js');
const canMount = existsSync(join(root, 'src/fuse/index.ts')) && (await fuseUsable());
const ANN = 'ann@example.com';
const BOB = 'bob@example.com';
const PASSWORD = 'office-locks-pw';

let data: string;
let mnt: string;
let child: ChildProcess | undefined;
let output = '';
let webdavUrl = '';

async function errnoOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code;
  }
}

function exited(c: ChildProcess, timeoutMs: number): Promise<number | null> {
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve(c.exitCode);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`process did not exit within ${timeoutMs} ms`)), timeoutMs);
    c.once('exit', (code) => { clearTimeout(t); resolve(code); });
  });
}

/** The service's view of the library (a library client on the same data, the gateway stopped). */
async function onService<T>(fn: (t: Awaited<ReturnType<typeof startTestService>>) => Promise<T>): Promise<T> {
  const t = await startTestService({ dataDir: join(data, 'service') });
  try {
    return await fn(t);
  } finally {
    await t.close();
  }
}

beforeAll(async () => {
  if (!canMount) return;
  data = await mkdtemp(join(tmpdir(), 'cloudlib-office-locks-'));
  mnt = join(data, 'mnt');
  await onService(async (t) => {
    const db = t.service.parts.tree.db;
    const c = t.service.credentials;
    for (const [account, name] of [[ANN, 'Ann'], [BOB, 'Bob']] as const) {
      const id = await db.insert('INSERT INTO members (ent_id, account, name, email, state, created_ms) VALUES (?, ?, ?, ?, 1, ?)', [c.enterprise.ent_id, account, name, account, Date.now()]);
      await db.run('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, 2)', [c.library.org_id, id]);
      await new AccessTokens(db, Date.now).setPassword(id, PASSWORD);
    }
    await put(t.client, 'x.odt', 'the document');
  });
  const config = join(data, 'cloudlib.toml');
  await writeFile(config, `[mount]\nmember = "${ANN}"\nmember_password_env = "MEMBER_PW"\n\n[webdav]\nmember_logins = true\n`);
  child = spawn(process.execPath, [bin, 'up', '--data', data, '--config', config, '--mount', mnt, '--webdav', '127.0.0.1:0', '--service-listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], {
    env: { ...process.env, CLOUDLIB_LOG_LEVEL: 'warn', MEMBER_PW: PASSWORD }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (b: Buffer) => { output += b.toString(); });
  child.stderr!.on('data', (b: Buffer) => { output += b.toString(); });
  const up = child;
  const state = await waitFor('cloudlib up to write endpoints.json', async () => (up.exitCode !== null ? `exited with ${up.exitCode}` : access(join(data, 'endpoints.json')).then(() => 'ready', () => '')), { timeoutMs: 90_000, intervalMs: 100 })
    .catch((err: Error) => { throw new Error(`${err.message}:\n${output}`); });
  if (state !== 'ready') throw new Error(`cloudlib up ${state}:\n${output}`);
  webdavUrl = (JSON.parse(await readFile(join(data, 'endpoints.json'), 'utf8')) as { webdav_url: string }).webdav_url;
}, 120_000);

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    await exited(child, 30_000).catch(() => child!.kill('SIGKILL'));
  }
  if (mnt) await new Promise<void>((resolve) => execFile('fusermount3', ['-uz', mnt], () => resolve()));
  if (data) await rm(data, { recursive: true, force: true });
}, 60_000);

describe.skipIf(!canMount)('a LibreOffice lock file made through the mount', { timeout: 120_000 }, () => {
  it('locks the document on the service for another member until it is deleted, and stays on the gateway', async () => {
    const bob = basicAuth(BOB, PASSWORD);
    const doc = join(mnt, 'Library', 'x.odt');
    const lockFile = join(mnt, 'Library', '.~lock.x.odt#');
    expect(await readFile(doc, 'utf8')).toBe('the document');
    // As LibreOffice opens a document for editing: an exclusive create of the lock file, one line, closed.
    const fh = await open(lockFile, 'wx');
    await fh.write('Ann,gateway,ann,29.11.2026 05:00,file:///home/ann/.config/libreoffice/4;\n');
    await fh.close();
    expect((await readdir(join(mnt, 'Library'))).sort()).toEqual(['.~lock.x.odt#', 'x.odt']);
    expect(await readFile(lockFile, 'utf8')).toMatch(/^Ann,gateway,/);
    // Ann saves as before; Bob (logged in after the lock was taken) is refused.
    await writeFile(doc, 'saved by Ann');
    expect((await dav(webdavUrl, 'LOCK', '/Library/x.odt', { body: LOCK_BODY(), auth: bob })).status).toBe(423);
    expect((await dav(webdavUrl, 'PUT', '/Library/x.odt', { body: 'Bob', auth: bob })).status).toBe(423);
    // LibreOffice closes the document: its lock file goes, and Bob writes (once his view has the unlock).
    await unlink(lockFile);
    expect(await readdir(join(mnt, 'Library'))).toEqual(['x.odt']);
    await waitFor('Bob\'s PUT to be taken once the document is unlocked', async () => (await dav(webdavUrl, 'PUT', '/Library/x.odt', { body: 'saved by Bob', auth: bob })).status, { until: (s) => s === 204, timeoutMs: 30_000, intervalMs: 200 });

    // The other way round: Bob's Office lock file through WebDAV; the mount shows the document read-only
    // (an editor opens it so) and refuses Ann's writes.
    expect((await dav(webdavUrl, 'PUT', '/Library/y.docx', { body: 'Bob\'s', auth: bob })).status).toBe(201);
    await waitFor('y.docx on the service (Bob\'s upload)', async () => (await readdir(join(mnt, 'Library'))).includes('y.docx'), { timeoutMs: 30_000, intervalMs: 200 });
    expect((await dav(webdavUrl, 'PUT', '/Library/~$y.docx', { body: 'Bob', auth: bob })).status).toBe(201);
    const y = join(mnt, 'Library', 'y.docx');
    await waitFor('the mount to show y.docx read-only (Ann\'s updates feed)', async () => ((await stat(y)).mode & 0o222) === 0, { timeoutMs: 30_000, intervalMs: 200 });
    expect(await errnoOf(writeFile(y, 'Ann'))).toBe('EACCES');
    expect((await dav(webdavUrl, 'DELETE', '/Library/~$y.docx', { auth: bob })).status).toBe(204);

    child!.kill('SIGTERM');
    expect(await exited(child!, 60_000)).toBe(0);
    await onService(async (t) => {
      const list = (await t.client.file.ls({ fullpath: '' })).list;
      expect(list.map((e) => e.filename).sort()).toEqual(['x.odt', 'y.docx']);
      expect(Number((await t.client.file.info({ fullpath: 'x.odt' })).lock)).toBe(0);
    });
  });
});
