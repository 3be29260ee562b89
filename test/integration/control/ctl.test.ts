/**
 * `cloudlib ctl` as a person or a script runs it, against a gateway on the embedded service: each family
 * reached through `ctl call`, the everyday verbs, bad input and their exit codes, no gateway answering.
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../../src/gateway/config.js';
import { Gateway } from '../../../src/gateway/gateway.js';
import { silentLogger } from '../../../src/shared/log.js';

const bin = fileURLToPath(new URL('../../../bin/cloudlib.js', import.meta.url));
let dir: string;
let gateway: Gateway;
let lib: string;

function ctl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, 'ctl', '--socket', join(dir, 'control.sock'), ...args], { timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr });
    });
  });
}

async function json(...args: string[]): Promise<unknown> {
  const r = await ctl('--json', ...args);
  if (r.code !== 0) throw new Error(`ctl ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ctl-gw-'));
  const config = await loadConfig({ data: dir, webdav: 'off', noMount: true }, {}, { fuseUsable: false });
  config.admin_listen = null;
  config.feed.interval_ms = 200;
  gateway = await Gateway.start({ config, logger: silentLogger });
  lib = gateway.vfs.libraryNames()[0]!;
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('cloudlib ctl against a running gateway', { timeout: 60_000 }, () => {
  it('status and library ls', async () => {
    const s = (await json('status')) as { libraries: { name: string }[]; embedded_service: boolean };
    expect(s.embedded_service).toBe(true);
    expect(s.libraries.map((l) => l.name)).toEqual([lib]);
    const human = await ctl('library', 'ls');
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(lib);
  });

  it('upload, download, history, tag, lock and unlock, restore an earlier version', async () => {
    const local = join(dir, 'v1.txt');
    await writeFile(local, 'first version');
    expect((await ctl('upload', local, `/${lib}/ctl/file.txt`)).code).toBe(0);
    await writeFile(local, 'second version, longer');
    expect((await ctl('upload', local, `/${lib}/ctl/file.txt`)).code).toBe(0);
    const out = join(dir, 'out.txt');
    expect((await ctl('download', `/${lib}/ctl/file.txt`, out)).code).toBe(0);
    expect(await readFile(out, 'utf8')).toBe('second version, longer');

    const history = (await json('history', `/${lib}/ctl/file.txt`)) as { list: { hid: string; filehash: string; filesize: number }[] };
    const first = history.list.find((h) => Number(h.filesize) === 'first version'.length);
    expect(first).toBeDefined();
    expect((await ctl('restore', `/${lib}/ctl/file.txt`, '--version', first!.filehash)).code).toBe(0);
    await gateway.vfs.refresh();
    expect((await ctl('download', `/${lib}/ctl/file.txt`, out)).code).toBe(0);
    expect(await readFile(out, 'utf8')).toBe('first version');

    expect((await ctl('tag', 'add', `/${lib}/ctl/file.txt`, 'draft', 'q4')).code).toBe(0);
    const info = (await json('call', 'file.info', `fullpath=/${lib}/ctl/file.txt`)) as { tag: string };
    expect(info.tag.split(';').sort()).toEqual(['draft', 'q4']);
    expect((await ctl('lock', `/${lib}/ctl/file.txt`)).code).toBe(0);
    expect((await ctl('unlock', `/${lib}/ctl/file.txt`)).code).toBe(0);
  });

  it('share links: create with expiry and password, list, close', async () => {
    await writeFile(join(dir, 'shared.txt'), 'shared');
    expect((await ctl('upload', join(dir, 'shared.txt'), `/${lib}/shared.txt`)).code).toBe(0);
    const created = (await json('link', 'create', `/${lib}/shared.txt`, '--expires', '7d', '--password', 'pw1234')) as { link: string; code: string };
    expect(created.link).toContain(created.code);
    const listed = JSON.stringify(await json('link', 'ls'));
    expect(listed).toContain(created.code);
    expect((await ctl('link', 'close', created.code)).code).toBe(0);
  });

  it('trash: a deleted file is listed and restored', async () => {
    await writeFile(join(dir, 'gone.txt'), 'gone');
    expect((await ctl('upload', join(dir, 'gone.txt'), `/${lib}/gone.txt`)).code).toBe(0);
    expect((await ctl('call', 'file.del', `fullpath=/${lib}/gone.txt`)).code).toBe(0);
    expect(JSON.stringify(await json('trash', 'ls'))).toContain('gone.txt');
    expect((await ctl('trash', 'restore', `/${lib}/gone.txt`)).code).toBe(0);
    expect(((await json('call', 'file.info', `fullpath=/${lib}/gone.txt`)) as { filesize: number }).filesize).toBeDefined();
  });

  it('member add, ls, disable, enable', async () => {
    expect((await ctl('member', 'add', 'erin@example.com', '--name', 'Erin')).code).toBe(0);
    expect(JSON.stringify(await json('member', 'ls'))).toContain('erin@example.com');
    expect(await json('member', 'disable', 'erin@example.com')).toMatchObject({ state: 0 });
    expect(await json('member', 'enable', 'erin@example.com')).toMatchObject({ state: 1 });
  });

  it('dept add, ls, rm; org create, ls, bind; partner ent create, ls, order; perm set and show', async () => {
    expect((await ctl('dept', 'add', 'Sales')).code).toBe(0);
    expect((await ctl('dept', 'add', 'East', '--parent', 'Sales')).code).toBe(0);
    expect(JSON.stringify(await json('dept', 'ls'))).toContain('East');
    expect((await ctl('dept', 'rm', 'Sales/East')).code).toBe(0);
    expect(JSON.stringify(await json('dept', 'ls'))).not.toContain('East');

    const created = (await json('org', 'create', 'Projects')) as { org_id: number };
    expect(JSON.stringify(await json('org', 'ls'))).toContain('Projects');
    const bound = (await json('org', 'bind', String(created.org_id))) as { org_client_id: string };
    expect(bound.org_client_id).toBeTruthy();

    expect((await ctl('partner', 'ent', 'create', 'acme-1', 'Acme', '--account', 'admin@acme.example', '--days', '30')).code).toBe(0);
    expect(JSON.stringify(await json('partner', 'ent', 'ls'))).toContain('acme-1');
    expect((await ctl('partner', 'ent', 'order', 'acme-1', 'trial.extend', '--days', '10')).code).toBe(0);

    expect((await ctl('member', 'add', 'perm@example.com', '--name', 'Perm')).code).toBe(0);
    await writeFile(join(dir, 'p.txt'), 'p');
    expect((await ctl('upload', join(dir, 'p.txt'), `/${lib}/perms/p.txt`)).code).toBe(0);
    const set = await ctl('perm', 'set', `/${lib}/perms`, '--member', 'perm@example.com', '--allow', 'ls,cd,dl', '--deny', 'rm');
    expect(set.code, set.stderr).toBe(0);
    const all = await ctl('--json', 'perm', 'show', `/${lib}/perms`);
    expect(all.code, all.stderr).toBe(0);
    const shown = await ctl('--json', 'perm', 'show', `/${lib}/perms`, '--member', 'perm@example.com');
    expect(shown.code, shown.stderr).toBe(0);
    expect(Object.keys((JSON.parse(all.stdout) as { members: Record<string, unknown> }).members)).toHaveLength(1);
    expect(JSON.parse(shown.stdout)).toMatchObject({ ls: 1, cd: 1, dl: 1, rm: -1, w: 0 });
  });

  it('each family is reached through `ctl call` with the gateway\'s credentials', async () => {
    expect(((await json('call', 'file.ls', `fullpath=/${lib}/`)) as { list: unknown[] }).list.length).toBeGreaterThan(0);
    expect(JSON.stringify(await json('call', 'org.ls'))).toContain(lib);
    // Families whose endpoints answer with the service's own result or its own error (never a gateway or usage error).
    for (const [method, ...params] of [['file2.get_member_permission', `fullpath=/${lib}/ctl`, 'member_id=1'], ['user.ls', 'fullpath=', `mount_id=${gateway.service!.credentials.library.mount_id}`], ['ent.get_members'], ['partner.ent_list']]) {
      const r = await ctl('--json', 'call', method!, ...params);
      expect(r.code === 0 || (r.code === 1 && /"error_code":\s*\d+/.test(r.stderr)), `${method}: ${r.code} ${r.stderr}`).toBe(true);
    }
  });

  it('bad input: exit 2 naming the parameter, nothing sent; unknown verb or method; exit 3 when no gateway answers', async () => {
    const missing = await ctl('call', 'file.move', `fullpath=/${lib}/ctl/file.txt`);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('dest_fullpath');
    const unknownParam = await ctl('call', 'file.ls', 'fullpath=', 'bogus=1');
    expect(unknownParam.code).toBe(2);
    expect(unknownParam.stderr).toContain('bogus');
    expect((await ctl('call', 'no.such_method')).code).toBe(2);
    expect((await ctl('frobnicate')).code).toBe(2);
    expect((await ctl('download', `/${lib}/ctl/none.txt`, join(dir, 'x'))).code).toBe(1);
    const none = await new Promise<number>((resolve) => {
      execFile(process.execPath, [bin, 'ctl', '--socket', join(dir, 'nobody.sock'), 'status'], (err) => resolve(err ? Number(err.code) : 0));
    });
    expect(none).toBe(3);
  });
});
