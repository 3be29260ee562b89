/**
 * Member logins end to end against the embedded service: three members with different rights on one
 * folder drive WebDAV (each through their own session and Vfs, over the user file API with their own
 * token), and every allowed and refused operation is checked against the service's own record.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LibraryRemote } from '../../../src/remote/library-remote.js';
import { MemberSessions, memberKey } from '../../../src/gateway/member-sessions.js';
import { createVfs, type GatewayVfs } from '../../../src/vfs/index.js';
import { createWebdavServer, type WebdavServer } from '../../../src/webdav/index.js';
import { silentLogger } from '../../../src/shared/log.js';
import { startTestService, type TestService } from '../../support/service.js';
import { basicAuth, dav } from '../../support/dav-http.js';
import { put } from '../service/helpers.js';
import { addMember, bootstrapApp, type TestMember } from '../service/user-fixtures.js';

let t: TestService;
let dir: string;
let adminVfs: GatewayVfs;
let sessions: MemberSessions;
let server: WebdavServer;
let url: string;
let lib: LibraryRemote;
/** Denied download on Team; everything else allowed. */
let nodl: TestMember;
/** Denied every change on Team; may read. */
let now: TestMember;
/** Sees Team listed at the top, nothing more. */
let lsonly: TestMember;
const PW = 'member-pw-1';
const startedMs = Date.now();

const as = (m: TestMember, password = PW) => basicAuth(m.account, password);
const names = async (folder: string) => (await t.client.file.ls({ fullpath: folder })).list.map((r) => r.filename).sort();

async function setCodes(folder: string, m: TestMember, codes: Record<string, number>) {
  await t.client.file2.setPermission({ fullpath: folder, permissions: JSON.stringify({ member_ids: [m.id], permission: { role_id: 0, ...codes } }) });
}

beforeAll(async () => {
  t = await startTestService();
  dir = await mkdtemp(join(tmpdir(), 'cloudlib-members-'));
  await t.client.file.createFolder({ fullpath: 'Team' });
  await put(t.client, 'Team/plan.txt', 'the plan');
  await put(t.client, 'Team/old.txt', 'old');
  nodl = await addMember(t, 'nodl', { libraryRole: 5, password: PW });
  now = await addMember(t, 'now', { libraryRole: 5, password: PW });
  lsonly = await addMember(t, 'lsonly', { libraryRole: 5, password: PW });
  await setCodes('Team', nodl, { ls: 1, cd: 1, ss: 1, pv: 1, dl: -1, w: 1, ul: 1, mk: 1, ren: 1, rm: 1 });
  await setCodes('Team', now, { ls: 1, cd: 1, ss: 1, pv: 1, dl: 1, w: -1, ul: -1, mk: -1, ren: -1, rm: -1 });
  await setCodes('Team', lsonly, { ls: -1, cd: -1, ss: 1, pv: -1, dl: -1, w: -1, ul: -1, mk: -1, ren: -1, rm: -1 });
  lib = new LibraryRemote({ client: t.client });
  adminVfs = await createVfs({ libraries: [{ name: 'Library', remote: lib }], dataDir: join(dir, 'admin'), feedIntervalMs: 0 });
  const id = String(t.service.credentials.library.org_id);
  sessions = new MemberSessions({
    baseUrl: t.service.baseUrl, application: (await bootstrapApp(t)), dataDir: join(dir, 'members'),
    libraries: () => [{ name: 'Library', id, feed: lib, client: t.client }],
    vfs: { feedIntervalMs: 0 }, checkIntervalMs: 3_600_000, logger: silentLogger,
    // The sessions' clock stands still: a refused account keeps waiting for the whole test, however slow the machine.
    clock: () => startedMs,
  });
  server = createWebdavServer({
    vfs: adminVfs, users: [], dataDir: join(dir, 'webdav'), logger: silentLogger,
    memberLogins: { loginsOn: true, login: async (a, p, c) => { const o = await sessions.login(a, p, c); return 'session' in o ? { vfs: o.session.vfs } : o; } },
  });
  url = await server.listen('127.0.0.1', 0);
});

afterAll(async () => {
  await server?.close();
  await sessions?.close();
  await adminVfs?.close();
  await t?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('member logins through WebDAV', () => {
  it('a member logs in with their own account and password; a wrong password is 401 and only Basic is offered', async () => {
    const ok = await dav(url, 'PROPFIND', '/Library/', { auth: as(now), headers: { depth: '1' } });
    expect(ok.status).toBe(207);
    const other = await addMember(t, 'other', { libraryRole: 5, password: PW });
    const wrong = await dav(url, 'PROPFIND', '/Library/', { auth: as(other, 'not-the-password'), headers: { depth: '1' } });
    expect(wrong.status).toBe(401);
    expect(String(wrong.headers['www-authenticate'])).toMatch(/^Basic/);
    expect(String(wrong.headers['www-authenticate'])).not.toContain('Digest');
    const none = await dav(url, 'PROPFIND', '/Library/', { auth: null, headers: { depth: '1' } });
    expect(none.status).toBe(401);
  });

  it('after a wrong password the account waits: even the right one is refused without asking the service', async () => {
    const m = await addMember(t, 'slow', { libraryRole: 5, password: PW });
    const grants = sessions.counters.grants;
    expect((await dav(url, 'PROPFIND', '/Library/', { auth: as(m, 'wrong'), headers: { depth: '0' } })).status).toBe(401);
    expect((await dav(url, 'PROPFIND', '/Library/', { auth: as(m), headers: { depth: '0' } })).status).toBe(401);
    expect(sessions.counters.grants).toBe(grants + 1);
    expect(sessions.counters.throttled).toBeGreaterThan(0);
  });

  it('a wrong password counts the same while the member has a session: guesses wait, even the right one', async () => {
    const m = await addMember(t, 'live', { libraryRole: 5, password: PW });
    expect((await dav(url, 'PROPFIND', '/Library/', { auth: as(m), headers: { depth: '0' } })).status).toBe(207);
    expect(sessions.list().some((s) => s.account === m.account)).toBe(true);
    const grants = sessions.counters.grants;
    for (let i = 0; i < 5; i++) expect((await dav(url, 'PROPFIND', '/Library/', { auth: as(m, `guess-${i}`), headers: { depth: '0' } })).status).toBe(401);
    // One guess reached the service; the rest waited, and so does the right password the session knows.
    expect(sessions.counters.grants).toBe(grants + 1);
    expect((await dav(url, 'PROPFIND', '/Library/', { auth: as(m), headers: { depth: '0' } })).status).toBe(401);
  });

  it('a repeated login is recognised by its verifier: one token grant for many requests; the password is not kept', async () => {
    const grants = sessions.counters.grants;
    for (let i = 0; i < 3; i++) expect((await dav(url, 'PROPFIND', '/Library/Team/', { auth: as(nodl), headers: { depth: '1' } })).status).toBe(207);
    expect(sessions.counters.grants - grants).toBeLessThanOrEqual(1);
    const s = sessions.list().find((x) => x.account === nodl.account);
    expect(s).toBeDefined();
    expect(JSON.stringify(sessions.list())).not.toContain(PW);
  });

  it('listing shows only what the member may see', async () => {
    const top = await dav(url, 'PROPFIND', '/Library/', { auth: as(lsonly), headers: { depth: '1' } });
    expect(top.status).toBe(207);
    expect(top.body).toContain('/Library/Team/');
    const inside = await dav(url, 'PROPFIND', '/Library/Team/', { auth: as(lsonly), headers: { depth: '1' } });
    expect(inside.status).toBe(403);
    expect(inside.body).not.toContain('plan.txt');
    const seen = await dav(url, 'PROPFIND', '/Library/Team/', { auth: as(now), headers: { depth: '1' } });
    expect(seen.body).toContain('plan.txt');
  });

  it('reads need dl: the member denied it gets 403, the one with it the bytes', async () => {
    expect((await dav(url, 'GET', '/Library/Team/plan.txt', { auth: as(nodl) })).status).toBe(403);
    const ok = await dav(url, 'GET', '/Library/Team/plan.txt', { auth: as(now) });
    expect(ok).toMatchObject({ status: 200, body: 'the plan' });
    // Read once by a member allowed to: still refused to the one who is not (no cache shared between them).
    expect((await dav(url, 'GET', '/Library/Team/plan.txt', { auth: as(nodl) })).status).toBe(403);
    expect((await dav(url, 'GET', '/Library/Team/plan.txt', { auth: as(lsonly) })).status).toBe(403);
  });

  it('writes need w (a change) or ul (a new file): refused at once with 403, nothing changed on the service', async () => {
    const change = await dav(url, 'PUT', '/Library/Team/plan.txt', { auth: as(now), body: 'changed by now' });
    expect(change.status).toBe(403);
    const add = await dav(url, 'PUT', '/Library/Team/new-by-now.txt', { auth: as(now), body: 'x' });
    expect(add.status).toBe(403);
    expect(await names('Team')).toEqual(['old.txt', 'plan.txt']);
    expect((await t.client.file.info({ fullpath: 'Team/plan.txt' })).filesize).toBe('the plan'.length);
  });

  it('an allowed write lands on the service with the member as the operator', async () => {
    const r = await dav(url, 'PUT', '/Library/Team/from-nodl.txt', { auth: as(nodl), body: 'written by nodl' });
    expect(r.status).toBe(201);
    const s = (await sessions.login(nodl.account, PW));
    if (!('session' in s)) throw new Error(s.refused);
    await s.session.vfs.flushAll({ timeoutMs: 30_000 });
    const info = await t.client.file.info({ fullpath: 'Team/from-nodl.txt' });
    expect(Number(info.filesize)).toBe('written by nodl'.length);
    expect(info.last_member_name).toBe('nodl');
  });

  it('folders need mk, renames ren, deletes rm: refused with 403 and nothing changed; allowed ones happen as the member', async () => {
    expect((await dav(url, 'MKCOL', '/Library/Team/by-now/', { auth: as(now) })).status).toBe(403);
    expect((await dav(url, 'MOVE', '/Library/Team/old.txt', { auth: as(now), headers: { destination: `${url}Library/Team/renamed.txt` } })).status).toBe(403);
    expect((await dav(url, 'DELETE', '/Library/Team/old.txt', { auth: as(now) })).status).toBe(403);
    expect(await names('Team')).toEqual(['from-nodl.txt', 'old.txt', 'plan.txt']);

    expect((await dav(url, 'MKCOL', '/Library/Team/by-nodl/', { auth: as(nodl) })).status).toBe(201);
    expect((await dav(url, 'MOVE', '/Library/Team/old.txt', { auth: as(nodl), headers: { destination: `${url}Library/Team/renamed.txt` } })).status).toBe(201);
    expect(await names('Team')).toEqual(['by-nodl', 'from-nodl.txt', 'plan.txt', 'renamed.txt']);
    expect((await t.client.file.info({ fullpath: 'Team/by-nodl' })).create_member_name).toBe('nodl');
    expect((await dav(url, 'DELETE', '/Library/Team/renamed.txt', { auth: as(nodl) })).status).toBe(204);
    expect(await names('Team')).toEqual(['by-nodl', 'from-nodl.txt', 'plan.txt']);
  });

  it('each member has a data folder of their own (journal, cursors)', async () => {
    const s = await sessions.login(nodl.account, PW);
    if (!('session' in s)) throw new Error(s.refused);
    expect(s.session.vfs).not.toBe((await sessions.login(now.account, PW) as { session: { vfs: unknown } }).session.vfs);
    expect(memberKey(nodl.account)).not.toBe(memberKey(now.account));
  });

  it('locks and tags go through the library authorization naming the member, once the service confirms w, t or trm', async () => {
    const lockinfo = '<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>';
    const info = () => t.client.file.info({ fullpath: 'Team/plan.txt' }) as Promise<{ lock?: number; lock_member_name?: string; tag?: string }>;
    // `now` is denied w on Team: refused, the file stays unlocked.
    expect((await dav(url, 'LOCK', '/Library/Team/plan.txt', { auth: as(now), body: lockinfo, headers: { timeout: 'Second-60' } })).status).toBe(403);
    expect((await info()).lock).toBe(0);
    // `nodl` may write: the lock is taken on the service, as nodl.
    const locked = await dav(url, 'LOCK', '/Library/Team/plan.txt', { auth: as(nodl), body: lockinfo, headers: { timeout: 'Second-60' } });
    expect(locked.status).toBe(200);
    expect(await info()).toMatchObject({ lock: 1, lock_member_name: nodl.account });
    expect((await dav(url, 'UNLOCK', '/Library/Team/plan.txt', { auth: as(nodl), headers: { 'lock-token': String(locked.headers['lock-token']) } })).status).toBe(204);
    expect((await info()).lock).toBe(0);
    // Tags: nodl has neither t nor trm on Team yet.
    const opened = await sessions.login(nodl.account, PW, '127.0.0.1');
    if (!('session' in opened)) throw new Error('nodl: no session');
    const vfs = opened.session.vfs;
    await expect(vfs.setTags('/Library/Team/plan.txt', ['q3'])).rejects.toMatchObject({ code: 'EACCES' });
    expect((await info()).tag ?? '').toBe('');
    await setCodes('Team', nodl, { ls: 1, cd: 1, ss: 1, pv: 1, dl: -1, w: 1, ul: 1, mk: 1, ren: 1, rm: 1, t: 1 });
    await vfs.setTags('/Library/Team/plan.txt', ['q3']);
    expect((await info()).tag).toBe('q3');
    expect(await vfs.getTags('/Library/Team/plan.txt')).toEqual(['q3']);
    await expect(vfs.setTags('/Library/Team/plan.txt', [])).rejects.toMatchObject({ code: 'EACCES' }); // removing needs trm
    expect((await info()).tag).toBe('q3');
    await setCodes('Team', nodl, { ls: 1, cd: 1, ss: 1, pv: 1, dl: -1, w: 1, ul: 1, mk: 1, ren: 1, rm: 1, t: 1, trm: 1 });
    await vfs.setTags('/Library/Team/plan.txt', []);
    expect((await info()).tag ?? '').toBe('');
    await setCodes('Team', nodl, { ls: 1, cd: 1, ss: 1, pv: 1, dl: -1, w: 1, ul: 1, mk: 1, ren: 1, rm: 1 });
  });

  it('a member disabled on the service loses access at the next check (one feed interval)', async () => {
    const m = await addMember(t, 'leaver', { libraryRole: 5, password: PW });
    await setCodes('Team', m, { ls: 1, cd: 1, ss: 1, pv: 1, dl: 1 });
    expect((await dav(url, 'GET', '/Library/Team/plan.txt', { auth: as(m) })).status).toBe(200);
    await t.service.parts.tree.db.run('UPDATE members SET state = 0 WHERE id = ?', [m.id]);
    await sessions.checkAll();
    expect(sessions.list().map((s) => s.account)).not.toContain(m.account);
    expect((await dav(url, 'GET', '/Library/Team/plan.txt', { auth: as(m) })).status).toBe(401);
    expect((await dav(url, 'PROPFIND', '/Library/', { auth: as(m), headers: { depth: '1' } })).status).toBe(401);
  });
});
