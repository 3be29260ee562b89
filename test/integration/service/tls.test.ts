/**
 * The embedded service over HTTPS (a self-signed certificate made here with openssl) and behind a proxy
 * (the public URL in credentials.json and the links it issues); `cloudlib service --tls-cert/--tls-key`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Agent, request } from 'undici';
import { ServiceClient } from '../../../src/api/client.js';
import { EmbeddedService, parsePublicUrl } from '../../../src/service/index.js';
import { put } from './helpers.js';
import { waitFor } from '../../support/wait-for.js';

let dir: string;
let cert: Buffer;
let key: Buffer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-tls-'));
  await promisify(execFile)('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
  ]);
  cert = await readFile(join(dir, 'cert.pem'));
  key = await readFile(join(dir, 'key.pem'));
}, 30_000);
afterAll(async () => { await rm(dir, { recursive: true, force: true }); });

describe('HTTPS', { timeout: 30_000 }, () => {
  it('serves the API, the upload server and download links over TLS with the given certificate', async () => {
    const service = await EmbeddedService.start({ dataDir: join(dir, 'data-tls'), tls: { cert, key } });
    const agent = new Agent({ connect: { ca: cert } });
    const c = service.credentials;
    const client = new ServiceClient({ baseUrl: service.baseUrl, credentials: { library: c.library }, retries: 0, dispatcher: agent });
    try {
      expect(service.baseUrl.startsWith('https://127.0.0.1:')).toBe(true);
      expect(c.upload_server).toBe(`${service.baseUrl}/upload`);
      await client.file.createFolder({ fullpath: 'secure' });
      const list = await client.file.ls({ fullpath: '' });
      expect(list.list.map((e) => e.filename)).toContain('secure');
      // chunked upload and download link over TLS
      const content = Buffer.from('over tls '.repeat(1000));
      await put(client, 'secure/file.txt', content);
      const { urls } = await client.file.downloadUrl({ fullpath: 'secure/file.txt' });
      expect(urls[0]!.startsWith('https://')).toBe(true);
      const got = await request(urls[0]!, { dispatcher: agent });
      expect(Buffer.from(await got.body.arrayBuffer()).equals(content)).toBe(true);
      // plain HTTP on the TLS port is not served
      const plain = await request(service.baseUrl.replace('https:', 'http:') + '/m-open/status').then((r) => r.statusCode, () => 0);
      expect(plain).not.toBe(200);
      // a client that does not trust the certificate is refused at the handshake
      const untrusted = await request(`${service.baseUrl}/m-open/status`).then(() => 'connected', (e: Error) => e.message);
      expect(untrusted).not.toBe('connected');
    } finally {
      await client.close();
      await service.close();
      await agent.close();
    }
  });

  it('with a public URL (a proxy in front), credentials and links carry it', async () => {
    const service = await EmbeddedService.start({ dataDir: join(dir, 'data-proxy'), publicUrl: 'https://files.example.com/' });
    try {
      expect(service.credentials.base_url).toBe('https://files.example.com');
      expect(service.credentials.upload_server).toBe('https://files.example.com/upload');
      const written = JSON.parse(await readFile(join(dir, 'data-proxy', 'credentials.json'), 'utf8')) as { base_url: string };
      expect(written.base_url).toBe('https://files.example.com');
    } finally {
      await service.close();
    }
    expect(() => parsePublicUrl('ftp://x')).toThrow(/http\(s\) URL/);
    expect(() => parsePublicUrl('https://x/?a=1')).toThrow(/without query/);
  });

  it('cloudlib service --tls-cert --tls-key serves HTTPS; one of the two alone is refused', async () => {
    const bin = fileURLToPath(new URL('../../../bin/cloudlib.js', import.meta.url));
    const alone = spawn(process.execPath, [bin, 'service', '--data', join(dir, 'data-cli'), '--tls-cert', join(dir, 'cert.pem')], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    alone.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    expect(await new Promise<number | null>((resolve) => alone.once('exit', (code) => resolve(code)))).toBe(2);
    expect(err).toContain('--tls-cert and --tls-key go together');

    const data = join(dir, 'data-cli');
    const child = spawn(process.execPath, [bin, 'service', '--data', data, '--listen', '127.0.0.1:0', '--log-level', 'warn',
      '--tls-cert', join(dir, 'cert.pem'), '--tls-key', join(dir, 'key.pem')], { stdio: ['ignore', 'ignore', 'ignore'] });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const agent = new Agent({ connect: { ca: cert } });
    try {
      const creds = await waitFor('credentials.json', async () => JSON.parse(await readFile(join(data, 'credentials.json'), 'utf8')) as { base_url: string }, { timeoutMs: 20_000, intervalMs: 100 });
      expect(creds?.base_url.startsWith('https://')).toBe(true);
      const res = await request(`${creds!.base_url}/m-open/status`, { dispatcher: agent });
      expect(res.statusCode).toBe(200);
      await res.body.dump();
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await agent.close();
    }
  });
});
