/**
 * The gateway with `webdav.member_logins` over the embedded service: a member logs in to WebDAV as
 * themselves, a configured user with `member` acts as that member (the service's record names the member,
 * their permissions apply), and a member's pending upload lives in that member's own journal folder.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../../src/api/client.js';
import { loadConfig } from '../../../src/gateway/config.js';
import { Gateway } from '../../../src/gateway/gateway.js';
import { memberKey } from '../../../src/gateway/member-sessions.js';
import { AccessTokens } from '../../../src/service/domain/tokens.js';
import type { EmbeddedService } from '../../../src/service/index.js';
import { silentLogger } from '../../../src/shared/log.js';
import { basicAuth, dav, LOCK_BODY, lockTokenOf } from '../../support/dav-http.js';
import { put } from '../service/helpers.js';
import { ControlClient } from '../../../src/control/client.js';

let dir: string;
let gateway: Gateway;
let client: ServiceClient;
let url: string;
const ROBOT_MEMBER = 'robot-member@example.com';

async function addMember(account: string, name: string, password: string): Promise<number> {
  const svc = gateway.service as unknown as EmbeddedService;
  const db = svc.parts.tree.db;
  const id = await db.insert('INSERT INTO members (ent_id, account, name, email, state, created_ms) VALUES (?, ?, ?, ?, 1, ?)', [svc.credentials.enterprise.ent_id, account, name, account, Date.now()]);
  await db.run('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, ?)', [svc.credentials.library.org_id, id, 5]);
  await new AccessTokens(db, Date.now).setPassword(id, password);
  return id;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudlib-gw-members-'));
  const config = await loadConfig({ data: dir, webdav: '127.0.0.1:0', noMount: true, serviceListen: '127.0.0.1:0', adminListen: '127.0.0.1:0' }, {}, { fuseUsable: false });
  config.admin_listen = null;
  config.webdav.member_logins = true;
  config.webdav.users = [{ name: 'robot', password: 'robot-password', member: ROBOT_MEMBER, member_password: 'robot-member-pw' }];
  gateway = await Gateway.start({ config, logger: silentLogger, stopFlushMs: 5000 });
  url = gateway.webdavUrl!;
  const c = (gateway.service as unknown as EmbeddedService).credentials;
  client = new ServiceClient({ baseUrl: gateway.serviceUrl, credentials: { library: { org_client_id: c.library.org_client_id, org_client_secret: c.library.org_client_secret } }, retries: 0 });
  await client.file.createFolder({ fullpath: 'Shared' });
});

afterAll(async () => {
  await client?.close();
  await gateway?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function grant(memberId: number, codes: Record<string, number>) {
  await client.file2.setPermission({ fullpath: 'Shared', permissions: JSON.stringify({ member_ids: [memberId], permission: { role_id: 0, ...codes } }) });
}

describe('gateway with member logins', () => {
  it('a member logs in to WebDAV as themselves; what they write is recorded as theirs, in their own journal first', async () => {
    const id = await addMember('carol@example.com', 'Carol', 'carol-pw');
    await grant(id, { ls: 1, cd: 1, ss: 1, pv: 1, dl: 1, ul: 1, w: 1 });
    const auth = basicAuth('carol@example.com', 'carol-pw');
    expect((await dav(url, 'PUT', '/Library/Shared/carol.txt', { auth, body: 'by carol' })).status).toBe(201);
    const folder = join(dir, 'members', memberKey('carol@example.com'));
    expect(JSON.parse(await readFile(join(folder, 'member.json'), 'utf8'))).toEqual({ account: 'carol@example.com' });
    expect(await readdir(folder)).toContain('journal');
    const session = await gateway.members!.login('carol@example.com', 'carol-pw');
    if (!('session' in session)) throw new Error(session.refused);
    await session.session.vfs.flushAll({ timeoutMs: 30_000 });
    expect((await client.file.info({ fullpath: 'Shared/carol.txt' })).last_member_name).toBe('Carol');
    expect((await dav(url, 'GET', '/Library/Shared/carol.txt', { auth })).body).toBe('by carol');
    expect((await dav(url, 'GET', '/Library/Shared/carol.txt', { auth: basicAuth('carol@example.com', 'wrong') })).status).toBe(401);
  });

  it('a configured user with `member` acts as that member: their permissions, their name on the service', async () => {
    const id = await addMember(ROBOT_MEMBER, 'Robot', 'robot-member-pw');
    await grant(id, { ls: 1, cd: 1, ss: 1, pv: 1, dl: 1, ul: 1, w: -1, rm: -1 });
    const auth = basicAuth('robot', 'robot-password');
    expect((await dav(url, 'PUT', '/Library/Shared/robot.txt', { auth, body: 'by robot' })).status).toBe(201);
    expect((await dav(url, 'PUT', '/Library/Shared/carol.txt', { auth, body: 'overwrite' })).status).toBe(403);
    expect((await dav(url, 'DELETE', '/Library/Shared/carol.txt', { auth })).status).toBe(403);
    const session = await gateway.members!.login(ROBOT_MEMBER, 'robot-member-pw');
    if (!('session' in session)) throw new Error(session.refused);
    await session.session.vfs.flushAll({ timeoutMs: 30_000 });
    expect((await client.file.info({ fullpath: 'Shared/robot.txt' })).last_member_name).toBe('Robot');
    expect((await client.file.info({ fullpath: 'Shared/carol.txt' })).filesize).toBe('by carol'.length);
  });
});

describe('members sharing a folder: locks and acknowledged writes', () => {
  it('a member who takes part through a folder permission alone (not a library member) gets their PUT onto the service', async () => {
    const svc = gateway.service as unknown as EmbeddedService;
    const db = svc.parts.tree.db;
    const id = await db.insert('INSERT INTO members (ent_id, account, name, email, state, created_ms) VALUES (?, ?, ?, ?, 1, ?)', [svc.credentials.enterprise.ent_id, 'fay@example.com', 'Fay', 'fay@example.com', Date.now()]);
    await new AccessTokens(db, Date.now).setPassword(id, 'fay-pw');
    await client.file.createFolder({ fullpath: 'FolderOnly' });
    await client.file2.setPermission({ fullpath: 'FolderOnly', permissions: JSON.stringify({ member_ids: [id], permission: { role_id: 0, ls: 1, cd: 1, ss: 1, pv: 1, dl: 1, ul: 1, w: 1 } }) });
    const asFay = basicAuth('fay@example.com', 'fay-pw');
    expect((await dav(url, 'PUT', '/Library/FolderOnly/fay.txt', { auth: asFay, body: 'by fay' })).status).toBe(201);
    const control = await ControlClient.connect(join(dir, 'control.sock'));
    try {
      expect(await control.call('flush', { timeout_s: 60 })).toEqual({ pending: 0 });
    } finally {
      control.close();
    }
    const info = await client.file.info({ fullpath: 'FolderOnly/fay.txt' });
    expect(info.filesize).toBe(6);
    expect(info.last_member_name).toBe('Fay');
  });

  it("a member's LOCK + PUT of a file uploaded elsewhere reaches the service; the other member cannot refresh or release that lock", async () => {
    const a = await addMember('ann@example.com', 'Ann', 'ann-pw');
    const b = await addMember('ben@example.com', 'Ben', 'ben-pw');
    await client.file.createFolder({ fullpath: 'Collab' });
    for (const id of [a, b]) await client.file2.setPermission({ fullpath: 'Collab', permissions: JSON.stringify({ member_ids: [id], permission: { role_id: 0, ls: 1, cd: 1, ss: 1, pv: 1, dl: 1, ul: 1, w: 1, rm: 1 } }) });
    const asA = basicAuth('ann@example.com', 'ann-pw');
    const asB = basicAuth('ben@example.com', 'ben-pw');
    // Both sessions open before the file exists: neither member's cache has seen it.
    expect((await dav(url, 'PROPFIND', '/Library/Collab/', { auth: asA, headers: { depth: '1' } })).status).toBe(207);
    expect((await dav(url, 'PROPFIND', '/Library/Collab/', { auth: asB, headers: { depth: '1' } })).status).toBe(207);
    await put(client, 'Collab/doc.txt', 'v1');
    const lock = await dav(url, 'LOCK', '/Library/Collab/doc.txt', { auth: asA, body: LOCK_BODY('exclusive', 'ann'), headers: { timeout: 'Second-600' } });
    // The file is there on the service though A's cache has not seen it yet: an existing file is locked (200), not made anew.
    expect(lock.status).toBe(200);
    const token = lockTokenOf(lock);
    const write = await dav(url, 'PUT', '/Library/Collab/doc.txt', { auth: asA, body: 'a-v2', headers: { if: `(<${token}>)` } });
    expect([201, 204]).toContain(write.status);
    // B may neither refresh nor release A's lock, though B knows its token.
    expect((await dav(url, 'LOCK', '/Library/Collab/doc.txt', { auth: asB, headers: { if: `(<${token}>)`, timeout: 'Second-600' } })).status).toBe(403);
    expect((await dav(url, 'UNLOCK', '/Library/Collab/doc.txt', { auth: asB, headers: { 'lock-token': `<${token}>` } })).status).toBe(403);
    expect((await dav(url, 'UNLOCK', '/Library/Collab/doc.txt', { auth: asA, headers: { 'lock-token': `<${token}>` } })).status).toBe(204);
    // The acknowledged version reaches the service; `status` lists it under A, `flush` waits for A's journal too.
    const control = await ControlClient.connect(join(dir, 'control.sock'));
    try {
      const flushed = await control.call('flush', { timeout_s: 60 }) as { pending: number };
      expect(flushed.pending).toBe(0);
      const status = await control.call('status', {}) as { uploads: { pending: number } };
      expect(status.uploads.pending).toBe(0);
    } finally {
      control.close();
    }
    expect((await client.file.info({ fullpath: 'Collab/doc.txt' })).filesize).toBe(4);
    expect((await client.file.info({ fullpath: 'Collab/doc.txt' })).last_member_name).toBe('Ann');
    const ben = await gateway.members!.login('ben@example.com', 'ben-pw');
    if (!('session' in ben)) throw new Error(ben.refused);
    await ben.session.vfs.refresh();
    const seenByB = await dav(url, 'PROPFIND', '/Library/Collab/', { auth: asB, headers: { depth: '1' } });
    expect(seenByB.body).toContain('doc.txt');
    expect((await dav(url, 'GET', '/Library/Collab/doc.txt', { auth: asB })).body).toBe('a-v2');
  });
});
