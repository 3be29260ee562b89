/**
 * The second day with `cloudlib up`, as a person meets it: started with no `--data` in one folder, `ctl`
 * from another finds it (one data folder per user, under a temporary HOME here); a restart keeps the
 * embedded service's address (share links made before it still open) and the status page's; a kept
 * address that is taken is refused with a clear error. Another gateway or test run on this machine may hold
 * the default addresses (8081, 8082): the test checks that `up` documents and derives them, then moves them
 * to ports free now with CLOUDLIB_DEFAULT_SERVICE_LISTEN / CLOUDLIB_DEFAULT_ADMIN_LISTEN, which a first
 * start takes and keeps exactly as it would the built-in ones.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { fuseUsable, type EndpointsFile } from '../../../src/gateway/gateway.js';
import { loadConfig } from '../../../src/gateway/config.js';
import { freePort } from '../../support/free-port.js';
import { waitFor } from '../../support/wait-for.js';
import { CloudlibProcesses, exited, jsonWrittenBy, logged, remoteService, runCloudlib as cloudlib, type CloudlibChild } from '../../support/cloudlib-processes.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const ready = existsSync(join(root, 'src/service/index.ts'));
const canMount = ready && (await fuseUsable());

const processes = new CloudlibProcesses();
const dirs: string[] = [];
const servers: Server[] = [];
const mounts: string[] = [];
afterEach(async () => {
  await processes.stopAll();
  for (const s of servers.splice(0)) s.close();
  // A mount left by a failed test: taken away lazily (never touched synchronously from here).
  for (const m of mounts.splice(0)) await new Promise((r) => execFile('fusermount3', ['-uz', m], () => r(undefined)));
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** The environment of a person with HOME at `home`: none of the variables that name a data folder, socket or address. */
function personEnv(home: string): NodeJS.ProcessEnv {
  const {
    CLOUDLIB_HOME: _h, CLOUDLIB_SOCKET: _s, XDG_DATA_HOME: _x, CLOUDLIB_CONFIG: _c, CLOUDLIB_SERVICE_LISTEN: _l, CLOUDLIB_ADMIN: _a,
    CLOUDLIB_DEFAULT_SERVICE_LISTEN: _dl, CLOUDLIB_DEFAULT_ADMIN_LISTEN: _da, ...rest
  } = process.env;
  return { ...rest, HOME: home, CLOUDLIB_LOG_LEVEL: 'warn' };
}

/** `cloudlib up` with WebDAV on an ephemeral port and no mount, started in `cwd`. */
function start(cwd: string, env: NodeJS.ProcessEnv): CloudlibChild {
  return processes.start(['up', '--webdav', '127.0.0.1:0', '--no-mount'], { cwd, env });
}

describe.skipIf(!ready)('daily use of cloudlib up', { timeout: 120_000 }, () => {
  it('ctl finds the gateway from another folder; a restart keeps share links and the status page; a taken kept address is refused', async () => {
    const base = await mkdtemp(join(tmpdir(), 'cloudlib-daily-'));
    dirs.push(base);
    const home = join(base, 'home');
    const started = join(base, 'project');
    const elsewhere = join(base, 'elsewhere');
    for (const d of [home, started, elsewhere]) await mkdir(d);
    const person = personEnv(home);
    const data = join(home, '.local', 'share', 'cloudlib');

    // With no address flags, `up` says and derives the defaults 8081 and 8082, both kept.
    const help = await cloudlib(['up', '--help'], started, person);
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/--service-listen H:P +embedded service listen address \(default\s+127\.0\.0\.1:8081,/);
    expect(help.stdout).toMatch(/--admin-listen H:P +status page .*\(default\s+127\.0\.0\.1:8082,/);
    const derived = await loadConfig({ noMount: true }, person, { fuseUsable: false, cwd: started });
    expect([derived.service_listen, derived.admin_listen, derived.keep_listen]).toEqual(['127.0.0.1:8081', '127.0.0.1:8082', { service: true, admin: true }]);
    // The same start with those defaults moved to ports free now: taken at the first start, kept after.
    const servicePort = await freePort();
    let adminPort = await freePort();
    while (adminPort === servicePort) adminPort = await freePort();
    const defaults = { service: `127.0.0.1:${servicePort}`, admin: `127.0.0.1:${adminPort}` };
    const env = { ...person, CLOUDLIB_DEFAULT_SERVICE_LISTEN: defaults.service, CLOUDLIB_DEFAULT_ADMIN_LISTEN: defaults.admin };

    let child = start(started, env);
    const first = await jsonWrittenBy<EndpointsFile>(join(data, 'endpoints.json'), child);
    expect([first.service_url, first.admin_url], child.output()).toEqual([`http://${defaults.service}`, `http://${defaults.admin}`]);
    expect(first.control_socket).toBe(join(data, 'control.sock'));
    expect(existsSync(join(started, '.cloudlib'))).toBe(false);

    // The banner's control line needs no --socket; ctl from another folder, with no option: the same gateway.
    await waitFor('the banner', () => child.output().includes('Ctrl-C stops'), { timeoutMs: 30_000, intervalMs: 100, detail: () => child.output() });
    expect(child.output()).toMatch(/^ {2}Control: +.*ctl status$/m);
    const status = await cloudlib(['ctl', 'status'], elsewhere, env);
    expect(status.code, status.stderr).toBe(0);
    await writeFile(join(elsewhere, 'shared.txt'), 'sent to a colleague');
    const up = await cloudlib(['ctl', 'upload', 'shared.txt', '/Library/shared.txt'], elsewhere, env);
    expect(up.code, up.stderr).toBe(0);
    const made = await cloudlib(['ctl', '--json', 'link', 'create', '/Library/shared.txt'], elsewhere, env);
    expect(made.code, made.stderr).toBe(0);
    const link = (JSON.parse(made.stdout) as { link: string }).link;
    const before = await request(link);
    expect(before.statusCode).toBeLessThan(400);
    await before.body.dump();

    child.kill('SIGTERM');
    expect(await exited(child, 30_000)).toBe(0);
    child = start(started, env);
    const second = await jsonWrittenBy<EndpointsFile>(join(data, 'endpoints.json'), child);
    expect(second.service_url).toBe(first.service_url);
    expect(second.admin_url).toBe(first.admin_url);
    const after = await request(link);
    expect(after.statusCode, `the link ${link} after a restart`).toBe(before.statusCode);
    await after.body.dump();
    const page = await request(`${second.admin_url}/`);
    expect(page.statusCode).toBe(200);
    await page.body.dump();
    // /healthz as the README says: JSON with the status.
    const health = await request(`${second.admin_url}/healthz`);
    expect(health.statusCode).toBe(200);
    expect(health.headers['content-type']).toBe('application/json');
    expect(await health.body.json()).toMatchObject({ ok: true, status: 'ok' });

    // The kept port taken by someone else: a clear error, no other port.
    child.kill('SIGTERM');
    expect(await exited(child, 30_000)).toBe(0);
    const port = Number(new URL(first.service_url).port);
    const squatter = createServer();
    servers.push(squatter);
    await new Promise<void>((r) => squatter.listen(port, '127.0.0.1', () => r()));
    child = start(started, env);
    expect(await exited(child, 30_000)).toBe(1);
    expect(child.output()).toContain(`address 127.0.0.1:${port}`);
    expect(child.output()).toMatch(/is in use .*--service-listen/);
    expect(existsSync(join(data, 'endpoints.json'))).toBe(false);
  });

  it('`cloudlib webdav` run on its own has a control socket: ctl sees its libraries and flushes its uploads', async () => {
    const base = await mkdtemp(join(tmpdir(), 'cloudlib-daily-'));
    dirs.push(base);
    const env = personEnv(join(base, 'home'));
    const { creds, config } = await remoteService(processes, base, env, { webdav: { users: [{ name: 'alice', password: 'secret' }] } });
    const data = join(base, 'gw');
    const gw = processes.start(['webdav', '--config', config, '--data', data, '--listen', '127.0.0.1:0'], { env });
    await logged(/WebDAV on (\S+);/, gw, 'cloudlib webdav');
    expect(gw.output()).toContain(`ctl --socket ${join(data, 'control.sock')} status`);
    await writeFile(join(base, 'a.txt'), 'through the control socket of cloudlib webdav');
    const up = await cloudlib(['ctl', '--data', data, 'upload', join(base, 'a.txt'), '/Remote/a.txt'], base, env);
    expect(up.code, up.stderr).toBe(0);
    const status = await cloudlib(['ctl', '--data', data, '--json', 'status'], base, env);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ service_url: creds.base_url, libraries: [{ name: 'Remote' }], uploads: { pending: 0 } });
    const flush = await cloudlib(['ctl', '--data', data, 'flush'], base, env);
    expect(flush.code, flush.stderr).toBe(0);
    const add = await cloudlib(['ctl', '--data', data, 'library', 'add', '--org', 'Other'], base, env);
    expect(add.code).toBe(2);
    expect(add.stderr).toMatch(/cloudlib up/);
    gw.kill('SIGTERM');
    expect(await exited(gw, 30_000)).toBe(0);
    expect(existsSync(join(data, 'control.sock'))).toBe(false);
  });

  it.skipIf(!canMount)('`cloudlib mount` run on its own has a control socket naming its mount point', async () => {
    const base = await mkdtemp(join(tmpdir(), 'cloudlib-daily-'));
    dirs.push(base);
    const env = personEnv(join(base, 'home'));
    const { config } = await remoteService(processes, base, env);
    const data = join(base, 'gw');
    const mnt = join(base, 'mnt');
    await mkdir(mnt);
    mounts.push(mnt);
    const child = processes.start(['mount', mnt, '--config', config, '--data', data], { env });
    await logged(/mounted on /, child, 'cloudlib mount');
    const status = await cloudlib(['ctl', '--data', data, '--json', 'status'], base, env);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ mount: mnt, libraries: [{ name: 'Remote' }] });
    child.kill('SIGTERM');
    expect(await exited(child, 30_000)).toBe(0);
    expect(existsSync(join(data, 'control.sock'))).toBe(false);
  });
});
