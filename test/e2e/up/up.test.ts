/**
 * `cloudlib up` as a user runs it: a child process on a temp data folder. Files put through WebDAV are
 * seen through the service's API and the mount; SIGTERM with an upload pending keeps it in the journal
 * and the next `up` finishes it; a config file pointing `up` at a separately started `cloudlib service`
 * works like the embedded default; `--bwlimit` limits the gateway's transfers.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { ServiceClient } from '../../../src/api/client.js';
import { ControlClient } from '../../../src/control/client.js';
import type { EndpointsFile, ServiceCredentialsFile } from '../../../src/gateway/gateway.js';
import { fuseUsable } from '../../../src/gateway/gateway.js';
import { waitFor } from '../../support/wait-for.js';
import { CloudlibProcesses, exited, jsonWrittenBy, remoteService, type CloudlibChild } from '../../support/cloudlib-processes.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const ready = existsSync(join(root, 'src/service/index.ts')) && existsSync(join(root, 'src/webdav/index.ts'));
const canMount = ready && (await fuseUsable());

const processes = new CloudlibProcesses();
const dirs: string[] = [];
afterEach(async () => {
  await processes.stopAll();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'cloudlib-up-'));
  dirs.push(d);
  return d;
}

/** `cloudlib ARGS` in this process's environment (`env` beside), logging warnings only. */
function start(args: string[], env: NodeJS.ProcessEnv = {}): CloudlibChild {
  return processes.start(args, { env: { ...process.env, CLOUDLIB_LOG_LEVEL: 'warn', ...env } });
}

async function up(data: string, extra: string[] = []): Promise<{ child: CloudlibChild; endpoints: EndpointsFile }> {
  const child = start(['up', '--data', data, '--webdav', '127.0.0.1:0', '--service-listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', ...extra]);
  const endpoints = await jsonWrittenBy<EndpointsFile>(join(data, 'endpoints.json'), child);
  return { child, endpoints };
}

function auth(e: EndpointsFile): string {
  return 'Basic ' + Buffer.from(`${e.webdav_user}:${e.webdav_password}`).toString('base64');
}

async function davPut(e: EndpointsFile, path: string, body: Buffer | string): Promise<number> {
  const res = await request(new URL(path, e.webdav_url!), { method: 'PUT', body, headers: { authorization: auth(e) } });
  await res.body.dump();
  return res.statusCode;
}

async function davGet(e: EndpointsFile, path: string): Promise<{ status: number; body: string }> {
  const res = await request(new URL(path, e.webdav_url!), { method: 'GET', headers: { authorization: auth(e) } });
  return { status: res.statusCode, body: await res.body.text() };
}

async function libraryClient(credentialsPath: string): Promise<{ client: ServiceClient; creds: ServiceCredentialsFile }> {
  const creds = JSON.parse(await readFile(credentialsPath, 'utf8')) as ServiceCredentialsFile;
  return { creds, client: new ServiceClient({ baseUrl: creds.base_url, credentials: { library: creds.library } }) };
}

async function libraryFolder(e: EndpointsFile): Promise<string> {
  const ctl = await ControlClient.connect(e.control_socket);
  try {
    const libs = (await ctl.call('library.ls')) as { name: string }[];
    return libs[0]!.name;
  } finally {
    ctl.close();
  }
}

function shell(command: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-c', command], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr });
    });
  });
}

async function bannerOf(child: CloudlibChild): Promise<string> {
  await waitFor('the banner', () => child.output().includes('Ctrl-C stops'), { timeoutMs: 30_000, intervalMs: 100, detail: () => child.output() });
  return child.output();
}

describe.skipIf(!ready)('cloudlib up', { timeout: 120_000 }, () => {
  it('every command the banner prints runs as printed; the demo library starts with a welcome file', async () => {
    const data = await tempDir();
    const { child, endpoints } = await up(data, ['--no-mount']);
    const text = await bannerOf(child);
    const lib = await libraryFolder(endpoints);
    const control = /^ {2}Control: +(.+)$/m.exec(text)?.[1];
    expect(control, text).toBeDefined();
    const status = await shell(control!);
    expect(status.stderr).toBe('');
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(lib);
    const rclone = /^ {2}rclone: +(rclone .+)$/m.exec(text)?.[1];
    expect(rclone, text).toBeDefined();
    expect(rclone).not.toContain(endpoints.webdav_password!);
    expect(rclone).toContain('--webdav-vendor owncloud');
    if (existsSync('/usr/bin/rclone')) {
      const listed = await shell(rclone!);
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout).toContain(lib);
    }
    // the fresh demo library starts with its welcome file
    const ctl = await ControlClient.connect(endpoints.control_socket);
    await ctl.call('flush');
    ctl.close();
    const { client } = await libraryClient(endpoints.credentials!);
    expect(Number((await client.file.info({ fullpath: 'Welcome.md' })).filesize)).toBeGreaterThan(100);
    await client.close();
    child.kill('SIGTERM');
    expect(await exited(child, 20_000)).toBe(0);
  });

  it('a stale endpoints.json (a crash) is removed at start, even when the start then fails', async () => {
    const data = await tempDir();
    await writeFile(join(data, 'endpoints.json'), JSON.stringify({ webdav_url: 'http://127.0.0.1:1/', control_socket: '/nowhere' }));
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
    const port = (busy.address() as { port: number }).port;
    try {
      const child = start(['up', '--data', data, '--no-mount', '--webdav', `127.0.0.1:${port}`, '--service-listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0']);
      expect(await exited(child, 30_000)).toBe(1);
      expect(existsSync(join(data, 'endpoints.json'))).toBe(false);
    } finally {
      busy.close();
    }
  });

  it('serves the embedded library over WebDAV; files put there are on the service; SIGTERM exits 0 and removes endpoints.json', async () => {
    const data = await tempDir();
    const { child, endpoints } = await up(data, ['--no-mount']);
    expect(endpoints).toMatchObject({ mount: null, credentials: join(data, 'service', 'credentials.json') });
    expect(endpoints.webdav_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const lib = await libraryFolder(endpoints);
    expect(await davPut(endpoints, `/${encodeURIComponent(lib)}/hello.txt`, 'hello from WebDAV')).toBeLessThan(300);
    const ctl = await ControlClient.connect(endpoints.control_socket);
    await ctl.call('flush');
    ctl.close();
    const { client } = await libraryClient(endpoints.credentials!);
    const info = await client.file.info({ fullpath: 'hello.txt' });
    expect(Number(info.filesize)).toBe(17);
    const metrics = await request(`${endpoints.admin_url}/metrics`);
    const text = await metrics.body.text();
    expect(text).toMatch(/cloudlib_uploads_pending 0/);
    expect(text).toMatch(/cloudlib_service_requests_total\{endpoint="file.create_file",status="200"\} [1-9]/);
    expect(text).toMatch(/cloudlib_requests_total\{frontend="webdav",op="put",status="201"\} 1/);
    expect(text).toMatch(/cloudlib_bytes_written_total\{frontend="webdav"\} 17/);
    const health = await request(`${endpoints.admin_url}/healthz`);
    expect(health.statusCode).toBe(200);
    await health.body.dump();
    await client.close();
    child.kill('SIGTERM');
    expect(await exited(child, 20_000)).toBe(0);
    expect(existsSync(join(data, 'endpoints.json'))).toBe(false);
  });

  it.skipIf(!canMount)('with a mount: a file put through WebDAV is read through the mount', async () => {
    const data = await tempDir();
    const mnt = join(data, 'mnt');
    const { child, endpoints } = await up(data, ['--mount', mnt]);
    try {
      expect(endpoints.mount).toBe(mnt);
      const lib = await libraryFolder(endpoints);
      expect(await davPut(endpoints, `/${encodeURIComponent(lib)}/both.txt`, 'seen both ways')).toBeLessThan(300);
      expect(await readFile(join(mnt, lib, 'both.txt'), 'utf8')).toBe('seen both ways');
      await writeFile(join(mnt, lib, 'from-mount.txt'), 'written on the mount');
      expect((await davGet(endpoints, `/${encodeURIComponent(lib)}/from-mount.txt`)).body).toBe('written on the mount');
    } finally {
      child.kill('SIGTERM');
      expect(await exited(child, 30_000)).toBe(0);
    }
  });

  it('pointed at a separate `cloudlib service` by a config file; SIGTERM with an upload pending keeps it, the next `up` finishes it', async () => {
    const base = await tempDir();
    const { config, service } = await remoteService(processes, base, { ...process.env, CLOUDLIB_LOG_LEVEL: 'warn' }, { feed: { interval_ms: 500 } });
    const { client, creds } = await libraryClient(join(base, 'svc', 'credentials.json'));
    const data = join(base, 'gw');
    const first = await up(data, ['--no-mount', '--config', config, '--stop-flush', '1']);
    expect(first.endpoints.credentials).toBeNull();
    expect(first.endpoints.service_url).toBe(creds.base_url);
    expect(await davPut(first.endpoints, '/Remote/direct.txt', 'through a remote service')).toBeLessThan(300);
    const ctl = await ControlClient.connect(first.endpoints.control_socket);
    await ctl.call('flush');
    ctl.close();
    expect(Number((await client.file.info({ fullpath: 'direct.txt' })).filesize)).toBe(24);

    // The PUT returns once the content is journaled; the service then stops answering, so the upload
    // that follows cannot finish before the gateway is stopped.
    const pending = randomBytes(32 * 1024 * 1024);
    expect(await davPut(first.endpoints, '/Remote/pending.bin', pending)).toBeLessThan(300);
    service.kill('SIGSTOP');
    first.child.kill('SIGTERM');
    expect(await exited(first.child, 60_000)).toBe(0);
    expect(first.child.output()).toContain('cloudlib up: stopping; waiting up to 1 s for 1 file to reach the service (Ctrl-C again: leave them in the journal for the next start)');
    service.kill('SIGCONT');
    await expect(client.file.info({ fullpath: 'pending.bin' })).rejects.toThrow();

    const second = await up(data, ['--no-mount', '--config', config]);
    const ctl2 = await ControlClient.connect(second.endpoints.control_socket);
    await ctl2.call('flush');
    ctl2.close();
    const info = await client.file.info({ fullpath: 'pending.bin', attribute: 10 });
    expect(Number(info.filesize)).toBe(pending.length);
    expect(info.filehash).toBe(createHash('sha1').update(pending).digest('hex'));
    await client.close();
    second.child.kill('SIGTERM');
    expect(await exited(second.child, 20_000)).toBe(0);
  });

  it('a data folder others could read is made private (and said so), what it holds is the owner\'s only, the banner keeps the password off a non-terminal, SIGHUP stops cleanly', async () => {
    const base = await tempDir();
    const data = join(base, 'open');
    await mkdir(data);
    await chmod(data, 0o755);
    const { child, endpoints } = await up(data, ['--no-mount']);
    expect((await stat(data)).mode & 0o777).toBe(0o700);
    await waitFor('cloudlib is up.', () => child.output().includes('cloudlib is up.'), { timeoutMs: 20_000, intervalMs: 50, detail: () => child.output() });
    const out = child.output();
    expect(out).toMatch(/data folder was readable by others; made private/);
    expect(out).toContain('cloudlib is up.');
    expect(out).not.toContain(endpoints.webdav_password!);
    expect(out).toContain(`(password in ${join(data, 'webdav-user.json')})`);
    // Files the gateway writes: 0600 (the data folder around them is 0700 anyway).
    const lib = await libraryFolder(endpoints);
    expect(await davPut(endpoints, `/${encodeURIComponent(lib)}/p.txt`, 'x')).toBeLessThan(300);
    const patch = await request(new URL(`/${encodeURIComponent(lib)}/p.txt`, endpoints.webdav_url!), {
      method: 'PROPPATCH', headers: { authorization: auth(endpoints) },
      body: '<D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:a>1</Z:a></D:prop></D:set></D:propertyupdate>',
    });
    expect(patch.statusCode).toBe(207);
    await patch.body.dump();
    for (const f of ['endpoints.json', 'webdav-user.json']) expect((await stat(join(data, f))).mode & 0o777, f).toBe(0o600);
    for (const f of await readdir(join(data, 'webdav', 'properties'))) expect((await stat(join(data, 'webdav', 'properties', f))).mode & 0o777, f).toBe(0o600);
    expect((await stat(join(data, 'webdav'))).mode & 0o777).toBe(0o700);
    // The terminal closing: a clean stop, not a kill.
    child.kill('SIGHUP');
    expect(await exited(child, 20_000)).toBe(0);
    expect(child.signalCode).toBeNull();
    expect(existsSync(join(data, 'endpoints.json'))).toBe(false);
  });

  it('--bwlimit: a limited upload reaches the service whole, its bytes counted through the limit in /metrics', async () => {
    const data = await tempDir();
    const { child, endpoints } = await up(data, ['--no-mount', '--bwlimit', '4M:8M']);
    const lib = await libraryFolder(endpoints);
    const body = randomBytes(1024 * 1024 + 3);
    expect(await davPut(endpoints, `/${encodeURIComponent(lib)}/limited.bin`, body)).toBeLessThan(300);
    const ctl = await ControlClient.connect(endpoints.control_socket);
    await ctl.call('flush');
    ctl.close();
    const { client } = await libraryClient(endpoints.credentials!);
    expect(Number((await client.file.info({ fullpath: 'limited.bin' })).filesize)).toBe(body.length);
    await client.close();
    const text = await (await request(`${endpoints.admin_url}/metrics`)).body.text();
    const uploaded = Number(/cloudlib_bwlimit_bytes\{direction="upload"\} (\d+)/.exec(text)?.[1]);
    expect(uploaded).toBeGreaterThanOrEqual(body.length);
    expect(text).toMatch(/cloudlib_bwlimit_bytes\{direction="download"\} \d+/);
    child.kill('SIGTERM');
    expect(await exited(child, 20_000)).toBe(0);
  });

  it('--log-file: the log lines go to that file, JSON, and not to stderr', async () => {
    const base = await tempDir();
    const file = join(base, 'logs', 'cloudlib.log');
    const { child } = await up(join(base, 'd'), ['--no-mount', '--log-file', file, '--log-level', 'info']);
    await bannerOf(child);
    const lines = (await readFile(file, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { msg: string });
    expect(lines.map((l) => l.msg)).toContain('gateway ready');
    expect(child.output()).not.toContain('gateway ready');
    child.kill('SIGTERM');
    expect(await exited(child, 20_000)).toBe(0);
    expect(await readFile(file, 'utf8')).toContain('gateway stopped');
  });

  it('anonymous read-write on loopback keeps the generated login: both work', async () => {
    const base = await tempDir();
    await writeFile(join(base, 'anon.toml'), '[webdav]\nanonymous = "read-write"\n');
    const { child, endpoints } = await up(join(base, 'd'), ['--config', join(base, 'anon.toml'), '--no-mount']);
    expect(endpoints.webdav_user).toBe('cloudlib');
    expect(await davPut(endpoints, '/Library/with-login.txt', 'logged in')).toBeLessThan(300);
    const anon = await request(new URL('/Library/anonymous.txt', endpoints.webdav_url!), { method: 'PUT', body: 'anonymous' });
    await anon.body.dump();
    expect(anon.statusCode).toBeLessThan(300);
    const wrong = await request(new URL('/Library/', endpoints.webdav_url!), { method: 'PROPFIND', headers: { depth: '1', authorization: 'Basic ' + Buffer.from('cloudlib:wrong').toString('base64') } });
    await wrong.body.dump();
    expect(wrong.statusCode).toBe(401);
    expect((await davGet(endpoints, '/Library/anonymous.txt')).body).toBe('anonymous');
    child.kill('SIGTERM');
    expect(await exited(child, 20_000)).toBe(0);
  });

  it('anonymous read-write on a network address is refused at start', async () => {
    const base = await tempDir();
    await writeFile(join(base, 'anon.toml'), '[webdav]\nanonymous = "read-write"\n');
    const child = start(['up', '--data', join(base, 'd'), '--config', join(base, 'anon.toml'), '--webdav', '0.0.0.0:0', '--no-mount', '--service-listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0']);
    expect(await exited(child, 20_000)).toBe(2);
    expect(child.output()).toMatch(/allow_anonymous_write_from_network/);
  });

  it.skipIf(!canMount)('after the mount was taken away (fusermount -uz), SIGTERM still ends the process', async () => {
    const data = await tempDir();
    const mnt = join(data, 'mnt');
    const { child } = await up(data, ['--mount', mnt]);
    await new Promise<void>((resolve, reject) => execFile('fusermount', ['-uz', mnt], (err) => (err ? reject(err) : resolve())));
    child.kill('SIGTERM');
    expect(await exited(child, 30_000)).toBe(0);
  });
});
