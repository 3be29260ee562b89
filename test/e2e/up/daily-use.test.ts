/**
 * The second day with `cloudlib up`, as a person meets it: started with no `--data` in one folder, `ctl`
 * from another finds it (one data folder per user, under a temporary HOME here); a restart keeps the
 * embedded service's address (share links made before it still open) and the status page's; a kept
 * address that is taken is refused with a clear error.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { access, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import type { EndpointsFile } from '../../../src/gateway/gateway.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const bin = join(root, 'bin', 'cloudlib.js');
const ready = existsSync(join(root, 'src/service/index.ts'));

const children: ChildProcess[] = [];
const dirs: string[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGTERM');
      await exited(c, 15_000).catch(() => c.kill('SIGKILL'));
    }
  }
  for (const s of servers.splice(0)) s.close();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** The environment of a person with HOME at `home`: none of the variables that name a data folder or socket. */
function personEnv(home: string): NodeJS.ProcessEnv {
  const { CLOUDLIB_HOME: _h, CLOUDLIB_SOCKET: _s, XDG_DATA_HOME: _x, CLOUDLIB_CONFIG: _c, CLOUDLIB_SERVICE_LISTEN: _l, CLOUDLIB_ADMIN: _a, ...rest } = process.env;
  return { ...rest, HOME: home, CLOUDLIB_LOG_LEVEL: 'warn' };
}

function start(cwd: string, env: NodeJS.ProcessEnv): ChildProcess & { output: () => string } {
  const child = spawn(process.execPath, [bin, 'up', '--webdav', '127.0.0.1:0', '--no-mount'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr!.on('data', (c: Buffer) => { out += c.toString(); });
  children.push(child);
  return Object.assign(child, { output: () => out });
}

function exited(child: ChildProcess, timeoutMs: number): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`process did not exit within ${timeoutMs} ms`)), timeoutMs);
    child.once('exit', (code) => { clearTimeout(t); resolve(code); });
  });
}

async function endpointsOf(file: string, child: ChildProcess & { output: () => string }): Promise<EndpointsFile> {
  const until = Date.now() + 30_000;
  for (;;) {
    try {
      await access(file);
      return JSON.parse(await readFile(file, 'utf8')) as EndpointsFile;
    } catch {
      if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode} before ${file} appeared:\n${child.output()}`);
      if (Date.now() > until) throw new Error(`${file} did not appear within 30 s:\n${child.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

function cloudlib(args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { cwd, env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr });
    });
  });
}

describe.skipIf(!ready)('daily use of cloudlib up', { timeout: 120_000 }, () => {
  it('ctl finds the gateway from another folder; a restart keeps share links and the status page; a taken kept address is refused', async () => {
    const base = await mkdtemp(join(tmpdir(), 'cloudlib-daily-'));
    dirs.push(base);
    const home = join(base, 'home');
    const started = join(base, 'project');
    const elsewhere = join(base, 'elsewhere');
    for (const d of [home, started, elsewhere]) await mkdir(d);
    const env = personEnv(home);
    const data = join(home, '.local', 'share', 'cloudlib');

    let child = start(started, env);
    const first = await endpointsOf(join(data, 'endpoints.json'), child);
    expect(first.control_socket).toBe(join(data, 'control.sock'));
    expect(existsSync(join(started, '.cloudlib'))).toBe(false);

    // ctl from another folder, with no option: the same gateway.
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
    const second = await endpointsOf(join(data, 'endpoints.json'), child);
    expect(second.service_url).toBe(first.service_url);
    expect(second.admin_url).toBe(first.admin_url);
    const after = await request(link);
    expect(after.statusCode, `the link ${link} after a restart`).toBe(before.statusCode);
    await after.body.dump();
    const page = await request(`${second.admin_url}/`);
    expect(page.statusCode).toBe(200);
    await page.body.dump();

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
});
