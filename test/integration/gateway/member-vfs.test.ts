/**
 * A member's Vfs (what a mount started as a member serves): refusals of the service are EACCES with
 * nothing changed; caches are the member's own; and a version the member wrote waits in the member's
 * own journal until that member has a session again, also across a restart: it is uploaded as them,
 * never by anyone else's session.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LibraryRemote } from '../../../src/remote/library-remote.js';
import { UserTokenRemote } from '../../../src/remote/user-token-remote.js';
import { MemberSessions, type MemberSessionsOptions } from '../../../src/gateway/member-sessions.js';
import type { FaultyRemote, GatewayVfs } from '../../../src/vfs/index.js';
import { silentLogger } from '../../../src/shared/log.js';
import { bandwidthLimitOf } from '../../../src/shared/bandwidth-limit.js';
import { startTestService, type TestService } from '../../support/service.js';
import { put } from '../service/helpers.js';
import { addMember, bootstrapApp, type TestMember } from '../service/user-fixtures.js';

let t: TestService;
let dir: string;
let writer: TestMember;
let reader: TestMember;
const PW = 'vfs-member-pw';
/** How far the service's clock is ahead (a token made to expire). */
let skewMs = 0;

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code;
  }
}

function sessionsWith(extra: Partial<MemberSessionsOptions> = {}): MemberSessions {
  const lib = new LibraryRemote({ client: t.client });
  const id = String(t.service.credentials.library.org_id);
  return new MemberSessions({
    baseUrl: t.service.baseUrl, application: app, dataDir: join(dir, 'members'),
    libraries: () => [{ name: 'Library', id, feed: lib, client: t.client }],
    vfs: { feedIntervalMs: 0 }, checkIntervalMs: 3_600_000, closeFlushMs: 200, logger: silentLogger, clock: () => Date.now() + skewMs, ...extra,
  });
}

async function vfsOf(s: MemberSessions, m: TestMember): Promise<GatewayVfs> {
  const out = await s.login(m.account, PW);
  if (!('session' in out)) throw new Error(out.refused);
  return out.session.vfs;
}

let app: { client_id: string; client_secret: string };

beforeAll(async () => {
  t = await startTestService({ clock: () => Date.now() + skewMs });
  app = await bootstrapApp(t);
  dir = await mkdtemp(join(tmpdir(), 'cloudlib-member-vfs-'));
  await t.client.file.createFolder({ fullpath: 'Box' });
  await put(t.client, 'Box/secret.txt', 'secret bytes');
  writer = await addMember(t, 'writer', { libraryRole: 5, password: PW });
  reader = await addMember(t, 'reader', { libraryRole: 5, password: PW });
  const set = (m: TestMember, codes: Record<string, number>) =>
    t.client.file2.setPermission({ fullpath: 'Box', permissions: JSON.stringify({ member_ids: [m.id], permission: { role_id: 0, ...codes } }) });
  await set(writer, { ls: 1, cd: 1, ss: 1, pv: 1, dl: -1, w: 1, ul: 1, mk: 1, ren: -1, rm: -1 });
  await set(reader, { ls: 1, cd: 1, ss: 1, pv: 1, dl: 1, w: -1, ul: -1, mk: -1, ren: -1, rm: -1 });
});

afterAll(async () => {
  await t?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("a member's Vfs", () => {
  it('refusals are EACCES and change nothing; what one member read is not served to another', async () => {
    const s = sessionsWith();
    try {
      const w = await vfsOf(s, writer);
      const r = await vfsOf(s, reader);
      expect((await r.readdir('/Library/Box')).map((a) => a.name)).toEqual(['secret.txt']);
      const read = await r.createReadStream('/Library/Box/secret.txt');
      const chunks: Buffer[] = [];
      for await (const c of read) chunks.push(c as Buffer);
      expect(Buffer.concat(chunks).toString()).toBe('secret bytes');
      expect(await codeOf(w.createReadStream('/Library/Box/secret.txt'))).toBe('EACCES');
      expect(await codeOf(r.writeFile('/Library/Box/new.txt', Buffer.from('x')))).toBe('EACCES');
      expect(await codeOf(r.mkdir('/Library/Box/sub'))).toBe('EACCES');
      expect(await codeOf(w.rename('/Library/Box/secret.txt', '/Library/Box/other.txt'))).toBe('EACCES');
      expect(await codeOf(w.unlink('/Library/Box/secret.txt'))).toBe('EACCES');
      expect((await t.client.file.ls({ fullpath: 'Box' })).list.map((e) => e.filename)).toEqual(['secret.txt']);
      expect(w.remoteOf('Library')).toBeInstanceOf(UserTokenRemote);
      expect(w).not.toBe(r);
    } finally {
      await s.close();
    }
  });

  it("a member's uploads and downloads take their bytes through the gateway's bandwidth limit", async () => {
    const limit = bandwidthLimitOf('64M:32M');
    const s = sessionsWith({ bandwidth: limit });
    try {
      const w = await vfsOf(s, writer);
      const data = Buffer.alloc(300_000, 5);
      await w.writeFile('/Library/Box/limited.bin', data);
      await w.flushAll({ timeoutMs: 30_000 });
      expect(Number((await t.client.file.info({ fullpath: 'Box/limited.bin' })).filesize)).toBe(data.length);
      expect(limit.upload!.counters.bytes).toBeGreaterThanOrEqual(data.length);
      const r = await vfsOf(s, reader);
      const chunks: Buffer[] = [];
      for await (const c of await r.createReadStream('/Library/Box/limited.bin')) chunks.push(c as Buffer);
      expect(Buffer.concat(chunks).equals(data)).toBe(true);
      expect(limit.download!.counters.bytes).toBeGreaterThanOrEqual(data.length);
    } finally {
      await s.close();
    }
  });

  it("the library's feed reaches a member's cache only through their own lookups: what they may not see never enters it", async () => {
    const s = sessionsWith({ vfs: { feedIntervalMs: 3_600_000 } });
    try {
      await t.client.file.createFolder({ fullpath: 'Closed' });
      await t.client.file2.setPermission({ fullpath: 'Closed', permissions: JSON.stringify({ member_ids: [reader.id], permission: { role_id: 0, ls: -1, cd: -1, ss: -1 } }) });
      const r = await vfsOf(s, reader);
      expect((await r.readdir('/Library/Box')).map((a) => a.name)).toEqual(expect.arrayContaining(['secret.txt']));
      expect(await codeOf(r.readdir('/Library/Closed'))).toBe('EACCES');
      await r.refresh();
      await put(t.client, 'Box/visible.txt', 'for the reader');
      await put(t.client, 'Closed/hidden.txt', 'not for the reader');
      await r.refresh();
      expect(r.cache.getEntry('Library', 'Closed/hidden.txt')).toBeFalsy();
      expect(r.cache.getEntry('Library', 'Box/visible.txt')).toMatchObject({ fullpath: 'Box/visible.txt', size: 'for the reader'.length });
      expect((r.remoteOf('Library') as UserTokenRemote).counters.feedLookups).toBeGreaterThanOrEqual(2);
      expect(await codeOf(r.stat('/Library/Closed/hidden.txt'))).toMatch(/EACCES|ENOENT/);
    } finally {
      await s.close();
    }
  });

  it('a file not yet uploaded renamed into a folder where the member may not add files: EACCES, nothing moved', async () => {
    // A long write-back delay: the file is only local when it is renamed (a rename of it asks nothing else of the service).
    const s = sessionsWith({ vfs: { feedIntervalMs: 0, upload: { delayMs: 3_600_000 } } });
    try {
      await t.client.file.createFolder({ fullpath: 'NoAdd' });
      await t.client.file2.setPermission({ fullpath: 'NoAdd', permissions: JSON.stringify({ member_ids: [writer.id], permission: { role_id: 0, ls: 1, cd: 1, ss: 1, pv: 1, dl: 1, w: -1, ul: -1, mk: -1, ren: -1, rm: -1 } }) });
      const w = await vfsOf(s, writer);
      await w.writeFile('/Library/Box/draft.tmp', Buffer.from('draft'));
      expect(await codeOf(w.rename('/Library/Box/draft.tmp', '/Library/NoAdd/draft.txt'))).toBe('EACCES');
      expect((await w.readdir('/Library/Box')).map((a) => a.name)).toContain('draft.tmp');
      // Within its folder (where it was added) it moves.
      await w.rename('/Library/Box/draft.tmp', '/Library/Box/draft.txt');
      await w.flushAll();
      expect((await t.client.file.ls({ fullpath: 'Box' })).list.map((e) => e.filename)).toContain('draft.txt');
      expect((await t.client.file.ls({ fullpath: 'NoAdd' })).list.map((e) => e.filename)).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it("an expired token is refreshed with the member's refresh token and the call replayed: the session goes on", async () => {
    const s = sessionsWith();
    try {
      const out = await s.login(reader.account, PW);
      if (!('session' in out)) throw new Error(out.refused);
      const before = out.session.client.credentials.user!.token;
      skewMs = 3 * 3_600_000;
      out.session.vfs.cache.dropLibrary('Library');
      expect((await out.session.vfs.readdir('/Library/Box')).map((a) => a.name)).toContain('secret.txt');
      expect(out.session.client.credentials.user!.token).not.toBe(before);
    } finally {
      skewMs = 0;
      await s.close();
    }
  });

  it('sessions are bounded (the least recently used is closed) and end when idle; a pinned one stays', async () => {
    let later = 0;
    const s = sessionsWith({ maxSessions: 1, idleMs: 60_000, clock: () => Date.now() + later });
    try {
      const w = await vfsOf(s, writer);
      await vfsOf(s, reader);
      expect(s.list().map((x) => x.account)).toEqual([reader.account]);
      expect(await codeOf(w.readdir('/Library/Box'))).toBeTruthy();
      later += 120_000;
      await s.closeIdle();
      expect(s.list()).toEqual([]);
      // A pinned session (a mount acting as the member) is neither idled out nor made room for.
      const pinned = await s.pinned(writer.account, PW);
      await vfsOf(s, reader);
      later += 120_000;
      await s.closeIdle();
      expect(s.list().map((x) => x.account)).toEqual([writer.account]);
      expect((await pinned.vfs.readdir('/Library/Box')).map((a) => a.name)).toContain('secret.txt');
    } finally {
      await s.close();
    }
  });

  it('a session holding an Office lock file is not closed for idleness until the lock file goes', async () => {
    let later = 0;
    const s = sessionsWith({ idleMs: 60_000, clock: () => Date.now() + later });
    try {
      const w = await vfsOf(s, writer);
      await w.writeFile('/Library/Box/~$secret.txt', Buffer.from('writer'));
      later += 120_000;
      await s.closeIdle();
      expect(s.list().map((x) => x.account)).toEqual([writer.account]);
      await w.unlink('/Library/Box/~$secret.txt');
      await s.closeIdle();
      expect(s.list()).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it("a version waiting in the member's journal is uploaded as that member by their next session (after a restart), never by another's", async () => {
    const first = sessionsWith({ vfs: { feedIntervalMs: 0, faults: true } });
    const w = await vfsOf(first, writer);
    // The service is away for uploads: the version is journaled and stays there.
    (w.remoteOf('Library') as FaultyRemote).inject({ kind: 'fail', methods: ['commit'], unreachable: true });
    await w.writeFile('/Library/Box/pending.txt', Buffer.from('from the journal'));
    await first.close();
    expect((await t.client.file.ls({ fullpath: 'Box' })).list.map((e) => e.filename)).not.toContain('pending.txt');

    // After the restart: another member's session does not upload it.
    const second = sessionsWith();
    try {
      const r = await vfsOf(second, reader);
      await r.flushAll({ timeoutMs: 5000 });
      expect((await t.client.file.ls({ fullpath: 'Box' })).list.map((e) => e.filename)).not.toContain('pending.txt');
      // The writer logs in again: their session replays their journal under their token.
      const again = await vfsOf(second, writer);
      await again.flushAll({ timeoutMs: 30_000 });
      const info = await t.client.file.info({ fullpath: 'Box/pending.txt' });
      expect(info.last_member_name).toBe('writer');
      expect(Number(info.filesize)).toBe('from the journal'.length);
    } finally {
      await second.close();
    }
  });
});
