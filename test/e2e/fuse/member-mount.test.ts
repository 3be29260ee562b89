/**
 * `cloudlib up` with `mount.member`: a real FUSE mount (in a child process) acting as a member of the
 * enterprise. The member's folder permissions apply through the mount (EACCES, nothing changed on the
 * service), and what the member may do lands on the service with the member as the operator.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fuseUsable } from '../../../src/gateway/gateway.js';
import { put } from '../../integration/service/helpers.js';
import { errnoOf, startMemberUp, type MemberUp } from './member-up.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const canMount = existsSync(join(root, 'src/fuse/index.ts')) && (await fuseUsable());
const ACCOUNT = 'mounted-member@example.com';

let up: MemberUp | undefined;

beforeAll(async () => {
  if (!canMount) return;
  up = await startMemberUp({
    prefix: 'cloudlib-member-mount-', password: 'mounted-member-pw', mountMember: ACCOUNT,
    members: [{ account: ACCOUNT, name: 'Mounted', roleId: 5 }],
    prepare: async (t, [id]) => {
      await t.client.file.createFolder({ fullpath: 'Team' });
      await put(t.client, 'Team/plan.txt', 'the plan');
      await t.client.file2.setPermission({ fullpath: 'Team', permissions: JSON.stringify({ member_ids: [id], permission: { role_id: 0, ls: 1, cd: 1, ss: 1, pv: 1, dl: -1, ul: 1, w: -1, mk: -1, ren: -1, rm: -1 } }) });
    },
  });
}, 120_000);

afterAll(async () => {
  await up?.close();
}, 60_000);

describe.skipIf(!canMount)('a mount started as a member', { timeout: 120_000 }, () => {
  it("the member's permissions apply (EACCES, nothing changed); what they may do is recorded as theirs", async () => {
    const team = join(up!.mnt, 'Library', 'Team');
    expect(await readdir(team)).toEqual(['plan.txt']);
    expect(await errnoOf(readFile(join(team, 'plan.txt')))).toBe('EACCES');
    expect(await errnoOf(writeFile(join(team, 'plan.txt'), 'changed'))).toBe('EACCES');
    expect(await errnoOf(mkdir(join(team, 'sub')))).toBe('EACCES');
    expect(await errnoOf(unlink(join(team, 'plan.txt')))).toBe('EACCES');
    await writeFile(join(team, 'added.txt'), 'added through the mount');
    expect((await readdir(team)).sort()).toEqual(['added.txt', 'plan.txt']);

    // Stopping flushes the upload; then the service's own record.
    expect(await up!.stop()).toBe(0);
    await up!.onService(async (t) => {
      const list = (await t.client.file.ls({ fullpath: 'Team' })).list;
      expect(list.map((e) => e.filename).sort()).toEqual(['added.txt', 'plan.txt']);
      expect(list.find((e) => e.filename === 'added.txt')!.last_member_name).toBe('Mounted');
      expect(Number(list.find((e) => e.filename === 'plan.txt')!.filesize)).toBe('the plan'.length);
    });
  });
});
