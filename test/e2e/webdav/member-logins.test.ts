/**
 * `cloudlib webdav` with `webdav.member_logins` over a separately started `cloudlib service`, as an
 * operator sets it up: the application and a member's password from `cloudlib service token`, a config
 * file naming the service, its library authorization and the application. A member logs in with their
 * own account and password; what they put is recorded on the service as theirs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ServiceClient } from '../../../src/api/client.js';
import type { ServiceCredentialsFile } from '../../../src/gateway/gateway.js';
import { freePort } from '../../support/free-port.js';
import { basicAuth, dav } from '../../support/dav-http.js';
import { waitFor } from '../../support/wait-for.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const bin = join(root, 'bin', 'cloudlib.js');

const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGTERM');
      await exited(c, 15_000).catch(() => c.kill('SIGKILL'));
    }
  }
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

function exited(c: ChildProcess, timeoutMs: number): Promise<number | null> {
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve(c.exitCode);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`process did not exit within ${timeoutMs} ms`)), timeoutMs);
    c.once('exit', (code) => { clearTimeout(t); resolve(code); });
  });
}

function start(args: string[]): ChildProcess & { output: () => string } {
  const child = spawn(process.execPath, [bin, ...args], { env: { ...process.env, CLOUDLIB_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => { out += b.toString(); });
  child.stderr!.on('data', (b: Buffer) => { out += b.toString(); });
  children.push(child);
  return Object.assign(child, { output: () => out });
}

/** waitFor for a probe (every 100 ms) that gives a value when done; fails at once when the process ends. */
async function until<T>(what: string, child: ChildProcess & { output: () => string }, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  return (await waitFor(what, probe, {
    until: (v: T | undefined) => v !== undefined, timeoutMs, intervalMs: 100,
    stopIf: () => (child.exitCode !== null ? `the process exited with ${child.exitCode}` : undefined), detail: () => child.output(),
  })) as T;
}

describe('cloudlib webdav with member logins', { timeout: 120_000 }, () => {
  it('a member of the enterprise logs in as themselves over a separately run service; their writes are theirs on the service', async () => {
    const base = await mkdtemp(join(tmpdir(), 'cloudlib-member-cli-'));
    dirs.push(base);
    const svcDir = join(base, 'svc');
    const service = start(['service', '--data', svcDir, '--listen', '127.0.0.1:0']);
    const creds = await until('credentials.json', service, async () => {
      await access(join(svcDir, 'credentials.json'));
      return JSON.parse(await readFile(join(svcDir, 'credentials.json'), 'utf8')) as ServiceCredentialsFile;
    });
    // The application and the demo member's password, as an operator gets them.
    const minted = await new Promise<{ client_id: string; client_secret: string }>((resolve, reject) => {
      execFile(process.execPath, [bin, 'service', 'token', '--data', svcDir, '--account', creds.member.account, '--password', 'demo-member-pw'], (err, stdout, stderr) => {
        if (err) reject(new Error(`${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout) as { client_id: string; client_secret: string });
      });
    });
    const config = join(base, 'cloudlib.json');
    const port = await freePort();
    await writeFile(config, JSON.stringify({
      service: {
        base_url: creds.base_url,
        libraries: [{ name: 'Remote', org_client_id: creds.library.org_client_id, org_client_secret: creds.library.org_client_secret }],
        application: { client_id: minted.client_id, client_secret: minted.client_secret },
      },
      webdav: { member_logins: true },
    }));
    const gw = start(['webdav', '--config', config, '--data', join(base, 'gw'), '--listen', `127.0.0.1:${port}`]);
    const url = `http://127.0.0.1:${port}/`;
    const member = basicAuth(creds.member.account, 'demo-member-pw');
    await until('the WebDAV server', gw, async () => ((await dav(url, 'PROPFIND', '/', { auth: member, headers: { depth: '0' } })).status === 207 ? true : undefined));

    expect((await dav(url, 'PUT', '/Remote/by-member.txt', { auth: member, body: 'put by the member' })).status).toBe(201);
    expect((await dav(url, 'GET', '/Remote/by-member.txt', { auth: member })).body).toBe('put by the member');
    // Last: after a wrong password the account waits, its live session too (docs/webdav.md).
    expect((await dav(url, 'PROPFIND', '/Remote/', { auth: basicAuth(creds.member.account, 'wrong'), headers: { depth: '1' } })).status).toBe(401);
    gw.kill('SIGTERM');
    expect(await exited(gw, 60_000)).toBe(0);

    const client = new ServiceClient({ baseUrl: creds.base_url, credentials: { library: creds.library } });
    try {
      const info = await client.file.info({ fullpath: 'by-member.txt' });
      expect(Number(info.filesize)).toBe('put by the member'.length);
      expect(info.last_member_name).toBe('Demo');
    } finally {
      await client.close();
    }
  });
});
