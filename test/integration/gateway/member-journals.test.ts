/**
 * The journals of members without a session: a member's uploads left in their journal (the session ended
 * before they went up, or the gateway restarted) are listed by status with the member named, and a flush
 * says they wait for the member's next login instead of claiming everything is on the service; the next
 * login sends them.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LibraryRemote } from '../../../src/remote/library-remote.js';
import { MemberSessions } from '../../../src/gateway/member-sessions.js';
import { silentLogger } from '../../../src/shared/log.js';
import { startTestService, type TestService } from '../../support/service.js';
import { addMember, bootstrapApp, type TestMember } from '../service/user-fixtures.js';

const PW = 'member-pw-1';
let t: TestService;
let dir: string;
let member: TestMember;
let application: { client_id: string; client_secret: string };
const open: MemberSessions[] = [];

/** A gateway's member sessions over `dir` (a new instance: as after a restart). Uploads wait `delayMs` after the last close. */
function sessionsOf(delayMs: number): MemberSessions {
  const lib = new LibraryRemote({ client: t.client });
  const id = String(t.service.credentials.library.org_id);
  const s = new MemberSessions({
    baseUrl: t.service.baseUrl, application, dataDir: join(dir, 'members'),
    libraries: () => [{ name: 'Library', id, feed: lib, client: t.client }],
    vfs: { feedIntervalMs: 0, upload: { delayMs } }, checkIntervalMs: 3_600_000, closeFlushMs: 1, logger: silentLogger,
  });
  open.push(s);
  return s;
}

beforeAll(async () => {
  t = await startTestService();
  dir = await mkdtemp(join(tmpdir(), 'cloudlib-member-journals-'));
  await t.client.file.createFolder({ fullpath: 'Team' });
  member = await addMember(t, 'writer', { libraryRole: 5, password: PW });
  await t.client.file2.setPermission({ fullpath: 'Team', permissions: JSON.stringify({ member_ids: [member.id], permission: { role_id: 0, ls: 1, cd: 1, ss: 1, pv: 1, dl: 1, w: 1, ul: 1, mk: 1, ren: 1, rm: 1 } }) });
  application = await bootstrapApp(t);
});

afterAll(async () => {
  for (const s of open) await s.close().catch(() => undefined);
  await t?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('members\' journals without a session', () => {
  it('status lists them naming the member, flush says they wait for a login, the next login sends them', async () => {
    // A session whose upload waits an hour: it ends (as an idle one would) with the file in its journal.
    const first = sessionsOf(3_600_000);
    const outcome = await first.login(member.account, PW);
    if (!('session' in outcome)) throw new Error(`login refused: ${outcome.refused}`);
    await outcome.session.vfs.writeFile('/Library/Team/draft.txt', Readable.from([Buffer.from('the member\'s draft')]));
    await first.end(member.account, 'idle');
    expect(first.uploads().map((u) => [u.member, u.fullpath, u.state])).toEqual([[member.account, 'Team/draft.txt', 'queued']]);
    await expect(first.flushAll()).rejects.toThrow(new RegExp(`members without a session: ${member.account.replace(/[.+]/g, '\\$&')} \\(1\\)`));
    await first.close();

    // After a restart the journal is read again, before any login.
    const second = sessionsOf(0);
    await second.ready;
    const [waiting] = second.uploads();
    expect(waiting).toMatchObject({ member: member.account, library: 'Library', fullpath: 'Team/draft.txt', size: 18 });
    expect(waiting!.lastError).toMatch(/log in again/);
    await expect(second.flushAll()).rejects.toThrow(/next login/);
    expect((await t.client.file.ls({ fullpath: 'Team' })).list.map((r) => r.filename)).not.toContain('draft.txt');

    // The member's next login replays the journal: the upload goes, and flush then holds.
    const again = await second.login(member.account, PW);
    if (!('session' in again)) throw new Error(`login refused: ${again.refused}`);
    await second.flushAll({ timeoutMs: 30_000 });
    expect(second.uploads()).toEqual([]);
    const info = await t.client.file.info({ fullpath: 'Team/draft.txt' });
    expect(Number(info.filesize)).toBe(18);
  });
});
