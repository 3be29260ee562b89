/**
 * `cloudlib ctl` as a person or a script runs it, against a gateway on the embedded service: each family
 * reached through `ctl call`, the everyday verbs, help and completion, bad input and their exit codes, no
 * gateway answering; and the socket itself: its mode, bad and oversized messages, two clients at once,
 * a second instance refused.
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { createConnection } from 'node:net';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
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

function run(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { timeout: 30_000, env }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr });
    });
  });
}

function ctl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(['ctl', '--socket', join(dir, 'control.sock'), ...args]);
}

/** Sends raw lines on a new connection and collects `count` answer lines. */
function raw(lines: (string | Buffer)[], count: number): Promise<Record<string, any>[]> {
  return new Promise((resolve, reject) => {
    const sock = createConnection(join(dir, 'control.sock'));
    let buf = '';
    const out: Record<string, any>[] = [];
    const t = setTimeout(() => { sock.destroy(); reject(new Error(`got ${out.length} of ${count} answers: ${buf}`)); }, 10_000);
    sock.on('data', (c: Buffer) => {
      buf += c.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) !== -1) {
        out.push(JSON.parse(buf.slice(0, nl)) as Record<string, any>);
        buf = buf.slice(nl + 1);
      }
      if (out.length >= count) { clearTimeout(t); sock.end(); resolve(out); }
    });
    sock.on('error', reject);
    for (const l of lines) sock.write(l);
  });
}

async function json(...args: string[]): Promise<unknown> {
  const r = await ctl('--json', ...args);
  if (r.code !== 0) throw new Error(`ctl ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ctl-gw-'));
  const config = await loadConfig({ data: dir, webdav: 'off', noMount: true, serviceListen: '127.0.0.1:0', adminListen: '127.0.0.1:0' }, {}, { fuseUsable: false });
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
    // A code is letters and digits, but `--` would pass one that starts with '-' as it is.
    const closed = await ctl('link', 'close', '--', created.code);
    expect(closed.code, closed.stderr).toBe(0);
    expect(JSON.stringify(await json('link', 'ls'))).not.toContain(created.code);
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
    // for a person: the member by account, with the advanced permissions set (not an empty list)
    const human = await ctl('perm', 'show', `/${lib}/perms`);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^perm@example\.com +- +ls,cd,dl +rm$/m);
  });

  it('each family is reached through `ctl call` with the gateway\'s credentials', async () => {
    expect(((await json('call', 'file.ls', `fullpath=/${lib}/`)) as { list: unknown[] }).list.length).toBeGreaterThan(0);
    expect(JSON.stringify(await json('call', 'org.ls'))).toContain(lib);
    // Every other family answers with the service's result, signed with the gateway's credentials.
    const results: Record<string, unknown> = {};
    for (const [method, ...params] of [['file2.get_member_permission', `fullpath=/${lib}/perms`, 'account=perm@example.com'], ['user.ls', `mount_id=${gateway.service!.credentials.library.mount_id}`], ['ent.get_members'], ['partner.ent_list']]) {
      const r = await ctl('--json', 'call', method!, ...params);
      expect(r.code, `${method}: ${r.stderr}`).toBe(0);
      results[method!] = JSON.parse(r.stdout);
    }
    expect(results['file2.get_member_permission']).toMatchObject({ dl: 1, rm: -1 });
    expect((results['user.ls'] as { list: unknown[] }).list.length).toBeGreaterThan(0);
    expect(JSON.stringify(results['ent.get_members'])).toContain('perm@example.com');
    expect(JSON.stringify(results['partner.ent_list'])).toContain('acme-1');
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

  it('the socket: owner-only, bad JSON, oversized and unknown messages get errors and the gateway goes on', async () => {
    expect((await stat(join(dir, 'control.sock'))).mode & 0o777).toBe(0o600);
    const big = '{"jsonrpc":"2.0","id":9,"method":"status","params":{"x":"' + 'y'.repeat(1.5 * 1024 * 1024) + '"}}\n';
    const answers = await raw([
      '{not json\n',
      big,
      '{"jsonrpc":"2.0","id":1,"method":"no.such"}\n',
      '{"jsonrpc":"1.0","id":2,"method":"status"}\n',
      '{"jsonrpc":"2.0","id":3,"method":"file.info","params":["a"]}\n',
      '{"jsonrpc":"2.0","id":4,"method":"status"}\n',
    ], 6);
    expect(answers.map((a) => a.error?.code ?? 'ok')).toEqual([-32700, -32002, -32601, -32600, -32602, 'ok']);
    expect(answers[5]!.id).toBe(4);
    expect(answers[5]!.result.libraries.map((l: { name: string }) => l.name)).toEqual([lib]);
    // A batch, and a notification (no id) that gets no answer.
    const [batch] = await raw(['[{"jsonrpc":"2.0","method":"status"},{"jsonrpc":"2.0","id":7,"method":"library.ls"}]\n'], 1);
    expect(batch).toEqual([expect.objectContaining({ id: 7, result: [expect.objectContaining({ name: lib })] })]);
    expect((await ctl('status')).code).toBe(0);
  });

  it('a JSON number where the endpoint table says string is -32602, for endpoint and gateway methods alike', async () => {
    const answers = await raw([
      '{"jsonrpc":"2.0","id":1,"method":"file.info","params":{"fullpath":123}}\n',
      `{"jsonrpc":"2.0","id":2,"method":"file.info","params":{"library":7,"fullpath":"a.txt"}}\n`,
      '{"jsonrpc":"2.0","id":3,"method":"file.info","params":{"fullpath":["a"]}}\n',
      `{"jsonrpc":"2.0","id":4,"method":"version.restore","params":{"path":"/${lib}/a.txt","version":5}}\n`,
      '{"jsonrpc":"2.0","id":5,"method":"status"}\n',
    ], 5);
    const byId = new Map(answers.map((a) => [a.id, a]));
    for (const id of [1, 2, 3, 4]) expect(byId.get(id)?.error?.code, `id ${id}: ${JSON.stringify(byId.get(id))}`).toBe(-32602);
    expect(byId.get(1)!.error.message).toMatch(/'fullpath' expected a string, got number 123/);
    expect(byId.get(5)!.result).toBeDefined();
    // The command line sends its key=value words as strings: a file named 123 is fine there.
    const r = await ctl('--json', 'call', 'file.info', 'fullpath=123');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/40402|no such|not found/i);
  });

  it('service errors come back with their error_code (exit 1); `call` takes both path forms', async () => {
    const r = await ctl('--json', 'call', 'file.info', `fullpath=/${lib}/no/such.txt`);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stderr.split('\n')[1]!)).toMatchObject({ error_code: 40402, endpoint: expect.stringContaining('info') });
    await writeFile(join(dir, 'forms.txt'), 'forms');
    expect((await ctl('upload', join(dir, 'forms.txt'), `/${lib}/forms/a.txt`)).code).toBe(0);
    const byGateway = (await json('call', 'file.info', `fullpath=/${lib}/forms/a.txt`)) as { hash: string };
    const byLibrary = (await json('call', 'file.info', `library=${lib}`, 'fullpath=forms/a.txt')) as { hash: string };
    const bare = (await json('call', 'file.info', 'fullpath=forms/a.txt')) as { hash: string };
    expect(byLibrary.hash).toBe(byGateway.hash);
    expect(bare.hash).toBe(byGateway.hash);
    // Other path parameters: move's dest_fullpath, search's path, mcopy's |-separated lists.
    expect((await ctl('call', 'file.move', `fullpath=/${lib}/forms/a.txt`, `dest_fullpath=/${lib}/forms/b.txt`)).code).toBe(0);
    expect(JSON.stringify(await json('call', 'file.search', 'keywords=b.txt', `path=/${lib}/forms`))).toContain('forms/b.txt');
    expect((await ctl('call', 'file.create_folder', `fullpath=/${lib}/forms2`)).code).toBe(0);
    expect((await ctl('call', 'file.mcopy', `from_fullpaths=/${lib}/forms/b.txt`, `paths=/${lib}/forms2`)).code).toBe(0);
    expect(JSON.stringify(await json('call', 'file.ls', `fullpath=/${lib}/forms2`))).toContain('b.txt');
    const other = await ctl('call', 'file.info', 'library=Nope', 'fullpath=forms/b.txt');
    expect(other.code).toBe(2);
    expect(other.stderr).toContain("unknown library 'Nope'");
  });

  it('two clients at once: ctl processes in parallel each get their own answer', async () => {
    await writeFile(join(dir, 'par.bin'), Buffer.alloc(512 * 1024, 3));
    const [up, st, ls] = await Promise.all([ctl('upload', join(dir, 'par.bin'), `/${lib}/par.bin`), ctl('--json', 'status'), ctl('--json', 'library', 'ls')]);
    expect([up.code, st.code, ls.code]).toEqual([0, 0, 0]);
    expect(up.stderr).toBe(''); // no progress bar when stderr is not a terminal
    expect(up.stdout.trim()).toBe(`uploaded /${lib}/par.bin (512.0 KiB)`);
    expect(JSON.parse(st.stdout)).toHaveProperty('caches');
    expect(JSON.parse(ls.stdout)).toEqual([expect.objectContaining({ name: lib })]);
  });

  it('a second instance on the same data folder is refused and leaves the first one serving', async () => {
    const config = await loadConfig({ data: dir, webdav: 'off', noMount: true, serviceListen: '127.0.0.1:0', adminListen: '127.0.0.1:0' }, {}, { fuseUsable: false });
    config.admin_listen = null;
    await expect(Gateway.start({ config, logger: silentLogger })).rejects.toThrow(/another cloudlib instance/);
    expect((await stat(join(dir, 'control.sock'))).isSocket()).toBe(true);
    expect(JSON.parse(await readFile(join(dir, 'endpoints.json'), 'utf8'))).toHaveProperty('control_socket');
    expect((await ctl('status')).code).toBe(0);
  });

  it('the socket from $CLOUDLIB_SOCKET, else $CLOUDLIB_HOME/control.sock; --socket wins', async () => {
    const env = { ...process.env, CLOUDLIB_SOCKET: join(dir, 'control.sock') };
    expect((await run(['ctl', 'library', 'ls'], env)).code).toBe(0);
    const { CLOUDLIB_SOCKET: _s, ...rest } = process.env;
    expect((await run(['ctl', 'library', 'ls'], { ...rest, CLOUDLIB_HOME: dir })).code).toBe(0);
    expect((await run(['ctl', '--socket', join(dir, 'none.sock'), 'library', 'ls'], env)).code).toBe(3);
  });

  it('library add and remove at run time; cp across libraries', async () => {
    const created = (await json('org', 'create', 'Runtime')) as { org_id: number };
    const bound = (await json('org', 'bind', String(created.org_id))) as { org_client_id: string; org_client_secret: string };
    const env = { ...process.env, RUNTIME_SECRET: bound.org_client_secret };
    const added = await run(['ctl', '--socket', join(dir, 'control.sock'), 'library', 'add', bound.org_client_id, '--secret-env', 'RUNTIME_SECRET'], env);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout.trim()).toBe('serving library /Runtime');
    expect(((await json('library', 'ls')) as { name: string }[]).map((l) => l.name)).toEqual([lib, 'Runtime']);
    await writeFile(join(dir, 'rt.txt'), 'runtime');
    expect((await ctl('upload', join(dir, 'rt.txt'), '/Runtime/rt.txt')).code).toBe(0);
    expect(((await json('call', 'file.info', 'fullpath=/Runtime/rt.txt')) as { filesize: number }).filesize).toBe(7);
    const across = await ctl('cp', '/Runtime/rt.txt', `/${lib}/rt-copy.txt`);
    expect(across.stdout.trim(), across.stderr).toBe(`copied /Runtime/rt.txt to /${lib}/rt-copy.txt (1 file(s), 7 B)`);
    expect((await ctl('download', `/${lib}/rt-copy.txt`, join(dir, 'rt-copy.txt'))).code).toBe(0);
    expect(await readFile(join(dir, 'rt-copy.txt'), 'utf8')).toBe('runtime');
    // Two libraries now: a bare path is refused, naming the parameter.
    expect((await ctl('call', 'file.info', 'fullpath=rt.txt')).stderr).toContain("parameter 'library' is required");
    expect((await ctl('library', 'remove', 'Runtime')).stdout.trim()).toBe('no longer serving /Runtime');
    expect(((await json('library', 'ls')) as { name: string }[]).map((l) => l.name)).toEqual([lib]);
    expect((await ctl('library', 'add', 'x')).code).toBe(2);
  });

  it('cp within a library; trash purge; dept members; partner ent info after an order', async () => {
    await writeFile(join(dir, 'c.txt'), 'copy me');
    expect((await ctl('upload', join(dir, 'c.txt'), `/${lib}/cp/c.txt`)).code).toBe(0);
    const cp = await ctl('cp', `/${lib}/cp/c.txt`, `/${lib}/cp/d.txt`);
    expect(cp.stdout.trim()).toBe(`copied /${lib}/cp/c.txt to /${lib}/cp/d.txt (1 file(s), 7 B)`);
    expect((await ctl('cp', `/${lib}/cp/c.txt`, `/${lib}/cp/d.txt`)).code).toBe(1);
    expect((await ctl('cp', `/${lib}/cp/c.txt`, `/${lib}/cp/d.txt`, '--overwrite')).code).toBe(0);

    expect((await ctl('call', 'file.del', `fullpath=/${lib}/cp/d.txt`)).code).toBe(0);
    expect(JSON.stringify(await json('trash', 'ls'))).toContain('cp/d.txt');
    expect((await ctl('trash', 'purge', `/${lib}/cp/d.txt`)).stdout.trim()).toBe(`purged /${lib}/cp/d.txt`);
    expect(JSON.stringify(await json('trash', 'ls'))).not.toContain('cp/d.txt');

    expect((await ctl('dept', 'add', 'Support')).stdout).toMatch(/^added department Support \(id \d+\)/);
    expect((await ctl('member', 'add', 'sam@example.com', '--dept', 'Support')).code).toBe(0);
    expect(JSON.stringify(await json('dept', 'members', 'Support'))).toContain('sam@example.com');

    expect((await ctl('partner', 'ent', 'create', 'acme-2', 'Acme Two', '--days', '5')).code).toBe(0);
    const before = (await json('partner', 'ent', 'info', 'acme-2')) as { end_dateline: number };
    expect((await ctl('partner', 'ent', 'order', 'acme-2', 'trial.extend', '--days', '10')).stdout.trim()).toBe('order trial.extend placed for acme-2');
    const after = (await json('partner', 'ent', 'info', 'acme-2')) as { end_dateline: number };
    expect(after.end_dateline - before.end_dateline).toBe(10 * 86400);
  });

  it('--help for every verb and method, from the same tables; completion', async () => {
    const verb = await ctl('link', 'create', '--help');
    expect(verb.code).toBe(0);
    expect(verb.stdout).toContain('Usage: cloudlib ctl link create PATH');
    expect(verb.stdout).toMatch(/file\.link — POST \/m-open\/1\/file\/link/);
    expect(verb.stdout).toMatch(/access_limit\s+int/);
    const method = await ctl('call', 'org.bind', '--help');
    expect(method.stdout).toContain('exactly one of: org_id, mount_id');
    expect((await ctl('help', 'partner.create_ent')).stdout).toMatch(/out_id\s+string, required/);
    expect((await ctl('partner', '--help')).stdout).toContain('partner ent order OUT_ID TYPE');
    expect((await ctl('help', 'frobnicate')).code).toBe(2);
    const offline = await run(['ctl', '--socket', join(dir, 'none.sock'), 'member', 'add', '--help']);
    expect(offline.code).toBe(0);
    expect(offline.stdout).toContain('ent.add_member — ');
    const top = await run(['ctl', '--help']);
    expect(top.stdout).toContain('Exit codes: 0 done');
    const completion = await ctl('completion', 'bash');
    expect(completion.stdout).toContain('complete -o default -F _cloudlib_ctl cloudlib');
  });

  it('bad input changes nothing: usage errors exit 2 before anything is sent', async () => {
    const links = JSON.stringify(await json('link', 'ls'));
    for (const args of [
      ['link', 'create', `/${lib}/shared.txt`, '--expires', 'soon'],
      ['link', 'create', `/${lib}/shared.txt`, '--limit', 'many'],
      ['link', 'create', `/${lib}/shared.txt`, '--bogus', '1'],
      ['perm', 'set', `/${lib}/perms`, '--member', 'x@example.com', '--allow', 'fly'],
      ['history', `/${lib}/shared.txt`, '--size', '-1'],
      ['member', 'add', 'nobody@example.com', '--password-env', 'NO_SUCH_VARIABLE_SET'],
      ['call', 'file.link', `fullpath=/${lib}/shared.txt`, 'deadline=tomorrow'],
      ['call', 'file.link'],
    ]) {
      const r = await ctl(...args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(/^cloudlib ctl: /);
    }
    expect(JSON.stringify(await json('link', 'ls'))).toBe(links);
    expect(JSON.stringify(await json('member', 'ls'))).not.toContain('nobody@example.com');
  });
});
