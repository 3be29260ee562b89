/**
 * User access tokens: the token endpoint (password and refresh grants, OAuth-shaped errors), expiry and
 * the client's refresh-and-replay, and `cloudlib service token` minting a working token.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { webUpload } from '../../../src/api/upload.js';
import { sign } from '../../../src/shared/sign.js';
import { AccessTokens, md5Hex } from '../../../src/service/domain/tokens.js';
import { startTestService, type TestService } from '../../support/service.js';
import { codeOf } from './helpers.js';
import { addMember, bootstrapApp } from './user-fixtures.js';

const run = promisify(execFile);
let t: TestService;
let now = Date.now();
beforeAll(async () => { t = await startTestService({ clock: () => now }); });
afterAll(async () => { await t?.close(); });

async function tokenCall(params: Record<string, string>) {
  const app = await bootstrapApp(t);
  const wire: Record<string, string> = { client_id: app.client_id, dateline: String(Math.floor(now / 1000)), ...params };
  wire.sign = sign(app.client_secret, wire);
  const res = await request(`${t.service.baseUrl}/m-api/oauth2/token2`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(wire).toString() });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

describe('token endpoint', () => {
  it('password grant: account + MD5 of the password gives a working token; wrong password / unknown account are one invalid_grant', async () => {
    const m = await addMember(t, 'pw', { libraryRole: 4, password: 's3cret' });
    const ok = await tokenCall({ grant_type: 'password', username: m.account, password: md5Hex('s3cret') });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ expires_in: 7200 });
    expect(String(ok.body.access_token)).toMatch(/^tk_/);
    const c = t.client.withCredentials({ user: { token: String(ok.body.access_token), client_secret: (await bootstrapApp(t)).client_secret } });
    expect((await c.user.mount({})).list.map((l) => l.org_id)).toContain(t.service.credentials.library.org_id);
    const wrong = await tokenCall({ grant_type: 'password', username: m.account, password: md5Hex('nope') });
    const unknown = await tokenCall({ grant_type: 'password', username: 'nobody@example.com', password: md5Hex('s3cret') });
    expect(wrong).toMatchObject({ status: 400, body: { error: 'invalid_grant', error_code: 40004 } });
    expect(unknown.body.error_description).toBe(wrong.body.error_description);
    const notMd5 = await tokenCall({ grant_type: 'password', username: m.account, password: 's3cret' });
    expect(notMd5).toMatchObject({ status: 400, body: { error: 'invalid_request' } });
    const badGrant = await tokenCall({ grant_type: 'client_credentials' });
    expect(badGrant).toMatchObject({ status: 400, body: { error: 'invalid_request' } });
    expect(String(badGrant.body.error_description)).toContain('grant_type');
  });

  it('refresh grant: a new pair; the refresh token works once; the old access token stops working', async () => {
    const m = await addMember(t, 'rf', { libraryRole: 4 });
    const first = await tokenCall({ grant_type: 'refresh_token', refresh_token: m.refresh_token });
    expect(first.status).toBe(200);
    expect(first.body.access_token).not.toBe(m.token);
    const again = await tokenCall({ grant_type: 'refresh_token', refresh_token: m.refresh_token });
    expect(again).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    const old = t.client.withCredentials({ user: { token: m.token, client_secret: (await bootstrapApp(t)).client_secret } });
    expect(await codeOf(old.user.mount({}))).toBe(40101);
  });

  it('an expired token answers 40102; the client refreshes once and replays the call', async () => {
    const m = await addMember(t, 'exp', { libraryRole: 4 });
    now += 3 * 3_600_000;
    try {
      const bare = t.client.withCredentials({ user: { token: m.token, client_secret: (await bootstrapApp(t)).client_secret } });
      expect(await codeOf(bare.user.mount({}))).toBe(40102);
      const list = await m.client.user.mount({});
      expect(list.list.length).toBeGreaterThan(0);
    } finally {
      now = Date.now();
    }
  });
});

describe('temporary accounts', () => {
  it('once the day of expiry has ended, the user API, the token endpoint and the upload server refuse the account (before any sweep)', async () => {
    const m = await addMember(t, 'temp', { libraryRole: 3, password: 'tmp-pw' });
    const day = Math.floor(now / 86_400_000) * 86_400;
    const db = t.service.parts.tree.db;
    await db.run('UPDATE members SET expire = ? WHERE id = ?', [day, m.id]);
    // A token that outlives the account, so the account's expiry (not the token's) is what is refused.
    const app = await bootstrapApp(t);
    const long = await new AccessTokens(db, () => now).issue(m.id, app.client_id, 3 * 86_400_000);
    const user = t.client.withCredentials({ user: { token: long.access_token, client_secret: app.client_secret } });
    const upload = () => webUpload(user, { path: '', name: 'temp.txt', source: { size: 1, open: () => Readable.from([Buffer.from('x')]) }, mountId: t.service.credentials.library.mount_id });
    expect(await codeOf(user.user.mount({}))).toBe(0);
    expect((await tokenCall({ grant_type: 'password', username: m.account, password: md5Hex('tmp-pw') })).status).toBe(200);
    const saved = now;
    now = (day + 86_400) * 1000 + 1000;
    try {
      const err = await user.user.mount({}).catch((e: unknown) => e) as { code: number; message: string };
      expect(err.code).toBe(40310);
      expect(err.message).toContain('expired');
      expect(await codeOf(upload())).toBe(40310);
      expect((await tokenCall({ grant_type: 'password', username: m.account, password: md5Hex('tmp-pw') })).body).toMatchObject({ error: 'invalid_grant' });
      expect((await tokenCall({ grant_type: 'refresh_token', refresh_token: m.refresh_token })).body).toMatchObject({ error: 'invalid_grant' });
      expect((await t.client.file.ls({ fullpath: '' })).list.some((r) => r.filename === 'temp.txt')).toBe(false);
    } finally {
      now = saved;
    }
  });
});

describe('cloudlib service token', () => {
  it('mints a token for an account that the service accepts; refuses an unknown account', async () => {
    const m = await addMember(t, 'cli', { libraryRole: 4 });
    const cli = ['--import', 'tsx', 'bin/cloudlib.js', 'service', 'token', '--data', t.dir, ...t.metadataArgs, '--account', m.account, '--ttl', '600'];
    const { stdout } = await run(process.execPath, cli, { timeout: 30_000 });
    const grant = JSON.parse(stdout) as { access_token: string; client_secret: string; expires_in: number; member_id: number };
    expect(grant).toMatchObject({ expires_in: 600, member_id: m.id });
    const c = t.client.withCredentials({ user: { token: grant.access_token, client_secret: grant.client_secret } });
    expect((await c.user.mount({})).list.length).toBeGreaterThan(0);
    const bad = await run(process.execPath, [...cli.slice(0, cli.indexOf('--account')), '--account', 'nobody@example.com'], { timeout: 30_000 }).catch((e: { code: number; stderr: string }) => e);
    expect((bad as { code: number }).code).toBe(2);
    expect((bad as { stderr: string }).stderr).toContain('no member with account');
  }, 60_000);
});
