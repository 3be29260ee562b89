import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { ServiceClient } from '../../../src/api/client.js';
import { ServiceError } from '../../../src/api/errors.js';
import { webUpload, SourceChangedError, type UploadSource } from '../../../src/api/upload.js';
import { sign } from '../../../src/shared/sign.js';
import { FakeUploadServer } from '../../support/fake-upload-server.js';

function source(data: Buffer, step = 4096): UploadSource {
  return {
    size: data.length,
    open: (start) => {
      const parts: Buffer[] = [];
      for (let i = start; i < data.length; i += step) parts.push(data.subarray(i, i + step));
      return Readable.from(parts);
    },
  };
}

describe('webUpload', { timeout: 15_000 }, () => {
  let fake: FakeUploadServer;
  let client: ServiceClient;

  beforeAll(async () => {
    fake = await new FakeUploadServer().start();
    client = new ServiceClient({
      baseUrl: fake.url, retries: 0,
      credentials: { library: { org_client_id: 'oc_1', org_client_secret: 'lib-secret-1' }, user: { token: 'tok-1', client_secret: 'app-secret-1' } },
    });
  });
  afterAll(async () => {
    await client.close();
    await fake.close();
  });
  beforeEach(() => fake.reset());

  it('library form: upload_servers (signed, timeout and rand), then one streamed multipart POST with the key', async () => {
    const data = randomBytes(50_000);
    const progress: number[] = [];
    const res = await webUpload(client, {
      path: '/docs/', name: 'Résumé "v2".pdf', source: source(data), operator: { op_name: 'Ana' }, keyTimeoutSec: 120,
      onProgress: (sent, total) => { expect(total).toBe(50_000); progress.push(sent); },
    });
    expect(res).toEqual({ fullpath: 'docs/Résumé "v2".pdf', filesize: 50_000, hash: expect.stringMatching(/^w\d+$/) });
    const [servers, upload] = fake.requests;
    expect(servers!.path).toBe('/m-open/1/file/upload_servers');
    expect(servers!.form).toMatchObject({ fullpath: 'docs/Résumé "v2".pdf', timeout: '120', org_client_id: 'oc_1' });
    expect(servers!.form.rand).toMatch(/^[0-9a-f]{16}$/);
    const { sign: sent, ...signed } = servers!.form;
    expect(sent).toBe(sign('lib-secret-1', signed));
    expect(upload!.method).toBe('POST');
    expect(upload!.path).toBe('/up/2/web_upload');
    expect(upload!.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    expect(Number(upload!.headers['content-length'])).toBeGreaterThan(50_000);
    expect(upload!.form).toEqual({
      org_client_id: 'oc_1', key: expect.stringMatching(/^key-/), op_name: 'Ana', path: 'docs', name: 'Résumé "v2".pdf', overwrite: '1', filefield: 'file',
    });
    expect(fake.files.get('docs/Résumé "v2".pdf')?.content?.equals(data)).toBe(true);
    expect(progress.at(-1)).toBe(50_000);
    expect(progress.length).toBeGreaterThan(5);
  });

  it('user form: upload_server of the user API, then token and mount_id in the form', async () => {
    const data = randomBytes(1000);
    const res = await webUpload(client, { path: '', name: 'n.txt', source: source(data), mountId: 4, overwrite: false });
    expect(res.fullpath).toBe('n.txt');
    const [server, upload] = fake.requests;
    expect(server!.method).toBe('GET');
    expect(server!.path).toBe('/m-api/1/file/upload_server');
    expect(server!.query).toMatchObject({ mount_id: '4', fullpath: 'n.txt', token: 'tok-1' });
    expect(upload!.form).toEqual({ token: 'tok-1', mount_id: '4', path: '', name: 'n.txt', overwrite: '0', filefield: 'file' });
    expect(fake.files.get('n.txt')?.content?.equals(data)).toBe(true);
  });

  it('an error answer becomes a ServiceError with the service code and message', async () => {
    fake.respond('/m-api/1/file/upload_server', () => ({ status: 200, body: { server: `${fake.url.replace('http://', '')}/refuse` } }));
    fake.respond('/refuse/2/web_upload', () => ({ status: 403, body: { error_code: 40321, error_msg: 'library capacity exceeded', fullpath: 'big.bin' } }));
    const err = await webUpload(client, { path: '', name: 'big.bin', source: source(randomBytes(100)), mountId: 4 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect(err).toMatchObject({ status: 403, code: 40321, serviceMessage: 'library capacity exceeded', endpoint: 'upload.user_web_upload' });
  });

  it('a source shorter than declared fails the request instead of sending a short file', async () => {
    const data = randomBytes(1000);
    const short: UploadSource = { size: 2000, open: () => Readable.from([data]) };
    await expect(webUpload(client, { path: '', name: 's.bin', source: short })).rejects.toBeInstanceOf(SourceChangedError);
    expect(fake.files.has('s.bin')).toBe(false);
  });

  it('bad arguments are refused before any request', async () => {
    const src = source(Buffer.from('x'));
    await expect(webUpload(client, { path: '', name: 'a/b', source: src })).rejects.toThrow(/name: expected a file name without '\/', got "a\/b"/);
    await expect(webUpload(client, { path: '', name: 'a', source: src, mountId: 1, operator: { op_id: '3' } })).rejects.toThrow(/operator: not supported/);
    await expect(webUpload(client, { path: '', name: 'a', source: src, keyTimeoutSec: 0 })).rejects.toThrow(/keyTimeoutSec: expected a positive integer, got 0/);
    expect(fake.requests).toHaveLength(0);
  });
});
