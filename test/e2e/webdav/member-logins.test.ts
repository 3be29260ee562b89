/**
 * `cloudlib webdav` with `webdav.member_logins` over a separately started `cloudlib service`, as an
 * operator sets it up: the application and a member's password from `cloudlib service token`, a config
 * file naming the service, its library authorization and the application. A member logs in with their
 * own account and password; what they put is recorded on the service as theirs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ServiceClient } from '../../../src/api/client.js';
import type { ServiceCredentialsFile } from '../../../src/gateway/gateway.js';
import { freePort } from '../../support/free-port.js';
import { basicAuth, dav } from '../../support/dav-http.js';
import { waitFor } from '../../support/wait-for.js';
import { CloudlibProcesses, exited, jsonWrittenBy, runCloudlib, type CloudlibChild } from '../../support/cloudlib-processes.js';

const processes = new CloudlibProcesses();
const env = { ...process.env, CLOUDLIB_LOG_LEVEL: 'warn' };
const dirs: string[] = [];
afterEach(async () => {
  await processes.stopAll();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

function start(args: string[]): CloudlibChild {
  return processes.start(args, { env });
}

/** waitFor for a probe (every 100 ms) that gives a value when done; fails at once when the process ends. */
async function until<T>(what: string, child: CloudlibChild, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
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
    const creds = await jsonWrittenBy<ServiceCredentialsFile>(join(svcDir, 'credentials.json'), service);
    // The application and the demo member's password, as an operator gets them.
    const token = await runCloudlib(['service', 'token', '--data', svcDir, '--account', creds.member.account, '--password', 'demo-member-pw'], base, env);
    expect(token.code, token.stderr).toBe(0);
    const minted = JSON.parse(token.stdout) as { client_id: string; client_secret: string };
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
