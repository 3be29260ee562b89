/**
 * Permission matrix through the user API: for each advanced code with a user-API action, a member
 * granted it (on the folder, by the advanced endpoint) can do the action and a member denied it cannot
 * (403/40310, or the item is not listed for display codes); the denied attempt changes nothing.
 * The other codes (links, recycle bin, history, tags, comments, share participants, library settings)
 * have no endpoint in the user file API: for them the model's answer (1 / -1) is checked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceClient } from '../../../src/api/client.js';
import { PERMISSION_CODES } from '../../../src/service/domain/permissions-codes.js';
import { startTestService, type TestService } from '../../support/service.js';
import { codeOf, put, sha1 } from './helpers.js';
import { addMember, type TestMember } from './user-fixtures.js';

let t: TestService;
let mount: number;
let granted: TestMember;
let denied: TestMember;
beforeAll(async () => {
  t = await startTestService();
  mount = t.service.credentials.library.mount_id;
  granted = await addMember(t, 'granted', { libraryRole: 0 });
  denied = await addMember(t, 'denied', { libraryRole: 0 });
});
afterAll(async () => { await t?.close(); });

/** Sets the same base codes for both members on `folder`, plus `code` = 1 for one and -1 for the other. */
async function grantAndDeny(folder: string, code: string, base: Record<string, number> = {}) {
  await t.client.file2.setPermission({ fullpath: folder, permissions: JSON.stringify({ member_ids: [granted.id], permission: { role_id: 0, ...base, [code]: 1 } }) });
  await t.client.file2.setPermission({ fullpath: folder, permissions: JSON.stringify({ member_ids: [denied.id], permission: { role_id: 0, ...base, [code]: -1 } }) });
}

const names = async (c: ServiceClient, fullpath: string) => ((await c.user.ls({ mount_id: mount, fullpath })).list).map((r) => r.fullpath);

interface Case { code: string; base?: Record<string, number>; folder?: string; setup: (f: string) => Promise<void>; act: (c: ServiceClient, f: string) => Promise<unknown>; check?: (f: string) => Promise<void> }

const cases: Case[] = [
  { code: 'ls', base: { cd: 1 }, setup: async (f) => { await put(t.client, `${f}/a.txt`, 'a'); },
    act: async (c, f) => { if (!(await names(c, f)).includes(`${f}/a.txt`)) throw Object.assign(new Error('not listed'), { code: 40310 }); } },
  { code: 'cd', base: { ls: 1 }, setup: async (f) => { await put(t.client, `${f}/a.txt`, 'a'); }, act: (c, f) => c.user.ls({ mount_id: mount, fullpath: f }) },
  { code: 'pv', setup: async (f) => { await put(t.client, `${f}/a.txt`, 'preview me'); }, act: (c, f) => c.user.previewUrl({ mount_id: mount, fullpath: `${f}/a.txt` }) },
  { code: 'dl', setup: async (f) => { await put(t.client, `${f}/a.txt`, 'download me'); }, act: (c, f) => c.user.open({ mount_id: mount, fullpath: `${f}/a.txt` }) },
  { code: 'w', setup: async (f) => { await put(t.client, `${f}/a.txt`, 'v1'); await put(t.client, 'w-source.txt', 'v2'); },
    act: (c, f) => c.user.createFile({ mount_id: mount, fullpath: `${f}/a.txt`, filehash: sha1('v2'), filesize: 2, overwrite: 1 }),
    check: async (f) => { expect((await t.client.file.info({ fullpath: `${f}/a.txt` })).filesize).toBe(2); } },
  { code: 'ul', setup: async () => { await put(t.client, 'ul-source.txt', 'upload'); },
    act: (c, f) => c.user.createFile({ mount_id: mount, fullpath: `${f}/new.txt`, filehash: sha1('upload'), filesize: 6 }),
    check: async (f) => { expect((await t.client.file.ls({ fullpath: f })).list.map((r) => r.filename)).toEqual(['new.txt']); } },
  { code: 'mk', setup: async () => {}, act: (c, f) => c.user.createFolder({ mount_id: mount, fullpath: `${f}/made` }),
    check: async (f) => { expect((await t.client.file.ls({ fullpath: f })).list.map((r) => r.filename)).toEqual(['made']); } },
  { code: 'ren', setup: async (f) => { await put(t.client, `${f}/a.txt`, 'a'); }, act: (c, f) => c.user.rename({ mount_id: mount, fullpath: `${f}/a.txt`, newname: 'b.txt' }),
    check: async (f) => { expect((await t.client.file.ls({ fullpath: f })).list.map((r) => r.filename)).toEqual(['b.txt']); } },
  { code: 'rm', setup: async (f) => { await put(t.client, `${f}/a.txt`, 'a'); }, act: (c, f) => c.user.del({ mount_id: mount, fullpath: `${f}/a.txt` }),
    check: async (f) => { expect((await t.client.file.ls({ fullpath: f })).count).toBe(0); } },
  // "current item" codes: set on the folder item itself (the sub-folder), checked on that item.
  { code: 'ss', folder: 'sub', setup: async (f) => { await t.client.file.createFolder({ fullpath: `${f}/sub` }); },
    act: async (c, f) => { if (!(await names(c, f)).includes(`${f}/sub`)) throw Object.assign(new Error('not listed'), { code: 40310 }); } },
  { code: 'sren', folder: 'sub', setup: async (f) => { await t.client.file.createFolder({ fullpath: `${f}/sub` }); },
    act: (c, f) => c.user.rename({ mount_id: mount, fullpath: `${f}/sub`, newname: 'renamed' }),
    check: async (f) => { expect((await t.client.file.ls({ fullpath: f })).list.map((r) => r.filename)).toEqual(['renamed']); } },
  { code: 'srm', folder: 'sub', setup: async (f) => { await t.client.file.createFolder({ fullpath: `${f}/sub` }); },
    act: (c, f) => c.user.del({ mount_id: mount, fullpath: `${f}/sub` }),
    check: async (f) => { expect((await t.client.file.ls({ fullpath: f })).count).toBe(0); } },
];

async function outcome(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 0;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'number') return code;
    throw err;
  }
}

describe('permission matrix (user API)', () => {
  for (const c of cases) {
    it(`${c.code}: granted can, denied cannot`, async () => {
      const folder = `matrix-${c.code}`;
      await t.client.file.createFolder({ fullpath: folder });
      await c.setup(folder);
      if (c.folder) {
        // Both may enter and list the parent; the code under test is set on the sub-folder.
        await grantAndDeny(`${folder}/${c.folder}`, c.code);
        await t.client.file2.setPermission({ fullpath: folder, permissions: JSON.stringify({ member_ids: [granted.id, denied.id], permission: { role_id: 0, cd: 1 } }) });
      } else {
        await grantAndDeny(folder, c.code, c.base);
      }
      const before = JSON.stringify((await t.client.file.ls({ fullpath: folder })).list.map((r) => [r.fullpath, r.filehash]));
      expect(await outcome(c.act(denied.client, folder))).toBe(40310);
      expect(JSON.stringify((await t.client.file.ls({ fullpath: folder })).list.map((r) => [r.fullpath, r.filehash]))).toBe(before);
      const state = await t.client.file2.getMemberPermission({ fullpath: c.folder ? `${folder}/${c.folder}` : folder, member_id: String(denied.id) });
      expect(state[c.code]).toBe(-1);
      expect(await outcome(c.act(granted.client, folder))).toBe(0);
      await c.check?.(folder);
    });
  }

  const withoutUserAction = ['ln', 'rmk', 'rmka', 't', 'trm', 'p', 'ps', 'mls', 'b', 'br', 'be', 'mln', 'h', 'hr'];

  it('every advanced code is in the matrix or has no user-API action', () => {
    expect([...cases.map((c) => c.code), ...withoutUserAction].sort()).toEqual([...PERMISSION_CODES].sort());
  });

  it('codes without a user-API action: the granted member holds 1, the denied one -1', async () => {
    await t.client.file.createFolder({ fullpath: 'matrix-rest' });
    for (const code of withoutUserAction) {
      await grantAndDeny('matrix-rest', code);
      const [g, d] = await Promise.all([granted, denied].map((m) => t.client.file2.getMemberPermission({ fullpath: 'matrix-rest', member_id: String(m.id) })));
      expect([code, g![code], d![code]]).toEqual([code, 1, -1]);
    }
  });

  it('refusals are 403 with a message naming the code and the folder; the library API keeps its top authority', async () => {
    await t.client.file.createFolder({ fullpath: 'guarded' });
    await put(t.client, 'guarded/a.txt', 'a');
    await t.client.file2.setPermission({ fullpath: 'guarded', permissions: JSON.stringify({ member_ids: [denied.id], permission: { role_id: 4, dl: -1 } }) });
    const err = await denied.client.user.open({ mount_id: mount, fullpath: 'guarded/a.txt' }).catch((e: unknown) => e) as { status: number; code: number; message: string };
    expect(err.status).toBe(403);
    expect(err.code).toBe(40310);
    expect(err.message).toContain("'dl'");
    expect(err.message).toContain('guarded');
    expect(await codeOf(t.client.file.downloadUrl({ fullpath: 'guarded/a.txt' }))).toBe(0);
    expect(await codeOf(t.client.file.del({ fullpath: 'guarded/a.txt' }))).toBe(0);
  });
});
