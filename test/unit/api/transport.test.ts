/**
 * The transport's policy: retries (reads, and writes only when the request was never sent), the
 * per-request deadline, the user token refresh, and that no error message or log line carries a secret,
 * a token or a signature.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createServer } from 'node:net';
import { Readable, Writable } from 'node:stream';
import { pino } from 'pino';
import type { Logger } from '../../../src/shared/log.js';
import { ServiceClient, type ClientOptions } from '../../../src/api/client.js';
import { ServiceError } from '../../../src/api/errors.js';
import { webUpload } from '../../../src/api/upload.js';
import { FakeUploadServer } from '../../support/fake-upload-server.js';

const SECRETS = {
  library: 'LIBSECRET-8f3a1c77e2',
  enterprise: 'ENTSECRET-2b9d0e41aa',
  app: 'APPSECRET-c0ffee1234',
  token: 'TOKEN-77aa88bb99cc',
  refresh: 'REFRESH-5566778899',
};

function logCapture(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({ write(chunk: Buffer, _enc, cb) { lines.push(chunk.toString('utf8')); cb(); } });
  return { logger: pino({ level: 'trace' }, sink) as unknown as Logger, lines };
}

describe('transport policy', { timeout: 20_000 }, () => {
  let fake: FakeUploadServer;
  const clients: ServiceClient[] = [];
  const make = (opts: Partial<ClientOptions> = {}) => {
    const c = new ServiceClient({
      baseUrl: fake.url, retryBaseMs: 1, timeoutMs: 2_000,
      credentials: {
        library: { org_client_id: 'oc_1', org_client_secret: SECRETS.library },
        enterprise: { client_id: 'ent_1', client_secret: SECRETS.enterprise },
        user: { token: SECRETS.token, client_secret: SECRETS.app, client_id: 'app_1', refresh_token: SECRETS.refresh },
      },
      ...opts,
    });
    clients.push(c);
    return c;
  };

  beforeAll(async () => { fake = await new FakeUploadServer().start(); });
  afterAll(async () => {
    for (const c of clients) await c.close();
    await fake.close();
  });
  beforeEach(() => fake.reset());

  it('reads are retried on 5xx with backoff, up to `retries` times', async () => {
    let n = 0;
    fake.respond('/m-open/1/file/ls', () => (++n <= 2 ? { status: 503, body: { error_code: 50301, error_msg: 'busy' } } : { status: 200, body: { count: '1', list: [] } }));
    const res = await make({ retries: 3 }).file.ls({ fullpath: '' });
    expect(res.count).toBe(1); // numbers as strings are normalised
    expect(fake.calls('/file/ls')).toHaveLength(3);

    n = -10;
    const err = await make({ retries: 2 }).file.ls({ fullpath: '' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 503, code: 50301, serviceMessage: 'busy', endpoint: 'file.ls' });
    expect(fake.calls('/file/ls')).toHaveLength(3 + 3);
  });

  it('writes are not retried on a 5xx or on a timeout (the service may have acted)', async () => {
    fake.respond('/m-open/1/file/create_folder', () => ({ status: 500, body: { error_code: 50001, error_msg: 'internal' } }));
    await expect(make({ retries: 3 }).file.createFolder({ fullpath: 'x' })).rejects.toMatchObject({ status: 500 });
    expect(fake.calls('/create_folder')).toHaveLength(1);

    fake.respond('/m-open/1/file/move', () => ({ status: 200, body: {}, delayMs: 400 }));
    const err = await make({ retries: 3, timeoutMs: 100 }).file.move({ fullpath: 'a', dest_fullpath: 'b' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ transport: true, status: 0, transportCode: 'ETIMEDOUT', endpoint: 'file.move' });
    expect((err as Error).message).toMatch(/timed out after 100 ms/);
    expect(fake.calls('/file/move')).toHaveLength(1);
  });

  it('the deadline covers the whole exchange; a read that times out is retried', async () => {
    let n = 0;
    // The first answer comes long after the deadline: the call ends that attempt and asks again.
    fake.respond('/m-open/1/file/stat', () => (++n === 1 ? { status: 200, body: {}, delayMs: 60_000 } : { status: 200, body: { org_id: 5 } }));
    const res = await make({ retries: 1, timeoutMs: 1_000 }).file.stat({});
    expect(res.org_id).toBe(5);
    expect(fake.calls('/file/stat')).toHaveLength(2);
  });

  it('a write whose connection was refused (never sent) is retried', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => { const p = (s.address() as { port: number }).port; s.close(() => resolve(p)); });
    });
    const { logger, lines } = logCapture();
    const c = make({ baseUrl: `http://127.0.0.1:${port}`, retries: 2, logger });
    const err = await c.file.createFolder({ fullpath: 'x' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect(err).toMatchObject({ transport: true, transportCode: 'ECONNREFUSED' });
    expect(lines.filter((l) => l.includes('retrying'))).toHaveLength(2);
  });

  it('an expired user token is refreshed once, shared by concurrent calls, and the calls replayed', async () => {
    let refreshes = 0;
    const grants: Record<string, string>[] = [];
    fake.respond('/m-api/oauth2/token2', (r) => {
      refreshes++;
      grants.push(r.form);
      return { status: 200, body: { access_token: 'TOKEN-fresh-000111', expires_in: 3600, refresh_token: 'REFRESH-next-222333' } };
    });
    fake.respond('/m-api/1/account/mount', (r) => (r.query.token === 'TOKEN-fresh-000111'
      ? { status: 200, body: { list: [{ org_id: '9' }] } }
      : { status: 401, body: { error_code: 40102, error_msg: 'token expired' } }));
    const seen: string[] = [];
    const c = make({ onTokenRefresh: (u) => seen.push(u.token) });
    const [a, b] = await Promise.all([c.user.mount({}), c.user.mount({})]);
    expect(a.list[0]!.org_id).toBe(9);
    expect(b.list).toHaveLength(1);
    expect(refreshes).toBe(1);
    expect(grants[0]).toMatchObject({ client_id: 'app_1', grant_type: 'refresh_token', refresh_token: SECRETS.refresh });
    expect(seen).toEqual(['TOKEN-fresh-000111']);
    expect(c.credentials.user).toMatchObject({ token: 'TOKEN-fresh-000111', refresh_token: 'REFRESH-next-222333' });

    // A token that stays expired is refreshed once per call, then the error is the caller's.
    fake.respond('/m-api/1/account/mount', () => ({ status: 401, body: { error_code: 40102, error_msg: 'token expired' } }));
    await expect(c.user.mount({})).rejects.toMatchObject({ code: 40102 });
    expect(refreshes).toBe(2);
    expect(grants[1]).toMatchObject({ refresh_token: 'REFRESH-next-222333' });
  });

  it('no ServiceError message and no log line carries a secret, a token or a signature', async () => {
    // A service that echoes everything it received in its error messages.
    const echo = (r: { query: Record<string, string>; form: Record<string, string> }) => ({
      status: 401, body: { error_code: 401041, error_msg: `signature check failed for ${JSON.stringify({ ...r.query, ...r.form })} (${encodeURIComponent(JSON.stringify(r.form))})` },
    });
    for (const p of ['/m-open/1/file/info', '/m-open/1/org/info', '/m-api/2/file/info', '/m-api/oauth2/token2']) fake.respond(p, echo);
    const { logger, lines } = logCapture();
    const c = make({ logger, retries: 1 });
    const errors = await Promise.all([
      c.file.info({ fullpath: 'a' }).catch((e: unknown) => e),
      c.org.info({ org_id: '1' }).catch((e: unknown) => e),
      c.user.info({ mount_id: 1, fullpath: 'a' }).catch((e: unknown) => e),
      c.user.token({ grant_type: 'password', username: 'u', password: 'PASSWORD-md5-abcdef' }).catch((e: unknown) => e),
    ]);
    // A web upload whose server echoes too.
    fake.respond('/m-open/1/file/upload_servers', () => ({ status: 200, body: { 'm-upload': [`${fake.url}/nowhere`], key: 'KEY-secret-9988' } }));
    fake.respond('/nowhere/2/web_upload', () => ({ status: 401, body: { error_code: 40101, error_msg: `bad credentials ${SECRETS.token} ${SECRETS.library}`, fullpath: 'a.txt' } }));
    errors.push(await webUpload(c, { path: '', name: 'a.txt', source: { size: 1, open: () => Readable.from([Buffer.from('x')]) } }).catch((e: unknown) => e));

    const signs = fake.requests.map((r) => r.query.sign ?? r.form.sign).filter((s): s is string => !!s);
    expect(signs.length).toBeGreaterThanOrEqual(5);
    const forbidden = [...Object.values(SECRETS), 'PASSWORD-md5-abcdef', ...signs];
    const texts = [...errors.map((e) => {
      expect(e).toBeInstanceOf(ServiceError);
      const se = e as ServiceError;
      return [se.message, se.serviceMessage, String(se.stack), JSON.stringify(se), String((se.cause as Error | undefined)?.message ?? '')].join('\n');
    }), ...lines];
    expect(lines.length).toBeGreaterThan(4);
    for (const t of texts) {
      for (const f of forbidden) {
        expect(t.includes(f) || t.includes(encodeURIComponent(f)), `"${f}" leaked in: ${t.slice(0, 200)}`).toBe(false);
      }
    }
    expect((errors[0] as ServiceError).serviceMessage).toContain('[redacted]');
  });

  it('option values are checked', () => {
    expect(() => make({ timeoutMs: 0 })).toThrow(/timeoutMs: expected a positive number of milliseconds, got 0/);
    expect(() => make({ retries: -1 })).toThrow(/retries: expected a non-negative integer, got -1/);
    expect(() => make({ baseUrl: 'ftp://x' })).toThrow(/baseUrl: expected an http\(s\) URL/);
  });
});
